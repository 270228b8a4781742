// tpl/net/tcp_socket.hpp — tpl::net::tcp_socket: a TCP connection (.NET Socket with
// SocketType.Stream / TcpClient). The stream operations are stream_socket's.
//
//   tpl::net::tcp_socket s;
//   co_await s.connect_async(tpl::net::endpoint::parse("127.0.0.1:8080"), token);
//   s.set_no_delay(true);
//   co_await s.send_async("ping\n", token);
//
// connect_async throws socket_error with the errno: std::errc::connection_refused,
// network_unreachable, timed_out, ...; a canceled connect throws operation_canceled and closes
// the socket.
#pragma once

#include <chrono>
#include <optional>

#include "tpl/net/endpoint.hpp"
#include "tpl/net/stream_socket.hpp"

namespace tpl::net {

class tcp_listener;

class tcp_socket : public stream_socket {
 public:
  /// Not open: connect_async opens it.
  tcp_socket() noexcept = default;
  tcp_socket(tcp_socket&&) noexcept = default;
  tcp_socket& operator=(tcp_socket&&) noexcept = default;

  /// Opens a socket of remote's family and connects it. Throws invalid_operation if this socket
  /// is already open; after a failed or canceled connect (which closes it) it may connect again.
  value_task<> connect_async(const endpoint& remote, const cancellation_token& token = {});

  endpoint local_endpoint() const;
  endpoint remote_endpoint() const;

  /// TCP_NODELAY: send small segments at once (no Nagle delay).
  void set_no_delay(bool on);
  bool no_delay() const;
  /// SO_KEEPALIVE.
  void set_keep_alive(bool on);
  bool keep_alive() const;
  /// SO_RCVBUF / SO_SNDBUF in bytes (the kernel may double or clamp what it is given).
  void set_receive_buffer_size(int bytes);
  int receive_buffer_size() const;
  void set_send_buffer_size(int bytes);
  int send_buffer_size() const;
  /// SO_LINGER: nullopt turns lingering off (close returns at once, the kernel sends what is
  /// left); a duration makes the kernel try that long; zero resets the connection on close.
  void set_linger(std::optional<std::chrono::seconds> timeout);

 private:
  friend class tcp_listener;
  explicit tcp_socket(detail::socket_context* c) noexcept : stream_socket(c) {}
};

}  // namespace tpl::net
