// time_provider basics, the system provider's timer thread, delay().
#include "tpl/time_provider.hpp"

#include "tpl/async_local.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tpl/detail/detached.hpp"
#include "tpl/detail/trampoline.hpp"
#include "tpl/detail/wait_guards.hpp"
#include "tpl/detail/waiter_firing.hpp"
#include "tpl/run.hpp"
#include "tpl/thread_pool.hpp"

namespace tpl {

namespace detail {

void check_timeout(std::chrono::nanoseconds d, const char* what) {
  if (d.count() < 0 && !is_infinite(d))
    throw std::invalid_argument(std::string("tpl: ") + what +
                                ": negative duration (only infinite_timeout may be negative)");
}

void report_callback_exception(const char* where) noexcept {
  try {
    throw;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tpl: exception escaped %s: %s\n", where, e.what());
  } catch (...) {
    std::fprintf(stderr, "tpl: exception escaped %s\n", where);
  }
}

}  // namespace detail

// ---- timer handle -------------------------------------------------------------------------------

bool timer::change(std::chrono::nanoseconds due, std::chrono::nanoseconds period) {
  detail::check_timeout(due, "timer::change(due)");
  detail::check_timeout(period, "timer::change(period)");
  return impl_ != nullptr && impl_->change(due, period);
}

void timer::dispose() noexcept {
  if (impl_ != nullptr) {
    impl_->dispose();
    impl_.reset();
  }
}

task<> timer::dispose_async() {
  auto impl = std::move(impl_);
  if (impl == nullptr) return completed_task();
  // Disposing can block on a running callback: do it on the pool, not on the caller.
  return run([impl] { impl->dispose(); });
}

std::chrono::nanoseconds time_provider::elapsed(std::int64_t start, std::int64_t end) const {
  const long double ticks = static_cast<long double>(end - start);
  return std::chrono::nanoseconds(
      static_cast<std::int64_t>(ticks * 1e9L / static_cast<long double>(timestamp_frequency())));
}

// ---- system timers ------------------------------------------------------------------------------

namespace {

struct timer_queue;

struct system_timer final : detail::timer_impl {
  system_timer(timer_queue* q, std::function<void()> cb) : queue(q), callback(std::move(cb)) {}
  bool change(std::chrono::nanoseconds due, std::chrono::nanoseconds period) override;
  void dispose() noexcept override;

  timer_queue* queue;
  std::function<void()> callback;
  std::weak_ptr<system_timer> self;
  // Guarded by queue->mutex.
  std::uint64_t generation = 0;  // bumped whenever the armed heap entry becomes stale
  bool armed = false;
  bool disposed = false;
  std::chrono::steady_clock::time_point due;
  std::chrono::nanoseconds period{0};
  int running = 0;  // callbacks that have started and not returned
  std::condition_variable idle;
};

thread_local const system_timer* t_running_timer = nullptr;

struct timer_queue {
  struct entry {
    std::chrono::steady_clock::time_point due;
    std::uint64_t sequence;
    std::uint64_t generation;
    std::shared_ptr<system_timer> timer;
  };
  // Min-heap on (due, sequence): std::push_heap builds a max-heap, so compare reversed.
  static bool later(const entry& a, const entry& b) noexcept {
    return a.due != b.due ? a.due > b.due : a.sequence > b.sequence;
  }

  std::mutex mutex;
  std::condition_variable wake;
  std::vector<entry> heap;
  std::size_t stale = 0;
  std::uint64_t next_sequence = 0;
  bool thread_started = false;

  static bool is_stale(const entry& e) noexcept {
    return e.timer->disposed || !e.timer->armed || e.generation != e.timer->generation;
  }

  void arm_locked(const std::shared_ptr<system_timer>& t, std::chrono::steady_clock::time_point due) {
    t->armed = true;
    t->due = due;
    heap.push_back(entry{due, next_sequence++, t->generation, t});
    std::push_heap(heap.begin(), heap.end(), later);
    if (!thread_started) {
      thread_started = true;
      std::thread([this] { run(); }).detach();  // lives as long as the process
    }
    if (heap.front().timer == t) wake.notify_one();
  }

  /// The armed entry of t (if any) is now stale; rebuild the heap when stale entries dominate, so
  /// a timer changed a million times does not hold a million entries.
  void invalidate_locked(system_timer& t) {
    if (t.armed) {
      ++t.generation;
      t.armed = false;
      ++stale;
    }
    if (stale > 1024 && stale * 2 > heap.size()) {
      std::erase_if(heap, [](const entry& e) { return is_stale(e); });
      std::make_heap(heap.begin(), heap.end(), later);
      stale = 0;
    }
  }

  void run() {
    std::unique_lock lock(mutex);
    for (;;) {
      if (heap.empty()) {
        wake.wait(lock);
        continue;
      }
      if (is_stale(heap.front())) {
        std::pop_heap(heap.begin(), heap.end(), later);
        heap.pop_back();
        if (stale > 0) --stale;
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      const auto due = heap.front().due;
      if (due > now) {
        wake.wait_until(lock, due);
        continue;
      }
      std::pop_heap(heap.begin(), heap.end(), later);
      std::shared_ptr<system_timer> t = std::move(heap.back().timer);
      heap.pop_back();
      t->armed = false;
      if (t->period.count() > 0) {
        // Next tick from the previous due time (no drift); skip ticks already missed.
        auto next = detail::saturating_add(due, t->period);
        if (next <= now) next += ((now - next) / t->period + 1) * t->period;
        ++t->generation;
        arm_locked(t, next);
      }
      lock.unlock();
      fire(std::move(t));
      lock.lock();
    }
  }

  static void fire(std::shared_ptr<system_timer> t);
};

// A callback counts as running only once it has started: dispose() waits for running callbacks,
// never for queued ones (those see `disposed` when they start and skip). Waiting for queued ones
// would deadlock when every pool thread is disposing a timer whose callback is queued behind it.
detail::detached run_timer_callback(std::shared_ptr<system_timer> t) {
  co_await resume_on(thread_pool::default_pool());
  {
    std::lock_guard g(t->queue->mutex);
    if (t->disposed) co_return;
    ++t->running;
  }
  const system_timer* previous = t_running_timer;
  t_running_timer = t.get();
  try {
    t->callback();
  } catch (...) {
    detail::report_callback_exception("a timer callback");
  }
  t_running_timer = previous;
  std::lock_guard g(t->queue->mutex);
  if (--t->running == 0) t->idle.notify_all();
}

void timer_queue::fire(std::shared_ptr<system_timer> t) { run_timer_callback(std::move(t)); }

timer_queue& the_timer_queue() {
  static timer_queue* q = new timer_queue();  // never destroyed: its thread runs until exit
  return *q;
}

bool system_timer::change(std::chrono::nanoseconds due_in, std::chrono::nanoseconds new_period) {
  std::lock_guard g(queue->mutex);
  if (disposed) return false;
  queue->invalidate_locked(*this);
  period = (detail::is_infinite(new_period) || new_period.count() == 0) ? std::chrono::nanoseconds(0)
                                                                       : new_period;
  if (!detail::is_infinite(due_in))
    queue->arm_locked(self.lock(), detail::saturating_add(std::chrono::steady_clock::now(), due_in));
  return true;
}

void system_timer::dispose() noexcept {
  std::unique_lock lock(queue->mutex);
  if (!disposed) {
    disposed = true;
    queue->invalidate_locked(*this);
  }
  if (t_running_timer == this) return;  // inside our own callback: do not wait for ourselves
  if (running == 0) return;
  detail::before_blocking_wait();
  idle.wait(lock, [this] { return running == 0; });
}

class system_provider final : public time_provider {
 public:
  std::chrono::system_clock::time_point utc_now() const override { return std::chrono::system_clock::now(); }
  std::chrono::seconds local_utc_offset() const override {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    return std::chrono::seconds(local.tm_gmtoff);
  }
  std::int64_t timestamp() const override {
    return std::chrono::steady_clock::now().time_since_epoch().count();
  }
  std::int64_t timestamp_frequency() const override {
    using period = std::chrono::steady_clock::period;
    return period::den / period::num;
  }
  timer create_timer(std::function<void()> callback, std::chrono::nanoseconds due,
                     std::chrono::nanoseconds period) override {
    if (!callback) throw std::invalid_argument("tpl: create_timer: empty callback");
    callback = detail::with_captured_context(std::move(callback));
    detail::check_timeout(due, "create_timer(due)");
    detail::check_timeout(period, "create_timer(period)");
    auto t = std::make_shared<system_timer>(&the_timer_queue(), std::move(callback));
    t->self = t;
    t->change(due, period);
    return timer(std::move(t));
  }
};

}  // namespace

time_provider& system_time_provider() noexcept {
  static system_provider p;
  return p;
}

// ---- cancel_after ---------------------------------------------------------------------------------

namespace {
// A timer owned by a source only to cancel it; timer_impl is what the source can hold without
// knowing the timer type, so keep the provider's timer alive inside a small adapter.
struct owned_timer final : detail::timer_impl {
  explicit owned_timer(timer t) : t(std::move(t)) {}
  bool change(std::chrono::nanoseconds due, std::chrono::nanoseconds period) override {
    return t.change(due, period);
  }
  void dispose() noexcept override { t.dispose(); }
  timer t;
};
}  // namespace

void cancellation_token_source::cancel_after(std::chrono::nanoseconds delay, time_provider& provider) {
  detail::check_timeout(delay, "cancel_after");
  detail::cancellation_state* s = checked();
  if (detail::is_canceled(s)) return;
  if (timer_ != nullptr) {
    timer_->change(delay, infinite_timeout);
    return;
  }
  if (detail::is_infinite(delay)) return;
  // The callback holds a token: the state outlives the source if the timer fires late.
  cancellation_token token(s);
  timer_ = std::make_shared<owned_timer>(provider.create_timer(
      [token] { detail::cancel(token.state_for_tpl_internal(), false); }, delay, infinite_timeout));
}

bool cancellation_token_source::try_reset() {
  detail::cancellation_state* s = checked();
  if (timer_ != nullptr) {
    // Dispose, not just disarm: dispose waits for a cancel_after callback that has already
    // started, so it cannot cancel the source after we report a successful reset.
    timer_->dispose();
    timer_.reset();
  }
  return detail::try_reset(s);
}

// ---- delay ----------------------------------------------------------------------------------------

namespace {

// Completed by whichever comes first: the timer or the token. The winner completes the task and
// takes the other one down. Both objects are handed over under `lock`, and whoever takes one
// disposes it outside the lock: timer::dispose and registration reset wait for a callback running
// elsewhere (the loser's, which only reads `decided`), and do not wait from inside their own.
struct delay_state final : detail::task_state<void>, detail::pooled_allocation {
  delay_state() noexcept : detail::task_state<void>(2, false, &detail::delete_as<delay_state>) {}
  std::atomic<bool> decided{false};
  detail::wait_guards guards;

  void finish(bool canceled) noexcept {
    // acq_rel: exactly one winner.
    if (decided.exchange(true, std::memory_order_acq_rel)) return;
    guards.clean_up();
    if (canceled)
      set_canceled();
    else
      set_value();
    detail::complete_and_fire(*this);
    release();  // the pending operation's reference
  }
};

}  // namespace

task<> delay(std::chrono::nanoseconds d, const cancellation_token& token, time_provider& provider) {
  detail::check_timeout(d, "delay");
  if (token.is_cancellation_requested()) return task_from_canceled();
  if (d.count() == 0) return completed_task();
  if (detail::is_infinite(d) && !token.can_be_canceled())
    throw std::invalid_argument(
        "tpl: delay(infinite_timeout) with a token that can never be canceled would never complete");
  auto* s = new delay_state();
  task<> result(detail::adopt_state, s);
  try {
    if (token.can_be_canceled()) s->guards.set_registration(token.register_callback([s] { s->finish(true); }));
    if (!detail::is_infinite(d) && !s->decided.load(std::memory_order_acquire))
      s->guards.set_timer(provider.create_timer([s] { s->finish(false); }, d, infinite_timeout));
  } catch (...) {
    // Arming failed (std::bad_alloc from the registration or the timer): the delay throws and
    // must drop the pending operation's reference, which only a winner releases; without this
    // the state leaked (tests/alloc_failure_test.cpp). acq_rel: as in finish, one winner; if the
    // token's callback already won, it took everything down and released.
    if (!s->decided.exchange(true, std::memory_order_acq_rel)) {
      s->guards.clean_up();
      s->release();
    }
    throw;  // `result` drops the handle's reference
  }
  // acquire: a winner that cleaned up before we stored something left it to us.
  if (s->decided.load(std::memory_order_acquire)) s->guards.clean_up();
  return result;
}

}  // namespace tpl
