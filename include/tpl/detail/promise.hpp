// tpl/detail/promise.hpp — the coroutine promise shared by task<T> and value_task<T> (internal).
//
// A task coroutine is hot (runs until its first real suspension inside the call, unless the start
// guard queues its start: tpl/detail/start_guard.hpp), allocates its
// frame from the per-thread frame pool, and completes at final_suspend by publishing its result in
// the state word and resuming the first waiter inline (through the trampoline).
//
// The synchronous fast path: until the body's first real suspension, the task handle has not been
// returned to the caller, so no other thread can hold it. A coroutine that completes without ever
// suspending therefore publishes its completion with plain stores: no read-modify-write at all.
// await_transform() wraps every awaiter of the body to record that a suspension happened.
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>

#include "tpl/detail/flow.hpp"
#include "tpl/detail/frame_pool.hpp"
#include "tpl/detail/start_guard.hpp"
#include "tpl/detail/task_awaiter.hpp"
#include "tpl/detail/task_state.hpp"
#include "tpl/detail/trampoline.hpp"
#include "tpl/detail/waiter_firing.hpp"

namespace tpl::detail {

template <class A>
decltype(auto) get_awaiter(A&& a) {
  if constexpr (requires { static_cast<A&&>(a).operator co_await(); }) {
    return static_cast<A&&>(a).operator co_await();
  } else if constexpr (requires { operator co_await(static_cast<A&&>(a)); }) {
    return operator co_await(static_cast<A&&>(a));
  } else {
    return static_cast<A&&>(a);
  }
}

/// Forwards to the real awaiter, records that the coroutine suspended (see file comment), and
/// hands the execution context over at the suspension and back at the resumption (flow.hpp).
template <class Awaiter>
struct marking_awaiter {
  Awaiter inner;
  coroutine_flow* flow = nullptr;  // set when await_suspend ran: await_resume then takes it back

  bool await_ready() { return inner.await_ready(); }
  template <class P>
  decltype(auto) await_suspend(std::coroutine_handle<P> h) {
    // All before inner.await_suspend: once it runs, h may resume on another thread. The
    // awaiter (with `inner`) is published first so that no store of ours or of inner's is
    // sunk past the hand-off (config.hpp).
    TPL_PUBLISH_AWAITER(this);
    h.promise().mark_suspended();
    flow = &h.promise().flow();
    flow->suspend();
    try {
      return inner.await_suspend(h);
    } catch (...) {
      flow->resume();  // the coroutine goes on here, with the exception
      flow = nullptr;
      throw;
    }
  }
  decltype(auto) await_resume() {
    if (flow != nullptr) flow->resume();
    return inner.await_resume();
  }
};

/// finish_coroutine() of a coroutine that suspended at least once: others may hold its handle.
template <class Promise>
TPL_NOINLINE void finish_suspended_coroutine(Promise& p) noexcept {
  task_state_base& s = p;
  const bool force_async = p.continuations_forced_async();
  waiter* list = s.publish_completion();
  s.release_running();
  fire_waiters(list, force_async);
}

/// Publishes a finished coroutine's completion, drops the coroutine's own reference and fires
/// the waiters. The frame may be destroyed inside; nothing here touches it afterwards.
template <class Promise>
void finish_coroutine(Promise& p) noexcept {
  if (!p.suspended_once()) {
    // Never suspended: the handle is still inside the ramp, so nobody waits, the caller's
    // handle keeps the frame alive, and no running unit was ever counted.
    static_cast<task_state_base&>(p).publish_completion_unshared();
    return;
  }
  finish_suspended_coroutine(p);
}

struct final_awaiter {
  bool await_ready() const noexcept { return false; }
  template <class P>
  void await_suspend(std::coroutine_handle<P> h) const noexcept {
    h.promise().flow().finish();
    finish_coroutine(h.promise());
  }
  void await_resume() const noexcept {}
};

/// co_await cancel_current_task{} completes the running coroutine task as canceled without
/// throwing, and never resumes it (the frame is destroyed with its last reference).
struct cancel_current_task {
  bool await_ready() const noexcept { return false; }
  template <class P>
  void await_suspend(std::coroutine_handle<P> h) const noexcept {
    // Awaited through marking_awaiter, whose suspend() already ran: take the context back, then
    // end the flow as a completing coroutine does.
    h.promise().flow().resume();
    h.promise().flow().finish();
    h.promise().set_canceled();
    finish_coroutine(h.promise());
  }
  void await_resume() const noexcept {}
};

/// The initial suspension: none, unless the start guard defers this start (tpl/detail/start_guard.hpp:
/// little stack left, tpl::spawn, or tpl::run's own coroutine), in which case the coroutine is
/// queued before its body runs.
struct initial_awaiter {
  // Where the flow to take back on resumption lies, as its distance in bytes from this awaiter
  // (both live in the coroutine frame, which never moves): 0 when the start was not deferred,
  // kRefusedRunStart when a tpl::run start's scheduler refused the coroutine. Four bytes and not a
  // pointer: the awaiter lives in every task's frame, and with 4-byte alignment g++ packs it
  // next to its own 4 bytes of bookkeeping (resume index and flags) instead of a new 8-byte slot.
  std::int32_t flow_delta = 0;

  bool await_ready() const noexcept { return !should_defer_start(); }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    // As marking_awaiter: everything before the hand-off, after which h may run elsewhere.
    TPL_PUBLISH_AWAITER(this);
    P& p = h.promise();
    p.mark_suspended();
    const bool run_start = deferring_run_start();
    if (!run_start) p.mark_started_deferred();
    coroutine_flow& flow = p.flow();
    set_flow(flow);
    flow.suspend();
    try {
      defer_start(h);
      return true;
    } catch (...) {
      flow.resume();
      if (run_start) {
        // tpl::run's scheduler refused it: the task faults with the scheduler's exception
        // (await_resume, which runs next on this thread, throws it into the body).
        stash_run_start_failure(std::current_exception());
        flow_delta = kRefusedRunStart;
      } else {
        // Could not queue it (out of memory): start it here after all.
        flow_delta = 0;
      }
      return false;
    }
  }
  void await_resume() {
    if (flow_delta == 0) return;
    if (TPL_UNLIKELY(flow_delta == kRefusedRunStart)) {
      flow_delta = 0;
      rethrow_run_start_failure();
    }
    const auto at = reinterpret_cast<std::uintptr_t>(this) + static_cast<std::uintptr_t>(static_cast<std::intptr_t>(flow_delta));
    reinterpret_cast<coroutine_flow*>(at)->resume();
  }

 private:
  // No flow lies at an odd distance (both objects are at least 4-byte aligned).
  static constexpr std::int32_t kRefusedRunStart = 1;

  void set_flow(coroutine_flow& flow) noexcept {
    const std::intptr_t d = static_cast<std::intptr_t>(reinterpret_cast<std::uintptr_t>(&flow) -
                                                       reinterpret_cast<std::uintptr_t>(this));
    // Both are in one coroutine frame: the distance is a few hundred bytes at most, never 0.
    if (TPL_UNLIKELY(d == 0 || d != static_cast<std::int32_t>(d))) std::terminate();
    flow_delta = static_cast<std::int32_t>(d);
  }
};

template <class T, class Derived>
class promise_base : public task_state<T> {
 public:
  // The returned handle's reference. The running coroutine's unit comes at its first suspension
  // (mark_suspended) and goes at final suspend.
  promise_base() noexcept : task_state<T>(1) { this->flow().start(); }
  ~promise_base() { this->flow().~coroutine_flow(); }

  initial_awaiter initial_suspend() const noexcept { return {}; }
  final_awaiter final_suspend() const noexcept { return {}; }

  void unhandled_exception() noexcept {
    std::exception_ptr e = std::current_exception();
    const bool canceled = is_operation_canceled(e);
    this->set_error(std::move(e), canceled);
  }

  template <class A>
  auto await_transform(A&& a) {
    using awaiter_t = decltype(get_awaiter(static_cast<A&&>(a)));
    if constexpr (is_task_awaiter<awaiter_t>::value)
      return flowing_task_awaiter<awaiter_t>(get_awaiter(static_cast<A&&>(a)));
    else
      return marking_awaiter<awaiter_t>{get_awaiter(static_cast<A&&>(a))};
  }

  /// Called at every suspension, before the awaiter can hand the coroutine to another thread.
  /// The first one counts the running coroutine's reference unit (see task_state_base).
  void mark_suspended() noexcept {
    if (!this->suspended_once_) {
      this->suspended_once_ = true;
      this->add_running_unshared();
    }
  }
  bool suspended_once() const noexcept { return this->suspended_once_; }

  static void* operator new(std::size_t n) { return frame_alloc(n); }
  static void operator delete(void* p, std::size_t n) noexcept { frame_free(p, n); }
};

template <class T, class Derived>
class value_promise : public promise_base<T, Derived> {
 public:
  template <class U = T>
    requires std::is_constructible_v<T, U&&>
  void return_value(U&& v) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
    this->set_value(static_cast<U&&>(v));
  }
};

template <class Derived>
class value_promise<void, Derived> : public promise_base<void, Derived> {
 public:
  void return_void() noexcept { this->set_value(); }
};

}  // namespace tpl::detail
