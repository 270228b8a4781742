// wait_all / wait_any (tpl/wait_all.hpp): .NET Task.WaitAll / Task.WaitAny with a timeout (on a
// fake clock), a token, faults, and bad input.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace wait_all_test_cpp {

using namespace std::chrono_literals;

namespace {

template <class T = void>
tpl::task<T> faulted(const char* what) {
  return tpl::task_from_exception<T>(std::make_exception_ptr(std::runtime_error(what)));
}

}  // namespace

TEST(wait_all, completed_tasks_return_at_once) {
  std::vector<tpl::task<int>> tasks{tpl::task_from_result(1), tpl::task_from_result(2)};
  EXPECT_NO_THROW(tpl::wait_all(tasks));
  EXPECT_TRUE(tpl::wait_all(tasks, 0ns));
  std::vector<tpl::task<int>> none;
  EXPECT_TRUE(tpl::wait_all(none, 0ns)) << "no tasks: all of them are done";
}

TEST(wait_all, throws_every_fault_and_cancellation_in_task_order) {
  std::vector<tpl::task<>> tasks{tpl::completed_task(), faulted("first"), tpl::task_from_canceled<void>(),
                                 tpl::task_from_exception<void>(std::make_exception_ptr(std::logic_error("second")))};
  try {
    tpl::wait_all(tasks);
    FAIL() << "no exception";
  } catch (const tpl::aggregate_exception& e) {
    ASSERT_EQ(e.size(), 3u);
    EXPECT_THROW(std::rethrow_exception(e.inner_exceptions()[0]), std::runtime_error);
    EXPECT_THROW(std::rethrow_exception(e.inner_exceptions()[1]), tpl::operation_canceled);
    EXPECT_THROW(std::rethrow_exception(e.inner_exceptions()[2]), std::logic_error);
  }
  EXPECT_THROW((void)tpl::wait_all(tasks, 1s), tpl::aggregate_exception) << "with a timeout too, once all completed";
}

TEST(wait_all, waits_for_tasks_completed_by_another_thread) {
  tpl::task_completion_source<int> a, b;
  std::vector<tpl::task<int>> tasks{a.get_task(), b.get_task()};
  std::thread completer([&] {
    a.set_result(1);
    b.set_result(2);
  });
  tpl::wait_all(tasks);
  completer.join();
  EXPECT_TRUE(tasks[0].is_completed() && tasks[1].is_completed());
}

TEST(wait_all, returns_false_when_the_timeout_passes_on_the_fake_clock) {
  tpl::testing::fake_time_provider clock;
  tpl::task_completion_source<int> pending;
  std::vector<tpl::task<int>> tasks{tpl::task_from_result(1), pending.get_task()};
  std::optional<bool> result;
  std::thread waiter([&] { result = tpl::wait_all(tasks, 10s, {}, clock); });
  ASSERT_TRUE(tpl_test::wait_until([&] { return clock.armed_timers() == 1; }, "the wait armed its timeout"));
  clock.advance(9s);
  EXPECT_EQ(clock.armed_timers(), 1u) << "not due yet";
  clock.advance(1s);  // fires the timeout here, on this thread
  waiter.join();
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(*result);
  EXPECT_FALSE(tasks[1].is_completed()) << "the tasks are not affected";
  pending.set_result(2);
  EXPECT_TRUE(tpl::wait_all(tasks, 10s, {}, clock));
}

TEST(wait_all, returns_true_when_the_tasks_complete_before_the_timeout) {
  tpl::testing::fake_time_provider clock;
  tpl::task_completion_source<int> pending;
  std::vector<tpl::task<int>> tasks{pending.get_task()};
  std::optional<bool> result;
  std::thread waiter([&] { result = tpl::wait_all(tasks, 10s, {}, clock); });
  ASSERT_TRUE(tpl_test::wait_until([&] { return clock.armed_timers() == 1; }, "the wait armed its timeout"));
  clock.advance(9s);
  pending.set_result(1);
  waiter.join();
  EXPECT_TRUE(result.value_or(false));
  EXPECT_EQ(clock.armed_timers(), 0u) << "the timeout is disposed with the wait";
}

TEST(wait_all, a_token_canceled_while_waiting_throws_operation_canceled) {
  tpl::cancellation_token_source cts;
  tpl::task_completion_source<int> never;
  std::vector<tpl::task<int>> tasks{never.get_task()};
  std::atomic<bool> canceled{false};
  std::thread waiter([&] {
    try {
      tpl::wait_all(tasks, cts.token());
    } catch (const tpl::operation_canceled&) {
      canceled = true;
    }
  });
  cts.cancel();
  waiter.join();
  EXPECT_TRUE(canceled.load());
  EXPECT_FALSE(tasks[0].is_completed());
  never.set_result(0);
}

TEST(wait_all, a_canceled_token_throws_even_if_the_tasks_are_done) {
  tpl::cancellation_token_source cts;
  cts.cancel();
  std::vector<tpl::task<int>> tasks{tpl::task_from_result(1)};
  EXPECT_THROW(tpl::wait_all(tasks, cts.token()), tpl::operation_canceled);
  EXPECT_THROW((void)tpl::wait_any(tasks, cts.token()), tpl::operation_canceled);
}

TEST(wait_all, a_zero_timeout_only_looks_and_the_system_clock_times_out_too) {
  tpl::task_completion_source<int> pending;
  std::vector<tpl::task<int>> tasks{pending.get_task()};
  EXPECT_FALSE(tpl::wait_all(tasks, 0ns));
  EXPECT_EQ(tpl::wait_any(tasks, 0ns), -1);
  EXPECT_FALSE(tpl::wait_all(tasks, 1ms));
  EXPECT_EQ(tpl::wait_any(tasks, 1ms), -1);
  pending.set_result(1);
  EXPECT_TRUE(tpl::wait_all(tasks, 0ns));
}

TEST(wait_all, bad_input_is_reported) {
  std::vector<tpl::task<int>> with_empty{tpl::task_from_result(1), tpl::task<int>()};
  EXPECT_THROW(tpl::wait_all(with_empty), tpl::invalid_operation);
  EXPECT_THROW((void)tpl::wait_any(with_empty), tpl::invalid_operation);
  std::vector<tpl::task<int>> tasks{tpl::task_from_result(1)};
  EXPECT_THROW((void)tpl::wait_all(tasks, -5ms), std::invalid_argument);
  EXPECT_THROW((void)tpl::wait_any(tasks, -5ms), std::invalid_argument);
  std::vector<tpl::task<int>> none;
  EXPECT_THROW((void)tpl::wait_any(none), std::invalid_argument);
}

TEST(wait_any, returns_the_first_completed_index_in_task_order) {
  tpl::task_completion_source<int> pending;
  std::vector<tpl::task<int>> tasks{pending.get_task(), tpl::task_from_result(1), tpl::task_from_result(2)};
  EXPECT_EQ(tpl::wait_any(tasks), 1);
  pending.set_result(0);
}

TEST(wait_any, never_throws_a_tasks_exception) {
  tpl::task_completion_source<int> pending;
  std::vector<tpl::task<int>> tasks{pending.get_task(), faulted<int>("boom")};
  EXPECT_EQ(tpl::wait_any(tasks), 1);
  pending.set_result(0);
}

TEST(wait_any, returns_the_task_another_thread_completes) {
  tpl::task_completion_source<int> a, b;
  std::vector<tpl::task<int>> tasks{a.get_task(), b.get_task()};
  std::thread completer([&] { b.set_result(2); });
  EXPECT_EQ(tpl::wait_any(tasks), 1);
  completer.join();
  a.set_result(1);
}

TEST(wait_any, returns_minus_one_when_the_timeout_passes_on_the_fake_clock) {
  tpl::testing::fake_time_provider clock;
  tpl::task_completion_source<int> a, b;
  std::vector<tpl::task<int>> tasks{a.get_task(), b.get_task()};
  std::optional<int> result;
  std::thread waiter([&] { result = tpl::wait_any(tasks, 5s, {}, clock); });
  ASSERT_TRUE(tpl_test::wait_until([&] { return clock.armed_timers() == 1; }, "the wait armed its timeout"));
  clock.advance(5s);
  waiter.join();
  EXPECT_EQ(result.value_or(0), -1);
  // The wait took its registrations back: completing the tasks now touches nothing of it.
  a.set_result(1);
  b.set_result(2);
  EXPECT_EQ(tpl::wait_any(tasks, 5s, {}, clock), 0);
}

TEST(wait_any, repeated_timed_out_waits_do_not_pile_up_on_a_task) {
  tpl::task_completion_source<int> never;
  std::vector<tpl::task<int>> tasks{never.get_task()};
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(tpl::wait_any(tasks, 1ns), -1);
  // Completing the task fires only what is still registered (nothing): were the 1,000 stale
  // registrations still listed, their records would be used after free (ASan) here.
  never.set_result(1);
  EXPECT_EQ(tpl::wait_any(tasks), 0);
}

}  // namespace wait_all_test_cpp
