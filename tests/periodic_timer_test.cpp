// periodic_timer (.NET PeriodicTimer): ticks, coalescing, dispose, cancellation, one wait at a
// time, the period's range and set_period.
//
// Every timing behaviour is driven by testing::fake_time_provider and advance(): a wait completes
// synchronously inside advance() (its continuation is queued to the pool), so is_completed() right
// after advance() is exact. The race test uses the system clock on the real pool and checks only
// outcomes that hold however late a tick comes; nothing sleeps or measures time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>

#include <tpl/testing/fake_time_provider.hpp>
#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace periodic_timer_test_cpp {

namespace {

using namespace std::chrono_literals;
using tpl::periodic_timer;
using tpl::testing::fake_time_provider;

tpl::task<bool> await_one_tick(periodic_timer& timer, tpl::cancellation_token token = {}) {
  co_return co_await timer.wait_for_next_tick_async(token);
}

// Counts ticks until the timer is disposed (or the token canceled: then rethrows).
tpl::task<int> count_ticks(periodic_timer& timer, tpl::cancellation_token token = {}) {
  int n = 0;
  while (co_await timer.wait_for_next_tick_async(token)) ++n;
  co_return n;
}

TEST(periodic_timer, wait_completes_with_true_at_each_tick_of_the_fake_clock) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  EXPECT_EQ(clock.armed_timers(), 1u);

  auto first = timer.wait_for_next_tick_async();
  EXPECT_FALSE(first.is_completed());
  clock.advance(999ms);
  EXPECT_FALSE(first.is_completed());
  clock.advance(1ms);
  ASSERT_TRUE(first.is_completed());
  EXPECT_TRUE(first.get());

  auto second = timer.wait_for_next_tick_async();
  EXPECT_FALSE(second.is_completed());
  clock.advance(1s);
  ASSERT_TRUE(second.is_completed());
  EXPECT_TRUE(second.get());
}

TEST(periodic_timer, co_await_resumes_the_awaiting_coroutine_with_true) {
  fake_time_provider clock;
  periodic_timer timer(10ms, clock);
  tpl::task<bool> t = await_one_tick(timer);
  EXPECT_FALSE(t.is_completed());
  clock.advance(10ms);
  EXPECT_TRUE(t.get());  // resumed on the pool
}

TEST(periodic_timer, missed_ticks_coalesce_into_one_immediate_completion) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  clock.advance(5s);  // five ticks, nobody waiting

  auto now = timer.wait_for_next_tick_async();
  ASSERT_TRUE(now.is_completed());
  EXPECT_TRUE(now.get());

  auto next = timer.wait_for_next_tick_async();  // the other four are gone
  EXPECT_FALSE(next.is_completed());
  clock.advance(999ms);
  EXPECT_FALSE(next.is_completed());
  clock.advance(1ms);
  ASSERT_TRUE(next.is_completed());
  EXPECT_TRUE(next.get());
}

TEST(periodic_timer, dispose_ends_a_pending_wait_with_false) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  auto pending = timer.wait_for_next_tick_async();
  EXPECT_FALSE(pending.is_completed());
  timer.dispose();
  ASSERT_TRUE(pending.is_completed());
  EXPECT_FALSE(pending.get());
  EXPECT_EQ(clock.armed_timers(), 0u);  // the provider's timer is disposed too
}

TEST(periodic_timer, dispose_ends_a_counting_loop) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  tpl::task<int> loop = count_ticks(timer);
  timer.dispose();
  EXPECT_EQ(loop.get(), 0);
}

TEST(periodic_timer, waits_after_dispose_return_false_at_once_even_with_a_coalesced_tick) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  clock.advance(1s);  // a tick nobody waited for
  timer.dispose();
  for (int i = 0; i < 3; ++i) {
    auto w = timer.wait_for_next_tick_async();
    ASSERT_TRUE(w.is_completed());
    EXPECT_FALSE(w.get());
  }
  clock.advance(10s);  // no ticks after dispose
  auto w = timer.wait_for_next_tick_async();
  ASSERT_TRUE(w.is_completed());
  EXPECT_FALSE(w.get());
}

TEST(periodic_timer, dispose_twice_and_then_the_destructor_are_fine) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  timer.dispose();
  timer.dispose();
  EXPECT_FALSE(timer.wait_for_next_tick_async().get());
}

TEST(periodic_timer, canceling_a_pending_wait_throws_operation_canceled_and_the_timer_keeps_running) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  tpl::cancellation_token_source cts;
  auto canceled = timer.wait_for_next_tick_async(cts.token());
  EXPECT_FALSE(canceled.is_completed());
  cts.cancel();
  ASSERT_TRUE(canceled.is_completed());
  EXPECT_THROW(canceled.get(), tpl::operation_canceled);

  // The next wait is allowed (the canceled one is no longer pending) and sees the next tick.
  auto next = timer.wait_for_next_tick_async(tpl::cancellation_token::none());
  EXPECT_FALSE(next.is_completed());
  clock.advance(1s);
  ASSERT_TRUE(next.is_completed());
  EXPECT_TRUE(next.get());
}

TEST(periodic_timer, canceling_a_co_awaited_wait_cancels_the_awaiting_coroutine) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  tpl::cancellation_token_source cts;
  tpl::task<int> loop = count_ticks(timer, cts.token());
  cts.cancel();
  EXPECT_THROW(loop.get(), tpl::aggregate_exception);  // get() wraps the cancellation
  EXPECT_TRUE(loop.is_canceled());

  tpl::task<bool> again = await_one_tick(timer);
  clock.advance(1s);
  EXPECT_TRUE(again.get());
}

TEST(periodic_timer, a_tick_during_a_canceled_wait_is_kept_for_the_next_wait) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  tpl::cancellation_token_source cts;
  auto canceled = timer.wait_for_next_tick_async(cts.token());
  cts.cancel();
  clock.advance(1s);  // nobody waits now: coalesced
  auto next = timer.wait_for_next_tick_async();
  ASSERT_TRUE(next.is_completed());
  EXPECT_TRUE(next.get());
  EXPECT_THROW(canceled.get(), tpl::operation_canceled);
}

TEST(periodic_timer, a_wait_with_an_already_canceled_token_is_canceled_unless_a_tick_is_pending) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  tpl::cancellation_token_source cts;
  cts.cancel();
  auto w = timer.wait_for_next_tick_async(cts.token());
  ASSERT_TRUE(w.is_completed());
  EXPECT_THROW(w.get(), tpl::operation_canceled);

  clock.advance(1s);
  auto ticked = timer.wait_for_next_tick_async(cts.token());  // completes at once, as in .NET
  ASSERT_TRUE(ticked.is_completed());
  EXPECT_TRUE(ticked.get());
}

TEST(periodic_timer, a_second_concurrent_wait_throws_invalid_operation) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  auto first = timer.wait_for_next_tick_async();
  EXPECT_THROW((void)timer.wait_for_next_tick_async(), tpl::invalid_operation);
  EXPECT_THROW((void)timer.wait_for_next_tick_async(), std::logic_error);
  clock.advance(1s);
  EXPECT_TRUE(first.get());
  auto second = timer.wait_for_next_tick_async();  // allowed again once the first completed
  EXPECT_FALSE(second.is_completed());
  timer.dispose();
  EXPECT_FALSE(second.get());
}

TEST(periodic_timer, a_period_that_is_not_positive_or_too_long_throws_invalid_argument) {
  fake_time_provider clock;
  EXPECT_THROW(periodic_timer(0s, clock), std::invalid_argument);
  EXPECT_THROW(periodic_timer(-1ms, clock), std::invalid_argument);
  EXPECT_THROW(periodic_timer(tpl::infinite_timeout, clock), std::invalid_argument);
  EXPECT_THROW(periodic_timer(periodic_timer::max_period() + 1ms, clock), std::invalid_argument);
  EXPECT_THROW(periodic_timer(std::chrono::nanoseconds::max(), clock), std::invalid_argument);
  EXPECT_EQ(clock.armed_timers(), 0u);

  periodic_timer shortest(1ns, clock);
  periodic_timer longest(periodic_timer::max_period(), clock);
  EXPECT_EQ(longest.period(), periodic_timer::max_period());
  EXPECT_EQ(clock.armed_timers(), 2u);
}

TEST(periodic_timer, set_period_restarts_the_period_from_now) {
  fake_time_provider clock;
  periodic_timer timer(10s, clock);
  EXPECT_EQ(timer.period(), 10s);
  clock.advance(5s);
  timer.set_period(2s);
  EXPECT_EQ(timer.period(), 2s);

  auto w = timer.wait_for_next_tick_async();
  clock.advance(1s);
  EXPECT_FALSE(w.is_completed());
  clock.advance(1s);  // 7 s: one new period after set_period
  ASSERT_TRUE(w.is_completed());
  EXPECT_TRUE(w.get());

  auto w2 = timer.wait_for_next_tick_async();
  clock.advance(2s);
  ASSERT_TRUE(w2.is_completed());
  EXPECT_TRUE(w2.get());
}

TEST(periodic_timer, set_period_rejects_a_bad_period_and_a_disposed_timer) {
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  EXPECT_THROW(timer.set_period(0s), std::invalid_argument);
  EXPECT_THROW(timer.set_period(periodic_timer::max_period() + 1ns), std::invalid_argument);
  EXPECT_EQ(timer.period(), 1s);
  timer.dispose();
  EXPECT_THROW(timer.set_period(2s), tpl::invalid_operation);
  EXPECT_EQ(timer.period(), 1s);
}

TEST(periodic_timer, destroying_the_timer_ends_a_pending_wait_with_false) {
  fake_time_provider clock;
  auto timer = std::make_unique<periodic_timer>(1s, clock);
  tpl::cancellation_token_source cts;
  auto pending = timer->wait_for_next_tick_async(cts.token());
  timer.reset();
  ASSERT_TRUE(pending.is_completed());
  EXPECT_FALSE(pending.get());
  cts.cancel();        // the registration is gone: nothing runs
  clock.advance(5s);   // the provider's timer is gone: nothing runs
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(periodic_timer, destroying_the_timer_ends_an_awaiting_coroutine_with_false) {
  fake_time_provider clock;
  std::optional<periodic_timer> timer;
  timer.emplace(1s, clock);
  tpl::task<bool> t = await_one_tick(*timer);
  timer.reset();
  EXPECT_FALSE(t.get());
}

TEST(periodic_timer, the_docs_example_counts_one_tick_before_dispose) {  // docs/time.md
  fake_time_provider clock;
  periodic_timer timer(1s, clock);
  auto first = timer.wait_for_next_tick_async();
  clock.advance(1s);
  EXPECT_TRUE(first.get());
  clock.advance(5s);
  auto coalesced = timer.wait_for_next_tick_async();
  EXPECT_TRUE(coalesced.is_completed() && coalesced.get());
  tpl::task<int> loop = count_ticks(timer);  // hot: its wait is pending
  clock.advance(1s);
  timer.dispose();
  EXPECT_EQ(loop.get(), 1);
}

// Counts ticks like count_ticks, completing `first` at the first one.
tpl::task<int> count_ticks_signaling(periodic_timer& timer, tpl::cancellation_token token,
                                     tpl::task_completion_source<> first) {
  int n = 0;
  while (co_await timer.wait_for_next_tick_async(token))
    if (++n == 1) first.try_set_result();
  co_return n;
}

tpl::task<int> await_one_tick_as_count(periodic_timer& timer, tpl::cancellation_token token) {
  co_return co_await timer.wait_for_next_tick_async(token) ? 1 : 0;
}

// Dispose (from this thread, from a pool thread, or by the destructor), ticks of the system clock
// and cancellation racing on the real pool. Every round's loop must end, with its tick count when
// dispose wins or canceled when the token wins: no hang, no use after free (ASan), no lost wait.
TEST(periodic_timer, dispose_racing_ticks_and_cancellation_on_the_pool_ends_every_wait) {
  const int rounds = tpl_test::scaled(200, 50);
  for (int round = 0; round < rounds; ++round) {
    auto timer = std::make_unique<periodic_timer>(std::chrono::microseconds(50 + round % 7 * 10));
    tpl::cancellation_token_source cts;
    tpl::task_completion_source<> first;
    const bool with_token = round % 3 == 0;
    const tpl::cancellation_token token = with_token ? cts.token() : tpl::cancellation_token{};
    // A round that destroys the timer awaits one tick only: a loop could call the destroyed timer.
    const bool destroy = round % 4 == 3;
    tpl::task<int> loop = destroy ? await_one_tick_as_count(*timer, token)
                                  : count_ticks_signaling(*timer, token, first);
    if (round % 2 == 0) first.get_task().wait();  // at least one tick first (however late it comes)
    tpl::task<> racer = tpl::run([&cts, with_token] {
      if (with_token) cts.cancel();
    });
    if (destroy)
      timer.reset();  // the destructor disposes
    else if (round % 4 == 1)
      timer->dispose();
    else
      tpl::run([&timer] { timer->dispose(); }).wait();
    racer.wait();
    try {
      loop.wait();
    } catch (const tpl::aggregate_exception&) {
    }
    ASSERT_TRUE(loop.is_completed_successfully() || (with_token && loop.is_canceled()))
        << "round " << round;
    if (round % 2 == 0 && loop.is_completed_successfully()) {
      EXPECT_GE(loop.get(), 1);
    }
    if (timer != nullptr) {
      auto after = timer->wait_for_next_tick_async();
      ASSERT_TRUE(after.is_completed());
      EXPECT_FALSE(after.get());
    }
  }
}

}  // namespace

}  // namespace periodic_timer_test_cpp
