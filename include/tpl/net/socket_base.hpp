// tpl/net/socket_base.hpp — tpl::net::socket_base: what every tpl socket shares (ownership of the
// descriptor and its registration with the socket engine, close, the descriptor itself).
//
// A socket is move-only. close() (or the destructor) completes every operation still pending on
// it with socket_error(std::errc::operation_canceled, "... the socket was closed"); those
// continuations are queued to the thread pool, never run inside close(). The descriptor is closed
// once no system call uses it any more. close() may be called from any thread, concurrently with
// the socket's operations; the other members belong to one thread at a time, like any C++ object.
//
//   tpl::net::tcp_socket s;
//   co_await s.connect_async(ep, token);
//   s.close();   // idempotent; the destructor does it too
//
// Each socket allows one pending receive-side operation (receive, accept) and one pending
// send-side operation (send, connect) at a time, as each is a sequence on one stream; a second
// one started while the first waits fails with tpl::invalid_operation.
#pragma once

namespace tpl::net {

namespace detail {
class socket_context;
}

class socket_base {
 public:
  socket_base(const socket_base&) = delete;
  socket_base& operator=(const socket_base&) = delete;

  /// True from open/connect/accept until close().
  bool is_open() const noexcept;
  /// Completes pending operations with "aborted", then closes. Idempotent.
  void close() noexcept;
  /// The descriptor (-1 when not open). For options tpl does not wrap; do not close it.
  int native_handle() const noexcept;

 protected:
  socket_base() noexcept = default;
  explicit socket_base(detail::socket_context* c) noexcept : ctx_(c) {}
  socket_base(socket_base&& o) noexcept : ctx_(o.ctx_) { o.ctx_ = nullptr; }
  socket_base& operator=(socket_base&& o) noexcept;
  ~socket_base();

  /// The context, or throws invalid_operation naming `what` if the socket is not open.
  detail::socket_context& context(const char* what) const;
  /// Adopts fd (made non-blocking here); throws socket_error and closes fd on failure.
  void adopt(int fd);
  /// Sets an option with setsockopt; throws socket_error.
  void set_option(int level, int name, const void* value, unsigned size, const char* what);
  void get_option(int level, int name, void* value, unsigned* size, const char* what) const;

  detail::socket_context* ctx_ = nullptr;
};

}  // namespace tpl::net
