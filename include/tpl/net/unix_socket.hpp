// tpl/net/unix_socket.hpp — Unix domain stream sockets: tpl::net::unix_socket (a connection) and
// tpl::net::unix_listener (.NET Socket with AddressFamily.Unix and UnixDomainSocketEndPoint).
//
//   tpl::net::unix_listener listener(tpl::net::unix_endpoint("/tmp/app.sock"));
//   tpl::net::unix_socket client;
//   co_await client.connect_async(tpl::net::unix_endpoint("/tmp/app.sock"), token);
//   tpl::net::unix_socket server_side = co_await listener.accept_async(token);
//
// The stream operations are stream_socket's. The listener does not remove its path when closed
// (as .NET): binding an existing path fails with std::errc::address_in_use; unlink it first.
// Accept backs off on EMFILE as tcp_listener does.
#pragma once

#include "tpl/net/endpoint.hpp"
#include "tpl/net/stream_socket.hpp"

namespace tpl::net {

class unix_listener;

class unix_socket : public stream_socket {
 public:
  unix_socket() noexcept = default;
  unix_socket(unix_socket&&) noexcept = default;
  unix_socket& operator=(unix_socket&&) noexcept = default;

  /// Opens and connects. Throws socket_error (no such file, connection refused, ...).
  value_task<> connect_async(const unix_endpoint& remote, const cancellation_token& token = {});

 private:
  friend class unix_listener;
  explicit unix_socket(detail::socket_context* c) noexcept : stream_socket(c) {}
};

class unix_listener : public socket_base {
 public:
  unix_listener() noexcept = default;
  /// Binds to the path and listens. Throws socket_error.
  explicit unix_listener(const unix_endpoint& local, int backlog = 512);
  unix_listener(unix_listener&&) noexcept = default;
  unix_listener& operator=(unix_listener&&) noexcept = default;

  value_task<unix_socket> accept_async(const cancellation_token& token = {});
};

}  // namespace tpl::net
