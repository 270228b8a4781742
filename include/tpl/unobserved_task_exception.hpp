// tpl/unobserved_task_exception.hpp — an event raised when a faulted task is destroyed without
// anyone having observed its exception (.NET TaskScheduler.UnobservedTaskException).
//
//   auto subscription = tpl::on_unobserved_task_exception([](tpl::unobserved_task_exception_event_args& e) {
//     log("lost: %s", e.exception().what());
//     e.set_observed();
//   });
//   { auto t = tpl::run([] { throw std::runtime_error("nobody waits for me"); }); }
//   // ... once t's task completes and its last handle is gone, the handler runs.
//
// Semantics:
//   1. Raised for a faulted task (not a canceled one) when its last handle and its coroutine are
//      gone and nothing observed its exception. Observing is what .NET counts: co_await (which
//      rethrows), wait() / get() / sync_wait, exception(), and when_all taking the task's
//      exceptions into its own. task<>::configure(await_options::suppress_throwing) does not
//      observe.
//   2. .NET raises it from the finalizer thread after a garbage collection; tpl has no collector:
//      it is raised on the thread that drops the last reference, during that release, so a
//      handler must be quick and must not block on the task's own completions.
//   3. The argument carries an aggregate_exception with every exception of the task. set_observed()
//      is recorded for the handlers after it (observed()); as in .NET's default configuration,
//      an exception nobody marks observed does not end the process either.
//   4. Handlers run in subscription order; an exception escaping one is reported on stderr and
//      the others still run. Subscribing and unsubscribing are thread-safe. Unsubscribing (the
//      subscription's destructor too) waits until no other thread is inside the handler; once it
//      returns the handler is never called again, so it may capture locals that die right after
//      the subscription (.NET's -= does not wait; tpl has no collector to keep them alive). From
//      inside a handler it does not wait for its own thread's calls: a handler may unsubscribe
//      itself. Two handlers that unsubscribe each other from inside, on two threads, deadlock,
//      as two cancellation callbacks that dispose each other's registrations do.
//   5. Without a subscriber nothing is built or called: the cost is one atomic load per unobserved
//      fault.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "tpl/exceptions.hpp"

namespace tpl {

/// What a handler receives (.NET UnobservedTaskExceptionEventArgs).
class unobserved_task_exception_event_args {
 public:
  explicit unobserved_task_exception_event_args(aggregate_exception e) : exception_(std::move(e)) {}
  /// Every exception of the task (.NET Exception).
  const aggregate_exception& exception() const noexcept { return exception_; }
  /// .NET SetObserved(): later handlers see observed() true.
  void set_observed() noexcept { observed_ = true; }
  bool observed() const noexcept { return observed_; }

 private:
  aggregate_exception exception_;
  bool observed_ = false;
};

using unobserved_task_exception_handler = std::function<void(unobserved_task_exception_event_args&)>;

/// A subscription to the event; move-only, unsubscribes when destroyed (.NET -=).
class unobserved_task_exception_subscription {
 public:
  unobserved_task_exception_subscription() noexcept = default;
  explicit unobserved_task_exception_subscription(std::shared_ptr<const unobserved_task_exception_handler> h) noexcept
      : handler_(std::move(h)) {}
  unobserved_task_exception_subscription(unobserved_task_exception_subscription&&) noexcept = default;
  unobserved_task_exception_subscription& operator=(unobserved_task_exception_subscription&& o) noexcept {
    if (this != &o) {
      unsubscribe();
      handler_ = std::move(o.handler_);
    }
    return *this;
  }
  ~unobserved_task_exception_subscription() { unsubscribe(); }

  /// Stops calling the handler, waiting for calls under way on other threads (semantics 4);
  /// idempotent.
  void unsubscribe() noexcept;
  bool active() const noexcept { return handler_ != nullptr; }

 private:
  std::shared_ptr<const unobserved_task_exception_handler> handler_;
};

/// Subscribes `handler` (.NET TaskScheduler.UnobservedTaskException +=). Throws
/// std::invalid_argument for an empty handler.
[[nodiscard]] unobserved_task_exception_subscription on_unobserved_task_exception(
    unobserved_task_exception_handler handler);

}  // namespace tpl
