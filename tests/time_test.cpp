// Time: testing::fake_time_provider, timers (fake and system), time_provider basics, delay() and
// cancel_after.
//
// Every timing behaviour is specified with fake time. Tests of the system provider (which runs its
// timers on a real timer thread) only check outcomes that hold however late a timer fires: they wait
// for a task_completion_source the callback completes, never sleep-then-check.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tpl/testing/fake_time_provider.hpp>
#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace time_test_cpp {

namespace {

using tpl_test::exception_of_await;

using namespace std::chrono_literals;
using tpl_test::holds;
using tpl_test::test_error;
using tpl_test::thrown_by;
using tpl::testing::fake_time_provider;

constexpr auto never = std::chrono::nanoseconds(tpl::infinite_timeout);

/// Records which callbacks ran, in order (callbacks may run on any thread).
using journal = tpl_test::ordered_log<std::string>;

tpl::task<std::thread::id> thread_after_delay(std::chrono::nanoseconds d, tpl::time_provider& clock) {
  co_await tpl::delay(d, clock);
  co_return std::this_thread::get_id();
}

/// Seed 000's LogAfterDelay: `await Task.Delay(TimeSpan.FromSeconds(30), timeProvider);
/// logger.Log("done");`.
tpl::task<> log_after_delay(journal& log, tpl::time_provider& clock) {
  co_await tpl::delay(30s, clock);
  log.add("done after 30 s");
}

/// A provider with .NET's tick frequency (10^7 per second), to test time_provider::elapsed.
class ticks_provider final : public tpl::time_provider {
 public:
  std::chrono::system_clock::time_point utc_now() const override { return {}; }
  std::chrono::seconds local_utc_offset() const override { return 0s; }
  std::int64_t timestamp() const override { return 0; }
  std::int64_t timestamp_frequency() const override { return 10'000'000; }
  tpl::timer create_timer(std::function<void()>, std::chrono::nanoseconds,
                          std::chrono::nanoseconds) override {
    return {};
  }
};

// ==== fake_time_provider: the clock ==============================================================

TEST(fake_time_provider, starts_at_2000_01_01_midnight_utc) {
  fake_time_provider clock;
  const auto expected = std::chrono::sys_days(std::chrono::year(2000) / std::chrono::January / 1);
  EXPECT_EQ(clock.utc_now(), expected);
  EXPECT_EQ(fake_time_provider::default_start(), expected);
  EXPECT_EQ(fake_time_provider::default_start().time_since_epoch(), 946'684'800s);
}

TEST(fake_time_provider, starts_at_the_given_time) {
  const auto start = std::chrono::sys_days(std::chrono::year(2024) / std::chrono::March / 15) + 12h;
  fake_time_provider clock(start);
  EXPECT_EQ(clock.utc_now(), start);
}

TEST(fake_time_provider, advance_moves_utc_now_by_exactly_the_duration) {
  fake_time_provider clock;
  const std::int64_t t0 = clock.timestamp();
  clock.advance(90min);
  clock.advance(1ns);
  // utc_now() has system_clock's precision (nanoseconds in libstdc++, microseconds in libc++);
  // the clock itself keeps every nanosecond.
  EXPECT_EQ(clock.utc_now(), std::chrono::time_point_cast<std::chrono::system_clock::duration>(
                                 fake_time_provider::default_start() + 90min + 1ns));
  EXPECT_EQ(clock.timestamp() - t0, std::chrono::nanoseconds(90min + 1ns).count());
  for (int i = 0; i < 999; ++i) clock.advance(1ns);  // a microsecond in all, in nanosecond steps
  EXPECT_EQ(clock.utc_now(), std::chrono::time_point_cast<std::chrono::system_clock::duration>(
                                 fake_time_provider::default_start() + 90min + 1us));
}

TEST(fake_time_provider, timestamp_counts_nanoseconds_and_elapsed_reports_the_advance) {
  fake_time_provider clock;
  EXPECT_EQ(clock.timestamp_frequency(), 1'000'000'000);
  const std::int64_t start = clock.timestamp();
  clock.advance(1500ms);
  EXPECT_EQ(clock.timestamp() - start, 1'500'000'000);
  EXPECT_EQ(clock.elapsed(start, clock.timestamp()), 1500ms);
  EXPECT_EQ(clock.elapsed_since(start), 1500ms);
}

TEST(fake_time_provider, set_utc_now_moves_the_clock_forward) {
  fake_time_provider clock;
  const auto target = fake_time_provider::default_start() + 24h;
  clock.set_utc_now(target);
  EXPECT_EQ(clock.utc_now(), target);
  clock.set_utc_now(target);  // the same time is not "backwards"
  EXPECT_EQ(clock.utc_now(), target);
}

TEST(fake_time_provider, set_utc_now_backwards_throws_invalid_argument_and_keeps_the_clock) {
  fake_time_provider clock;
  clock.advance(10s);
  const auto now = clock.utc_now();
  EXPECT_THROW(clock.set_utc_now(now - std::chrono::system_clock::duration(1)), std::invalid_argument);
  EXPECT_EQ(clock.utc_now(), now);
}

TEST(fake_time_provider, advance_by_a_negative_duration_throws_invalid_argument_and_keeps_the_clock) {
  fake_time_provider clock;
  EXPECT_THROW(clock.advance(-1ns), std::invalid_argument);
  EXPECT_EQ(clock.utc_now(), fake_time_provider::default_start());
}

TEST(fake_time_provider, advance_by_zero_keeps_the_clock) {
  fake_time_provider clock;
  clock.advance(0ns);
  EXPECT_EQ(clock.utc_now(), fake_time_provider::default_start());
}

TEST(fake_time_provider, auto_advance_makes_each_read_return_the_time_then_move_the_clock) {
  fake_time_provider clock;
  EXPECT_EQ(clock.auto_advance(), 0ns);
  clock.set_auto_advance(1s);
  EXPECT_EQ(clock.auto_advance(), 1s);
  const auto start = fake_time_provider::default_start();
  EXPECT_EQ(clock.utc_now(), start);
  EXPECT_EQ(clock.utc_now(), start + 1s);
  EXPECT_EQ(clock.utc_now(), start + 2s);
  clock.set_auto_advance(0ns);
  EXPECT_EQ(clock.utc_now(), start + 3s);
  EXPECT_EQ(clock.utc_now(), start + 3s);
}

TEST(fake_time_provider, negative_auto_advance_throws_invalid_argument) {
  fake_time_provider clock;
  EXPECT_THROW(clock.set_auto_advance(-1ns), std::invalid_argument);
  EXPECT_EQ(clock.auto_advance(), 0ns);
}

TEST(fake_time_provider, auto_advance_reads_do_not_fire_timers_the_next_advance_does) {
  // tpl fires fake timers only inside advance() / set_utc_now() (.NET's FakeTimeProvider also
  // wakes them from GetUtcNow()).
  fake_time_provider clock;
  int fired = 0;
  auto t = clock.create_timer([&] { ++fired; }, 1s, never);
  clock.set_auto_advance(1s);
  (void)clock.utc_now();
  EXPECT_EQ(fired, 0);
  EXPECT_EQ(clock.armed_timers(), 1u);
  clock.advance(0ns);
  EXPECT_EQ(fired, 1);
}

TEST(fake_time_provider, local_now_is_utc_now_plus_the_local_offset) {
  fake_time_provider clock;
  EXPECT_EQ(clock.local_utc_offset(), 0s);
  EXPECT_EQ(clock.local_now(), clock.utc_now());
  clock.set_local_utc_offset(-5h);
  EXPECT_EQ(clock.local_utc_offset(), -5h);
  EXPECT_EQ(clock.local_now(), fake_time_provider::default_start() - 5h);
  EXPECT_EQ(clock.utc_now(), fake_time_provider::default_start());
}

// ==== fake_time_provider: timers =================================================================

TEST(fake_time_provider, timer_fires_when_the_clock_reaches_its_due_time_not_before) {
  fake_time_provider clock;
  int fired = 0;
  auto t = clock.create_timer([&] { ++fired; }, 5s, never);
  clock.advance(5s - 1ns);
  EXPECT_EQ(fired, 0);
  clock.advance(1ns);
  EXPECT_EQ(fired, 1);
  clock.advance(1h);
  EXPECT_EQ(fired, 1);  // one-shot
}

TEST(fake_time_provider, timer_with_zero_due_fires_at_the_next_advance_even_by_zero) {
  fake_time_provider clock;
  int fired = 0;
  auto t = clock.create_timer([&] { ++fired; }, 0ns, never);
  EXPECT_EQ(fired, 0);  // creating a timer never runs its callback
  clock.advance(0ns);
  EXPECT_EQ(fired, 1);
}

TEST(fake_time_provider, timers_fire_synchronously_on_the_advancing_thread) {
  fake_time_provider clock;
  std::thread::id fired_on;
  bool fired_before_advance_returned = false;
  auto t = clock.create_timer([&] { fired_on = std::this_thread::get_id(); }, 1s, never);
  std::thread::id advancer_id;
  std::thread advancer([&] {
    advancer_id = std::this_thread::get_id();
    clock.advance(1s);
    fired_before_advance_returned = fired_on == advancer_id;
  });
  advancer.join();
  EXPECT_TRUE(fired_before_advance_returned);
  EXPECT_EQ(fired_on, advancer_id);
}

TEST(fake_time_provider, fires_due_timers_earliest_first_with_ties_in_creation_order) {
  fake_time_provider clock;
  std::vector<std::string> order;
  auto a = clock.create_timer([&] { order.push_back("a@3s"); }, 3s, never);
  auto b = clock.create_timer([&] { order.push_back("b@1s"); }, 1s, never);
  auto c = clock.create_timer([&] { order.push_back("c@2s"); }, 2s, never);
  auto d = clock.create_timer([&] { order.push_back("d@1s"); }, 1s, never);
  auto e = clock.create_timer([&] { order.push_back("e@4s"); }, 4s, never);
  clock.advance(3s);
  EXPECT_EQ(order, (std::vector<std::string>{"b@1s", "d@1s", "c@2s", "a@3s"}));
}

TEST(fake_time_provider, clock_reads_each_timers_due_time_inside_its_callback) {
  fake_time_provider clock;
  const auto start = clock.utc_now();
  std::vector<std::chrono::nanoseconds> seen;
  auto a = clock.create_timer([&] { seen.push_back(clock.utc_now() - start); }, 2s, never);
  auto b = clock.create_timer([&] { seen.push_back(clock.utc_now() - start); }, 7s, never);
  clock.advance(10s);
  EXPECT_EQ(seen, (std::vector<std::chrono::nanoseconds>{2s, 7s}));
  EXPECT_EQ(clock.utc_now() - start, 10s);  // then the clock lands on the target
}

TEST(fake_time_provider, periodic_timer_advanced_past_several_periods_fires_once_per_period_in_order) {
  fake_time_provider clock;
  const auto start = clock.utc_now();
  std::vector<std::chrono::nanoseconds> ticks;
  auto t = clock.create_timer([&] { ticks.push_back(clock.utc_now() - start); }, 1s, 2s);
  clock.advance(6500ms);
  EXPECT_EQ(ticks, (std::vector<std::chrono::nanoseconds>{1s, 3s, 5s}));
  clock.advance(500ms);
  EXPECT_EQ(ticks.back(), 7s);
  EXPECT_EQ(ticks.size(), 4u);
}

TEST(fake_time_provider, periodic_timers_interleave_by_due_time) {
  fake_time_provider clock;
  std::vector<std::string> order;
  auto fast = clock.create_timer([&] { order.push_back("fast"); }, 1s, 1s);
  auto slow = clock.create_timer([&] { order.push_back("slow"); }, 2s, 2s);
  clock.advance(4s);
  // 1 fast, 2 fast (created first) then slow, 3 fast, 4 fast then slow.
  EXPECT_EQ(order, (std::vector<std::string>{"fast", "fast", "slow", "fast", "fast", "slow"}));
}

TEST(fake_time_provider, set_utc_now_fires_due_timers_like_advance) {
  fake_time_provider clock;
  int fired = 0;
  auto t = clock.create_timer([&] { ++fired; }, 1min, 1min);
  clock.set_utc_now(fake_time_provider::default_start() + 3min);
  EXPECT_EQ(fired, 3);
}

TEST(fake_time_provider, change_re_arms_a_timer_from_the_current_time) {
  fake_time_provider clock;
  int fired = 0;
  auto t = clock.create_timer([&] { ++fired; }, 10s, never);
  clock.advance(4s);
  EXPECT_TRUE(t.change(2s, never));  // now due at 6 s, no longer at 10 s
  clock.advance(2s - 1ns);
  EXPECT_EQ(fired, 0);
  clock.advance(1ns);
  EXPECT_EQ(fired, 1);
  clock.advance(1h);
  EXPECT_EQ(fired, 1);
}

TEST(fake_time_provider, change_re_arms_a_timer_that_already_fired) {
  fake_time_provider clock;
  int fired = 0;
  auto t = clock.create_timer([&] { ++fired; }, 1s, never);
  clock.advance(1s);
  EXPECT_EQ(clock.armed_timers(), 0u);
  EXPECT_TRUE(t.change(1s, never));
  EXPECT_EQ(clock.armed_timers(), 1u);
  clock.advance(1s);
  EXPECT_EQ(fired, 2);
}

TEST(fake_time_provider, change_to_infinite_due_disarms_the_timer) {
  fake_time_provider clock;
  int fired = 0;
  auto t = clock.create_timer([&] { ++fired; }, 1s, 1s);
  EXPECT_TRUE(t.change(never, 1s));
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1h);
  EXPECT_EQ(fired, 0);
}

TEST(fake_time_provider, timer_created_with_infinite_due_is_disarmed_until_changed) {
  fake_time_provider clock;
  int fired = 0;
  auto t = clock.create_timer([&] { ++fired; }, never, never);
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1h);
  EXPECT_EQ(fired, 0);
  t.change(1s, never);
  clock.advance(1s);
  EXPECT_EQ(fired, 1);
}

TEST(fake_time_provider, zero_or_infinite_period_means_one_shot) {
  fake_time_provider clock;
  int zero = 0;
  int infinite = 0;
  auto a = clock.create_timer([&] { ++zero; }, 1s, 0ns);
  auto b = clock.create_timer([&] { ++infinite; }, 1s, never);
  clock.advance(10s);
  EXPECT_EQ(zero, 1);
  EXPECT_EQ(infinite, 1);
}

TEST(fake_time_provider, dispose_stops_the_timer_and_is_idempotent) {
  fake_time_provider clock;
  int fired = 0;
  auto t = clock.create_timer([&] { ++fired; }, 1s, 1s);
  clock.advance(1s);
  t.dispose();
  EXPECT_FALSE(t.valid());
  EXPECT_EQ(clock.armed_timers(), 0u);
  t.dispose();
  clock.advance(1h);
  EXPECT_EQ(fired, 1);
}

TEST(fake_time_provider, change_after_dispose_returns_false_and_does_not_re_arm) {
  fake_time_provider clock;
  int fired = 0;
  auto t = clock.create_timer([&] { ++fired; }, 1s, never);
  t.dispose();
  EXPECT_FALSE(t.change(1s, never));
  clock.advance(1h);
  EXPECT_EQ(fired, 0);
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(fake_time_provider, destroying_the_timer_handle_disposes_it) {
  fake_time_provider clock;
  int fired = 0;
  { auto t = clock.create_timer([&] { ++fired; }, 1s, never); }
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1h);
  EXPECT_EQ(fired, 0);
}

TEST(fake_time_provider, move_assigning_over_a_timer_disposes_the_old_one) {
  fake_time_provider clock;
  int old_fired = 0;
  int new_fired = 0;
  auto t = clock.create_timer([&] { ++old_fired; }, 1s, never);
  t = clock.create_timer([&] { ++new_fired; }, 1s, never);
  EXPECT_EQ(clock.armed_timers(), 1u);
  clock.advance(1s);
  EXPECT_EQ(old_fired, 0);
  EXPECT_EQ(new_fired, 1);
}

TEST(fake_time_provider, dispose_from_inside_its_own_callback_does_not_deadlock_and_stops_it) {
  fake_time_provider clock;
  int fired = 0;
  tpl::timer t;
  t = clock.create_timer(
      [&] {
        ++fired;
        t.dispose();
      },
      1s, 1s);
  clock.advance(5s);
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(fake_time_provider, callback_may_change_its_own_timer) {
  fake_time_provider clock;
  const auto start = clock.utc_now();
  std::vector<std::chrono::nanoseconds> ticks;
  tpl::timer t;
  t = clock.create_timer(
      [&] {
        ticks.push_back(clock.utc_now() - start);
        if (ticks.size() < 3) t.change(10s, never);
      },
      1s, never);
  clock.advance(1min);
  EXPECT_EQ(ticks, (std::vector<std::chrono::nanoseconds>{1s, 11s, 21s}));
}

TEST(fake_time_provider, armed_timers_counts_armed_timers_only) {
  fake_time_provider clock;
  EXPECT_EQ(clock.armed_timers(), 0u);
  auto one_shot = clock.create_timer([] {}, 1s, never);
  auto periodic = clock.create_timer([] {}, 1s, 1s);
  auto later = clock.create_timer([] {}, 1h, never);
  auto disarmed = clock.create_timer([] {}, never, never);
  EXPECT_EQ(clock.armed_timers(), 3u);
  clock.advance(1s);  // the one-shot fired; the periodic one re-armed
  EXPECT_EQ(clock.armed_timers(), 2u);
  later.dispose();
  EXPECT_EQ(clock.armed_timers(), 1u);
}

TEST(fake_time_provider, next_due_reports_the_earliest_armed_due_time) {
  fake_time_provider clock;
  std::chrono::system_clock::time_point due;
  EXPECT_FALSE(clock.next_due(due));
  auto a = clock.create_timer([] {}, 5s, never);
  auto b = clock.create_timer([] {}, 2s, never);
  auto c = clock.create_timer([] {}, 1s, never);
  c.change(never, never);
  ASSERT_TRUE(clock.next_due(due));
  EXPECT_EQ(due, fake_time_provider::default_start() + 2s);
}

TEST(fake_time_provider, timer_due_beyond_the_clocks_range_does_not_fire_early) {
  // now + due overflows the time_point (undefined behaviour, which UBSan aborts on: child process).
  tpl_test::expect_passes_in_a_child_process([] {
    fake_time_provider clock;
    int fired = 0;
    tpl::timer t;
    try {
      t = clock.create_timer([&] { ++fired; }, std::chrono::nanoseconds::max(), never);
    } catch (const std::invalid_argument&) {
      return true;  // rejecting it is right too
    }
    clock.advance(24h);
    return tpl_test::check_eq(fired, 0, "timer due in nanoseconds::max() fired after 24 h");
  });
}

TEST(fake_time_provider, timer_outliving_its_provider_is_inert) {
  int fired = 0;
  tpl::timer t;
  {
    fake_time_provider clock;
    t = clock.create_timer([&] { ++fired; }, 1s, 1s);
  }
  EXPECT_TRUE(t.valid());
  (void)t.change(1s, 1s);  // must not crash; there is no clock left to fire it
  t.dispose();
  t.dispose();
  EXPECT_EQ(fired, 0);
}

TEST(fake_time_provider, exception_from_a_callback_propagates_out_of_advance) {
  fake_time_provider clock;
  auto t = clock.create_timer([] { throw test_error(7); }, 1s, never);
  const auto e = thrown_by([&] { clock.advance(2s); });
  EXPECT_EQ(tpl_test::test_error_id(e), 7);
  // The clock stopped at the failing timer's due time; the next advance goes on from there.
  EXPECT_EQ(clock.utc_now(), fake_time_provider::default_start() + 1s);
  clock.advance(1s);
  EXPECT_EQ(clock.utc_now(), fake_time_provider::default_start() + 2s);
}

TEST(fake_time_provider, dispose_async_completes) {
  fake_time_provider clock;
  int fired = 0;
  auto t = clock.create_timer([&] { ++fired; }, 1s, 1s);
  tpl::sync_wait(t.dispose_async());
  EXPECT_FALSE(t.valid());
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1h);
  EXPECT_EQ(fired, 0);
}

TEST(fake_time_provider, dispose_from_another_thread_waits_for_the_running_callback) {
  fake_time_provider clock;
  std::latch callback_entered(1);
  std::latch release_callback(1);
  std::atomic<bool> dispose_started{false};
  std::atomic<bool> callback_finished{false};
  auto t = clock.create_timer(
      [&] {
        callback_entered.count_down();
        release_callback.wait();
        callback_finished.store(true);
      },
      1s, never);
  std::thread advancer([&] { clock.advance(1s); });
  callback_entered.wait();
  std::thread releaser([&] {
    dispose_started.wait(false);
    release_callback.count_down();
  });
  dispose_started.store(true);
  dispose_started.notify_one();
  t.dispose();
  EXPECT_TRUE(callback_finished.load());
  releaser.join();
  advancer.join();
}

// ==== time_provider / timer: common rules ========================================================

TEST(time_provider, elapsed_converts_timestamp_ticks_with_the_providers_frequency) {
  ticks_provider p;  // 10^7 ticks per second, as .NET's Stopwatch on Windows
  EXPECT_EQ(p.elapsed(0, 10'000'000), 1s);
  EXPECT_EQ(p.elapsed(5, 15), 1us);
  EXPECT_EQ(p.elapsed(15, 5), -1us);
  EXPECT_EQ(p.elapsed(42, 42), 0ns);
}

TEST(time_provider, infinite_timeout_is_minus_one_millisecond) {
  EXPECT_EQ(tpl::infinite_timeout, std::chrono::milliseconds(-1));
}

TEST(time_provider, create_timer_with_a_negative_due_throws_invalid_argument) {
  fake_time_provider clock;
  EXPECT_THROW(clock.create_timer([] {}, -1ns, never), std::invalid_argument);
  EXPECT_THROW(clock.create_timer([] {}, -2ms, never), std::invalid_argument);
  EXPECT_THROW(tpl::system_time_provider().create_timer([] {}, -2ms, never), std::invalid_argument);
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(time_provider, create_timer_with_a_negative_period_throws_invalid_argument) {
  fake_time_provider clock;
  EXPECT_THROW(clock.create_timer([] {}, 1s, -5s), std::invalid_argument);
  EXPECT_THROW(tpl::system_time_provider().create_timer([] {}, 1s, -5s), std::invalid_argument);
}

TEST(time_provider, create_timer_with_an_empty_callback_throws_invalid_argument) {
  fake_time_provider clock;
  EXPECT_THROW(clock.create_timer(std::function<void()>{}, 1s, never), std::invalid_argument);
  EXPECT_THROW(tpl::system_time_provider().create_timer(std::function<void()>{}, 1s, never),
               std::invalid_argument);
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(time_provider, change_with_a_negative_due_or_period_throws_invalid_argument) {
  fake_time_provider clock;
  auto t = clock.create_timer([] {}, 1s, never);
  EXPECT_THROW(t.change(-2ms, never), std::invalid_argument);
  EXPECT_THROW(t.change(1s, -2ms), std::invalid_argument);
  EXPECT_EQ(clock.armed_timers(), 1u);  // unchanged
}

TEST(timer, default_constructed_timer_is_invalid_and_harmless) {
  tpl::timer t;
  EXPECT_FALSE(t.valid());
  EXPECT_FALSE(t.change(1s, never));
  t.dispose();
  auto done = t.dispose_async();
  EXPECT_TRUE(done.is_completed_successfully());
}

// ==== system provider ============================================================================

TEST(time_provider, system_utc_now_lies_between_two_system_clock_reads) {
  auto& sys = tpl::system_time_provider();
  const auto before = std::chrono::system_clock::now();
  const auto now = sys.utc_now();
  const auto after = std::chrono::system_clock::now();
  EXPECT_LE(before, now);
  EXPECT_LE(now, after);
}

TEST(time_provider, system_timestamp_is_monotonic_with_a_positive_frequency) {
  auto& sys = tpl::system_time_provider();
  EXPECT_GT(sys.timestamp_frequency(), 0);
  const auto a = sys.timestamp();
  const auto b = sys.timestamp();
  EXPECT_LE(a, b);
  EXPECT_GE(sys.elapsed(a, b), 0ns);
}

TEST(time_provider, system_local_offset_is_a_real_time_zone_offset) {
  const auto offset = tpl::system_time_provider().local_utc_offset();
  EXPECT_LE(offset, 14h);
  EXPECT_GE(offset, -12h);
}

TEST(time_provider, system_time_provider_is_one_object) {
  EXPECT_EQ(&tpl::system_time_provider(), &tpl::system_time_provider());
}

/// Shared with system timer callbacks, which run on pool threads: owned by a shared_ptr so that a
/// (buggy) late callback still finds it alive.
struct system_timer_probe {
  std::atomic<int> ticks{0};
  std::atomic<int> ticks_after_dispose{0};
  std::atomic<bool> disposed{false};
  tpl::task_completion_source<> reached;
  int target = 1;

  void tick() {
    if (disposed.load()) ticks_after_dispose.fetch_add(1);
    if (ticks.fetch_add(1) + 1 == target) reached.try_set_result();
  }
};

TEST(timer, system_one_shot_timer_fires_once) {
  auto probe = std::make_shared<system_timer_probe>();
  auto t = tpl::system_time_provider().create_timer([probe] { probe->tick(); }, 1ms, never);
  tpl::sync_wait(probe->reached.get_task());
  t.dispose();
  EXPECT_EQ(probe->ticks.load(), 1);
}

TEST(timer, system_timer_with_zero_due_fires) {
  auto probe = std::make_shared<system_timer_probe>();
  auto t = tpl::system_time_provider().create_timer([probe] { probe->tick(); }, 0ns, never);
  tpl::sync_wait(probe->reached.get_task());
  EXPECT_GE(probe->ticks.load(), 1);
}

TEST(timer, system_timer_callback_runs_on_a_pool_thread) {
  auto on_pool = std::make_shared<tpl::task_completion_source<bool>>();
  auto t = tpl::system_time_provider().create_timer(
      [on_pool] { on_pool->try_set_result(tpl::thread_pool::current() != nullptr); }, 1ms, never);
  EXPECT_TRUE(tpl::sync_wait(on_pool->get_task()));
}

TEST(timer, system_timer_can_be_re_armed_after_it_fired) {
  auto probe = std::make_shared<system_timer_probe>();
  probe->target = 2;
  auto first = std::make_shared<tpl::task_completion_source<>>();
  auto t = tpl::system_time_provider().create_timer(
      [probe, first] {
        first->try_set_result();
        probe->tick();
      },
      1ms, never);
  tpl::sync_wait(first->get_task());
  EXPECT_TRUE(t.change(1ms, never));
  tpl::sync_wait(probe->reached.get_task());
  t.dispose();
  EXPECT_EQ(probe->ticks.load(), 2);
}

TEST(timer, system_periodic_timer_ticks_repeatedly_and_never_after_dispose_returned) {
  auto probe = std::make_shared<system_timer_probe>();
  probe->target = 3;
  auto t = tpl::system_time_provider().create_timer([probe] { probe->tick(); }, 1ms, 1ms);
  tpl::sync_wait(probe->reached.get_task());
  t.dispose();
  probe->disposed.store(true);
  // Give a stale tick every opportunity to show up (not a timing assertion: the check below holds
  // however long this takes).
  tpl::delay(5ms).wait();
  EXPECT_GE(probe->ticks.load(), 3);
  EXPECT_EQ(probe->ticks_after_dispose.load(), 0);
}

TEST(timer, system_dispose_waits_for_a_running_callback) {
  struct shared {
    std::latch release_callback{1};
    std::atomic<bool> dispose_started{false};
    std::atomic<bool> callback_finished{false};
    tpl::task_completion_source<> entered;
  };
  auto s = std::make_shared<shared>();
  auto t = tpl::system_time_provider().create_timer(
      [s] {
        s->entered.try_set_result();
        s->release_callback.wait();
        s->callback_finished.store(true);
      },
      1ms, never);
  tpl::sync_wait(s->entered.get_task());
  // Released from another thread only once dispose() has been called.
  std::thread releaser([s] {
    s->dispose_started.wait(false);
    s->release_callback.count_down();
  });
  s->dispose_started.store(true);
  s->dispose_started.notify_one();
  t.dispose();
  EXPECT_TRUE(s->callback_finished.load());
  releaser.join();
}

TEST(timer, system_dispose_async_completes_only_after_the_running_callback_returned) {
  struct shared {
    std::latch release_callback{1};
    std::atomic<bool> callback_finished{false};
    tpl::task_completion_source<> entered;
  };
  auto s = std::make_shared<shared>();
  auto t = tpl::system_time_provider().create_timer(
      [s] {
        s->entered.try_set_result();
        s->release_callback.wait();
        s->callback_finished.store(true);
      },
      1ms, never);
  tpl::sync_wait(s->entered.get_task());
  auto disposed = t.dispose_async();
  EXPECT_FALSE(t.valid());
  EXPECT_FALSE(disposed.is_completed());  // the callback is still blocked
  s->release_callback.count_down();
  tpl::sync_wait(disposed);
  EXPECT_TRUE(s->callback_finished.load());
}

TEST(timer, system_dispose_async_of_an_idle_periodic_timer_completes) {
  auto probe = std::make_shared<system_timer_probe>();
  auto t = tpl::system_time_provider().create_timer([probe] { probe->tick(); }, 1ms, 1ms);
  tpl::sync_wait(probe->reached.get_task());
  tpl::sync_wait(t.dispose_async());
  probe->disposed.store(true);
  tpl::delay(5ms).wait();  // an opportunity for a stale tick, not a timing assertion
  EXPECT_EQ(probe->ticks_after_dispose.load(), 0);
}

TEST(timer, system_dispose_from_inside_its_own_callback_does_not_deadlock) {
  struct shared {
    std::mutex mutex;  // orders the assignment of `t` before the callback's use of it
    tpl::timer t;
    std::atomic<int> ticks{0};
    tpl::task_completion_source<> disposed;
  };
  auto s = std::make_shared<shared>();
  {
    std::lock_guard g(s->mutex);
    s->t = tpl::system_time_provider().create_timer(
        [s] {
          std::lock_guard g(s->mutex);
          s->ticks.fetch_add(1);
          s->t.dispose();
          s->disposed.try_set_result();
        },
        1ms, 1ms);
  }
  tpl::sync_wait(s->disposed.get_task());
  std::lock_guard g(s->mutex);
  EXPECT_FALSE(s->t.valid());
  EXPECT_EQ(s->ticks.load(), 1);
}

TEST(timer, system_callback_exception_is_reported_on_stderr_and_the_next_tick_still_runs) {
  auto probe = std::make_shared<system_timer_probe>();
  probe->target = 2;
  testing::internal::CaptureStderr();
  auto t = tpl::system_time_provider().create_timer(
      [probe] {
        probe->tick();
        if (probe->ticks.load() == 1) throw test_error(1);
      },
      1ms, 1ms);
  tpl::sync_wait(probe->reached.get_task());
  t.dispose();  // waits for every running callback, the reporting one included
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("exception escaped a timer callback"), std::string::npos) << err;
  EXPECT_NE(err.find("test_error 1"), std::string::npos) << err;
}

TEST(timer, disposing_timers_whose_callbacks_are_queued_on_every_pool_thread_does_not_deadlock) {
  // Every pool thread disposes a timer whose callback the timer thread has already handed to the
  // pool but no thread has started. A disposed timer's callback never runs, so there is nothing to
  // wait for; waiting for it anyway needs a free pool thread, and there is none: a deadlock. (This
  // is what a delay / wait_async / timed semaphore wait does when its token or its task wins the
  // race against the timer on a busy pool; with a one-thread pool it takes a single such race.)
  // Child process: a hang fails this test only, when the watchdog ends it.
  tpl_test::expect_passes_in_a_child_process(
      [] {
        auto& pool = tpl::thread_pool::default_pool();
        const unsigned n = pool.thread_count();
        tpl_test::barrier all_busy(static_cast<int>(n));
        // Once one thread has disposed (and, not blocking, gone on to run queued work), the queue
        // may never hold n callbacks again: the others then go ahead and dispose too.
        std::atomic<bool> one_disposed{false};
        std::vector<tpl::task<>> items;
        for (unsigned i = 0; i < n; ++i) {
          items.push_back(tpl::run([&] {
            all_busy.arrive_and_wait();  // every pool thread is here: queued work cannot start
            auto t = tpl::system_time_provider().create_timer([] {}, 0ns, never);
            // Wait until the timer thread has handed all n callbacks to the pool.
            while (pool.stats().global_queue_length < n && !one_disposed.load()) std::this_thread::yield();
            tpl_test::progress("callbacks queued; disposing");
            t.dispose();
            one_disposed.store(true);
          }));
        }
        tpl::when_all(items).wait();
        return true;
      },
      std::chrono::seconds(60));
}

TEST(timer, many_system_timers_all_fire) {
  const int n = tpl_test::scaled(1000, 200);
  auto probe = std::make_shared<system_timer_probe>();
  probe->target = n;
  std::vector<tpl::timer> timers;
  timers.reserve(n);
  for (int i = 0; i < n; ++i)
    timers.push_back(tpl::system_time_provider().create_timer(
        [probe] { probe->tick(); }, std::chrono::microseconds(i % 50), never));
  tpl::sync_wait(probe->reached.get_task());
  timers.clear();
  EXPECT_EQ(probe->ticks.load(), n);
}

TEST(timer, system_timers_changed_and_disposed_from_several_threads_stay_consistent) {
  // Churn the timer queue (re-arm far in the future, disarm, dispose) from several threads while
  // short timers fire: every short timer fires, nothing crashes, no far timer fires.
  const int per_thread = tpl_test::scaled(2000, 300);
  constexpr int threads = 3;
  auto probe = std::make_shared<system_timer_probe>();
  probe->target = threads;
  auto far_fired = std::make_shared<std::atomic<int>>(0);
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    workers.emplace_back([&, w] {
      for (int i = 0; i < per_thread; ++i) {
        auto t = tpl::system_time_provider().create_timer([far_fired] { far_fired->fetch_add(1); }, 1h,
                                                          never);
        t.change(2h, never);
        if (i % 2 == 0) t.change(never, never);
        if (i % 3 == 0) t.dispose();
      }
      (void)w;
    });
  }
  std::vector<tpl::timer> short_timers;
  for (int i = 0; i < threads; ++i)
    short_timers.push_back(
        tpl::system_time_provider().create_timer([probe] { probe->tick(); }, 1ms, never));
  for (auto& w : workers) w.join();
  tpl::sync_wait(probe->reached.get_task());
  EXPECT_EQ(far_fired->load(), 0);
}

// ==== delay ======================================================================================

TEST(delay, completes_after_exactly_the_duration_of_fake_time) {
  fake_time_provider clock;
  auto d = tpl::delay(10s, clock);
  EXPECT_FALSE(d.is_completed());
  clock.advance(10s - 1ns);
  EXPECT_FALSE(d.is_completed());
  clock.advance(1ns);
  EXPECT_TRUE(d.is_completed_successfully());
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(delay, resumes_its_awaiter_on_the_advancing_thread) {
  fake_time_provider clock;
  auto resumed_on = thread_after_delay(1s, clock);
  std::thread::id advancer_id;
  std::thread advancer([&] {
    advancer_id = std::this_thread::get_id();
    clock.advance(1s);
  });
  advancer.join();
  ASSERT_TRUE(resumed_on.is_completed());
  EXPECT_EQ(resumed_on.get(), advancer_id);
}

TEST(delay, zero_is_completed_immediately_without_a_timer) {
  fake_time_provider clock;
  auto d = tpl::delay(0ns, clock);
  EXPECT_TRUE(d.is_completed_successfully());
  EXPECT_EQ(clock.armed_timers(), 0u);
  EXPECT_TRUE(tpl::delay(0ns).is_completed_successfully());  // system provider
}

TEST(delay, negative_duration_other_than_infinite_throws_invalid_argument) {
  fake_time_provider clock;
  EXPECT_THROW((void)tpl::delay(-1ns, clock), std::invalid_argument);
  EXPECT_THROW((void)tpl::delay(-2ms, clock), std::invalid_argument);
  EXPECT_THROW((void)tpl::delay(-2ms), std::invalid_argument);
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(delay, already_canceled_token_gives_a_canceled_task_without_waiting) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel();
  auto d = tpl::delay(1h, cts.token(), clock);
  EXPECT_TRUE(d.is_canceled());
  EXPECT_EQ(clock.armed_timers(), 0u);
  EXPECT_TRUE(tpl::delay(0ns, cts.token(), clock).is_canceled());  // the token is checked first
}

TEST(delay, cancel_during_the_delay_cancels_it_at_once_and_disposes_its_timer) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  auto d = tpl::delay(1h, cts.token(), clock);
  clock.advance(10min);
  EXPECT_EQ(clock.armed_timers(), 1u);
  cts.cancel();
  EXPECT_TRUE(d.is_canceled());
  EXPECT_EQ(clock.armed_timers(), 0u);
  EXPECT_TRUE(holds<tpl::operation_canceled>(tpl::sync_wait(exception_of_await(d))));
}

TEST(delay, completing_first_removes_its_token_registration) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  auto d = tpl::delay(1s, cts.token(), clock);
  clock.advance(1s);
  ASSERT_TRUE(d.is_completed_successfully());
  cts.cancel();  // nothing left registered: the delay stays successful
  EXPECT_TRUE(d.is_completed_successfully());
}

TEST(delay, infinite_with_a_token_completes_only_on_cancel) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  auto d = tpl::delay(tpl::infinite_timeout, cts.token(), clock);
  EXPECT_EQ(clock.armed_timers(), 0u);  // no timer at all
  clock.advance(24h * 365);
  EXPECT_FALSE(d.is_completed());
  cts.cancel();
  EXPECT_TRUE(d.is_canceled());
}

TEST(delay, infinite_with_a_token_that_cannot_be_canceled_throws_invalid_argument) {
  fake_time_provider clock;
  EXPECT_THROW((void)tpl::delay(tpl::infinite_timeout, tpl::cancellation_token::none(), clock),
               std::invalid_argument);
  EXPECT_THROW((void)tpl::delay(tpl::infinite_timeout, clock), std::invalid_argument);
  EXPECT_THROW((void)tpl::delay(tpl::infinite_timeout), std::invalid_argument);
}

TEST(delay, dropping_the_handle_does_not_stop_the_delay) {
  fake_time_provider clock;
  journal log;
  { auto t = log_after_delay(log, clock); }
  clock.advance(30s);
  EXPECT_EQ(log.entries(), (std::vector<std::string>{"done after 30 s"}));
}

TEST(delay, seed_000_log_after_delay_is_verified_with_fake_time_without_waiting) {
  // Seed 000: `await Task.Delay(TimeSpan.FromSeconds(30), timeProvider); logger.Log(...)`, tested
  // with FakeTimeProvider.Advance(30 s). Here too: no 30 s wait, no sleeping.
  fake_time_provider clock;
  journal log;
  auto work = log_after_delay(log, clock);
  clock.advance(29s);
  EXPECT_TRUE(log.entries().empty());
  EXPECT_FALSE(work.is_completed());
  clock.advance(1s);
  EXPECT_TRUE(work.is_completed_successfully());
  EXPECT_EQ(log.entries(), (std::vector<std::string>{"done after 30 s"}));
}

TEST(delay, a_chain_of_delays_completes_within_one_advance) {
  // A delay started by a callback during advance() is due within the same advance: it fires too.
  fake_time_provider clock;
  auto chain = [](tpl::time_provider& c) -> tpl::task<int> {
    int steps = 0;
    for (int i = 0; i < 10; ++i) {
      co_await tpl::delay(1s, c);
      ++steps;
    }
    co_return steps;
  }(clock);
  clock.advance(10s - 1ns);
  EXPECT_FALSE(chain.is_completed());
  clock.advance(1ns);
  ASSERT_TRUE(chain.is_completed());
  EXPECT_EQ(chain.get(), 10);
}

TEST(delay, cancel_after_on_the_same_fake_clock_cancels_it_at_its_due_time) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts(5s, clock);
  auto d = tpl::delay(10s, cts.token(), clock);
  clock.advance(10s);  // cancel_after fires at 5 s and takes the delay's timer down
  EXPECT_TRUE(d.is_canceled());
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(delay, many_delays_complete_in_due_time_order) {
  fake_time_provider clock;
  std::vector<int> order;
  std::vector<tpl::task<>> delays;
  for (int i : {5, 1, 4, 2, 3})
    delays.push_back(tpl::delay(std::chrono::seconds(i), clock).continue_with(
        [&order, i] { order.push_back(i); }, tpl::task_continuation_options::execute_synchronously));
  clock.advance(5s);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4, 5}));
}

// now + d overflows the clock's time_point for these durations: the timer must not wrap around into
// the past and fire at once (rejecting the duration with std::invalid_argument would be right too).
// Run in a child process: the overflow is undefined behaviour, which UBSan aborts on.

TEST(delay, duration_beyond_the_clocks_range_does_not_fire_early) {
  tpl_test::expect_passes_in_a_child_process([] {
    fake_time_provider clock;
    tpl::cancellation_token_source cts;
    tpl::task<> d;
    try {
      d = tpl::delay(std::chrono::nanoseconds::max(), cts.token(), clock);
    } catch (const std::invalid_argument&) {
      return true;
    }
    clock.advance(24h);
    const bool ok = tpl_test::check(!d.is_completed(), "delay(nanoseconds::max()) completed after 24 h");
    cts.cancel();  // leave no pending operation behind
    return ok;
  });
}

TEST(delay, system_delay_beyond_the_clocks_range_does_not_fire_early) {
  tpl_test::expect_passes_in_a_child_process([] {
    tpl::cancellation_token_source cts;
    tpl::task<> d;
    try {
      d = tpl::delay(std::chrono::nanoseconds::max(), cts.token());
    } catch (const std::invalid_argument&) {
      return true;
    }
    tpl::delay(5ms).wait();  // an opportunity to fire wrongly, not a timing assertion
    const bool ok = tpl_test::check(!d.is_completed(), "system delay(nanoseconds::max()) completed");
    cts.cancel();
    return ok;
  });
}

TEST(delay, system_delay_completes) {
  auto d = tpl::delay(1ms);
  d.wait();
  EXPECT_TRUE(d.is_completed_successfully());
}

TEST(delay, system_delay_is_canceled_by_its_token_without_waiting_for_the_timer) {
  tpl::cancellation_token_source cts;
  auto d = tpl::delay(1h, cts.token());
  cts.cancel();
  EXPECT_TRUE(d.is_canceled());
}

TEST(delay, racing_cancel_and_expiry_complete_each_delay_exactly_once) {
  // A canceling thread races the advancing one over many delays: each ends canceled or successful,
  // and no timer is left armed.
  const int n = tpl_test::scaled(2000, 200);
  fake_time_provider clock;
  std::vector<tpl::cancellation_token_source> sources(n);
  std::vector<tpl::task<>> delays;
  delays.reserve(n);
  for (int i = 0; i < n; ++i)
    delays.push_back(tpl::delay(std::chrono::milliseconds(i + 1), sources[i].token(), clock));
  std::thread canceler([&] {
    for (auto& s : sources) s.cancel();
  });
  for (int i = 0; i < n; ++i) clock.advance(1ms);
  canceler.join();
  int canceled = 0;
  for (auto& d : delays) {
    ASSERT_TRUE(d.is_completed());
    canceled += d.is_canceled() ? 1 : 0;
    EXPECT_TRUE(d.is_canceled() || d.is_completed_successfully());
  }
  EXPECT_EQ(clock.armed_timers(), 0u);
  (void)canceled;  // either outcome is right; how many of each depends on the race
}

// ==== cancel_after ===============================================================================

TEST(cancel_after, cancels_at_the_due_fake_time_not_before) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel_after(5s, clock);
  clock.advance(5s - 1ns);
  EXPECT_FALSE(cts.is_cancellation_requested());
  clock.advance(1ns);
  EXPECT_TRUE(cts.is_cancellation_requested());
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(cancel_after, runs_the_token_callbacks_on_the_advancing_thread) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  std::thread::id ran_on;
  auto reg = cts.token().register_callback([&] { ran_on = std::this_thread::get_id(); });
  cts.cancel_after(1s, clock);
  std::thread::id advancer_id;
  std::thread advancer([&] {
    advancer_id = std::this_thread::get_id();
    clock.advance(1s);
  });
  advancer.join();
  EXPECT_EQ(ran_on, advancer_id);
}

TEST(cancel_after, a_second_call_re_arms_from_the_current_time) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel_after(5s, clock);
  clock.advance(3s);
  cts.cancel_after(5s, clock);  // now due at 8 s
  EXPECT_EQ(clock.armed_timers(), 1u);
  clock.advance(5s - 1ns);
  EXPECT_FALSE(cts.is_cancellation_requested());
  clock.advance(1ns);
  EXPECT_TRUE(cts.is_cancellation_requested());
}

TEST(cancel_after, a_second_call_can_bring_the_cancellation_forward) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel_after(1h, clock);
  cts.cancel_after(1s, clock);
  clock.advance(1s);
  EXPECT_TRUE(cts.is_cancellation_requested());
}

TEST(cancel_after, infinite_timeout_disarms_a_pending_cancel_after) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel_after(5s, clock);
  cts.cancel_after(tpl::infinite_timeout, clock);
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1h);
  EXPECT_FALSE(cts.is_cancellation_requested());
}

TEST(cancel_after, infinite_timeout_alone_arms_nothing) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel_after(tpl::infinite_timeout, clock);
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1h);
  EXPECT_FALSE(cts.is_cancellation_requested());
}

TEST(cancel_after, zero_cancels_at_the_next_advance) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel_after(0ns, clock);
  clock.advance(0ns);
  EXPECT_TRUE(cts.is_cancellation_requested());
}

TEST(cancel_after, negative_delay_other_than_infinite_throws_invalid_argument) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  EXPECT_THROW(cts.cancel_after(-2ms, clock), std::invalid_argument);
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(cancel_after, has_no_effect_on_a_canceled_source) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel();
  cts.cancel_after(1s, clock);
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1s);
  EXPECT_TRUE(cts.is_cancellation_requested());
}

TEST(cancel_after, calling_it_after_it_fired_arms_nothing) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  int callbacks = 0;
  auto reg = cts.token().register_callback([&] { ++callbacks; });
  cts.cancel_after(1s, clock);
  clock.advance(1s);
  cts.cancel_after(1s, clock);
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1s);
  EXPECT_EQ(callbacks, 1);
}

TEST(cancel_after, try_reset_stops_a_pending_cancel_after) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel_after(5s, clock);
  EXPECT_TRUE(cts.try_reset());
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1h);
  EXPECT_FALSE(cts.is_cancellation_requested());
}

TEST(cancel_after, works_again_after_try_reset) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel_after(5s, clock);
  ASSERT_TRUE(cts.try_reset());
  cts.cancel_after(2s, clock);
  clock.advance(2s);
  EXPECT_TRUE(cts.is_cancellation_requested());
}

TEST(cancel_after, constructor_with_a_delay_cancels_after_it) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts(5s, clock);
  EXPECT_EQ(clock.armed_timers(), 1u);
  clock.advance(5s - 1ns);
  EXPECT_FALSE(cts.is_cancellation_requested());
  clock.advance(1ns);
  EXPECT_TRUE(cts.is_cancellation_requested());
}

// As .NET's new CancellationTokenSource(TimeSpan.Zero): canceled on return, no timer.
TEST(cancel_after, constructor_with_a_zero_delay_is_canceled_when_it_returns) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts(0ns, clock);
  EXPECT_TRUE(cts.is_cancellation_requested());
  EXPECT_TRUE(cts.token().is_cancellation_requested());
  EXPECT_EQ(clock.armed_timers(), 0u);
  int callbacks = 0;
  auto reg = cts.token().register_callback([&] { ++callbacks; });
  EXPECT_EQ(callbacks, 1);  // a registration on a canceled token runs at once
  EXPECT_FALSE(cts.try_reset());

  tpl::cancellation_token_source on_system_time(0ms);
  EXPECT_TRUE(on_system_time.is_cancellation_requested());
}

// As .NET's CancelAfter(0): the timer is armed due at once and cancels on its own thread.
TEST(cancel_after, zero_is_not_canceled_inside_the_call_but_by_the_timer) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel_after(0ns, clock);
  EXPECT_FALSE(cts.is_cancellation_requested());
  EXPECT_EQ(clock.armed_timers(), 1u);
  clock.advance(0ns);
  EXPECT_TRUE(cts.is_cancellation_requested());
}

// As .NET: -1 ms (infinite_timeout) never cancels; any other negative delay is rejected, by the
// constructor as by cancel_after, before anything is armed.
TEST(cancel_after, constructor_with_a_negative_delay_other_than_infinite_throws_invalid_argument) {
  fake_time_provider clock;
  EXPECT_THROW(tpl::cancellation_token_source(-2ms, clock), std::invalid_argument);
  EXPECT_THROW(tpl::cancellation_token_source(-1ns, clock), std::invalid_argument);
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(cancel_after, constructor_with_infinite_delay_never_cancels) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts(tpl::infinite_timeout, clock);
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1h);
  EXPECT_FALSE(cts.is_cancellation_requested());
}

TEST(cancel_after, destroying_the_source_before_the_due_time_disposes_its_timer) {
  fake_time_provider clock;
  tpl::cancellation_token token;
  {
    tpl::cancellation_token_source cts(5s, clock);
    token = cts.token();
  }
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1h);
  EXPECT_FALSE(token.is_cancellation_requested());
}

TEST(cancel_after, moved_source_keeps_its_pending_cancel_after) {
  fake_time_provider clock;
  tpl::cancellation_token_source original(5s, clock);
  tpl::cancellation_token_source moved(std::move(original));
  clock.advance(5s);
  EXPECT_TRUE(moved.is_cancellation_requested());
}

TEST(cancel_after, when_cancelled_completes_at_the_due_time) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts(30s, clock);
  auto when = tpl::when_cancelled(cts.token());
  clock.advance(29s);
  EXPECT_FALSE(when.is_completed());
  clock.advance(1s);
  EXPECT_TRUE(when.is_completed_successfully());
}

TEST(cancel_after, system_cancel_after_cancels) {
  tpl::cancellation_token_source cts;
  cts.cancel_after(1ms);
  tpl::sync_wait(tpl::when_cancelled(cts.token()));
  EXPECT_TRUE(cts.is_cancellation_requested());
}

TEST(cancel_after, system_constructor_with_a_delay_cancels) {
  tpl::cancellation_token_source cts(1ms);
  tpl::sync_wait(tpl::when_cancelled(cts.token()));
  EXPECT_TRUE(cts.is_cancellation_requested());
}

TEST(cancel_after, system_sources_destroyed_before_their_timers_fire_are_safe) {
  const int n = tpl_test::scaled(1000, 100);
  for (int i = 0; i < n; ++i) {
    tpl::cancellation_token_source cts(std::chrono::microseconds(i % 20));
    auto token = cts.token();
    (void)token;
  }
  // A last one that does fire proves the timer thread is still healthy.
  tpl::cancellation_token_source last(1ms);
  tpl::sync_wait(tpl::when_cancelled(last.token()));
}

}  // namespace

}  // namespace time_test_cpp
