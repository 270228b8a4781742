// testing::fake_time_provider: timers fire only inside advance() / set_utc_now(), on the caller.
#include "tpl/testing/fake_time_provider.hpp"

#include "tpl/async_local.hpp"

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tpl/detail/trampoline.hpp"

namespace tpl::testing {

namespace {
thread_local const void* t_running_fake_timer = nullptr;
}  // namespace

/// t in nanoseconds, clamped to their range (a coarser system_clock, as libc++'s, reaches further).
fake_time_provider::time_point_ns fake_time_provider::to_ns(std::chrono::system_clock::time_point t) noexcept {
  using std::chrono::time_point_cast;
  using sys_duration = std::chrono::system_clock::duration;
  if (t >= time_point_cast<sys_duration>(time_point_ns::max())) return time_point_ns::max();
  if (t <= time_point_cast<sys_duration>(time_point_ns::min())) return time_point_ns::min();
  return time_point_cast<std::chrono::nanoseconds>(t);
}

struct fake_time_provider::core {
  std::mutex mutex;
  time_point_ns now;
  std::chrono::nanoseconds auto_advance{0};
  std::chrono::seconds local_offset{0};
  std::uint64_t next_sequence = 0;
  struct fake_timer;
  std::vector<std::shared_ptr<fake_timer>> timers;  // armed or disarmed, not disposed
};

struct fake_time_provider::core::fake_timer final : detail::timer_impl {
  fake_timer(std::shared_ptr<core> c, std::function<void()> cb, std::uint64_t seq)
      : owner(std::move(c)), callback(std::move(cb)), sequence(seq) {}

  bool change(std::chrono::nanoseconds due_in, std::chrono::nanoseconds new_period) override {
    std::lock_guard g(owner->mutex);
    if (disposed) return false;
    period = (detail::is_infinite(new_period) || new_period.count() == 0) ? std::chrono::nanoseconds(0)
                                                                         : new_period;
    armed = !detail::is_infinite(due_in);
    if (armed) due = detail::saturating_add(owner->now, due_in);
    return true;
  }

  void dispose() noexcept override {
    std::unique_lock lock(owner->mutex);
    if (!disposed) {
      disposed = true;
      armed = false;
      std::erase_if(owner->timers, [this](const std::shared_ptr<fake_timer>& t) { return t.get() == this; });
    }
    if (t_running_fake_timer == this) return;
    if (running == 0) return;
    detail::before_blocking_wait();
    idle.wait(lock, [this] { return running == 0; });
  }

  std::shared_ptr<core> owner;
  std::function<void()> callback;
  const std::uint64_t sequence;  // creation order: breaks ties between equal due times
  // Guarded by owner->mutex.
  bool armed = false;
  bool disposed = false;
  time_point_ns due;
  std::chrono::nanoseconds period{0};
  int running = 0;
  std::condition_variable idle;
};

std::chrono::system_clock::time_point fake_time_provider::default_start() noexcept {
  // 2000-01-01T00:00:00Z = 946684800 s after the Unix epoch.
  return std::chrono::system_clock::time_point(std::chrono::seconds(946'684'800));
}

fake_time_provider::fake_time_provider(std::chrono::system_clock::time_point start)
    : core_(std::make_shared<core>()) {
  core_->now = to_ns(start);
}

fake_time_provider::~fake_time_provider() = default;

std::chrono::system_clock::time_point fake_time_provider::utc_now() const {
  std::lock_guard g(core_->mutex);
  const auto now = core_->now;
  core_->now += core_->auto_advance;  // .NET: the read returns the time, then the clock moves
  return std::chrono::time_point_cast<std::chrono::system_clock::duration>(now);
}

std::chrono::seconds fake_time_provider::local_utc_offset() const {
  std::lock_guard g(core_->mutex);
  return core_->local_offset;
}

std::int64_t fake_time_provider::timestamp() const {
  std::lock_guard g(core_->mutex);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(core_->now.time_since_epoch()).count();
}

timer fake_time_provider::create_timer(std::function<void()> callback, std::chrono::nanoseconds due,
                                       std::chrono::nanoseconds period) {
  if (!callback) throw std::invalid_argument("tpl: create_timer: empty callback");
  callback = detail::with_captured_context(std::move(callback));
  detail::check_timeout(due, "create_timer(due)");
  detail::check_timeout(period, "create_timer(period)");
  std::shared_ptr<core::fake_timer> t;
  {
    std::lock_guard g(core_->mutex);
    t = std::make_shared<core::fake_timer>(core_, std::move(callback), core_->next_sequence++);
    core_->timers.push_back(t);
  }
  t->change(due, period);
  return timer(std::move(t));
}

void fake_time_provider::advance(std::chrono::nanoseconds d) {
  if (d.count() < 0) throw std::invalid_argument("tpl: fake_time_provider::advance: negative duration");
  time_point_ns target;
  {
    std::lock_guard g(core_->mutex);
    target = detail::saturating_add(core_->now, d);
  }
  advance_to(target);
}

void fake_time_provider::set_utc_now(std::chrono::system_clock::time_point t) {
  const time_point_ns target = to_ns(t);
  {
    std::lock_guard g(core_->mutex);
    if (target < core_->now)
      throw std::invalid_argument("tpl: fake_time_provider::set_utc_now: time cannot go backwards");
  }
  advance_to(target);
}

void fake_time_provider::advance_to(time_point_ns target) {
  std::unique_lock lock(core_->mutex);
  for (;;) {
    std::shared_ptr<core::fake_timer> next;
    for (const auto& t : core_->timers) {
      if (!t->armed || t->due > target) continue;
      if (next == nullptr || t->due < next->due || (t->due == next->due && t->sequence < next->sequence))
        next = t;
    }
    if (next == nullptr) {
      if (core_->now < target) core_->now = target;
      return;
    }
    if (core_->now < next->due) core_->now = next->due;
    if (next->period.count() > 0 && next->due != time_point_ns::max())
      next->due = detail::saturating_add(next->due, next->period);  // may fire again in this advance
    else
      next->armed = false;
    ++next->running;
    lock.unlock();
    const void* previous = t_running_fake_timer;
    t_running_fake_timer = next.get();
    struct done_guard {
      std::shared_ptr<core::fake_timer>& t;
      std::unique_lock<std::mutex>& lock;
      const void* previous;
      ~done_guard() {
        t_running_fake_timer = previous;
        lock.lock();
        if (--t->running == 0) t->idle.notify_all();
      }
    } guard{next, lock, previous};
    next->callback();  // exceptions propagate to the caller of advance(), as in .NET's fake
  }
}

void fake_time_provider::set_auto_advance(std::chrono::nanoseconds d) {
  if (d.count() < 0) throw std::invalid_argument("tpl: fake_time_provider::set_auto_advance: negative duration");
  std::lock_guard g(core_->mutex);
  core_->auto_advance = d;
}

std::chrono::nanoseconds fake_time_provider::auto_advance() const {
  std::lock_guard g(core_->mutex);
  return core_->auto_advance;
}

void fake_time_provider::set_local_utc_offset(std::chrono::seconds offset) {
  std::lock_guard g(core_->mutex);
  core_->local_offset = offset;
}

std::size_t fake_time_provider::armed_timers() const {
  std::lock_guard g(core_->mutex);
  std::size_t n = 0;
  for (const auto& t : core_->timers) n += t->armed ? 1 : 0;
  return n;
}

bool fake_time_provider::next_due(std::chrono::system_clock::time_point& out) const {
  std::lock_guard g(core_->mutex);
  bool found = false;
  time_point_ns earliest;
  for (const auto& t : core_->timers) {
    if (t->armed && (!found || t->due < earliest)) {
      earliest = t->due;
      found = true;
    }
  }
  if (found) out = std::chrono::ceil<std::chrono::system_clock::duration>(earliest);
  return found;
}

}  // namespace tpl::testing
