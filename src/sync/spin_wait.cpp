// spin_wait's calibrated spin unit and schedule, and spin_lock.
#include "tpl/sync/spin_wait.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "tpl/detail/config.hpp"
#include "tpl/detail/cpu_count.hpp"
#include "tpl/exceptions.hpp"

namespace tpl {

namespace detail {

namespace {

/// What one spin unit should cost (.NET aims each normalized spin iteration at ~35-37 ns).
constexpr std::uint64_t kTargetNsPerSpinUnit = 35;
/// How often spinning code measures the pause cost again.
constexpr std::int64_t kPauseRecalibrationPeriodMs = 1000;
/// Pauses timed per measurement: long enough to dwarf the clock reads (~1-20 us in all).
constexpr int kPausesPerMeasurement = 256;
/// Cap on the units of one spin_once() (the doubling stops here).
constexpr std::uint32_t kMaxSpinUnitsPerIteration = 128;
/// Checks of the clock are themselves rate-limited: one per this many spin_units() calls.
constexpr std::uint32_t kClockCheckEvery = 64;

struct calibration {
  std::atomic<std::uint32_t> pauses_per_unit{0};  // 0: never measured
  std::atomic<std::uint64_t> pause_ps{0};
  std::atomic<std::int64_t> next_due_ms{0};
  std::atomic<bool> measuring{false};
  std::atomic<std::uint64_t> count{0};
};
calibration g_cal;

std::int64_t now_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void measure() noexcept {
  bool expected = false;
  // acquire: one measurer at a time; others keep using the previous value.
  if (!g_cal.measuring.compare_exchange_strong(expected, true, std::memory_order_acquire)) return;
  // Best of three: a preemption during one round must not inflate the result.
  std::uint64_t best_ps = ~std::uint64_t{0};
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kPausesPerMeasurement; ++i) TPL_CPU_RELAX();
    const auto t1 = std::chrono::steady_clock::now();
    const auto ps = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()) *
                    1000 / kPausesPerMeasurement;
    if (ps < best_ps) best_ps = ps;
  }
  if (best_ps == 0) best_ps = 1;
  std::uint64_t per_unit = kTargetNsPerSpinUnit * 1000 / best_ps;
  if (per_unit < 1) per_unit = 1;
  if (per_unit > 1024) per_unit = 1024;
  // relaxed: independent statistics; a reader seeing a mix of old and new values only spins a
  // slightly different time.
  g_cal.pause_ps.store(best_ps, std::memory_order_relaxed);
  g_cal.pauses_per_unit.store(static_cast<std::uint32_t>(per_unit), std::memory_order_relaxed);
  g_cal.next_due_ms.store(now_ms() + kPauseRecalibrationPeriodMs, std::memory_order_relaxed);
  g_cal.count.fetch_add(1, std::memory_order_relaxed);
  // release: ends our turn as the measurer.
  g_cal.measuring.store(false, std::memory_order_release);
}

thread_local std::uint32_t t_spin_calls = 0;

}  // namespace

std::uint32_t pauses_per_spin_unit() noexcept {
  // relaxed: a plain number; see measure().
  std::uint32_t n = g_cal.pauses_per_unit.load(std::memory_order_relaxed);
  if (TPL_UNLIKELY(n == 0)) {
    measure();
    n = g_cal.pauses_per_unit.load(std::memory_order_relaxed);
    if (n == 0) n = 1;  // another thread is measuring for the first time
  } else if (TPL_UNLIKELY(++t_spin_calls % kClockCheckEvery == 0) &&
             now_ms() >= g_cal.next_due_ms.load(std::memory_order_relaxed)) {
    measure();
  }
  return n;
}

void recalibrate_pause() noexcept { measure(); }

std::uint64_t measured_pause_picoseconds() noexcept {
  pauses_per_spin_unit();
  // relaxed: see measure().
  return g_cal.pause_ps.load(std::memory_order_relaxed);
}

std::uint64_t pause_calibrations() noexcept {
  // relaxed: a statistic.
  return g_cal.count.load(std::memory_order_relaxed);
}

void spin_units(std::uint32_t units) noexcept {
  const std::uint64_t pauses = static_cast<std::uint64_t>(units) * pauses_per_spin_unit();
  for (std::uint64_t i = 0; i < pauses; ++i) TPL_CPU_RELAX();
}

}  // namespace detail

// ---- spin_wait --------------------------------------------------------------------------------

bool spin_wait::single_core() noexcept {
  static const bool one = detail::available_cpus() <= 1;
  return one;
}

void spin_wait::spin_once_impl(int sleep1_threshold) noexcept {
  if (sleep1_threshold >= 0 && sleep1_threshold < yield_threshold) sleep1_threshold = yield_threshold;
  if (next_spin_will_yield()) {
    const int yields = count_ >= yield_threshold ? count_ - yield_threshold : count_;
    if (sleep1_threshold >= 0 && count_ >= sleep1_threshold &&
        yields % sleep1_every_how_many_yields == sleep1_every_how_many_yields - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else {
      // .NET alternates Thread.Yield with a Sleep(0) every 5th step; on Linux both are
      // sched_yield (libstdc++'s sleep_for(0) returns without a system call), so one call serves.
      std::this_thread::yield();
    }
  } else {
    std::uint32_t units = detail::kMaxSpinUnitsPerIteration;
    if (count_ < 30 && (1u << count_) < units) units = 1u << count_;
    detail::spin_units(units);
  }
  // Wrap like .NET: stay in the yielding phase rather than overflow.
  count_ = count_ == 0x7fffffff ? yield_threshold : count_ + 1;
}

// ---- spin_lock --------------------------------------------------------------------------------

bool spin_lock::is_held_by_current_thread() const noexcept {
  // relaxed: only the owner itself can see its own id there, and it wrote it.
  return track_owner_ && owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

bool spin_lock::try_lock() {
  if (track_owner_ && is_held_by_current_thread())
    throw lock_recursion_error("tpl: spin_lock: the calling thread already holds the lock (not recursive)");
  // relaxed pre-check: avoids a write to a contended line; acquire on the exchange: the critical
  // section must see the previous holder's writes.
  if (held_.load(std::memory_order_relaxed) || held_.exchange(true, std::memory_order_acquire)) return false;
  // relaxed: read only by this thread (is_held_by_current_thread) or after acquiring the lock.
  if (track_owner_) owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  return true;
}

void spin_lock::lock() {
  if (try_lock()) return;
  spin_wait sw;
  for (;;) {
    // relaxed: just waiting for the lock to look free before trying again.
    while (held_.load(std::memory_order_relaxed)) sw.spin_once();
    if (try_lock()) return;
  }
}

void spin_lock::unlock() {
  if (track_owner_) {
    if (!is_held_by_current_thread())
      throw synchronization_lock_error("tpl: spin_lock::unlock: the calling thread does not hold the lock");
    // relaxed: published by the release store below.
    owner_.store(std::thread::id{}, std::memory_order_relaxed);
  } else if (!held_.load(std::memory_order_relaxed)) {  // relaxed: a misuse check only
    throw synchronization_lock_error("tpl: spin_lock::unlock: the lock is not held");
  }
  // release: publishes the critical section to the next holder.
  held_.store(false, std::memory_order_release);
}

}  // namespace tpl
