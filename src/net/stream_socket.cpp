// stream_socket: receive / send with a synchronous fast path and a reusable slow path.
//
// Fast path: read the direction's sequence number, make the system call; data or room at once
// gives a completed value_task (no frame, no allocation). Otherwise the operation waits through
// socket_context's handshake, starting from the number the fast path read (no second system call
// before it registers), in the direction's reusable op_source: the value_task names that source,
// and no coroutine frame is taken. Only when the source is held by another operation (a second
// concurrent operation of the direction, which the handshake then reports, or a value_task never
// awaited), or to report an error, does a coroutine (a frame from tpl's frame pool) take over.
#include <sys/socket.h>

#include <string>

#include "operations.hpp"
#include "socket_context.hpp"
#include "tpl/net/stream_socket.hpp"

namespace tpl::net {

namespace {

using detail::attempt_result;
using detail::context_ref;

value_task<std::size_t> receive_slow(context_ref ctx, std::span<std::byte> buffer, cancellation_token token,
                                     std::uint32_t observed, int first_error) {
  token.throw_if_cancellation_requested();
  if (first_error != 0) detail::throw_op_error(first_error, "receive");
  detail::receive_op op(buffer);
  co_await detail::op_awaiter(*ctx, ctx->reads(), op, observed, token);
  if (op.error != 0) detail::throw_op_error(op.error, "receive");
  co_return op.received;
}

value_task<> send_slow(context_ref ctx, std::span<const std::byte> data, std::size_t sent, cancellation_token token,
                       std::uint32_t observed, int first_error) {
  if (token.is_cancellation_requested()) throw send_canceled(sent);
  if (first_error != 0) detail::throw_op_error(first_error, "send");
  detail::send_op op(data);
  op.sent = sent;
  co_await detail::op_awaiter(*ctx, ctx->writes(), op, observed, token);
  if (op.error == detail::kCanceled) throw send_canceled(op.sent);
  if (op.error != 0) detail::throw_op_error(op.error, "send");
}

value_task<std::size_t> receive_on(detail::socket_context& c, std::span<std::byte> buffer,
                                   const cancellation_token& token) {
  std::uint32_t observed = 0;
  int error = 0;
  if (!token.is_cancellation_requested()) {
    detail::receive_op op(buffer);
    observed = c.reads().observe();
    if (c.attempt(op) == attempt_result::done) {
      if (op.error == 0) return value_task<std::size_t>(op.received);
      error = op.error;
    } else if (auto& source = c.receive_source(); source.try_claim()) {
      detail::receive_op& waiting = source.op();
      waiting.buffer = buffer;
      waiting.received = 0;
      if (c.wait(c.reads(), source.begin(), observed, token, source.registration())) return source.waiting();
      const std::size_t received = waiting.received;
      error = waiting.error;
      source.end_unawaited();
      if (error == 0) return value_task<std::size_t>(received);
    }
  }
  return receive_slow(context_ref(&c), buffer, token, observed, error);
}

// Holds the context, not the socket object: the socket may be destroyed while this waits (the
// pending receive then fails with "aborted").
value_task<> receive_exactly_slow(context_ref ctx, std::span<std::byte> buffer, std::size_t received,
                                  cancellation_token token) {
  while (received < buffer.size()) {
    const std::size_t n = co_await receive_on(*ctx, buffer.subspan(received), token);
    if (n == 0) throw end_of_stream(received);
    received += n;
  }
}

}  // namespace

value_task<std::size_t> stream_socket::receive_async(std::span<std::byte> buffer, const cancellation_token& token) {
  return receive_on(context("receive_async"), buffer, token);
}

value_task<> stream_socket::receive_exactly_async(std::span<std::byte> buffer, const cancellation_token& token) {
  detail::socket_context& c = context("receive_exactly_async");
  std::size_t received = 0;
  if (!token.is_cancellation_requested()) {
    while (received < buffer.size()) {
      detail::receive_op op(buffer.subspan(received));
      if (c.attempt(op) != attempt_result::done || op.error != 0) break;  // the slow path reports it
      if (op.received == 0) break;  // end of stream: the slow path's receive sees it again
      received += op.received;
    }
    if (received == buffer.size()) return value_task<>::completed();
  }
  return receive_exactly_slow(context_ref(&c), buffer, received, token);
}

value_task<> stream_socket::send_async(std::span<const std::byte> data, const cancellation_token& token) {
  detail::socket_context& c = context("send_async");
  std::uint32_t observed = 0;
  std::size_t sent = 0;
  int error = 0;
  if (!token.is_cancellation_requested()) {
    detail::send_op op(data);
    observed = c.writes().observe();
    const attempt_result first = c.attempt(op);
    sent = op.sent;
    if (first == attempt_result::done) {
      if (op.error == 0) return value_task<>::completed();
      error = op.error;
    } else if (auto& source = c.send_source(); source.try_claim()) {
      detail::send_op& waiting = source.op();
      waiting.data = data;
      waiting.sent = sent;
      if (c.wait(c.writes(), source.begin(), observed, token, source.registration())) return source.waiting();
      sent = waiting.sent;
      error = waiting.error;
      source.end_unawaited();
      if (error == 0) return value_task<>::completed();
    }
  }
  return send_slow(context_ref(&c), data, sent, token, observed, error);
}

void stream_socket::shutdown_send() {
  detail::socket_context& c = context("shutdown_send");
  if (!c.fd_acquire()) detail::throw_op_error(detail::kAborted, "shutdown_send");
  const int r = ::shutdown(c.fd(), SHUT_WR);
  const int e = errno;
  c.fd_release();
  if (r != 0) throw socket_error(e, "tpl::net: shutdown(send) failed");
}

}  // namespace tpl::net
