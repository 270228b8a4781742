// One socket operation in flight (internal): what socket_context's handshake stores in a
// direction's waiting slot, and how whoever finishes it tells its waiter.
//
// Invariants:
//   - Exactly one party finishes a waiting operation: the handler that took it from the slot
//     (socket_context::drive), close() or the cancel callback, each after taking it out of the
//     slot under the direction's lock. An operation that finishes during its own handshake is
//     never finished through here: the caller sees `false` from wait() and goes on itself.
//   - finish() with `queued` never runs the waiter on the finishing thread's stack (close() may be
//     a destructor, a cancel callback runs on the canceler's stack); without it the waiter runs
//     inline, through tpl's bounded-depth trampoline.
//   - After finish() the finisher touches the operation no more: its waiter may reuse or free it.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>

#include "tpl/detail/trampoline.hpp"

namespace tpl::net::detail {

enum class attempt_result : std::uint8_t { done, would_block };

/// The operation's outcome beyond an errno value.
inline constexpr int kAborted = -1;   ///< the socket was closed while it was pending
inline constexpr int kCanceled = -2;  ///< its token was canceled while it waited
inline constexpr int kBusy = -3;      ///< another operation of the same direction was waiting

struct pending_op {
  /// Makes the syscall (EINTR retried inside); on `done` it has set `error` (0 on success) and
  /// its own result fields.
  attempt_result (*attempt)(pending_op* self, int fd) noexcept = nullptr;
  /// How the waiter learns the operation is over: null resumes `continuation` (a coroutine that
  /// awaits the operation itself); otherwise called with `queued` (a reusable source completes
  /// its value_task, op_source.hpp).
  void (*on_finished)(pending_op* self, bool queued) noexcept = nullptr;
  int error = 0;
  std::atomic<bool> cancel_requested{false};
  std::coroutine_handle<> continuation;
};

/// Tells op's waiter that op is over (see the invariants above).
inline void finish(pending_op& op, bool queued) noexcept {
  if (op.on_finished != nullptr) {
    op.on_finished(&op, queued);
  } else if (queued) {
    tpl::detail::dispatch(op.continuation);
  } else {
    tpl::detail::resume_inline(op.continuation);
  }
}

}  // namespace tpl::net::detail
