// .NET's hill climbing (PortableThreadPool.HillClimbing), re-expressed: the pool's thread count is
// modulated by a square wave, throughput is sampled, and the Goertzel filter measures how much of
// the throughput signal moves with the thread wave. A positive correlation (throughput follows
// threads) moves the control setting up, a negative one down, scaled by confidence (signal over
// noise) and limited to max_change_per_second.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "tpl/detail/pool_policy.hpp"

namespace tpl::detail {

hill_climbing::hill_climbing(unsigned min_threads, unsigned max_threads, std::uint32_t seed)
    : hill_climbing(min_threads, max_threads, config{}, seed) {}

hill_climbing::hill_climbing(unsigned min_threads, unsigned max_threads, config c, std::uint32_t seed)
    : cfg_(c),
      min_(min_threads),
      max_(max_threads),
      samples_to_measure_(c.wave_period * c.wave_history_size),
      samples_(static_cast<std::size_t>(samples_to_measure_)),
      thread_counts_(static_cast<std::size_t>(samples_to_measure_)),
      rng_(seed == 0 ? 1 : seed) {
  if (cfg_.sample_interval_ms_low > cfg_.sample_interval_ms_high) {
    cfg_.sample_interval_ms_low = 10;
    cfg_.sample_interval_ms_high = 200;
  }
  current_sample_ms_ = static_cast<unsigned>(std::uniform_int_distribution<int>(
      cfg_.sample_interval_ms_low, cfg_.sample_interval_ms_high)(rng_));
  last_thread_count_ = min_threads;
  control_ = min_threads;
}

void hill_climbing::set_limits(unsigned min_threads, unsigned max_threads) noexcept {
  min_ = min_threads;
  max_ = max_threads;
}

hill_climbing::result hill_climbing::update(unsigned current, double seconds, std::uint64_t completions,
                                            double cpu) {
  if (current != last_thread_count_) force_change(current, hill_climbing_state::initializing);

  seconds_since_change_ += seconds;
  completions_since_change_ += static_cast<double>(completions);

  seconds += accumulated_seconds_;
  completions += accumulated_completions_;

  // The count is off by up to (threads - 1) items in flight at each end of the interval: wait for
  // enough completions that this error stays under max_sample_error.
  if (total_samples_ > 0 &&
      (completions == 0 || (current - 1.0) / static_cast<double>(completions) >= cfg_.max_sample_error)) {
    accumulated_seconds_ = seconds;
    accumulated_completions_ = completions;
    return {current, 10};
  }
  accumulated_seconds_ = 0;
  accumulated_completions_ = 0;

  const double throughput = seconds > 0 ? static_cast<double>(completions) / seconds : 0;
  const auto index = static_cast<std::size_t>(total_samples_ % samples_to_measure_);
  samples_[index] = throughput;
  thread_counts_[index] = current;
  ++total_samples_;

  std::complex<double> thread_wave{}, throughput_wave{}, ratio{};
  double throughput_error = 0;
  double confidence = 0;
  hill_climbing_state state = hill_climbing_state::warmup;

  // At least one whole wave period more than we measure, and a whole multiple of it (so the
  // frequency falls on a Fourier band).
  const int sample_count =
      static_cast<int>(std::min<std::int64_t>(total_samples_ - 1, samples_to_measure_)) /
      cfg_.wave_period * cfg_.wave_period;

  if (sample_count > cfg_.wave_period) {
    double sample_sum = 0, thread_sum = 0;
    for (int i = 0; i < sample_count; ++i) {
      const auto k = static_cast<std::size_t>((total_samples_ - sample_count + i) % samples_to_measure_);
      sample_sum += samples_[k];
      thread_sum += thread_counts_[k];
    }
    const double average_throughput = sample_sum / sample_count;
    const double average_threads = thread_sum / sample_count;
    if (average_throughput > 0 && average_threads > 0) {
      const double adjacent1 = sample_count / (static_cast<double>(sample_count) / cfg_.wave_period + 1);
      const double adjacent2 = sample_count / (static_cast<double>(sample_count) / cfg_.wave_period - 1);
      throughput_wave = wave_component(samples_, sample_count, cfg_.wave_period) / average_throughput;
      throughput_error = std::abs(wave_component(samples_, sample_count, adjacent1) / average_throughput);
      if (adjacent2 <= sample_count)
        throughput_error = std::max(
            throughput_error, std::abs(wave_component(samples_, sample_count, adjacent2) / average_throughput));
      thread_wave = wave_component(thread_counts_, sample_count, cfg_.wave_period) / average_threads;

      if (average_noise_ == 0)
        average_noise_ = throughput_error;
      else
        average_noise_ = cfg_.error_smoothing_factor * throughput_error +
                         (1.0 - cfg_.error_smoothing_factor) * average_noise_;

      if (std::abs(thread_wave) > 0) {
        ratio = (throughput_wave - cfg_.target_throughput_ratio * thread_wave) / thread_wave;
        state = hill_climbing_state::climbing_move;
      } else {
        ratio = {0, 0};
        state = hill_climbing_state::stabilizing;
      }
      const double noise = std::max(average_noise_, throughput_error);
      confidence = noise > 0 ? (std::abs(thread_wave) / noise) / cfg_.target_signal_to_noise : 1.0;
    }
  }

  // The real part of the ratio: in phase with the thread wave = move up, opposite = move down.
  double move = std::min(1.0, std::max(-1.0, ratio.real()));
  move *= std::min(1.0, std::max(0.0, confidence));
  const double gain = cfg_.max_change_per_second * seconds;
  move = std::pow(std::abs(move), cfg_.gain_exponent) * (move >= 0.0 ? 1 : -1) * gain;
  move = std::min(move, cfg_.max_change_per_sample);
  if (move > 0.0 && cpu > cfg_.cpu_utilization_high) move = 0.0;

  control_ += move;

  int wave_magnitude = static_cast<int>(0.5 + control_ * average_noise_ * cfg_.target_signal_to_noise *
                                                  cfg_.wave_magnitude_multiplier * 2.0);
  wave_magnitude = std::clamp(wave_magnitude, 1, cfg_.max_wave_magnitude);

  control_ = std::min(static_cast<double>(max_) - wave_magnitude, control_);
  control_ = std::max(static_cast<double>(min_), control_);

  const std::int64_t half_period = std::max(1, cfg_.wave_period / 2);
  long long n = static_cast<long long>(control_ + wave_magnitude * ((total_samples_ / half_period) % 2));
  n = std::clamp<long long>(n, min_, max_);
  const auto new_count = static_cast<unsigned>(n);

  if (new_count != current) change_thread_count(new_count, state);

  unsigned next_ms = current_sample_ms_;
  // At the minimum and hurting throughput by going higher: stay longer before trying again.
  if (ratio.real() < 0.0 && new_count == min_)
    next_ms = static_cast<unsigned>(0.5 + current_sample_ms_ * (10.0 * std::min(-ratio.real(), 1.0)));
  return {new_count, next_ms};
}

void hill_climbing::force_change(unsigned new_count, hill_climbing_state why) {
  if (last_thread_count_ != new_count) {
    control_ += static_cast<double>(new_count) - static_cast<double>(last_thread_count_);
    change_thread_count(new_count, why);
  }
}

void hill_climbing::change_thread_count(unsigned n, hill_climbing_state why) {
  last_thread_count_ = n;
  current_sample_ms_ = static_cast<unsigned>(std::uniform_int_distribution<int>(
      cfg_.sample_interval_ms_low, cfg_.sample_interval_ms_high)(rng_));
  last_state_ = why;
  seconds_since_change_ = 0;
  completions_since_change_ = 0;
}

std::complex<double> hill_climbing::wave_component(const std::vector<double>& samples, int n,
                                                   double period) const {
  // Goertzel: the component of the last n samples at the given period.
  const double w = 2 * std::numbers::pi / period;
  const double cosine = std::cos(w);
  const double coeff = 2 * cosine;
  double q0 = 0, q1 = 0, q2 = 0;
  for (int i = 0; i < n; ++i) {
    q0 = coeff * q1 - q2 + samples[static_cast<std::size_t>((total_samples_ - n + i) % samples_to_measure_)];
    q2 = q1;
    q1 = q0;
  }
  return std::complex<double>(q1 - q2 * cosine, q2 * std::sin(w)) / static_cast<double>(n);
}

double cpu_meter::sample() noexcept {
#if defined(__linux__)
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return 0;
  unsigned long long v[8] = {};
  const int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                              &v[3], &v[4], &v[5], &v[6], &v[7]);
  std::fclose(f);
  if (got < 4) return 0;
  unsigned long long total = 0;
  for (unsigned long long x : v) total += x;
  const unsigned long long idle = v[3] + v[4];  // idle + iowait
  const unsigned long long busy = total - idle;
  const unsigned long long dt = total - last_total_, db = busy - last_busy_;
  const bool first = last_total_ == 0;
  last_total_ = total;
  last_busy_ = busy;
  if (first || dt == 0) return 0;
  return static_cast<double>(db) / static_cast<double>(dt);
#else
  return 0;
#endif
}

}  // namespace tpl::detail
