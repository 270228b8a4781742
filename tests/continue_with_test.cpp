// task::continue_with: runs a function after the antecedent completes, as a new task, subject to
// task_continuation_options.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace continue_with_test_cpp {

namespace {

using opts = tpl::task_continuation_options;
using tpl_test::holds;
using tpl_test::test_error;
using tpl_test::test_error_id;
using tpl_test::wait_inner_exceptions;

std::exception_ptr error(int id) { return std::make_exception_ptr(test_error(id)); }

}  // namespace

// ---- running after completion -----------------------------------------------------------------

TEST(continue_with, runs_after_the_antecedent_completes_with_the_antecedent_as_argument) {
  tpl::task_completion_source<int> tcs;
  std::atomic<bool> ran{false};
  tpl::task<int> c = tcs.get_task().continue_with([&](tpl::task<int>& antecedent) {
    ran = true;
    return antecedent.get() * 2;
  });
  EXPECT_FALSE(ran.load());
  EXPECT_FALSE(c.is_completed());

  tcs.set_result(21);

  EXPECT_EQ(c.get(), 42);
  EXPECT_TRUE(ran.load());
}

TEST(continue_with, argument_is_the_antecedent_itself) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> antecedent = tcs.get_task();
  tpl::task<bool> same = antecedent.continue_with([antecedent](tpl::task<int>& arg) { return arg == antecedent; });
  tcs.set_result(1);
  EXPECT_TRUE(same.get());
}

TEST(continue_with, function_without_parameters_is_accepted) {
  tpl::task<std::string> c = tpl::completed_task().continue_with([] { return std::string("no args"); });
  EXPECT_EQ(c.get(), "no args");
}

TEST(continue_with, void_function_gives_a_void_task) {
  std::atomic<int> calls{0};
  auto c = tpl::task_from_result(1).continue_with([&](tpl::task<int>&) { calls.fetch_add(1); });
  static_assert(std::is_same_v<decltype(c), tpl::task<>>);
  c.wait();
  EXPECT_EQ(calls.load(), 1);
}

TEST(continue_with, result_type_is_that_of_the_function) {
  auto c = tpl::task_from_result(1).continue_with([](tpl::task<int>& a) { return std::to_string(a.get()); });
  static_assert(std::is_same_v<decltype(c), tpl::task<std::string>>);
  EXPECT_EQ(c.get(), "1");
}

TEST(continue_with, of_a_void_antecedent_receives_it) {
  tpl::task_completion_source<> tcs;
  tpl::task<bool> c = tcs.get_task().continue_with([](tpl::task<>& a) { return a.is_completed_successfully(); });
  tcs.set_result();
  EXPECT_TRUE(c.get());
}

TEST(continue_with, runs_exactly_once) {
  std::atomic<int> calls{0};
  tpl::task_completion_source<int> tcs;
  tpl::task<> c = tcs.get_task().continue_with([&] { calls.fetch_add(1); });
  tcs.set_result(1);
  c.wait();
  EXPECT_EQ(calls.load(), 1);
}

TEST(continue_with, by_default_runs_on_a_pool_thread) {
  tpl::task_completion_source<int> tcs;
  tpl::task<tpl::thread_pool*> c = tcs.get_task().continue_with([] { return tpl::thread_pool::current(); });
  tcs.set_result(1);
  EXPECT_NE(c.get(), nullptr);
}

TEST(continue_with, by_default_on_an_already_completed_task_still_runs_on_a_pool_thread) {
  tpl::task<std::thread::id> c = tpl::task_from_result(1).continue_with([] { return std::this_thread::get_id(); });
  EXPECT_NE(c.get(), std::this_thread::get_id());
}

TEST(continue_with, runs_on_a_faulted_antecedent_by_default) {
  tpl::task<int> c = tpl::task_from_exception<int>(test_error(3)).continue_with([](tpl::task<int>& a) {
    return a.is_faulted() ? 1 : 0;
  });
  EXPECT_EQ(c.get(), 1);
}

TEST(continue_with, runs_on_a_canceled_antecedent_by_default) {
  tpl::task<bool> c = tpl::task_from_canceled<int>().continue_with([](tpl::task<int>& a) { return a.is_canceled(); });
  EXPECT_TRUE(c.get());
}

TEST(continue_with, exception_thrown_by_the_function_faults_the_continuation) {
  tpl::task<int> c = tpl::task_from_result(1).continue_with([](tpl::task<int>&) -> int { throw test_error(9); });
  auto inner = wait_inner_exceptions(c);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(test_error_id(inner[0]), 9);
}

TEST(continue_with, rethrowing_the_antecedents_fault_faults_the_continuation) {
  tpl::task<int> c =
      tpl::task_from_exception<int>(test_error(4)).continue_with([](tpl::task<int>& a) { return a.get(); });
  auto inner = wait_inner_exceptions(c);
  ASSERT_EQ(inner.size(), 1u);
  // get() threw an aggregate_exception; that aggregate is the continuation's fault.
  EXPECT_TRUE(holds<tpl::aggregate_exception>(inner[0]));
}

TEST(continue_with, function_throwing_operation_canceled_cancels_the_continuation) {
  tpl::task<> c = tpl::completed_task().continue_with([] { throw tpl::operation_canceled(); });
  EXPECT_THROW(c.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(c.is_canceled());
}

TEST(continue_with, several_continuations_of_one_task_all_run) {
  tpl::task_completion_source<int> tcs;
  std::atomic<int> sum{0};
  std::vector<tpl::task<>> continuations;
  for (int i = 1; i <= 10; ++i)
    continuations.push_back(tcs.get_task().continue_with([&sum, i](tpl::task<int>& a) { sum.fetch_add(i * a.get()); }));
  tcs.set_result(2);
  for (auto& c : continuations) c.wait();
  EXPECT_EQ(sum.load(), 2 * 55);
}

TEST(continue_with, chains_of_continuations_run_in_order) {
  tpl::task_completion_source<std::string> tcs;
  tpl::task<std::string> c = tcs.get_task()
                                 .continue_with([](tpl::task<std::string>& a) { return a.get() + "b"; })
                                 .continue_with([](tpl::task<std::string>& a) { return a.get() + "c"; });
  tcs.set_result("a");
  EXPECT_EQ(c.get(), "abc");
}

// ---- execute_synchronously ----------------------------------------------------------------------

TEST(continue_with, execute_synchronously_runs_on_the_completing_thread) {
  tpl::task_completion_source<int> tcs;
  tpl::task<std::thread::id> c =
      tcs.get_task().continue_with([] { return std::this_thread::get_id(); }, opts::execute_synchronously);
  std::thread completer([&] { tcs.set_result(1); });
  const std::thread::id completer_id = completer.get_id();
  completer.join();
  EXPECT_EQ(c.get(), completer_id);
}

TEST(continue_with, execute_synchronously_completes_inside_set_result) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> c = tcs.get_task().continue_with([](tpl::task<int>& a) { return a.get() + 1; },
                                                  opts::execute_synchronously);
  tcs.set_result(1);
  EXPECT_TRUE(c.is_completed());
  EXPECT_EQ(c.get(), 2);
}

TEST(continue_with, execute_synchronously_on_a_completed_task_runs_on_the_caller_before_returning) {
  tpl::task<std::thread::id> c =
      tpl::task_from_result(1).continue_with([] { return std::this_thread::get_id(); }, opts::execute_synchronously);
  EXPECT_TRUE(c.is_completed());
  EXPECT_EQ(c.get(), std::this_thread::get_id());
}

TEST(continue_with, every_execute_synchronously_continuation_runs_on_the_completing_thread) {
  // As .NET's ExecuteSynchronously: not only the first registered continuation, every one of them.
  tpl::task_completion_source<int> tcs;
  std::vector<tpl::task<std::thread::id>> continuations;
  for (int i = 0; i < 3; ++i)
    continuations.push_back(
        tcs.get_task().continue_with([] { return std::this_thread::get_id(); }, opts::execute_synchronously));
  tcs.set_result(1);
  for (auto& c : continuations) EXPECT_EQ(c.get(), std::this_thread::get_id());
}

// ---- conditional continuations --------------------------------------------------------------------

TEST(continue_with, only_on_faulted_runs_when_the_antecedent_faulted) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> c = tcs.get_task().continue_with(
      [](tpl::task<int>& a) { return tpl_test::test_error_id(tpl_test::wait_inner_exceptions(a).at(0)); },
      opts::only_on_faulted | opts::execute_synchronously);
  tcs.set_exception(error(6));
  EXPECT_EQ(c.get(), 6);
}

TEST(continue_with, only_on_faulted_is_canceled_without_calling_fn_when_the_antecedent_succeeded) {
  std::atomic<int> calls{0};
  tpl::task_completion_source<int> tcs;
  tpl::task<> c = tcs.get_task().continue_with([&] { calls.fetch_add(1); }, opts::only_on_faulted);
  tcs.set_result(1);
  EXPECT_THROW(c.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(c.is_canceled());
  EXPECT_EQ(calls.load(), 0);
}

TEST(continue_with, only_on_faulted_is_canceled_when_the_antecedent_was_canceled) {
  std::atomic<int> calls{0};
  tpl::task<> c = tpl::task_from_canceled<int>().continue_with([&] { calls.fetch_add(1); }, opts::only_on_faulted);
  EXPECT_THROW(c.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(c.is_canceled());
  EXPECT_EQ(calls.load(), 0);
}

TEST(continue_with, only_on_ran_to_completion_runs_when_the_antecedent_succeeded) {
  tpl::task<int> c =
      tpl::task_from_result(1000).continue_with([](tpl::task<int>& a) { return a.get() + 1; }, opts::only_on_ran_to_completion);
  EXPECT_EQ(c.get(), 1001);
}

TEST(continue_with, only_on_ran_to_completion_is_canceled_without_calling_fn_when_the_antecedent_faulted) {
  std::atomic<int> calls{0};
  tpl::task_completion_source<int> tcs;
  tpl::task<int> c = tcs.get_task().continue_with(
      [&] {
        calls.fetch_add(1);
        return 1;
      },
      opts::only_on_ran_to_completion);
  tcs.set_exception(error(1));
  EXPECT_THROW(c.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(c.is_canceled());
  EXPECT_EQ(calls.load(), 0);
}

TEST(continue_with, only_on_ran_to_completion_is_canceled_when_the_antecedent_was_canceled) {
  std::atomic<int> calls{0};
  tpl::task<> c =
      tpl::task_from_canceled<int>().continue_with([&] { calls.fetch_add(1); }, opts::only_on_ran_to_completion);
  EXPECT_THROW(c.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(c.is_canceled());
  EXPECT_EQ(calls.load(), 0);
}

TEST(continue_with, not_on_canceled_is_canceled_without_calling_fn_when_the_antecedent_was_canceled) {
  std::atomic<int> calls{0};
  tpl::task_completion_source<int> tcs;
  tpl::task<> c = tcs.get_task().continue_with([&] { calls.fetch_add(1); }, opts::not_on_canceled);
  tcs.set_canceled();
  EXPECT_THROW(c.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(c.is_canceled());
  EXPECT_EQ(calls.load(), 0);
}

TEST(continue_with, not_on_canceled_runs_when_the_antecedent_succeeded_or_faulted) {
  tpl::task<int> on_success = tpl::task_from_result(1000).continue_with([] { return 1; }, opts::not_on_canceled);
  tpl::task<int> on_fault =
      tpl::task_from_exception<int>(test_error(1)).continue_with([] { return 2; }, opts::not_on_canceled);
  EXPECT_EQ(on_success.get(), 1);
  EXPECT_EQ(on_fault.get(), 2);
}

TEST(continue_with, not_on_faulted_is_canceled_when_the_antecedent_faulted) {
  std::atomic<int> calls{0};
  tpl::task<> c =
      tpl::task_from_exception<int>(test_error(1)).continue_with([&] { calls.fetch_add(1); }, opts::not_on_faulted);
  EXPECT_THROW(c.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(c.is_canceled());
  EXPECT_EQ(calls.load(), 0);
}

TEST(continue_with, only_on_canceled_runs_only_when_the_antecedent_was_canceled) {
  tpl::task<int> ran = tpl::task_from_canceled<int>().continue_with([] { return 1; }, opts::only_on_canceled);
  tpl::task<int> skipped = tpl::task_from_result(1000).continue_with([] { return 1; }, opts::only_on_canceled);
  EXPECT_EQ(ran.get(), 1);
  EXPECT_THROW(skipped.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(skipped.is_canceled());
}

TEST(continue_with, excluded_continuation_with_execute_synchronously_is_canceled_inside_set_result) {
  std::atomic<int> calls{0};
  tpl::task_completion_source<int> tcs;
  tpl::task<> c = tcs.get_task().continue_with([&] { calls.fetch_add(1); },
                                               opts::only_on_faulted | opts::execute_synchronously);
  tcs.set_result(1);
  EXPECT_TRUE(c.is_canceled());
  EXPECT_EQ(calls.load(), 0);
}

// As .NET (ArgumentOutOfRangeException from ContinueWith): options under which fn could never run
// are rejected at the call, and nothing is scheduled.
TEST(continue_with, options_that_exclude_every_outcome_throw_invalid_argument_at_the_call) {
  std::atomic<int> calls{0};
  tpl::task_completion_source<int> tcs;
  tpl::task<int> antecedent = tcs.get_task();
  const opts rejected[] = {
      opts::only_on_ran_to_completion | opts::only_on_faulted,
      opts::only_on_ran_to_completion | opts::only_on_canceled,
      opts::only_on_faulted | opts::only_on_canceled,
      opts::not_on_ran_to_completion | opts::not_on_faulted | opts::not_on_canceled,
      opts::not_on_ran_to_completion | opts::not_on_faulted | opts::not_on_canceled |
          opts::execute_synchronously,
      opts::only_on_canceled | opts::not_on_canceled,
      static_cast<opts>(1u),  // a bit that names no option
  };
  for (opts o : rejected) {
    EXPECT_THROW((void)antecedent.continue_with([&] { calls.fetch_add(1); }, o), std::invalid_argument);
    EXPECT_THROW((void)tpl::completed_task().continue_with([&] { calls.fetch_add(1); }, o),
                 std::invalid_argument);
  }
  tcs.set_result(1);
  // Each single outcome filter is still accepted.
  tpl::task<> ran = antecedent.continue_with([&] { calls.fetch_add(1); }, opts::only_on_ran_to_completion);
  ran.wait();
  EXPECT_EQ(calls.load(), 1);
}

TEST(continue_with, continuation_of_a_skipped_continuation_sees_it_canceled) {
  tpl::task<bool> c = tpl::task_from_result(1000)
                          .continue_with([] { return 1; }, opts::only_on_faulted)
                          .continue_with([](tpl::task<int>& skipped) { return skipped.is_canceled(); });
  EXPECT_TRUE(c.get());
}

// ---- a token and a scheduler (.NET ContinueWith(action, token, options, scheduler)) ----------------

TEST(continue_with_token, canceling_the_token_cancels_the_continuation_while_the_antecedent_runs) {
  tpl::task_completion_source<int> tcs;
  tpl::cancellation_token_source cts;
  std::atomic<int> calls{0};
  tpl::task<int> c = tcs.get_task().continue_with([&] { return calls.fetch_add(1); }, cts.token());
  EXPECT_FALSE(c.is_completed());

  cts.cancel();

  // Canceled before the antecedent completes (.NET's default, eager cancellation).
  tpl::sync_wait(c.when_ready());
  EXPECT_TRUE(c.is_canceled());
  EXPECT_FALSE(tcs.get_task().is_completed());
  tcs.set_result(1);
  EXPECT_EQ(calls.load(), 0);
}

TEST(continue_with_token, lazy_cancellation_waits_for_the_antecedent_before_canceling) {
  tpl::task_completion_source<int> tcs;
  tpl::cancellation_token_source cts;
  std::atomic<int> calls{0};
  tpl::task<int> c = tcs.get_task().continue_with([&] { return calls.fetch_add(1); }, cts.token(),
                                                  opts::lazy_cancellation | opts::execute_synchronously);
  cts.cancel();
  EXPECT_FALSE(c.is_completed());  // the antecedent has not completed: not canceled yet

  tcs.set_result(1);  // execute_synchronously: settled inside set_result

  EXPECT_TRUE(c.is_completed());
  EXPECT_TRUE(c.is_canceled());
  EXPECT_EQ(calls.load(), 0);
}

TEST(continue_with_token, a_token_canceled_at_the_call_cancels_at_once) {
  tpl::task_completion_source<int> tcs;
  tpl::cancellation_token_source cts;
  cts.cancel();
  tpl::task<> c = tcs.get_task().continue_with([] {}, cts.token(), opts::execute_synchronously);
  EXPECT_TRUE(c.is_canceled());
  tcs.set_result(1);
}

TEST(continue_with_token, an_uncanceled_token_changes_nothing) {
  tpl::task_completion_source<int> tcs;
  tpl::cancellation_token_source cts;
  tpl::task<int> c = tcs.get_task().continue_with([](tpl::task<int>& a) { return a.get() * 2; }, cts.token());
  tcs.set_result(21);
  EXPECT_EQ(c.get(), 42);
  cts.cancel();  // after completion: no effect
  EXPECT_EQ(c.get(), 42);
}

TEST(continue_with_token, the_outcome_filter_still_applies) {
  tpl::cancellation_token_source cts;
  tpl::task<> c = tpl::task_from_result(1).continue_with([] {}, cts.token(), opts::only_on_faulted);
  tpl::sync_wait(c.when_ready());
  EXPECT_TRUE(c.is_canceled());
  tpl::task<int> faulted = tpl::task_from_exception<int>(error(3));
  tpl::task<int> seen = faulted.continue_with(
      [](tpl::task<int>& a) { return test_error_id(wait_inner_exceptions(a).at(0)); }, cts.token(),
      opts::only_on_faulted);
  EXPECT_EQ(seen.get(), 3);
}

TEST(continue_with_token, a_function_that_has_started_runs_to_its_end) {
  tpl::task_completion_source<int> tcs;
  tpl::cancellation_token_source cts;
  tpl::task<int> c = tcs.get_task().continue_with(
      [&] {
        cts.cancel();  // too late: fn has started
        return 7;
      },
      cts.token(), opts::execute_synchronously);
  tcs.set_result(1);
  EXPECT_EQ(c.get(), 7);
}

TEST(continue_with_token, rejects_the_same_options_as_without_a_token) {
  tpl::cancellation_token_source cts;
  EXPECT_THROW((void)tpl::completed_task().continue_with([] {}, cts.token(),
                                                        opts::only_on_faulted | opts::only_on_canceled),
               std::invalid_argument);
  EXPECT_THROW((void)tpl::task<int>{}.continue_with([] {}, cts.token()), tpl::invalid_operation);
}

TEST(continue_with_scheduler, runs_the_function_on_the_given_scheduler) {
  tpl::testing::deterministic_scheduler sched(1);
  tpl::task_completion_source<int> tcs;
  tpl::scheduler* seen = nullptr;
  tpl::task<int> c = tcs.get_task().continue_with(
      [&](tpl::task<int>& a) {
        seen = tpl::scheduler::current();
        return a.get() + 1;
      },
      sched);
  tcs.set_result(1);
  EXPECT_FALSE(c.is_completed());  // queued to sched, which has not run it
  EXPECT_EQ(sched.ready_count(), 1u);
  sched.run_until_idle();
  EXPECT_EQ(c.get(), 2);
  EXPECT_EQ(seen, &sched);
}

TEST(continue_with_scheduler, execute_synchronously_from_another_scheduler_still_queues_to_it) {
  tpl::testing::deterministic_scheduler sched(1);
  tpl::task<> c = tpl::task_from_result(1).continue_with([] {}, sched, opts::execute_synchronously);
  EXPECT_FALSE(c.is_completed());  // the caller is not running sched's work
  sched.run_until_idle();
  EXPECT_TRUE(c.is_completed());
}

TEST(continue_with_scheduler, execute_synchronously_on_the_scheduler_itself_runs_inline) {
  tpl::testing::deterministic_scheduler sched(1);
  tpl::task_completion_source<int> tcs;
  tpl::task<> c = tcs.get_task().continue_with([] {}, sched, opts::execute_synchronously);
  std::size_t items_before = 0;
  bool completed_inline = false;
  tpl::task<> driver = sched.start([&]() -> tpl::task<> {
    items_before = sched.items_run();
    tcs.set_result(1);  // completes the antecedent on a thread running sched's item
    completed_inline = c.is_completed();
    co_return;
  });
  sched.run_until_idle();
  EXPECT_TRUE(completed_inline);
  EXPECT_EQ(sched.items_run(), items_before);  // the driver's item only: none for the continuation
  driver.get();
}

TEST(continue_with_scheduler, a_token_canceled_before_the_scheduler_runs_it_cancels_it) {
  tpl::testing::deterministic_scheduler sched(1);
  tpl::cancellation_token_source cts;
  std::atomic<int> calls{0};
  tpl::task<> c = tpl::task_from_result(1).continue_with([&] { calls.fetch_add(1); }, cts.token(),
                                                         opts::lazy_cancellation, sched);
  EXPECT_EQ(sched.ready_count(), 1u);
  cts.cancel();  // after the antecedent completed, before sched ran fn
  sched.run_until_idle();
  EXPECT_TRUE(c.is_canceled());
  EXPECT_EQ(calls.load(), 0);
}

}  // namespace continue_with_test_cpp
