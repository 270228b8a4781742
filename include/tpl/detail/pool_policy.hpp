// tpl/detail/pool_policy.hpp — the thread pool's decisions as plain functions and classes, with no
// threads and no clock of their own, so that tests drive them with made-up times (internal).
//
// thread_counts: the packed (processing, existing, goal) word. goal_for: cooperative blocking's
// goal. blocking_injection_delay: .NET's delay before each blocking injection beyond `cores`
// extra threads. starvation_detector: the gate's "no progress for a period" rule.
// hill_climbing: .NET's HillClimbing (wave period 4, 8 waves of history, max wave magnitude 20,
// bias 0.15, target signal/noise 3, max change 4/s, Goertzel filter).
//
//   tpl::detail::starvation_detector gate(std::chrono::milliseconds(500));
//   bool add = gate.tick(now, completed_so_far, /*work_waiting=*/true, /*cpu=*/0.3);
#pragma once

#include <chrono>
#include <algorithm>
#include <complex>
#include <cstdint>
#include <random>
#include <vector>

#include "tpl/thread_pool.hpp"

namespace tpl::detail {

/// (processing work, existing, goal), 16 bits each, in one 64-bit word so that one CAS moves them
/// together (.NET's ThreadCounts).
struct thread_counts {
  std::uint16_t processing = 0;
  std::uint16_t existing = 0;
  std::uint16_t goal = 0;

  static constexpr thread_counts unpack(std::uint64_t w) noexcept {
    return {static_cast<std::uint16_t>(w), static_cast<std::uint16_t>(w >> 16),
            static_cast<std::uint16_t>(w >> 32)};
  }
  constexpr std::uint64_t pack() const noexcept {
    return std::uint64_t{processing} | (std::uint64_t{existing} << 16) | (std::uint64_t{goal} << 32);
  }
  friend constexpr bool operator==(thread_counts, thread_counts) = default;
};

inline constexpr unsigned kMaxPoolThreads = 32767;

/// The goal while `blocked` workers are blocked: the larger of what starvation / hill climbing
/// decided (`base`) and min + blocked, within [min, max]. With cooperative blocking off, `base`.
constexpr unsigned goal_for(unsigned base, unsigned blocked, unsigned min, unsigned max,
                            bool cooperative) noexcept {
  unsigned g = base;
  if (cooperative && min + blocked > g) g = min + blocked;
  if (g < min) g = min;
  if (g > max) g = max;
  return g;
}

/// How long to wait before adding a thread for blocking when `existing` threads exist: none while
/// existing < min + cores (up to `cores` extra threads come at once); beyond that
/// min(25 ms x (1 + excess / cores), 250 ms), excess = existing - (min + cores).
constexpr std::chrono::milliseconds blocking_injection_delay(unsigned existing, unsigned min,
                                                             unsigned cores) noexcept {
  if (cores == 0) cores = 1;
  if (existing < min + cores) return std::chrono::milliseconds(0);
  const unsigned excess = existing - (min + cores);
  const auto d = std::chrono::milliseconds(25) * (1 + excess / cores);
  return d < std::chrono::milliseconds(250) ? d : std::chrono::milliseconds(250);
}

/// The starvation gate's rule: tick() once per gate period; it answers true (add one thread) when
/// work waited through a whole period in which no item was completed. When the CPU is busy (at or
/// above `cpu_limit`, .NET: 80%) the period stretches to goal x 2 periods (.NET's
/// DequeueDelayThreshold), so a busy machine gets threads more slowly but a stalled pool is never
/// left without one. After a true it starts a new period, so a starved pool gains exactly one
/// thread per period.
class starvation_detector {
 public:
  using clock = std::chrono::steady_clock;
  explicit starvation_detector(std::chrono::milliseconds period, double cpu_limit = 0.8) noexcept
      : period_(period), cpu_limit_(cpu_limit) {}

  bool tick(clock::time_point now, std::uint64_t completed, bool work_waiting, double cpu,
            unsigned goal = 1) noexcept {
    if (!started_ || completed != last_completed_ || !work_waiting) {
      started_ = true;
      last_completed_ = completed;
      since_ = now;
      return false;
    }
    const auto needed = cpu < cpu_limit_ ? period_ : period_ * 2 * std::max(1u, goal);
    if (now - since_ < needed) return false;
    since_ = now;
    return true;
  }
  std::chrono::milliseconds period() const noexcept { return period_; }

 private:
  std::chrono::milliseconds period_;
  double cpu_limit_;
  bool started_ = false;
  std::uint64_t last_completed_ = 0;
  clock::time_point since_{};
};

/// .NET's HillClimbing, driven by samples of (thread count, duration, completions).
class hill_climbing {
 public:
  struct config {
    int wave_period = 4;
    int max_wave_magnitude = 20;
    double wave_magnitude_multiplier = 1.0;
    int wave_history_size = 8;
    double target_throughput_ratio = 0.15;  // "bias"
    double target_signal_to_noise = 3.0;
    double max_change_per_second = 4;
    double max_change_per_sample = 20;
    int sample_interval_ms_low = 10;
    int sample_interval_ms_high = 200;
    double error_smoothing_factor = 0.01;
    double gain_exponent = 2.0;
    double max_sample_error = 0.15;
    double cpu_utilization_high = 0.95;  // no positive move above this
  };

  struct result {
    unsigned new_thread_count;
    unsigned new_sample_ms;
  };

  hill_climbing(unsigned min_threads, unsigned max_threads, std::uint32_t seed = 0x5EED);
  hill_climbing(unsigned min_threads, unsigned max_threads, config c, std::uint32_t seed);

  /// One sample: `current` threads ran for `seconds` and completed `completions` items, while the
  /// machine's CPU was `cpu` busy (0..1). Returns the thread count to use and when to sample next.
  result update(unsigned current, double seconds, std::uint64_t completions, double cpu);
  /// Someone else (starvation, blocking) changed the count: re-base the control setting.
  void force_change(unsigned new_count, hill_climbing_state why);
  void set_limits(unsigned min_threads, unsigned max_threads) noexcept;

  hill_climbing_state state() const noexcept { return last_state_; }
  double control_setting() const noexcept { return control_; }
  unsigned sample_ms() const noexcept { return current_sample_ms_; }

 private:
  std::complex<double> wave_component(const std::vector<double>& samples, int n, double period) const;
  void change_thread_count(unsigned n, hill_climbing_state why);

  config cfg_;
  unsigned min_, max_;
  int samples_to_measure_;
  double control_ = 0;
  std::int64_t total_samples_ = 0;
  unsigned last_thread_count_ = 0;
  double average_noise_ = 0;
  double seconds_since_change_ = 0;
  double completions_since_change_ = 0;
  std::uint64_t accumulated_completions_ = 0;
  double accumulated_seconds_ = 0;
  std::vector<double> samples_;
  std::vector<double> thread_counts_;
  unsigned current_sample_ms_;
  std::minstd_rand rng_;
  hill_climbing_state last_state_ = hill_climbing_state::warmup;
};

/// The machine's CPU utilisation (0..1) since the previous call, from /proc/stat on Linux; 0 where
/// unknown. Not thread-safe: one instance per caller.
class cpu_meter {
 public:
  double sample() noexcept;

 private:
  unsigned long long last_busy_ = 0, last_total_ = 0;
};

}  // namespace tpl::detail
