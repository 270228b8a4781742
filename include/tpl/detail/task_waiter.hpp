// tpl/detail/task_waiter.hpp — what a task's completion hands to those waiting for it: the
// task_status it ended with, and the waiter, the intrusive registration (internal;
// task_state_base.hpp keeps the list of waiters and fires them).
//
// A waiter is two words: the list link, and its action. The action is either a coroutine to
// resume (the common case, a coroutine awaiting a task: no call through a pointer, and no word
// beyond the two) or the address of a waiter_callback, for every other kind of waiter.
//
// Invariants: a waiter lives in its owner's memory (an awaiting coroutine's frame, a blocked
// thread's stack, a when_all state), never in the task's; its action is written before it
// registers and never changes while it is registered; it is fired exactly once per registration
// unless it was removed before completion; at most one waiter per completion is fired with
// fire_mode::first_inline.
//
// Example (how a waiter with a callback registers; tpl::task's awaiter stores a continuation):
//
//   struct my_waiter : tpl::detail::waiter {
//     std::coroutine_handle<> h;
//     static void fire(tpl::detail::waiter* self, tpl::detail::fire_mode) noexcept {
//       static_cast<my_waiter*>(self)->h.resume();
//     }
//   };
//   my_waiter w;
//   w.h = current_coroutine;
//   w.set_callback(tpl::detail::waiter_callback_for<&my_waiter::fire>);
//   if (!state.add_waiter(&w)) { /* already completed: do not wait */ }
#pragma once

#include <coroutine>
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

struct waiter;
class task_state_base;

/// What a waiter that is not a plain continuation does when it is fired. A waiter stores the
/// address of one of these (a static object per function, waiter_callback_for), so that the
/// action word can also hold a continuation, told apart by its low bits.
struct waiter_callback {
  void (*fn)(waiter* self, fire_mode mode) noexcept;
};

/// The callback object for Fn.
template <void (*Fn)(waiter*, fire_mode) noexcept>
inline constexpr waiter_callback waiter_callback_for{Fn};

/// A registration to be told when a task completes. Lives in the waiter's own memory (an awaiting
/// coroutine's frame, a blocked thread's stack, a when_all state).
struct waiter {
  struct uninitialized_t {};

  /// The action is a coroutine to resume (bit 0): inline when fired first (fire_mode::first_inline),
  /// otherwise through the pool, as the default co_await of a task does.
  static constexpr std::uintptr_t kContinuation = 1;
  /// With kContinuation: the rest of the word is the awaiting coroutine's tpl promise (a
  /// task_state_base, whose frame_address() is the coroutine); without it, the rest is the
  /// coroutine's frame address. Promises and frames are 8-byte aligned (both begin with
  /// pointers), so the two low bits are free.
  static constexpr std::uintptr_t kPromise = 2;
  static constexpr std::uintptr_t kTagBits = kContinuation | kPromise;

  waiter() noexcept : next(nullptr), action(0) {}
  /// Leaves both fields unset, for a waiter that sets them before it registers (add_waiter()
  /// writes `next`): an awaiter of a task that turns out completed never registers, and its
  /// fast path then writes neither.
  explicit waiter(uninitialized_t) noexcept {}

  /// Fired through cb (called exactly once after completion, unless remove_waiter() took the
  /// waiter out first; at most one waiter per completion gets fire_mode::first_inline).
  void set_callback(const waiter_callback& cb) noexcept { action = reinterpret_cast<std::uintptr_t>(&cb); }

  /// The action that resumes h: its frame address tagged kContinuation (continuation_of in
  /// waiter_firing.hpp decodes it).
  static std::uintptr_t continuation_word(std::coroutine_handle<> h) noexcept {
    return reinterpret_cast<std::uintptr_t>(h.address()) | kContinuation;
  }
  /// The action that resumes the coroutine whose tpl promise is `promise`: the promise's address
  /// tagged kContinuation | kPromise, for an awaiter that keeps the promise rather than the frame.
  static std::uintptr_t promise_continuation_word(const task_state_base& promise) noexcept {
    return reinterpret_cast<std::uintptr_t>(&promise) | kContinuation | kPromise;
  }

  waiter* next;
  /// The address of a waiter_callback (the two low bits clear), or a continuation (kContinuation).
  std::uintptr_t action;
};
static_assert(alignof(waiter_callback) > waiter::kTagBits, "a callback's address must leave the tag bits clear");

}  // namespace tpl::detail
