// periodic_timer (.NET PeriodicTimer): a time_provider timer whose ticks complete one pending wait.
//
// State, guarded by periodic_timer_state::lock (a short_lock):
//   waiter        the pending wait's task state, or null. Whoever takes it out of `waiter` under
//                 the lock (a tick: true; dispose: false; its token's callback: canceled) is the
//                 one that completes it, outside the lock.
//   tick_pending  a tick passed while nobody waited (coalesced: a bool, not a count).
//   disposed      set once by dispose(); ticks after it are ignored, waits return false.
// The provider's timer and the period are guarded by `config_lock` (a std::mutex), which tick and
// cancellation callbacks never take: set_period() may call timer::change, and dispose() may call
// timer::dispose (which waits for a running tick), without holding the lock those callbacks take.
//
// Lifetime: the periodic_timer owns the state through a shared_ptr. The tick callback holds a
// weak_ptr and locks it for each tick; a token callback holds a shared_ptr, dropped when its
// registration is reset. So the state outlives every callback that is running, whichever thread
// destroys the periodic_timer. A wait's task state has two references: the value_task's and the
// pending operation's, which its completer releases.
#include "tpl/periodic_timer.hpp"

#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "tpl/detail/short_lock.hpp"
#include "tpl/detail/wait_guards.hpp"
#include "tpl/detail/waiter_firing.hpp"
#include "tpl/exceptions.hpp"

namespace tpl {

namespace detail {

namespace {

// One pending wait_for_next_tick_async. Continuations run asynchronously (queued to the pool), as
// .NET's PeriodicTimer does: a tick callback, advance() or dispose() never runs the waiter's code.
struct periodic_wait final : task_state<bool>, pooled_allocation {
  periodic_wait() noexcept : task_state<bool>(2, false, &delete_as<periodic_wait>) {
    set_run_continuations_asynchronously(true);
  }
  // The token registration: stored by the wait that armed it, reset by the completer (and by the
  // arming wait if the completer came first). See wait_guards.
  wait_guards guards;
};

enum class tick_outcome { tick, disposed, canceled };

// Completes a wait taken out of `waiter` (outside the state lock). Resetting the registration
// waits for its callback if that is running on another thread (it only finds `waiter` changed);
// called from inside that callback, it does not wait.
void finish(periodic_wait* w, tick_outcome outcome) noexcept {
  w->guards.clean_up();
  if (outcome == tick_outcome::canceled)
    w->set_canceled();
  else
    w->set_value(outcome == tick_outcome::tick);
  complete_and_fire(*w);
  w->release();  // the pending operation's reference
}

void check_period(std::chrono::nanoseconds period, const char* what) {
  if (period.count() <= 0 || period > periodic_timer::max_period())
    throw std::invalid_argument(std::string("tpl: ") + what +
                                ": the period must be positive and at most periodic_timer::max_period()");
}

}  // namespace

struct periodic_timer_state {
  short_lock lock;
  periodic_wait* waiter = nullptr;  // guarded by lock
  bool tick_pending = false;        // guarded by lock
  bool disposed = false;            // guarded by lock

  std::mutex config_lock;
  timer clock;                       // guarded by config_lock
  std::chrono::nanoseconds period;   // guarded by config_lock

  explicit periodic_timer_state(std::chrono::nanoseconds p) : period(p) {}

  void on_tick() noexcept {
    periodic_wait* w;
    {
      std::lock_guard g(lock);
      if (disposed) return;
      w = std::exchange(waiter, nullptr);
      if (w == nullptr) {
        tick_pending = true;
        return;
      }
    }
    finish(w, tick_outcome::tick);
  }

  void on_cancel(periodic_wait* w) noexcept {
    {
      std::lock_guard g(lock);
      if (waiter != w) return;  // completed by a tick or dispose (w is alive: see wait())
      waiter = nullptr;
    }
    finish(w, tick_outcome::canceled);
  }
};

}  // namespace detail

periodic_timer::periodic_timer(std::chrono::nanoseconds period, time_provider& provider) {
  detail::check_period(period, "periodic_timer");
  s_ = std::make_shared<detail::periodic_timer_state>(period);
  std::weak_ptr<detail::periodic_timer_state> weak = s_;
  timer t = provider.create_timer(
      [weak] {
        if (auto s = weak.lock()) s->on_tick();
      },
      period, period);
  std::lock_guard g(s_->config_lock);
  s_->clock = std::move(t);
}

periodic_timer::~periodic_timer() { dispose(); }

value_task<bool> periodic_timer::wait_for_next_tick_async(const cancellation_token& token) {
  detail::periodic_timer_state& s = *s_;
  detail::periodic_wait* w;
  {
    std::lock_guard g(s.lock);
    if (s.waiter != nullptr)
      throw invalid_operation(
          "tpl: periodic_timer::wait_for_next_tick_async: another wait is still pending (one at a time)");
    if (s.disposed) return value_task<bool>(false);
    if (s.tick_pending) {
      s.tick_pending = false;
      return value_task<bool>(true);
    }
    if (token.is_cancellation_requested()) return value_task<bool>(task_from_canceled<bool>());
    w = new detail::periodic_wait();
    s.waiter = w;
  }
  // From here w has two references: this value_task's and the pending operation's.
  value_task<bool> result(detail::adopt_state, w);
  if (!token.can_be_canceled()) return result;

  // The token's callback may run at once (the token canceled since the check above) or on
  // another thread at any time; it completes w only if it still finds it in `waiter`. w stays
  // alive while the callback can run: its completer resets the registration (waiting for a
  // running callback) before releasing the pending reference, and `result` holds the other.
  cancellation_registration reg;
  try {
    reg = token.register_callback([st = s_, w] {
      auto keep = st;  // the reset of this registration (in on_cancel) destroys the capture
      keep->on_cancel(w);
    });
  } catch (...) {
    // Could not register (out of memory): withdraw the wait if nobody completed it yet.
    bool withdrawn = false;
    {
      std::lock_guard g(s.lock);
      if (s.waiter == w) {
        s.waiter = nullptr;
        withdrawn = true;
      }
    }
    if (withdrawn) w->release();  // the pending reference; `result` frees w
    throw;
  }
  w->guards.set_registration(std::move(reg));
  bool decided;
  {
    std::lock_guard g(s.lock);
    decided = s.waiter != w;  // no ABA: `result` keeps w alive, so no new wait can reuse it
  }
  // A completer that ran before set_registration could not reset the registration: do it here.
  if (decided) w->guards.clean_up();
  return result;
}

void periodic_timer::dispose() noexcept {
  detail::periodic_timer_state& s = *s_;
  detail::periodic_wait* w;
  {
    std::lock_guard g(s.lock);
    if (s.disposed) return;
    s.disposed = true;
    s.tick_pending = false;
    w = std::exchange(s.waiter, nullptr);
  }
  timer t;
  {
    std::lock_guard g(s.config_lock);
    t = std::move(s.clock);
  }
  // Outside both locks: waits for a tick callback running on another thread (which finds
  // `disposed` and returns); called from inside a tick callback, it does not wait.
  t.dispose();
  if (w != nullptr) detail::finish(w, detail::tick_outcome::disposed);
}

std::chrono::nanoseconds periodic_timer::period() const {
  std::lock_guard g(s_->config_lock);
  return s_->period;
}

void periodic_timer::set_period(std::chrono::nanoseconds period) {
  detail::check_period(period, "periodic_timer::set_period");
  detail::periodic_timer_state& s = *s_;
  std::lock_guard g(s.config_lock);
  if (!s.clock.valid() || !s.clock.change(period, period))
    throw invalid_operation("tpl: periodic_timer::set_period: the timer is disposed");
  s.period = period;
}

}  // namespace tpl
