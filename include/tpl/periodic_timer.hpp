// tpl/periodic_timer.hpp — tpl::periodic_timer: a timer awaited tick by tick (.NET PeriodicTimer).
//
// Provides:
//   tpl::periodic_timer   wait_for_next_tick_async(token) -> value_task<bool>: true at the next
//                         tick, false once the timer is disposed; dispose(); period() /
//                         set_period() (.NET 8's Period setter).
//
// Example:
//   tpl::task<> heartbeat(tpl::cancellation_token token) {
//     tpl::periodic_timer timer(std::chrono::seconds(1));       // system clock; tests pass a
//                                                               // testing::fake_time_provider
//     while (co_await timer.wait_for_next_tick_async(token))   // throws operation_canceled
//       send_heartbeat();                                       // once token is canceled
//   }
//
// Semantics (as .NET's):
// - The timer starts ticking at construction, every period(). Ticks that pass while nobody waits
//   coalesce into one: the next wait completes at once, once, and the one after waits for a new
//   tick.
// - One wait at a time: calling wait_for_next_tick_async while a previous wait is still pending
//   throws invalid_operation (.NET InvalidOperationException).
// - dispose() stops the timer, ends a pending wait with false and makes every later wait return
//   false. It is idempotent; the destructor calls it.
// - Canceling the token of a pending wait ends that wait with operation_canceled; the timer keeps
//   running and the next wait works. A wait whose token is already canceled (and that would not
//   complete at once with a coalesced tick or with false) returns a canceled value_task.
// - The period must be positive and at most max_period() (.NET's limit, 0xFFFFFFFE ms): otherwise
//   the constructor and set_period throw std::invalid_argument. set_period restarts the period
//   from now (.NET 8: Period's setter calls Timer.Change(period, period)); on a disposed timer it
//   throws invalid_operation (.NET ObjectDisposedException).
// - A pending wait's continuation is queued (to the completing thread's scheduler, else the
//   thread pool), never run inside the tick callback, fake_time_provider::advance(), dispose() or
//   cancel().
// - Thread safety: waits, ticks, dispose(), set_period() and cancellation may race freely; one
//   wait may be pending at a time (the rule above).
//
// Neither copyable nor movable: waiters call the one object. Its state is shared with the
// provider's timer callback and a pending wait's token callback, so destroying the object while
// one of them runs on another thread is safe (the callback finds the timer disposed).
#pragma once

#include <chrono>
#include <memory>

#include "tpl/cancellation.hpp"
#include "tpl/time_provider.hpp"
#include "tpl/value_task.hpp"

namespace tpl {

namespace detail {
struct periodic_timer_state;
}  // namespace detail

class periodic_timer {
 public:
  /// The longest period accepted (.NET's PeriodicTimer limit: 4294967294 ms, about 49.7 days).
  static constexpr std::chrono::milliseconds max_period() noexcept {
    return std::chrono::milliseconds(0xFFFFFFFEll);
  }

  /// Starts a timer that ticks every `period` on `provider`'s clock. Throws std::invalid_argument
  /// if period is not in (0, max_period()].
  explicit periodic_timer(std::chrono::nanoseconds period, time_provider& provider = system_time_provider());
  /// Disposes the timer (a pending wait ends with false).
  ~periodic_timer();

  periodic_timer(const periodic_timer&) = delete;
  periodic_timer& operator=(const periodic_timer&) = delete;

  /// Completes with true at the next tick (at once if a tick passed since the last wait), with
  /// false once the timer is disposed; is canceled (operation_canceled) when `token` is canceled
  /// first. Throws invalid_operation if another wait is still pending.
  value_task<bool> wait_for_next_tick_async(const cancellation_token& token = {});

  /// Stops the timer; a pending wait completes with false, later waits return false. Idempotent.
  void dispose() noexcept;

  /// The current period.
  std::chrono::nanoseconds period() const;
  /// Changes the period; the next tick is one new period from now. Throws std::invalid_argument
  /// for a period out of range and invalid_operation if the timer is disposed.
  void set_period(std::chrono::nanoseconds period);

 private:
  std::shared_ptr<detail::periodic_timer_state> s_;
};

}  // namespace tpl
