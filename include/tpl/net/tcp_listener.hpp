// tpl/net/tcp_listener.hpp — tpl::net::tcp_listener: accepts TCP connections (.NET TcpListener).
//
//   tpl::net::tcp_listener listener(tpl::net::endpoint::parse("127.0.0.1:0"), {.backlog = 1024});
//   auto port = listener.local_endpoint().port();               // the port the kernel chose
//   for (;;) {
//     tpl::net::tcp_socket conn = co_await listener.accept_async(token);
//     serve(std::move(conn));                                   // a task per connection
//   }
//
// Out of descriptors (EMFILE, ENFILE) or kernel memory (ENOBUFS, ENOMEM) on accept: the pending
// accept waits and tries again, 5 ms first and doubling to 1 s (as Go's net/http does), so
// the server keeps serving its open connections and resumes accepting when descriptors are freed.
// A connection aborted before it was accepted (ECONNABORTED) is skipped. Other errors throw
// socket_error.
#pragma once

#include "tpl/net/endpoint.hpp"
#include "tpl/net/socket_base.hpp"
#include "tpl/net/tcp_socket.hpp"

namespace tpl::net {

struct listener_options {
  /// listen()'s backlog (the kernel caps it at net.core.somaxconn).
  int backlog = 512;
  /// SO_REUSEADDR: bind a port whose old connections are still in TIME_WAIT.
  bool reuse_address = true;
  /// SO_REUSEPORT: several listeners (processes) on one port, the kernel spreading connections.
  bool reuse_port = false;
};

class tcp_listener : public socket_base {
 public:
  tcp_listener() noexcept = default;
  /// Binds to local and listens. Throws socket_error (address in use, permission denied, ...).
  explicit tcp_listener(const endpoint& local, const listener_options& options = {});
  tcp_listener(tcp_listener&&) noexcept = default;
  tcp_listener& operator=(tcp_listener&&) noexcept = default;

  /// The next connection. Completes synchronously when one is already waiting.
  value_task<tcp_socket> accept_async(const cancellation_token& token = {});

  endpoint local_endpoint() const;
};

}  // namespace tpl::net
