// tpl/time_provider.hpp — time as a dependency (.NET TimeProvider / ITimer), timers, delay().
//
// Every timed API in tpl takes a time_provider (default: system_time_provider()), so code that
// waits can be tested with testing::fake_time_provider without sleeping.
//
//   tpl::time_provider& clock = tpl::system_time_provider();
//   auto start = clock.timestamp();
//   tpl::timer t = clock.create_timer([] { std::puts("tick"); },
//                                     std::chrono::milliseconds(100),    // first due
//                                     std::chrono::milliseconds(100));   // then every 100 ms
//   co_await tpl::delay(std::chrono::seconds(1));                          // cancellable: (d, token)
//   auto took = clock.elapsed_since(start);
//
// System timers: one timer thread keeps a binary heap of due times (O(log n) per operation with
// 100,000 live timers) and hands each due callback to the thread pool. A periodic timer is
// re-armed from its previous due time (no drift); if it falls more than a period behind, the
// missed ticks are skipped rather than fired in a burst. An exception escaping a timer callback is
// caught and reported on stderr: it never kills a pool thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "tpl/cancellation.hpp"
#include "tpl/task.hpp"

namespace tpl {

/// Infinite timeout / period (.NET Timeout.InfiniteTimeSpan: -1 ms).
inline constexpr std::chrono::milliseconds infinite_timeout{-1};

namespace detail {
inline bool is_infinite(std::chrono::nanoseconds d) noexcept {
  return d == std::chrono::nanoseconds(infinite_timeout);
}
/// Throws std::invalid_argument for a negative duration other than infinite_timeout.
void check_timeout(std::chrono::nanoseconds d, const char* what);

struct timer_impl {
  virtual ~timer_impl() = default;
  virtual bool change(std::chrono::nanoseconds due, std::chrono::nanoseconds period) = 0;
  virtual void dispose() noexcept = 0;
};
}  // namespace detail

/// A timer made by a time_provider (.NET ITimer). Move-only; destroying it disposes it.
class timer {
 public:
  timer() noexcept = default;
  explicit timer(std::shared_ptr<detail::timer_impl> impl) noexcept : impl_(std::move(impl)) {}
  timer(timer&&) noexcept = default;
  timer& operator=(timer&& o) noexcept {
    if (this != &o) {
      dispose();
      impl_ = std::move(o.impl_);
    }
    return *this;
  }
  ~timer() { dispose(); }

  /// Re-arms: first callback after `due` (infinite_timeout: disarmed), then every `period`
  /// (infinite_timeout or zero: once). Returns false if the timer was disposed.
  bool change(std::chrono::nanoseconds due, std::chrono::nanoseconds period);

  /// Stops the timer. If its callback is running on another thread, waits for it to return
  /// (called from inside the callback, it does not wait). Idempotent.
  void dispose() noexcept;

  /// As dispose(), without blocking the caller: the task completes once a running callback
  /// has returned.
  task<> dispose_async();

  bool valid() const noexcept { return impl_ != nullptr; }

 private:
  std::shared_ptr<detail::timer_impl> impl_;
};

/// The source of time for everything in tpl that waits (.NET TimeProvider).
class time_provider {
 public:
  virtual ~time_provider() = default;

  /// Current UTC time (.NET GetUtcNow).
  virtual std::chrono::system_clock::time_point utc_now() const = 0;
  /// Offset of local time from UTC (.NET LocalTimeZone, reduced to its current offset).
  virtual std::chrono::seconds local_utc_offset() const = 0;
  /// Current local time, as a system_clock time point shifted by local_utc_offset() (.NET GetLocalNow).
  std::chrono::system_clock::time_point local_now() const { return utc_now() + local_utc_offset(); }

  /// A monotonic timestamp in ticks of timestamp_frequency() per second (.NET GetTimestamp).
  virtual std::int64_t timestamp() const = 0;
  virtual std::int64_t timestamp_frequency() const = 0;
  /// Time between two timestamps (.NET GetElapsedTime).
  std::chrono::nanoseconds elapsed(std::int64_t start, std::int64_t end) const;
  std::chrono::nanoseconds elapsed_since(std::int64_t start) const { return elapsed(start, timestamp()); }

  /// A timer calling `callback` after `due` and then every `period` (see timer::change).
  virtual timer create_timer(std::function<void()> callback, std::chrono::nanoseconds due,
                             std::chrono::nanoseconds period) = 0;
};

/// The real clock and the process-wide timer thread (.NET TimeProvider.System).
time_provider& system_time_provider() noexcept;

/// A task that completes after `d` (.NET Task.Delay), or is canceled when `token` is first.
/// d == 0 completes at once; infinite_timeout waits for the token only; other negative durations
/// throw std::invalid_argument.
task<> delay(std::chrono::nanoseconds d, const cancellation_token& token = {},
             time_provider& provider = system_time_provider());
inline task<> delay(std::chrono::nanoseconds d, time_provider& provider) {
  return delay(d, cancellation_token{}, provider);
}

}  // namespace tpl
