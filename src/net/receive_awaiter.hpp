// A receive awaited directly by one of tpl's own coroutines (network_stream's slow paths), so that
// a receive that has to wait costs no coroutine frame of its own: `co_await receive_awaiter(ctx,
// buffer, token)` does what `co_await stream_socket::receive_async(buffer, token)` does, with the
// operation kept in the awaiter (in the awaiting coroutine's frame) instead of in receive_slow's.
//
// Invariants (the same steps, in the same order, as receive_on + receive_slow in stream_socket.cpp):
//   - A token canceled before the receive starts throws operation_canceled without a system call.
//   - The direction's sequence number is read (acquire) before the first recv; an EAGAIN then
//     enters socket_context::wait() with that number, so the readiness handshake of
//     socket_context.hpp (and its model check) covers this path unchanged: the continuation
//     stored in the pending_op is the awaiting coroutine instead of receive_slow's frame.
//   - While the operation waits, the awaiter holds a reference to the context (taken in
//     await_suspend, so a receive that completes at once takes none): the socket object may be
//     closed or destroyed meanwhile, and the engine or a cancel callback may still touch the
//     context. The token registration is dropped (waiting for a callback that is running) before
//     that reference.
//   - Errors are reported in await_resume exactly as receive_slow reports them (throw_op_error).
#pragma once

#include <coroutine>
#include <cstddef>
#include <span>

#include "operations.hpp"
#include "tpl/cancellation.hpp"

namespace tpl::net::detail {

class receive_awaiter {
 public:
  receive_awaiter(socket_context& c, std::span<std::byte> buffer, const cancellation_token& token) noexcept
      : ctx_(&c), op_(buffer), token_(&token) {}
  receive_awaiter(const receive_awaiter&) = delete;
  receive_awaiter& operator=(const receive_awaiter&) = delete;
  ~receive_awaiter() {
    reg_.reset();  // waits for a cancel callback that is running (it uses the context)
    if (holds_context_) ctx_->release();
  }

  bool await_ready() noexcept {
    if (token_->is_cancellation_requested()) {
      canceled_before_start_ = true;
      return true;
    }
    observed_ = ctx_->reads().observe();
    return ctx_->attempt(op_) == attempt_result::done;
  }

  bool await_suspend(std::coroutine_handle<> h) {
    ctx_->add_ref();
    holds_context_ = true;
    op_.continuation = h;
    return ctx_->wait(ctx_->reads(), op_, observed_, *token_, reg_);
  }

  std::size_t await_resume() const {
    if (canceled_before_start_) token_->throw_if_cancellation_requested();
    if (op_.error != 0) throw_op_error(op_.error, "receive");
    return op_.received;
  }

 private:
  socket_context* ctx_;
  receive_op op_;
  const cancellation_token* token_;
  cancellation_registration reg_;
  std::uint32_t observed_ = 0;
  bool holds_context_ = false;
  bool canceled_before_start_ = false;
};

}  // namespace tpl::net::detail
