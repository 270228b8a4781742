// tpl/testing/fake_time_provider.hpp — a time_provider whose clock moves only when told to
// (.NET Microsoft.Extensions.Time.Testing.FakeTimeProvider).
//
//   tpl::testing::fake_time_provider clock;                 // starts at 2000-01-01T00:00:00Z
//   tpl::task<> t = tpl::delay(std::chrono::seconds(30), {}, clock);
//   clock.advance(std::chrono::seconds(29));                // t still pending
//   clock.advance(std::chrono::seconds(1));                 // t completes here, on this thread
//
// advance() fires every timer that falls due, synchronously on the calling thread, earliest first
// (ties in creation order), setting the clock to each timer's due time as it fires it; a periodic
// timer advanced past several periods fires once per period, in order. set_utc_now() refuses to go
// back. With auto_advance, every utc_now() read moves the clock forward by that amount afterwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "tpl/time_provider.hpp"

namespace tpl::testing {

class fake_time_provider final : public time_provider {
 public:
  /// 2000-01-01T00:00:00Z, the .NET FakeTimeProvider's default start.
  static std::chrono::system_clock::time_point default_start() noexcept;

  explicit fake_time_provider(std::chrono::system_clock::time_point start = default_start());
  ~fake_time_provider() override;

  std::chrono::system_clock::time_point utc_now() const override;
  std::chrono::seconds local_utc_offset() const override;
  std::int64_t timestamp() const override;
  std::int64_t timestamp_frequency() const override { return 1'000'000'000; }
  timer create_timer(std::function<void()> callback, std::chrono::nanoseconds due,
                     std::chrono::nanoseconds period) override;

  /// Moves the clock forward by d (>= 0), firing due timers on this thread.
  void advance(std::chrono::nanoseconds d);
  /// Moves the clock to t, firing due timers; throws std::invalid_argument if t is in the past.
  void set_utc_now(std::chrono::system_clock::time_point t);
  /// Every utc_now() read advances the clock by d afterwards (0: off).
  void set_auto_advance(std::chrono::nanoseconds d);
  std::chrono::nanoseconds auto_advance() const;
  void set_local_utc_offset(std::chrono::seconds offset);

  /// Armed timers (for tests of code that must not leak timers).
  std::size_t armed_timers() const;
  /// Due time of the earliest armed timer, if any (the deterministic scheduler uses it), rounded
  /// up to system_clock's precision (set_utc_now(out) then fires it).
  bool next_due(std::chrono::system_clock::time_point& out) const;

 private:
  // The clock keeps nanoseconds whatever system_clock's precision (libc++'s is microseconds), so
  // advancing by less than a microsecond is never lost.
  using time_point_ns = std::chrono::time_point<std::chrono::system_clock, std::chrono::nanoseconds>;
  void advance_to(time_point_ns target);
  static time_point_ns to_ns(std::chrono::system_clock::time_point t) noexcept;

  // Shared with the timers, so a timer that outlives its provider is simply inert.
  struct core;
  std::shared_ptr<core> core_;
};

}  // namespace tpl::testing
