// tcp_socket (connect, endpoints, options) and tcp_listener (bind, listen, accept).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "accept.hpp"
#include "operations.hpp"
#include "socket_context.hpp"
#include "tpl/net/socket_error.hpp"
#include "tpl/net/tcp_listener.hpp"
#include "tpl/net/tcp_socket.hpp"

namespace tpl::net {

namespace detail {

/// Waits for a connect in progress; closes the socket if it fails or is canceled, so a failed
/// socket reports is_open() == false.
value_task<> connect_slow(context_ref ctx, cancellation_token token, std::uint32_t observed, int first_error) {
  int error = first_error;
  if (error == 0) {
    connect_op op;
    co_await op_awaiter(*ctx, ctx->writes(), op, observed, token);
    error = op.error;
  }
  if (error != 0) {
    ctx->close();
    throw_op_error(error, "connect");
  }
}

/// Starts a non-blocking connect on c (to addr) and finishes it.
value_task<> connect_on(socket_context& c, const socket_address& addr, const cancellation_token& token) {
  if (token.is_cancellation_requested()) {
    c.close();
    throw operation_canceled();
  }
  const std::uint32_t observed = c.writes().observe();
  if (!c.fd_acquire()) throw_op_error(kAborted, "connect");
  int r;
  while ((r = ::connect(c.fd(), addr.get(), addr.length)) != 0 && errno == EINTR) {
  }
  const int e = r == 0 ? 0 : errno;
  c.fd_release();
  if (r == 0) return value_task<>::completed();
  if (e == EINPROGRESS || e == EAGAIN) return connect_slow(context_ref(&c), token, observed, 0);
  return connect_slow(context_ref(&c), token, observed, e);
}

endpoint socket_name(socket_context& c, bool peer, const char* what) {
  socket_address a;
  a.length = sizeof a.storage;
  if (!c.fd_acquire()) throw_op_error(kAborted, what);
  const int r = peer ? ::getpeername(c.fd(), a.get(), &a.length) : ::getsockname(c.fd(), a.get(), &a.length);
  const int e = errno;
  c.fd_release();
  if (r != 0) throw socket_error(e, std::string("tpl::net: ") + what + " failed");
  return to_endpoint(a.get(), a.length);
}

int open_socket(int family, int type) {
  const int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw socket_error(errno, "tpl::net: socket() failed");
  return fd;
}

}  // namespace detail

value_task<> tcp_socket::connect_async(const endpoint& remote, const cancellation_token& token) {
  if (is_open()) throw invalid_operation("tpl::net: connect_async on a socket that is already open");
  adopt(detail::open_socket(detail::to_native_family(remote.family()), SOCK_STREAM));
  return detail::connect_on(*ctx_, detail::to_socket_address(remote), token);
}

endpoint tcp_socket::local_endpoint() const { return detail::socket_name(context("local_endpoint"), false, "local_endpoint"); }
endpoint tcp_socket::remote_endpoint() const { return detail::socket_name(context("remote_endpoint"), true, "remote_endpoint"); }

void tcp_socket::set_no_delay(bool on) {
  const int v = on ? 1 : 0;
  set_option(IPPROTO_TCP, TCP_NODELAY, &v, sizeof v, "set_no_delay");
}
bool tcp_socket::no_delay() const {
  int v = 0;
  unsigned n = sizeof v;
  get_option(IPPROTO_TCP, TCP_NODELAY, &v, &n, "no_delay");
  return v != 0;
}
void tcp_socket::set_keep_alive(bool on) {
  const int v = on ? 1 : 0;
  set_option(SOL_SOCKET, SO_KEEPALIVE, &v, sizeof v, "set_keep_alive");
}
bool tcp_socket::keep_alive() const {
  int v = 0;
  unsigned n = sizeof v;
  get_option(SOL_SOCKET, SO_KEEPALIVE, &v, &n, "keep_alive");
  return v != 0;
}
void tcp_socket::set_receive_buffer_size(int bytes) {
  if (bytes <= 0) throw std::invalid_argument("tpl::net: a receive buffer size must be positive");
  set_option(SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes, "set_receive_buffer_size");
}
int tcp_socket::receive_buffer_size() const {
  int v = 0;
  unsigned n = sizeof v;
  get_option(SOL_SOCKET, SO_RCVBUF, &v, &n, "receive_buffer_size");
  return v;
}
void tcp_socket::set_send_buffer_size(int bytes) {
  if (bytes <= 0) throw std::invalid_argument("tpl::net: a send buffer size must be positive");
  set_option(SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes, "set_send_buffer_size");
}
int tcp_socket::send_buffer_size() const {
  int v = 0;
  unsigned n = sizeof v;
  get_option(SOL_SOCKET, SO_SNDBUF, &v, &n, "send_buffer_size");
  return v;
}
void tcp_socket::set_linger(std::optional<std::chrono::seconds> timeout) {
  if (timeout && timeout->count() < 0) throw std::invalid_argument("tpl::net: a linger time must not be negative");
  linger l{};
  l.l_onoff = timeout ? 1 : 0;
  l.l_linger = timeout ? static_cast<int>(timeout->count()) : 0;
  set_option(SOL_SOCKET, SO_LINGER, &l, sizeof l, "set_linger");
}

tcp_listener::tcp_listener(const endpoint& local, const listener_options& options) {
  if (options.backlog <= 0) throw std::invalid_argument("tpl::net: a listen backlog must be positive");
  adopt(detail::open_socket(detail::to_native_family(local.family()), SOCK_STREAM));
  const int on = 1;
  if (options.reuse_address) set_option(SOL_SOCKET, SO_REUSEADDR, &on, sizeof on, "reuse_address");
  if (options.reuse_port) set_option(SOL_SOCKET, SO_REUSEPORT, &on, sizeof on, "reuse_port");
  const detail::socket_address a = detail::to_socket_address(local);
  if (::bind(ctx_->fd(), a.get(), a.length) != 0)
    throw socket_error(errno, "tpl::net: bind to " + local.to_string() + " failed");
  if (::listen(ctx_->fd(), options.backlog) != 0) throw socket_error(errno, "tpl::net: listen failed");
}

value_task<tcp_socket> tcp_listener::accept_async(const cancellation_token& token) {
  return detail::accept_on<tcp_socket>(context("accept_async"), token, [](int fd) {
    return tcp_socket(detail::socket_context::create(fd));
  });
}

endpoint tcp_listener::local_endpoint() const {
  return detail::socket_name(context("local_endpoint"), false, "local_endpoint");
}

}  // namespace tpl::net
