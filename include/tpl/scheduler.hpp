// tpl/scheduler.hpp — where coroutines run: the scheduler interface, inline_scheduler,
// co_await tpl::yield() and co_await tpl::resume_on(s).
//
// A scheduler receives coroutine handles and must resume each exactly once. thread_pool implements
// it; so can user code (a GUI loop, a dedicated thread, a test scheduler):
//
//   class my_loop final : public tpl::scheduler {
//    public:
//     void schedule(std::coroutine_handle<> h) override { queue_.push(h); }
//     void run_one() { auto h = queue_.pop(); run(h); }   // scheduler::run: see below
//   };
//
//   tpl::task<> work(my_loop& loop) {
//     co_await tpl::resume_on(loop);   // from here on, runs inside my_loop::run_one()
//     co_await tpl::yield();           // back of my_loop's queue: the current scheduler
//   }
//
// While a scheduler runs an item through run(h), it is the thread's current scheduler
// (scheduler::current()): yield() and continuations that must be queued (the second awaiter of a
// task, run_continuations_asynchronously, the depth guard) go back to it. A coroutine that awaits
// a task still continues on the thread that completes that task, as in .NET; use
// co_await tpl::resume_on(s) to come back explicitly.
#pragma once

#include <coroutine>

#include "tpl/detail/flow.hpp"
#include "tpl/detail/trampoline.hpp"

namespace tpl {

class scheduler;

namespace detail {
inline thread_local scheduler* t_current_scheduler = nullptr;
TPL_TLS_ACCESSOR(scheduler*, current_scheduler_tls, t_current_scheduler)
}  // namespace detail

class scheduler {
 public:
  virtual ~scheduler() = default;

  /// Queues h to be resumed exactly once. Must not resume h inline before returning unless the
  /// scheduler is documented to do so (inline_scheduler).
  virtual void schedule(std::coroutine_handle<> h) = 0;

  /// Queues h behind the work already waiting (used by yield()). Defaults to schedule().
  virtual void schedule_after_others(std::coroutine_handle<> h) { schedule(h); }

  /// The scheduler whose item the calling thread is running (a pool worker: its pool), or nullptr.
  static scheduler* current() noexcept { return detail::current_scheduler_tls(); }

  /// Called on the current scheduler when the item it runs is about to block its thread (tpl's
  /// blocking waits and tpl::blocking_scope; `what` names the call, e.g. "task::wait()"). The
  /// default does nothing; a scheduler that runs everything on one thread throws here, because
  /// blocking would deadlock it.
  virtual void on_blocking_call(const char* what) { (void)what; }

 protected:
  /// Resumes a handle taken from this scheduler's queue, with this scheduler current while it runs
  /// and through tpl's bounded-depth trampoline. Schedulers run their items through this, not
  /// h.resume().
  void run(std::coroutine_handle<> h) noexcept {
    scheduler* previous = detail::current_scheduler_tls();
    detail::current_scheduler_tls() = this;
    detail::run_item(h);
    detail::reset_context();  // each item starts in the default execution context
    detail::current_scheduler_tls() = previous;
  }
};

/// Resumes immediately on the scheduling thread (through the trampoline, so never unbounded
/// recursion). Useful in tests and for trivially cheap continuations.
class inline_scheduler final : public scheduler {
 public:
  void schedule(std::coroutine_handle<> h) override { detail::resume_inline(h); }
  static inline_scheduler& instance() noexcept;
};

namespace detail {
/// As dispatch (tpl/detail/trampoline.hpp), but behind the waiting work (schedule_after_others).
void dispatch_after_others(std::coroutine_handle<> h);
}  // namespace detail

/// co_await tpl::yield(): lets the work already queued run, then continues on the current
/// scheduler (the default pool when the thread has none). .NET Task.Yield().
struct yield_awaitable {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const { detail::dispatch_after_others(h); }
  void await_resume() const noexcept {}
};
[[nodiscard]] inline yield_awaitable yield() noexcept { return {}; }

/// co_await tpl::resume_on(s): continues on scheduler s.
class resume_on_awaitable {
 public:
  explicit resume_on_awaitable(scheduler& s) noexcept : s_(&s) {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const { s_->schedule(h); }
  void await_resume() const noexcept {}

 private:
  scheduler* s_;
};
[[nodiscard]] inline resume_on_awaitable resume_on(scheduler& s) noexcept {
  return resume_on_awaitable{s};
}

}  // namespace tpl
