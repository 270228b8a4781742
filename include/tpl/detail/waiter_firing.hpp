// tpl/detail/waiter_firing.hpp — how a completed task tells its waiters (internal): the list
// publish_completion() took is fired in registration order, the first waiter possibly inline on
// the completing thread, the rest through the scheduler.
//
// Invariants: each waiter of the list is fired exactly once, and nothing touches a waiter after
// its firing began (its callback may free it); at most one waiter per list is fired with
// fire_mode::first_inline, and none with force_async; completions that nest (a when_all
// completing completes its own waiters) share the trampoline's depth guard, so past
// kMaxInlineResumeDepth the whole list is fired from the pool, on a fresh stack, and a long
// synchronous chain never overflows the stack (DESIGN.md, principle 2).
//
// Example (a state that is not a coroutine frame completing, as task_completion_source does):
//
//   state.set_succeeded();
//   tpl::detail::complete_and_fire(state);  // publishes completion, then resumes the waiters
#pragma once

#include <coroutine>
#include <cstdint>

#include "tpl/detail/config.hpp"
#include "tpl/detail/task_state_base.hpp"
#include "tpl/detail/task_waiter.hpp"
#include "tpl/detail/trampoline.hpp"

namespace tpl::detail {

/// The coroutine a continuation word names (waiter::kContinuation): a frame address, or, with
/// waiter::kPromise, the frame of that tpl promise. The one decoding of waiter::continuation_word
/// and waiter::promise_continuation_word.
inline std::coroutine_handle<> continuation_of(std::uintptr_t word) noexcept {
  const std::uintptr_t target = word & ~waiter::kTagBits;
  return std::coroutine_handle<>::from_address((word & waiter::kPromise) != 0
                                                   ? reinterpret_cast<task_state_base*>(target)->frame_address()
                                                   : reinterpret_cast<void*>(target));
}

/// Fires one waiter: resumes its continuation (inline if it is the first, otherwise through the
/// pool) or calls its callback. The waiter may be gone once this returns.
inline void fire_waiter(waiter* w, fire_mode mode) noexcept {
  const std::uintptr_t a = w->action;
  if (TPL_LIKELY((a & waiter::kContinuation) != 0)) {
    if (mode == fire_mode::first_inline)
      resume_inline(continuation_of(a));
    else
      dispatch_wakeup(continuation_of(a));
  } else {
    reinterpret_cast<const waiter_callback*>(a)->fn(w, mode);
  }
}

/// Queues the firing of list to the pool (the deep-stack fallback of fire_waiters; src/task.cpp).
void fire_waiters_later(waiter* list, bool force_async) noexcept;

/// Tells each waiter of list (publish_completion()'s result). The first may continue inline
/// unless force_async. Past the trampoline's depth limit the whole list is handed to the pool.
inline void fire_waiters(waiter* list, bool force_async) noexcept {
  if (list == nullptr) return;
  trampoline_state& t = trampoline_tls();
  if (TPL_UNLIKELY(t.depth >= kMaxInlineResumeDepth)) {
    fire_waiters_later(list, force_async);
    return;
  }
  ++t.depth;
  fire_mode mode = force_async ? fire_mode::async_only : fire_mode::first_inline;
  while (list != nullptr) {
    waiter* next = list->next;  // list may be freed by its own callback
    fire_waiter(list, mode);
    if (mode == fire_mode::first_inline) mode = fire_mode::later;
    list = next;
  }
  --t.depth;
}

/// Publishes the completion of s (its outcome and result already written) and runs the waiters:
/// for states that are not coroutine frames (task_completion_source, timers, waits).
inline void complete_and_fire(task_state_base& s) noexcept {
  waiter* list = s.publish_completion();
  fire_waiters(list, s.continuations_forced_async());
}

}  // namespace tpl::detail
