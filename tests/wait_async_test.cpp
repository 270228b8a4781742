// task<T>::wait_async: waiting for a task with a timeout and/or a cancellation token, without
// canceling the task itself (.NET Task.WaitAsync). Timeouts are specified with fake time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tpl/testing/fake_time_provider.hpp>
#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace wait_async_test_cpp {

namespace {

using tpl_test::exception_of_await;

using namespace std::chrono_literals;
using tpl_test::holds;
using tpl_test::ref_count;
using tpl_test::test_error;
using tpl_test::test_error_id;
using tpl_test::thrown_by;
using tpl::testing::fake_time_provider;

/// Seed-style consumer: gives up on a slow operation after a timeout and reports what happened.
tpl::task<std::string> value_or_timeout(tpl::task<int> slow, tpl::time_provider& clock) {
  try {
    const int v = co_await slow.wait_async(2s, tpl::cancellation_token{}, clock);
    co_return "value " + std::to_string(v);
  } catch (const tpl::timeout_exception&) {
    co_return std::string("timed out");
  }
}

// ---- the task completes first -------------------------------------------------------------------

TEST(wait_async, completes_with_the_tasks_value_when_the_task_completes_first) {
  fake_time_provider clock;
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(1h, tpl::cancellation_token{}, clock);
  EXPECT_FALSE(w.is_completed());
  EXPECT_EQ(clock.armed_timers(), 1u);
  tcs.set_result(42);
  ASSERT_TRUE(w.is_completed_successfully());
  EXPECT_EQ(w.get(), 42);
  EXPECT_EQ(clock.armed_timers(), 0u);  // the timer was disposed at once
}

TEST(wait_async, result_is_copied_and_the_task_keeps_its_own) {
  fake_time_provider clock;
  tpl::task_completion_source<std::string> tcs;
  auto source = tcs.get_task();
  auto w = source.wait_async(1h, tpl::cancellation_token{}, clock);
  tcs.set_result("shared");
  EXPECT_EQ(tpl::sync_wait(std::move(w)), "shared");
  EXPECT_EQ(source.get(), "shared");
}

TEST(wait_async, void_task_completes_when_the_task_does) {
  fake_time_provider clock;
  tpl::task_completion_source<> tcs;
  auto w = tcs.get_task().wait_async(1h, tpl::cancellation_token{}, clock);
  tcs.set_result();
  EXPECT_TRUE(w.is_completed_successfully());
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(wait_async, task_completing_first_removes_the_token_registration) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(1h, cts.token(), clock);
  tcs.set_result(1);
  cts.cancel();  // too late: nothing registered any more
  EXPECT_TRUE(w.is_completed_successfully());
}

TEST(wait_async, faulted_task_propagates_its_exception) {
  fake_time_provider clock;
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(1h, tpl::cancellation_token{}, clock);
  tcs.set_exception(std::make_exception_ptr(test_error(5)));
  EXPECT_TRUE(w.is_faulted());
  EXPECT_EQ(test_error_id(tpl::sync_wait(exception_of_await(w))), 5);
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(wait_async, canceled_task_propagates_its_cancellation) {
  fake_time_provider clock;
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(1h, tpl::cancellation_token{}, clock);
  tcs.set_canceled();
  EXPECT_TRUE(w.is_canceled());
  EXPECT_TRUE(holds<tpl::operation_canceled>(tpl::sync_wait(exception_of_await(w))));
  EXPECT_EQ(clock.armed_timers(), 0u);
}

// ---- the timeout elapses first ------------------------------------------------------------------

TEST(wait_async, faults_with_timeout_exception_exactly_at_the_timeout) {
  fake_time_provider clock;
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(10s, tpl::cancellation_token{}, clock);
  clock.advance(10s - 1ns);
  EXPECT_FALSE(w.is_completed());
  clock.advance(1ns);
  EXPECT_TRUE(w.is_faulted());
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(wait_async, co_await_after_the_timeout_throws_timeout_exception) {
  fake_time_provider clock;
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(10s, tpl::cancellation_token{}, clock);
  clock.advance(10s);
  const auto e = tpl::sync_wait(exception_of_await(w));
  EXPECT_TRUE(holds<tpl::timeout_exception>(e));
  EXPECT_EQ(tpl_test::message_of([&] { std::rethrow_exception(e); }), "The operation has timed out.");
}

TEST(wait_async, timing_out_leaves_the_task_running_and_it_can_still_complete) {
  fake_time_provider clock;
  tpl::task_completion_source<int> tcs;
  auto source = tcs.get_task();
  auto w = source.wait_async(1s, tpl::cancellation_token{}, clock);
  clock.advance(1s);
  ASSERT_TRUE(w.is_faulted());
  EXPECT_FALSE(source.is_completed());  // not canceled by the timeout
  tcs.set_result(7);
  EXPECT_EQ(source.get(), 7);
  EXPECT_TRUE(w.is_faulted());  // decided once
}

TEST(wait_async, timing_out_removes_the_waiter_and_the_token_registration) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  tpl::task_completion_source<int> tcs;
  auto source = tcs.get_task();
  const auto before = ref_count(source);
  {
    auto w = source.wait_async(1s, cts.token(), clock);
    clock.advance(1s);
    ASSERT_TRUE(w.is_faulted());
  }
  EXPECT_EQ(ref_count(source), before);
  cts.cancel();  // nothing registered any more
}

TEST(wait_async, awaiting_with_a_timeout_in_a_coroutine_reports_the_timeout_or_the_value) {
  fake_time_provider clock;
  tpl::task_completion_source<int> slow;
  auto timed_out = value_or_timeout(slow.get_task(), clock);
  clock.advance(2s);
  EXPECT_EQ(timed_out.get(), "timed out");

  tpl::task_completion_source<int> fast;
  auto in_time = value_or_timeout(fast.get_task(), clock);
  clock.advance(1s);
  fast.set_result(3);
  EXPECT_EQ(in_time.get(), "value 3");
  slow.set_result(0);
}

TEST(wait_async, zero_timeout_on_a_pending_task_times_out_immediately) {
  fake_time_provider clock;
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(0s, tpl::cancellation_token{}, clock);
  EXPECT_TRUE(w.is_faulted());
  EXPECT_TRUE(holds<tpl::timeout_exception>(tpl::sync_wait(exception_of_await(w))));
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(wait_async, negative_timeout_other_than_infinite_throws_invalid_argument) {
  fake_time_provider clock;
  tpl::task_completion_source<int> tcs;
  EXPECT_THROW((void)tcs.get_task().wait_async(-2ms, tpl::cancellation_token{}, clock),
               std::invalid_argument);
  EXPECT_THROW((void)tcs.get_task().wait_async(-1ns), std::invalid_argument);
  EXPECT_THROW((void)tpl::task_from_result(1).wait_async(-1s), std::invalid_argument);  // checked first
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(wait_async, on_an_empty_handle_throws_invalid_operation) {
  tpl::task<int> empty;
  EXPECT_THROW((void)empty.wait_async(1s), tpl::invalid_operation);
}

TEST(wait_async, timeout_in_any_duration_unit_is_converted_exactly) {
  fake_time_provider clock;
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(std::chrono::duration<long long, std::milli>(1500),
                                     tpl::cancellation_token{}, clock);
  clock.advance(1499ms);
  EXPECT_FALSE(w.is_completed());
  clock.advance(1ms);
  EXPECT_TRUE(w.is_faulted());
}

// ---- the token is canceled first ----------------------------------------------------------------

TEST(wait_async, canceled_by_the_token_while_the_task_is_not) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  tpl::task_completion_source<int> tcs;
  auto source = tcs.get_task();
  auto w = source.wait_async(1h, cts.token(), clock);
  cts.cancel();
  EXPECT_TRUE(w.is_canceled());
  EXPECT_TRUE(holds<tpl::operation_canceled>(tpl::sync_wait(exception_of_await(w))));
  EXPECT_FALSE(source.is_completed());
  EXPECT_EQ(clock.armed_timers(), 0u);
  tcs.set_result(1);
  EXPECT_EQ(source.get(), 1);
  EXPECT_TRUE(w.is_canceled());
}

TEST(wait_async, token_only_overload_waits_without_a_timer) {
  tpl::cancellation_token_source cts;
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(cts.token());
  EXPECT_FALSE(w.is_completed());
  cts.cancel();
  EXPECT_TRUE(w.is_canceled());
}

TEST(wait_async, token_only_overload_completes_with_the_task) {
  tpl::cancellation_token_source cts;
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(cts.token());
  tcs.set_result(9);
  EXPECT_EQ(w.get(), 9);
}

TEST(wait_async, already_canceled_token_on_a_pending_task_gives_a_canceled_task_without_a_timer) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  cts.cancel();
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(1h, cts.token(), clock);
  EXPECT_TRUE(w.is_canceled());
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(wait_async, cancel_after_on_the_token_cancels_the_wait_at_that_fake_time) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts(5s, clock);
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(tpl::infinite_timeout, cts.token(), clock);
  clock.advance(5s - 1ns);
  EXPECT_FALSE(w.is_completed());
  clock.advance(1ns);
  EXPECT_TRUE(w.is_canceled());
  tcs.set_result(0);
}

// ---- no wait needed -----------------------------------------------------------------------------

TEST(wait_async, on_a_completed_task_returns_the_same_task) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  auto done = tpl::task_from_result(5);
  EXPECT_TRUE(done.wait_async(1s, cts.token(), clock) == done);
  EXPECT_TRUE(done.wait_async(1s) == done);
  EXPECT_TRUE(done.wait_async(cts.token()) == done);
  EXPECT_TRUE(done.wait_async(0s, cts.token(), clock) == done);  // no timeout on a completed task
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(wait_async, on_a_completed_task_returns_it_even_with_a_canceled_token) {
  tpl::cancellation_token_source cts;
  cts.cancel();
  auto done = tpl::task_from_result(5);
  EXPECT_TRUE(done.wait_async(cts.token()) == done);
}

TEST(wait_async, on_a_faulted_or_canceled_task_returns_the_same_task) {
  fake_time_provider clock;
  auto faulted = tpl::task_from_exception<int>(test_error(1));
  auto canceled = tpl::task_from_canceled<int>();
  EXPECT_TRUE(faulted.wait_async(1s, tpl::cancellation_token{}, clock) == faulted);
  EXPECT_TRUE(canceled.wait_async(1s, tpl::cancellation_token{}, clock) == canceled);
}

TEST(wait_async, infinite_timeout_and_an_uncancelable_token_return_the_same_pending_task) {
  tpl::task_completion_source<int> tcs;
  auto source = tcs.get_task();
  EXPECT_TRUE(source.wait_async(tpl::infinite_timeout) == source);
  EXPECT_TRUE(source.wait_async(tpl::cancellation_token::none()) == source);
}

// ---- system provider ----------------------------------------------------------------------------

TEST(wait_async, system_timeout_overload_completes_with_the_task) {
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(1h);
  tcs.set_result(11);
  EXPECT_EQ(tpl::sync_wait(w), 11);
}

TEST(wait_async, system_timeout_elapses) {
  tpl::task_completion_source<int> tcs;
  auto w = tcs.get_task().wait_async(1ms);
  EXPECT_TRUE(holds<tpl::timeout_exception>(tpl::sync_wait(exception_of_await(w))));
  tcs.set_result(0);
}

// ---- leaks and races ----------------------------------------------------------------------------

TEST(wait_async, many_canceled_waits_on_a_long_lived_task_leave_no_timer_and_no_reference) {
  const int n = tpl_test::scaled(10'000, 2'000);
  fake_time_provider clock;
  tpl::task_completion_source<int> long_lived;
  auto source = long_lived.get_task();
  const auto before = ref_count(source);
  for (int i = 0; i < n; ++i) {
    tpl::cancellation_token_source cts;
    auto w = source.wait_async(1h, cts.token(), clock);
    cts.cancel();
    ASSERT_TRUE(w.is_canceled());
  }
  EXPECT_EQ(clock.armed_timers(), 0u);
  EXPECT_EQ(ref_count(source), before);
  long_lived.set_result(1);  // and the source has no stale waiter to resume
  EXPECT_EQ(source.get(), 1);
}

TEST(wait_async, many_timed_out_waits_on_a_long_lived_task_leave_no_timer_and_no_reference) {
  const int n = tpl_test::scaled(10'000, 2'000);
  fake_time_provider clock;
  tpl::task_completion_source<int> long_lived;
  auto source = long_lived.get_task();
  const auto before = ref_count(source);
  for (int i = 0; i < n; ++i) {
    auto w = source.wait_async(1s, tpl::cancellation_token{}, clock);
    clock.advance(1s);
    ASSERT_TRUE(w.is_faulted());
  }
  EXPECT_EQ(clock.armed_timers(), 0u);
  EXPECT_EQ(ref_count(source), before);
  long_lived.set_result(1);
}

TEST(wait_async, completion_timeout_and_cancel_racing_decide_each_wait_exactly_once) {
  // Three threads race over many waits: one completes the tasks, one cancels the tokens, one
  // advances fake time past each timeout. Each wait ends with exactly one of the three outcomes,
  // and nothing stays registered anywhere.
  const int n = tpl_test::scaled(2'000, 300);
  fake_time_provider clock;
  struct one_case {
    tpl::task_completion_source<int> tcs;
    tpl::cancellation_token_source cts;
    tpl::task<int> source;
    tpl::task<int> wait;
    std::uint32_t refs_before = 0;
  };
  std::vector<one_case> cases(n);
  for (int i = 0; i < n; ++i) {
    auto& c = cases[i];
    c.source = c.tcs.get_task();
    c.refs_before = ref_count(c.source);
    c.wait = c.source.wait_async(std::chrono::milliseconds(i + 1), c.cts.token(), clock);
  }
  std::thread completer([&] {
    for (int i = 0; i < n; ++i) cases[i].tcs.set_result(i);
  });
  std::thread canceler([&] {
    for (int i = 0; i < n; ++i) cases[i].cts.cancel();
  });
  for (int i = 0; i < n; ++i) clock.advance(1ms);
  completer.join();
  canceler.join();

  for (int i = 0; i < n; ++i) {
    auto& c = cases[i];
    ASSERT_TRUE(c.wait.is_completed()) << i;
    if (c.wait.is_completed_successfully()) {
      EXPECT_EQ(c.wait.get(), i);
    } else if (c.wait.is_faulted()) {
      EXPECT_TRUE(holds<tpl::timeout_exception>(tpl::sync_wait(exception_of_await(c.wait)))) << i;
    } else {
      EXPECT_TRUE(c.wait.is_canceled()) << i;
    }
    c.wait = {};
    EXPECT_EQ(ref_count(c.source), c.refs_before) << i;
  }
  EXPECT_EQ(clock.armed_timers(), 0u);
}

}  // namespace

}  // namespace wait_async_test_cpp
