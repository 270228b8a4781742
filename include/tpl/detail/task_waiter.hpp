// tpl/detail/task_waiter.hpp — what a task's completion hands to those waiting for it: the
// task_status it ended with, and the waiter, the intrusive registration (internal;
// task_state_base.hpp keeps the list of waiters).
//
// Invariants: a waiter lives in its owner's memory (an awaiting coroutine's frame, a blocked
// thread's stack, a when_all state), never in the task's; on_complete runs exactly once per
// registration unless the waiter was removed before completion; at most one waiter per completion
// is fired with fire_mode::first_inline.
//
// Example (how an awaiter registers; tpl::task's awaiter does this):
//
//   struct my_waiter : tpl::detail::waiter {
//     std::coroutine_handle<> h;
//   };
//   my_waiter w;
//   w.h = current_coroutine;
//   w.on_complete = [](tpl::detail::waiter* self, tpl::detail::fire_mode) noexcept {
//     static_cast<my_waiter*>(self)->h.resume();
//   };
//   if (!state.add_waiter(&w)) { /* already completed: do not wait */ }
#pragma once

#include <cstdint>

namespace tpl {

/// The state of a task (.NET TaskStatus, reduced to what a hot task can be in).
enum class task_status : std::uint8_t {
  running,            ///< not completed yet (.NET WaitingForActivation / Running)
  ran_to_completion,  ///< completed with a result
  faulted,            ///< completed with one or more exceptions
  canceled,           ///< completed by cancellation
};

}  // namespace tpl

namespace tpl::detail {

/// How a waiter is told about completion.
enum class fire_mode : std::uint8_t {
  first_inline,  ///< the first waiter: it may continue on the completing thread
  later,         ///< another waiter already continues here: queue, unless asked to run synchronously
  async_only,    ///< the task requires asynchronous continuations (run_continuations_asynchronously)
};

/// A registration to be told when a task completes. Lives in the waiter's own memory (an awaiting
/// coroutine's frame, a blocked thread's stack, a when_all state).
struct waiter {
  struct uninitialized_t {};

  waiter() noexcept : next(nullptr), on_complete(nullptr) {}
  /// Leaves both fields unset, for a waiter that sets them before it registers (add_waiter()
  /// writes `next`): an awaiter of a task that turns out completed never registers, and its
  /// fast path then writes neither.
  explicit waiter(uninitialized_t) noexcept {}

  waiter* next;
  /// Called exactly once after completion, unless remove_waiter() took the waiter out first.
  /// At most one waiter per completion gets fire_mode::first_inline.
  void (*on_complete)(waiter* self, fire_mode mode) noexcept;
};

}  // namespace tpl::detail
