// tpl::task<T>: hot start, awaiting, waiting, faults, status, the task factories, await options
// and sync_wait.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace task_test_cpp {

namespace {

using tpl_test::exception_of_await;

using tpl_test::holds;
using tpl_test::test_error;
using tpl_test::test_error_id;
using tpl_test::wait_inner_exceptions;

// ---- coroutines used by the tests -------------------------------------------------------------

tpl::task<int> record_then_await(int& step, tpl::task<> gate) {
  step = 1;
  co_await gate;
  step = 2;
  co_return 42;
}

tpl::task<int> returns_immediately(int v) { co_return v; }

tpl::task<> increments_immediately(int& counter) {
  ++counter;
  co_return;
}

tpl::task<int> awaits(tpl::task<int> t) { co_return co_await t; }

tpl::task<int> awaits_twice(tpl::task<int> t) {
  int a = co_await t;
  int b = co_await t;
  co_return a + b;
}

tpl::task<std::thread::id> thread_after_awaiting(tpl::task<int> t) {
  co_await t;
  co_return std::this_thread::get_id();
}

tpl::task<> count_value(tpl::task<int> t, int expected, std::atomic<int>& matches) {
  // Not `if (co_await t == expected)`: g++ 12 miscompiles a co_await inside an if condition
  // (the resumed frame is corrupt), so the awaited value goes through a variable.
  const int value = co_await t;
  if (value == expected) matches.fetch_add(1, std::memory_order_relaxed);
}

tpl::task<> count_fault(tpl::task<int> t, int expected_id, std::atomic<int>& matches) {
  try {
    co_await t;
  } catch (const test_error& e) {
    if (e.id == expected_id) matches.fetch_add(1, std::memory_order_relaxed);
  }
}

tpl::task<int> throws_immediately(int id) {
  throw test_error(id);
  co_return 0;
}

tpl::task<int> throws_after_yield(int id) {
  co_await tpl::yield();
  throw test_error(id);
}

tpl::task<int> cancels_itself() {
  throw tpl::operation_canceled();
  co_return 0;
}

tpl::task<int> cancels_itself_after_yield() {
  co_await tpl::yield();
  throw tpl::operation_canceled();
}

tpl::task<std::unique_ptr<int>> unique_after_yield(int v) {
  co_await tpl::yield();
  co_return std::make_unique<int>(v);
}

tpl::task<int> yields_then_returns(int v) {
  co_await tpl::yield();
  co_return v;
}

tpl::task<bool> suppressed_await_completes(tpl::task<int> t) {
  co_await t.configure<tpl::await_options::suppress_throwing>();
  co_return t.is_completed();
}

tpl::task<bool> when_ready_completes(tpl::task<int> t) {
  co_await t.when_ready();
  co_return t.is_completed();
}

tpl::task<bool> runtime_suppressed_await_completes(tpl::task<> t) {
  co_await t.configure(tpl::await_options::suppress_throwing);
  co_return t.is_completed();
}

struct resumption {
  std::thread::id thread;
  tpl::thread_pool* pool;
};

tpl::task<resumption> force_yielding_await(tpl::task<int> t) {
  co_await t.configure<tpl::await_options::force_yielding>();
  co_return resumption{std::this_thread::get_id(), tpl::thread_pool::current()};
}

tpl::task<resumption> runtime_force_yielding_await(tpl::task<int> t) {
  co_await t.configure(tpl::await_options::force_yielding);
  co_return resumption{std::this_thread::get_id(), tpl::thread_pool::current()};
}

tpl::task<resumption> force_yielding_suppressed_await(tpl::task<int> t) {
  co_await t.configure<tpl::await_options::force_yielding | tpl::await_options::suppress_throwing>();
  co_return resumption{std::this_thread::get_id(), tpl::thread_pool::current()};
}

}  // namespace

// ---- hot start --------------------------------------------------------------------------------

TEST(task, coroutine_runs_synchronously_until_its_first_suspension) {
  tpl::task_completion_source<> gate;
  int step = 0;

  tpl::task<int> t = record_then_await(step, gate.get_task());

  EXPECT_EQ(step, 1);
  EXPECT_FALSE(t.is_completed());
  gate.set_result();
  EXPECT_EQ(step, 2);
  EXPECT_EQ(t.get(), 42);
}

TEST(task, coroutine_that_never_suspends_is_completed_on_return) {
  tpl::task<int> t = returns_immediately(7);
  EXPECT_TRUE(t.is_completed());
  EXPECT_EQ(t.status(), tpl::task_status::ran_to_completion);
  EXPECT_EQ(t.get(), 7);
}

TEST(task, void_coroutine_runs_its_body_inside_the_call) {
  int counter = 0;
  tpl::task<> t = increments_immediately(counter);
  EXPECT_EQ(counter, 1);
  EXPECT_TRUE(t.is_completed_successfully());
}

TEST(task, awaiting_an_already_completed_task_does_not_suspend) {
  tpl::task<int> t = awaits(tpl::task_from_result(5));
  EXPECT_TRUE(t.is_completed());
  EXPECT_EQ(t.get(), 5);
}

TEST(task, awaiter_resumes_inline_on_the_thread_that_completes_the_task) {
  tpl::task_completion_source<int> tcs;
  tpl::task<std::thread::id> resumed_on = thread_after_awaiting(tcs.get_task());

  std::thread completer([&] { tcs.set_result(1); });
  const std::thread::id completer_id = completer.get_id();
  completer.join();

  EXPECT_EQ(resumed_on.get(), completer_id);
}

TEST(task, a_task_can_be_awaited_again_with_the_same_result) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> sum = awaits_twice(tcs.get_task());
  tcs.set_result(21);
  EXPECT_EQ(sum.get(), 42);
}

TEST(task, result_stays_readable_for_as_long_as_a_handle_lives) {
  tpl::task<std::string> t;
  {
    tpl::task_completion_source<std::string> tcs;
    t = tcs.get_task();
    tcs.set_result("kept");
  }
  EXPECT_EQ(t.get(), "kept");
  EXPECT_EQ(t.get(), "kept");
}

// ---- many awaiters ----------------------------------------------------------------------------

TEST(task, many_awaiters_all_resume_with_the_value) {
  constexpr int kAwaiters = 32;
  tpl::task_completion_source<int> tcs;
  std::atomic<int> matches{0};
  std::vector<tpl::task<>> awaiters;
  for (int i = 0; i < kAwaiters; ++i) awaiters.push_back(count_value(tcs.get_task(), 99, matches));
  for (auto& a : awaiters) EXPECT_FALSE(a.is_completed());

  tcs.set_result(99);

  for (auto& a : awaiters) a.wait();
  EXPECT_EQ(matches.load(), kAwaiters);
}

TEST(task, many_awaiters_all_observe_the_exception) {
  constexpr int kAwaiters = 32;
  tpl::task_completion_source<int> tcs;
  std::atomic<int> matches{0};
  std::vector<tpl::task<>> awaiters;
  for (int i = 0; i < kAwaiters; ++i) awaiters.push_back(count_fault(tcs.get_task(), 7, matches));

  tcs.set_exception(std::make_exception_ptr(test_error(7)));

  for (auto& a : awaiters) a.wait();  // the awaiters caught the fault: they succeed
  EXPECT_EQ(matches.load(), kAwaiters);
}

TEST(task, several_threads_can_wait_on_one_task_at_once) {
  constexpr int kThreads = 6;
  tpl::task_completion_source<int> tcs;
  tpl::task<int> t = tcs.get_task();
  std::latch started(kThreads);
  std::atomic<int> matches{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      started.count_down();
      if (i % 2 == 0) {
        t.wait();
        if (t.get() == 5) matches.fetch_add(1);
      } else if (t.get() == 5) {
        matches.fetch_add(1);
      }
    });
  }
  started.wait();
  tcs.set_result(5);
  for (auto& th : threads) th.join();
  EXPECT_EQ(matches.load(), kThreads);
}

TEST(task, several_threads_waiting_on_a_faulted_task_each_get_the_aggregate) {
  constexpr int kThreads = 4;
  tpl::task_completion_source<int> tcs;
  tpl::task<int> t = tcs.get_task();
  std::latch started(kThreads);
  std::atomic<int> matches{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      started.count_down();
      try {
        t.wait();
      } catch (const tpl::aggregate_exception& e) {
        if (e.size() == 1 && test_error_id(e.inner_exceptions()[0]) == 3) matches.fetch_add(1);
      }
    });
  }
  started.wait();
  tcs.set_exception(std::make_exception_ptr(test_error(3)));
  for (auto& th : threads) th.join();
  EXPECT_EQ(matches.load(), kThreads);
}

// ---- faults -----------------------------------------------------------------------------------

TEST(task, awaiting_a_faulted_task_rethrows_its_first_exception) {
  std::exception_ptr e = exception_of_await(throws_immediately(4)).get();
  EXPECT_EQ(test_error_id(e), 4);
}

TEST(task, awaiting_a_task_that_faults_later_rethrows_the_original_exception_type) {
  std::exception_ptr e = exception_of_await(throws_after_yield(5)).get();
  EXPECT_TRUE(holds<test_error>(e));
  EXPECT_EQ(test_error_id(e), 5);
}

TEST(task, wait_on_a_faulted_task_throws_aggregate_exception_holding_the_exception) {
  tpl::task<int> t = throws_after_yield(6);
  auto inner = wait_inner_exceptions(t);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(test_error_id(inner[0]), 6);
}

TEST(task, get_on_a_faulted_task_throws_aggregate_exception_holding_the_exception) {
  tpl::task<int> t = throws_immediately(8);
  try {
    (void)t.get();
    ADD_FAILURE() << "get() did not throw";
  } catch (const tpl::aggregate_exception& e) {
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(test_error_id(e.inner_exceptions()[0]), 8);
    EXPECT_THROW(e.rethrow_first(), test_error);
  }
}

TEST(task, aggregate_exception_message_mentions_the_inner_exception) {
  tpl::task<int> t = throws_immediately(9);
  std::string what = tpl_test::message_of([&] { t.wait(); });
  EXPECT_NE(what.find("test_error 9"), std::string::npos) << what;
}

TEST(task, is_faulted_after_the_body_throws) {
  tpl::task<int> t = throws_immediately(1);
  EXPECT_TRUE(t.is_completed());
  EXPECT_TRUE(t.is_faulted());
  EXPECT_FALSE(t.is_canceled());
  EXPECT_FALSE(t.is_completed_successfully());
}

TEST(task, body_throwing_operation_canceled_ends_canceled) {
  tpl::task<int> t = cancels_itself();
  EXPECT_TRUE(t.is_completed());
  EXPECT_TRUE(t.is_canceled());
  EXPECT_FALSE(t.is_faulted());
  EXPECT_EQ(t.status(), tpl::task_status::canceled);
}

TEST(task, body_throwing_operation_canceled_after_suspending_ends_canceled) {
  tpl::task<int> t = cancels_itself_after_yield();
  EXPECT_THROW(t.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(t.is_canceled());
}

TEST(task, awaiting_a_canceled_task_throws_operation_canceled) {
  std::exception_ptr e = exception_of_await(cancels_itself()).get();
  EXPECT_TRUE(holds<tpl::operation_canceled>(e));
}

TEST(task, wait_on_a_canceled_task_throws_aggregate_exception_holding_operation_canceled) {
  tpl::task<int> t = cancels_itself();
  auto inner = wait_inner_exceptions(t);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_TRUE(holds<tpl::operation_canceled>(inner[0]));
}

TEST(task, exception_is_null_for_a_successful_task) {
  EXPECT_EQ(returns_immediately(1).exception(), nullptr);
}

TEST(task, exception_is_null_for_a_running_task) {
  tpl::task_completion_source<int> tcs;
  EXPECT_EQ(tcs.get_task().exception(), nullptr);
}

TEST(task, exception_of_a_faulted_task_is_an_aggregate_of_its_faults) {
  std::exception_ptr e = throws_immediately(12).exception();
  ASSERT_TRUE(holds<tpl::aggregate_exception>(e));
  try {
    std::rethrow_exception(e);
  } catch (const tpl::aggregate_exception& a) {
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(test_error_id(a.inner_exceptions()[0]), 12);
  }
}

TEST(task, exception_of_a_canceled_task_is_null) {
  // As .NET's Task.Exception: a canceled task has no fault to report.
  EXPECT_EQ(cancels_itself().exception(), nullptr);
}

// ---- status -----------------------------------------------------------------------------------

TEST(task, status_is_running_until_the_task_completes) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> t = tcs.get_task();
  EXPECT_EQ(t.status(), tpl::task_status::running);
  EXPECT_FALSE(t.is_completed());
  EXPECT_FALSE(t.is_completed_successfully());
  EXPECT_FALSE(t.is_faulted());
  EXPECT_FALSE(t.is_canceled());
  tcs.set_result(1);
  EXPECT_EQ(t.status(), tpl::task_status::ran_to_completion);
}

TEST(task, status_of_a_successful_task_is_ran_to_completion) {
  tpl::task<int> t = yields_then_returns(3);
  t.wait();
  EXPECT_EQ(t.status(), tpl::task_status::ran_to_completion);
  EXPECT_TRUE(t.is_completed());
  EXPECT_TRUE(t.is_completed_successfully());
  EXPECT_FALSE(t.is_faulted());
  EXPECT_FALSE(t.is_canceled());
}

TEST(task, status_of_a_faulted_task_is_faulted) {
  tpl::task<int> t = throws_after_yield(1);
  EXPECT_THROW(t.wait(), tpl::aggregate_exception);
  EXPECT_EQ(t.status(), tpl::task_status::faulted);
  EXPECT_TRUE(t.is_completed());
}

TEST(task, status_of_a_canceled_task_is_canceled) {
  tpl::task<int> t = tpl::task_from_canceled<int>();
  EXPECT_EQ(t.status(), tpl::task_status::canceled);
  EXPECT_TRUE(t.is_completed());
}

// ---- handles ----------------------------------------------------------------------------------

TEST(task, copies_of_a_task_compare_equal) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> a = tcs.get_task();
  tpl::task<int> b = a;
  EXPECT_TRUE(a == b);
  EXPECT_TRUE(tcs.get_task() == a);
}

TEST(task, distinct_tasks_compare_unequal) {
  tpl::task_completion_source<int> x, y;
  EXPECT_FALSE(x.get_task() == y.get_task());
}

TEST(task, moved_from_task_is_not_valid) {
  tpl::task<int> a = tpl::task_from_result(1000);
  tpl::task<int> b = std::move(a);
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  EXPECT_TRUE(b.valid());
  EXPECT_EQ(b.get(), 1000);
}

TEST(task, default_constructed_task_is_not_valid) {
  tpl::task<int> t;
  EXPECT_FALSE(t.valid());
}

TEST(task, get_on_an_rvalue_sole_owner_moves_a_move_only_result_out) {
  auto make = []() -> tpl::task<std::unique_ptr<int>> { co_return std::make_unique<int>(11); };
  tpl::task<std::unique_ptr<int>> t = make();
  std::unique_ptr<int> p = std::move(t).get();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 11);
}

TEST(task, move_only_result_is_moved_out_by_the_sole_owner_as_soon_as_it_sees_completion) {
  // The caller's handle is the only one left once the coroutine has completed: taking the result
  // must work whenever the caller observes completion, even while the completing thread is still
  // inside the coroutine's final steps.
  const int rounds = tpl_test::scaled(20'000, 2'000);
  int taken = 0;
  for (int i = 0; i < rounds; ++i) {
    tpl::task<std::unique_ptr<int>> t = unique_after_yield(i);
    while (!t.is_completed()) {
      // spin: observe the completion as early as possible
    }
    try {
      std::unique_ptr<int> p = std::move(t).get();
      if (p != nullptr && *p == i) ++taken;
    } catch (const tpl::invalid_operation&) {
    }
  }
  EXPECT_EQ(taken, rounds);
}

// ---- factories --------------------------------------------------------------------------------

// The result and the exception share their storage in the task's state (a task ends with one or
// the other): each outcome must construct and destroy exactly what it holds.
namespace lifetime {
struct counted {
  static inline int live = 0;
  int v;
  explicit counted(int x) : v(x) { ++live; }
  counted(const counted& o) : v(o.v) { ++live; }
  ~counted() { --live; }
};
struct counted_error : std::runtime_error {
  static inline int live = 0;
  counted_error() : std::runtime_error("counted") { ++live; }
  counted_error(const counted_error& o) : std::runtime_error(o) { ++live; }
  ~counted_error() override { --live; }
};
}  // namespace lifetime

// What every task coroutine's frame pays for tpl (docs/internals.md, "What a coroutine frame
// holds"): guards against a field or an awaiter member growing the million-frame chains.
static_assert(sizeof(void*) != 8 || sizeof(tpl::detail::task_state<int>) == 32);
static_assert(sizeof(void*) != 8 || sizeof(tpl::detail::task_promise<int>) == 32);
// Four bytes, so that g++ packs it beside the frame's own resume index and flags.
static_assert(sizeof(tpl::detail::initial_awaiter) == 4 && alignof(tpl::detail::initial_awaiter) == 4);
// Three words: the waiter's link and action (the awaiting coroutine) and the awaited state.
static_assert(sizeof(void*) != 8 ||
              sizeof(tpl::detail::flowing_task_awaiter<tpl::detail::task_awaiter<int, true, false>>) == 24);

TEST(task, a_result_or_an_exception_is_destroyed_exactly_once_with_its_task) {
  using lifetime::counted;
  using lifetime::counted_error;
  {
    auto ok = []() -> tpl::task<counted> {
      co_await tpl::yield();
      co_return counted(5);
    }();
    EXPECT_EQ(ok.get().v, 5);
    EXPECT_EQ(counted::live, 1);  // the task still holds its result
  }
  EXPECT_EQ(counted::live, 0);
  {
    auto bad = []() -> tpl::task<counted> {
      co_await tpl::yield();
      throw counted_error();
    }();
    EXPECT_THROW(bad.get(), tpl::aggregate_exception);
    EXPECT_EQ(counted::live, 0);  // no result was ever constructed
    EXPECT_GE(counted_error::live, 1);
    EXPECT_TRUE(bad.is_faulted());
  }
  EXPECT_EQ(counted_error::live, 0);
  {
    auto canceled = []() -> tpl::task<counted> {
      co_await tpl::yield();
      throw tpl::operation_canceled();
    }();
    EXPECT_THROW(canceled.wait(), tpl::aggregate_exception);
    EXPECT_TRUE(canceled.is_canceled());
    EXPECT_EQ(counted::live, 0);
  }
  {
    // Synchronous completion (never suspended) takes the unshared path.
    auto sync_ok = []() -> tpl::task<counted> { co_return counted(6); }();
    EXPECT_EQ(counted::live, 1);
    auto sync_bad = []() -> tpl::task<counted> {
      throw counted_error();
      co_return counted(0);
    }();
    EXPECT_TRUE(sync_bad.is_faulted());
    EXPECT_EQ(counted::live, 1);
  }
  EXPECT_EQ(counted::live, 0);
  EXPECT_EQ(counted_error::live, 0);
  {
    tpl::task_completion_source<counted> tcs;
    auto t = tcs.get_task();
    EXPECT_TRUE(tcs.try_set_exception(std::make_exception_ptr(counted_error())));
    EXPECT_FALSE(tcs.try_set_result(counted(1)));
    EXPECT_TRUE(t.is_faulted());
  }
  EXPECT_EQ(counted::live, 0);
  EXPECT_EQ(counted_error::live, 0);
}

TEST(task_from_result, is_completed_with_the_value) {
  tpl::task<std::string> t = tpl::task_from_result(std::string("x"));
  EXPECT_TRUE(t.is_completed_successfully());
  EXPECT_EQ(t.get(), "x");
}

TEST(task_from_result, of_bool_returns_the_same_cached_task_each_time) {
  EXPECT_TRUE(tpl::task_from_result(true) == tpl::task_from_result(true));
  EXPECT_TRUE(tpl::task_from_result(false) == tpl::task_from_result(false));
  EXPECT_FALSE(tpl::task_from_result(true) == tpl::task_from_result(false));
  EXPECT_TRUE(tpl::task_from_result(true).get());
  EXPECT_FALSE(tpl::task_from_result(false).get());
}

TEST(task_from_result, of_small_ints_returns_the_same_cached_task_each_time) {
  for (int v = -1; v <= 8; ++v) {
    tpl::task<int> a = tpl::task_from_result(v);
    tpl::task<int> b = tpl::task_from_result(v);
    EXPECT_TRUE(a == b) << v;
    EXPECT_TRUE(a.is_completed_successfully()) << v;
    EXPECT_EQ(a.get(), v);
  }
  EXPECT_FALSE(tpl::task_from_result(3) == tpl::task_from_result(4));
}

TEST(task_from_result, of_other_ints_is_a_distinct_completed_task) {
  tpl::task<int> a = tpl::task_from_result(1000);
  tpl::task<int> b = tpl::task_from_result(1000);
  EXPECT_FALSE(a == b);
  EXPECT_EQ(a.get(), 1000);
  EXPECT_EQ(tpl::task_from_result(-2).get(), -2);
  EXPECT_EQ(tpl::task_from_result(9).get(), 9);
}

TEST(task_from_result, cached_tasks_survive_any_number_of_handles) {
  for (int i = 0; i < 1000; ++i) {
    tpl::task<int> t = tpl::task_from_result(3);
    tpl::task<int> copy = t;
    tpl::task<int> moved = std::move(copy);
    EXPECT_EQ(moved.get(), 3);
  }
  EXPECT_EQ(tpl::task_from_result(3).get(), 3);
}

TEST(task_from_result, without_a_value_is_the_completed_task) {
  EXPECT_TRUE(tpl::task_from_result() == tpl::completed_task());
}

TEST(task_from_result, holds_a_move_only_value) {
  tpl::task<std::unique_ptr<int>> t = tpl::task_from_result(std::make_unique<int>(4));
  EXPECT_EQ(*std::move(t).get(), 4);
}

TEST(completed_task, is_completed_successfully_and_cached) {
  tpl::task<> t = tpl::completed_task();
  EXPECT_TRUE(t.is_completed_successfully());
  EXPECT_NO_THROW(t.wait());
  EXPECT_TRUE(t == tpl::completed_task());
}

TEST(task_from_exception, is_faulted_with_the_exception) {
  tpl::task<int> t = tpl::task_from_exception<int>(std::make_exception_ptr(test_error(2)));
  EXPECT_TRUE(t.is_faulted());
  auto inner = wait_inner_exceptions(t);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(test_error_id(inner[0]), 2);
  EXPECT_EQ(test_error_id(exception_of_await(t).get()), 2);
}

TEST(task_from_exception, accepts_an_exception_object) {
  tpl::task<> t = tpl::task_from_exception(test_error(5));
  EXPECT_TRUE(t.is_faulted());
  EXPECT_EQ(test_error_id(exception_of_await(t).get()), 5);
}

// As .NET's Task.FromException(new OperationCanceledException()): Faulted, not Canceled (only a
// coroutine body that throws operation_canceled ends canceled: see the coroutine tests above).
TEST(task_from_exception, with_operation_canceled_is_faulted_as_in_dotnet) {
  tpl::task<int> t = tpl::task_from_exception<int>(tpl::operation_canceled());
  EXPECT_TRUE(t.is_faulted());
  EXPECT_FALSE(t.is_canceled());
  EXPECT_EQ(t.status(), tpl::task_status::faulted);
  EXPECT_TRUE(holds<tpl::operation_canceled>(exception_of_await(t).get()));
  auto inner = wait_inner_exceptions(t);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_TRUE(holds<tpl::operation_canceled>(inner[0]));

  tpl::task<> v = tpl::task_from_exception(std::make_exception_ptr(tpl::operation_canceled()));
  EXPECT_TRUE(v.is_faulted());
}

TEST(task_from_canceled, is_canceled) {
  tpl::task<std::string> t = tpl::task_from_canceled<std::string>();
  EXPECT_TRUE(t.is_canceled());
  EXPECT_TRUE(holds<tpl::operation_canceled>(exception_of_await(t).get()));
  auto inner = wait_inner_exceptions(t);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_TRUE(holds<tpl::operation_canceled>(inner[0]));
}

// ---- await options ----------------------------------------------------------------------------

TEST(await_options, suppress_throwing_await_of_a_faulted_task_does_not_throw) {
  tpl::task<int> faulted = throws_after_yield(1);
  EXPECT_TRUE(suppressed_await_completes(faulted).get());
  EXPECT_TRUE(faulted.is_faulted());
}

TEST(await_options, suppress_throwing_await_of_a_canceled_task_does_not_throw) {
  EXPECT_TRUE(suppressed_await_completes(tpl::task_from_canceled<int>()).get());
}

TEST(await_options, suppress_throwing_await_waits_for_a_pending_task) {
  tpl::task_completion_source<int> tcs;
  tpl::task<bool> t = suppressed_await_completes(tcs.get_task());
  EXPECT_FALSE(t.is_completed());
  tcs.set_exception(std::make_exception_ptr(test_error(1)));
  EXPECT_TRUE(t.get());
}

TEST(await_options, when_ready_waits_without_throwing) {
  tpl::task_completion_source<int> tcs;
  tpl::task<bool> t = when_ready_completes(tcs.get_task());
  EXPECT_FALSE(t.is_completed());
  tcs.set_exception(std::make_exception_ptr(test_error(1)));
  EXPECT_TRUE(t.get());
}

TEST(await_options, force_yielding_resumes_on_a_pool_thread_even_if_already_completed) {
  tpl::task<resumption> t = force_yielding_await(tpl::task_from_result(1));
  resumption r = t.get();
  EXPECT_NE(r.thread, std::this_thread::get_id());
  EXPECT_NE(r.pool, nullptr);
}

TEST(await_options, force_yielding_resumes_on_a_pool_thread_when_completed_inline) {
  tpl::task_completion_source<int> tcs;
  tpl::task<resumption> t = force_yielding_await(tcs.get_task());
  tcs.set_result(1);
  resumption r = t.get();
  EXPECT_NE(r.thread, std::this_thread::get_id());
  EXPECT_NE(r.pool, nullptr);
}

TEST(await_options, force_yielding_combined_with_suppress_throwing_neither_throws_nor_runs_inline) {
  resumption r = force_yielding_suppressed_await(tpl::task_from_exception<int>(test_error(1))).get();
  EXPECT_NE(r.thread, std::this_thread::get_id());
  EXPECT_NE(r.pool, nullptr);
}

TEST(await_options, runtime_configure_with_force_yielding_resumes_on_a_pool_thread) {
  resumption r = runtime_force_yielding_await(tpl::task_from_result(1)).get();
  EXPECT_NE(r.thread, std::this_thread::get_id());
  EXPECT_NE(r.pool, nullptr);
}

TEST(await_options, runtime_configure_with_suppress_throwing_on_a_valued_task_throws_invalid_argument) {
  tpl::task<int> t = tpl::task_from_result(1);
  EXPECT_THROW((void)t.configure(tpl::await_options::suppress_throwing), std::invalid_argument);
}

TEST(await_options, runtime_configure_with_suppress_throwing_on_a_void_task_does_not_throw) {
  tpl::task<> faulted = tpl::task_from_exception(test_error(1));
  EXPECT_TRUE(runtime_suppressed_await_completes(faulted).get());
}

// ---- wait_for ---------------------------------------------------------------------------------

TEST(task, wait_for_returns_false_when_the_task_does_not_complete) {
  tpl::task_completion_source<int> tcs;  // never completed within the wait
  EXPECT_FALSE(tcs.get_task().wait_for(std::chrono::milliseconds(1)));
}

TEST(task, wait_for_returns_true_for_a_completed_task) {
  EXPECT_TRUE(tpl::task_from_result(1).wait_for(std::chrono::milliseconds(0)));
}

TEST(task, wait_for_throws_aggregate_exception_for_a_faulted_task) {
  tpl::task<int> t = tpl::task_from_exception<int>(test_error(1));
  EXPECT_THROW((void)t.wait_for(std::chrono::milliseconds(0)), tpl::aggregate_exception);
}

TEST(task, wait_for_that_gave_up_leaves_the_task_awaitable) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> t = tcs.get_task();
  EXPECT_FALSE(t.wait_for(std::chrono::milliseconds(1)));
  tcs.set_result(3);  // the abandoned wait must not be called back (its stack frame is gone)
  EXPECT_TRUE(t.wait_for(std::chrono::milliseconds(0)));
  EXPECT_EQ(t.get(), 3);
}

TEST(task, concurrent_timed_waits_that_give_up_leave_the_task_consistent) {
  // Several threads poll one pending task with wait_for(0): each registers a waiter and takes it
  // back. The waiter list must stay intact: afterwards the task completes and is waited normally.
  // (Run in a child process: a corrupted waiter list shows up as a livelock or a crash.)
  tpl_test::expect_passes_in_a_child_process(
      [] {
        const int polls_per_thread = tpl_test::scaled(200'000, 20'000);
        constexpr int kThreads = 4;
        tpl::task_completion_source<int> tcs;
        tpl::task<int> t = tcs.get_task();
        std::atomic<int> gave_up{0};
        std::vector<std::thread> threads;
        for (int i = 0; i < kThreads; ++i) {
          threads.emplace_back([&] {
            for (int k = 0; k < polls_per_thread; ++k)
              if (!t.wait_for(std::chrono::seconds(0))) gave_up.fetch_add(1, std::memory_order_relaxed);
          });
        }
        for (auto& th : threads) th.join();
        tpl_test::progress("every poll returned");
        tcs.set_result(8);
        bool ok = tpl_test::check_eq(gave_up.load(), static_cast<long long>(kThreads) * polls_per_thread,
                                     "polls that gave up");
        ok &= tpl_test::check_eq(t.get(), 8, "result");
        return ok;
      },
      std::chrono::seconds(60));
}

TEST(task, timed_waits_racing_completion_each_see_it_or_give_up_cleanly) {
  const int rounds = tpl_test::scaled(2'000, 300);
  constexpr int kWaiters = 3;
  int completed_seen = 0;
  for (int round = 0; round < rounds; ++round) {
    tpl::task_completion_source<int> tcs;
    tpl::task<int> t = tcs.get_task();
    std::latch start(kWaiters + 1);
    std::atomic<int> saw_completion{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kWaiters; ++i) {
      threads.emplace_back([&] {
        start.arrive_and_wait();
        for (int k = 0; k < 4; ++k) (void)t.wait_for(std::chrono::seconds(0));
        t.wait();  // whatever the timed waits did, an untimed wait still sees the completion
        if (t.get() == round) saw_completion.fetch_add(1);
      });
    }
    start.arrive_and_wait();
    tcs.set_result(round);
    for (auto& th : threads) th.join();
    completed_seen += saw_completion.load();
  }
  EXPECT_EQ(completed_seen, rounds * kWaiters);
}

// ---- sync_wait --------------------------------------------------------------------------------

TEST(sync_wait, returns_the_value_of_a_pending_task) {
  EXPECT_EQ(tpl::sync_wait(yields_then_returns(17)), 17);
}

TEST(sync_wait, rethrows_the_original_exception_not_an_aggregate) {
  EXPECT_THROW(tpl::sync_wait(throws_after_yield(1)), test_error);
}

TEST(sync_wait, of_a_canceled_task_throws_operation_canceled) {
  EXPECT_THROW(tpl::sync_wait(tpl::task_from_canceled<int>()), tpl::operation_canceled);
}

TEST(sync_wait, accepts_any_awaitable) {
  static_assert(std::is_void_v<decltype(tpl::sync_wait(tpl::yield()))>);
  EXPECT_NO_THROW(tpl::sync_wait(tpl::yield()));
}

TEST(sync_wait, takes_a_move_only_result_from_an_rvalue_task) {
  std::unique_ptr<int> p = tpl::sync_wait(tpl::task_from_result(std::make_unique<int>(6)));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 6);
}

// ---- awaited from a coroutine that is not tpl's ------------------------------------------------

namespace foreign {
// The user's own coroutine type: an await of a tpl task from it has no tpl promise to find, so the
// awaiter's continuation is the bare frame address (task_awaiter.hpp, the resume word).
struct eager {
  struct promise_type {
    eager get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

struct outcome {
  std::atomic<int> value{0};
  std::atomic<std::thread::id> thread{};
  tpl::task_completion_source<> done;
};

// Each coroutine shares its outcome, so the test may drop its own as soon as `done` completes.
eager await_task(tpl::task<int> t, std::shared_ptr<outcome> out) {
  const int v = co_await t;
  out->thread.store(std::this_thread::get_id());
  out->value.store(v);
  out->done.set_result();
}

eager await_value_task(tpl::value_task<int> t, std::shared_ptr<outcome> out) {
  const int v = co_await std::move(t);
  out->thread.store(std::this_thread::get_id());
  out->value.store(v);
  out->done.set_result();
}
}  // namespace foreign

TEST(task, coroutines_that_are_not_tpls_resume_when_the_awaited_task_completes) {
  tpl::task_completion_source<int> tcs;
  auto first = std::make_shared<foreign::outcome>();
  auto second = std::make_shared<foreign::outcome>();
  auto third = std::make_shared<foreign::outcome>();
  foreign::await_task(tcs.get_task(), first);
  foreign::await_task(tcs.get_task(), second);
  foreign::await_value_task(tpl::value_task<int>(tcs.get_task()), third);
  EXPECT_EQ(first->value.load(), 0);
  EXPECT_EQ(second->value.load(), 0);
  EXPECT_EQ(third->value.load(), 0);

  tcs.set_result(42);
  // The first waiter continues on the completing thread, inside set_result; the others through
  // the pool.
  EXPECT_EQ(first->value.load(), 42);
  EXPECT_EQ(first->thread.load(), std::this_thread::get_id());
  ASSERT_TRUE(second->done.get_task().wait_for(std::chrono::seconds(10)));
  ASSERT_TRUE(third->done.get_task().wait_for(std::chrono::seconds(10)));
  EXPECT_EQ(second->value.load(), 42);
  EXPECT_EQ(third->value.load(), 42);
  EXPECT_NE(second->thread.load(), std::this_thread::get_id());
  EXPECT_NE(third->thread.load(), std::this_thread::get_id());
}

TEST(task, a_coroutine_that_is_not_tpls_continues_at_once_on_a_completed_task) {
  auto out = std::make_shared<foreign::outcome>();
  foreign::await_task(tpl::task_from_result(5), out);
  EXPECT_EQ(out->value.load(), 5);
  EXPECT_EQ(out->thread.load(), std::this_thread::get_id());
}

}  // namespace task_test_cpp
