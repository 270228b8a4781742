// udp_socket: datagrams, with the same fast path / slow path split as stream_socket, and the same
// reusable operation for a receive_from that waits: the socket's datagram_sources, allocated once
// when it is built, so a waiting receive_from takes no frame unless the source is held (a second
// receive, which the handshake reports). A send_to that waits (the socket's send buffer full:
// never on loopback, where the kernel frees a datagram's memory as it delivers it) takes the
// frame path.
#include <sys/socket.h>

#include <cerrno>

#include "operations.hpp"
#include "socket_context.hpp"
#include "tpl/net/socket_error.hpp"
#include "tpl/net/udp_socket.hpp"

namespace tpl::net {

namespace detail {
int open_socket(int family, int type);
endpoint socket_name(socket_context& c, bool peer, const char* what);
}  // namespace detail

namespace {

using detail::attempt_result;
using detail::context_ref;

value_task<std::size_t> send_to_slow(context_ref ctx, std::span<const std::byte> datagram, detail::socket_address to,
                                     cancellation_token token, std::uint32_t observed, int first_error) {
  token.throw_if_cancellation_requested();
  if (first_error != 0) detail::throw_op_error(first_error, "send_to");
  detail::send_to_op op(datagram, to);
  co_await detail::op_awaiter(*ctx, ctx->writes(), op, observed, token);
  if (op.error != 0) detail::throw_op_error(op.error, "send_to");
  co_return op.sent;
}

value_task<received_from> receive_from_slow(context_ref ctx, std::span<std::byte> buffer, cancellation_token token,
                                            std::uint32_t observed, int first_error) {
  token.throw_if_cancellation_requested();
  if (first_error != 0) detail::throw_op_error(first_error, "receive_from");
  detail::receive_from_op op(buffer);
  co_await detail::op_awaiter(*ctx, ctx->reads(), op, observed, token);
  if (op.error != 0) detail::throw_op_error(op.error, "receive_from");
  co_return received_from{op.received, detail::to_endpoint(op.from.get(), op.from.length)};
}

}  // namespace

udp_socket::udp_socket(address_family family) {
  adopt(detail::open_socket(detail::to_native_family(family), SOCK_DGRAM));
  context("udp_socket").enable_datagram_sources();
}

udp_socket::udp_socket(const endpoint& local) {
  adopt(detail::open_socket(detail::to_native_family(local.family()), SOCK_DGRAM));
  context("udp_socket").enable_datagram_sources();
  const detail::socket_address a = detail::to_socket_address(local);
  if (::bind(ctx_->fd(), a.get(), a.length) != 0)
    throw socket_error(errno, "tpl::net: bind to " + local.to_string() + " failed");
}

value_task<std::size_t> udp_socket::send_to_async(std::span<const std::byte> datagram, const endpoint& remote,
                                                  const cancellation_token& token) {
  detail::socket_context& c = context("send_to_async");
  const detail::socket_address to = detail::to_socket_address(remote);
  std::uint32_t observed = 0;
  int error = 0;
  if (!token.is_cancellation_requested()) {
    detail::send_to_op op(datagram, to);
    observed = c.writes().observe();
    if (c.attempt(op) == attempt_result::done) {
      if (op.error == 0) return value_task<std::size_t>(op.sent);
      error = op.error;
    }
  }
  return send_to_slow(context_ref(&c), datagram, to, token, observed, error);
}

value_task<received_from> udp_socket::receive_from_async(std::span<std::byte> buffer, const cancellation_token& token) {
  detail::socket_context& c = context("receive_from_async");
  std::uint32_t observed = 0;
  int error = 0;
  if (!token.is_cancellation_requested()) {
    detail::receive_from_op op(buffer);
    observed = c.reads().observe();
    if (c.attempt(op) == attempt_result::done) {
      if (op.error == 0)
        return value_task<received_from>(received_from{op.received, detail::to_endpoint(op.from.get(), op.from.length)});
      error = op.error;
    } else if (detail::datagram_sources* d = c.datagram(); d != nullptr && d->receive_from.try_claim()) {
      auto& source = d->receive_from;
      detail::receive_from_op& waiting = source.op();
      waiting.buffer = buffer;
      waiting.received = 0;
      if (c.wait(c.reads(), source.begin(), observed, token, source.registration())) return source.waiting();
      // Copied out before the claim goes back; the address is converted after (it may throw).
      const std::size_t received = waiting.received;
      const detail::socket_address from = waiting.from;
      error = waiting.error;
      source.end_unawaited();
      if (error == 0) return value_task<received_from>(received_from{received, detail::to_endpoint(from.get(), from.length)});
    }
  }
  return receive_from_slow(context_ref(&c), buffer, token, observed, error);
}

endpoint udp_socket::local_endpoint() const {
  return detail::socket_name(context("local_endpoint"), false, "local_endpoint");
}

}  // namespace tpl::net
