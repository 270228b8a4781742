// tpl/sync/spin_wait.hpp — spin_wait (.NET SpinWait: spin a little, then yield the CPU) and
// spin_lock (.NET SpinLock: a lock that never blocks in the kernel, for critical sections of a few
// instructions).
//
//   tpl::spin_wait sw;
//   while (!flag.load(std::memory_order_acquire)) sw.spin_once();     // pause, then yield
//
//   tpl::spin_lock lock;                          // or spin_lock(true): track the owner
//   { std::lock_guard g(lock); counter += 1; }    // BasicLockable / Lockable
//
// spin_wait's schedule (the .NET one): the first yield_threshold (10) calls spin on the CPU, each
// twice as long as the previous (1, 2, 4 ... spin units, capped); later calls give up the time
// slice: std::this_thread::yield(), and every 5th call a sleep(0) (on Linux both are sched_yield;
// the cadence is kept so counts line up with .NET's). spin_once never sleeps for a millisecond
// unless asked to with spin_once(sleep1_threshold): the 1 ms sleeps are what made .NET 6's
// ReaderWriterLockSlim stall (acquisitions of 10 ms and more under
// contention; see docs/synchronization.md).
//
// A spin unit is calibrated, not a fixed count of `pause` instructions: `pause` costs ~10 cycles on
// older Intel cores and ~140 on Skylake and later, so a fixed count spins 14 times longer on one
// machine than another. tpl measures the cost of `pause` on first use and measures it again at
// most every kPauseRecalibrationPeriodMs when spinning (frequency scaling and VM migrations change
// it), so that one spin unit costs about kTargetNsPerSpinUnit on any machine.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace tpl {

namespace detail {
/// Pauses per spin unit (at least 1), measured so that one unit costs about kTargetNsPerSpinUnit.
std::uint32_t pauses_per_spin_unit() noexcept;
/// Measures again now (tests and benchmarks; spin_wait re-measures on its own).
void recalibrate_pause() noexcept;
/// The last measurement: nanoseconds per pause instruction (times 1000, for precision).
std::uint64_t measured_pause_picoseconds() noexcept;
/// Calibrations done since start (1 after the first measurement).
std::uint64_t pause_calibrations() noexcept;
/// Spins for `units` spin units.
void spin_units(std::uint32_t units) noexcept;
}  // namespace detail

class spin_wait {
 public:
  /// Calls before spin_once() starts yielding the CPU (.NET SpinWait.YieldThreshold).
  static constexpr int yield_threshold = 10;
  /// While yielding, every this many-th call is a sleep(0) instead of a yield.
  static constexpr int sleep0_every_how_many_yields = 5;
  /// With spin_once(sleep1_threshold), every this many-th yielding call sleeps 1 ms.
  static constexpr int sleep1_every_how_many_yields = 20;

  /// Number of spin_once() calls since construction or reset().
  int count() const noexcept { return count_; }
  /// True if the next spin_once() yields the CPU instead of spinning on it.
  bool next_spin_will_yield() const noexcept { return count_ >= yield_threshold || single_core(); }

  /// One step of the schedule: spin, yield or sleep(0); never sleeps 1 ms.
  void spin_once() noexcept { spin_once_impl(-1); }
  /// As spin_once(), and once count() reaches sleep1_threshold (>= yield_threshold), every 20th
  /// yielding step sleeps 1 ms (.NET SpinOnce(sleep1Threshold)). -1 disables the 1 ms sleeps.
  void spin_once(int sleep1_threshold) noexcept { spin_once_impl(sleep1_threshold); }
  void reset() noexcept { count_ = 0; }

  /// Spins until cond() is true (.NET SpinWait.SpinUntil); never gives up.
  template <class Cond>
  static void spin_until(Cond cond) {
    spin_wait sw;
    while (!cond()) sw.spin_once();
  }

  /// True on a single-processor machine, where spinning on the CPU never helps.
  static bool single_core() noexcept;

 private:
  void spin_once_impl(int sleep1_threshold) noexcept;
  int count_ = 0;
};

/// A lock that spins (with spin_wait's schedule) instead of blocking in the kernel (.NET SpinLock).
/// For very short critical sections only; it does not tell the pool it is blocked. Not recursive.
/// With track_owner, lock() by the owner throws lock_recursion_error (instead of deadlocking) and
/// unlock() by another thread throws synchronization_lock_error; without it, unlock() of an unheld
/// lock still throws synchronization_lock_error (both derive from invalid_operation).
class spin_lock {
 public:
  explicit spin_lock(bool track_owner = false) noexcept : track_owner_(track_owner) {}
  spin_lock(const spin_lock&) = delete;
  spin_lock& operator=(const spin_lock&) = delete;

  void lock();
  bool try_lock();
  void unlock();
  bool is_held() const noexcept {
    // relaxed: a snapshot for diagnostics; callers must not synchronise on it.
    return held_.load(std::memory_order_relaxed);
  }
  /// With owner tracking: whether the calling thread holds the lock (false without tracking).
  bool is_held_by_current_thread() const noexcept;
  bool is_thread_owner_tracking_enabled() const noexcept { return track_owner_; }

 private:
  std::atomic<bool> held_{false};
  std::atomic<std::thread::id> owner_{};
  const bool track_owner_;
};

}  // namespace tpl
