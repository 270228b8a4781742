// tpl/net/udp_socket.hpp — tpl::net::udp_socket: datagrams (.NET Socket with SocketType.Dgram /
// UdpClient).
//
//   tpl::net::udp_socket server(tpl::net::endpoint::parse("127.0.0.1:0"));   // bound
//   tpl::net::udp_socket client(tpl::net::address_family::ipv4);              // unbound
//   co_await client.send_to_async(bytes, server.local_endpoint(), token);
//   auto [n, from] = co_await server.receive_from_async(buf, token);
//
// A datagram larger than the receive buffer is truncated to it (the rest is lost, as with
// recvfrom). Cancellation loses nothing: a canceled receive took no datagram. A receive that
// finds a datagram waiting completes synchronously; one that waits does so in an operation the
// socket keeps and reuses, so neither allocates (await each value_task at most once, as with
// stream_socket). One receive_from at a time: a second while one waits is invalid_operation.
#pragma once

#include <cstddef>
#include <span>

#include "tpl/cancellation.hpp"
#include "tpl/net/endpoint.hpp"
#include "tpl/net/socket_base.hpp"
#include "tpl/value_task.hpp"

namespace tpl::net {

struct received_from {
  std::size_t bytes = 0;
  endpoint remote;
};

class udp_socket : public socket_base {
 public:
  udp_socket() noexcept = default;
  /// An unbound socket of the family (the kernel binds it at the first send).
  explicit udp_socket(address_family family);
  /// Bound to local. Throws socket_error.
  explicit udp_socket(const endpoint& local);
  udp_socket(udp_socket&&) noexcept = default;
  udp_socket& operator=(udp_socket&&) noexcept = default;

  /// Sends one datagram; returns its size. Throws socket_error (EMSGSIZE for one too large).
  value_task<std::size_t> send_to_async(std::span<const std::byte> datagram, const endpoint& remote,
                                        const cancellation_token& token = {});
  /// Receives one datagram.
  value_task<received_from> receive_from_async(std::span<std::byte> buffer, const cancellation_token& token = {});

  endpoint local_endpoint() const;
};

}  // namespace tpl::net
