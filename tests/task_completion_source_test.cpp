// tpl::task_completion_source<T>: completing a task by hand, once; continuations inline or
// asynchronous; broken promises; move-only results; completion racing registration.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <initializer_list>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace task_completion_source_test_cpp {

namespace {

using tpl_test::exception_of_await;

using tpl_test::holds;
using tpl_test::scaled;
using tpl_test::test_error;
using tpl_test::test_error_id;
using tpl_test::wait_inner_exceptions;

std::vector<std::exception_ptr> errors(std::initializer_list<int> ids) {
  std::vector<std::exception_ptr> out;
  for (int id : ids) out.push_back(std::make_exception_ptr(test_error(id)));
  return out;
}

tpl::task<std::thread::id> thread_after_awaiting(tpl::task<int> t) {
  co_await t;
  co_return std::this_thread::get_id();
}

tpl::task<std::unique_ptr<int>> take_by_await(tpl::task<std::unique_ptr<int>> t) {
  co_return co_await std::move(t);
}

tpl::task<> observe_by_await(tpl::task<int> t, int expected, std::atomic<int>& seen) {
  // Not `if (co_await t == expected)`: g++ 12 miscompiles a co_await inside an if condition
  // (the resumed frame is corrupt), so the awaited value goes through a variable.
  const int value = co_await t;
  if (value == expected) seen.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

// ---- completing once --------------------------------------------------------------------------

TEST(task_completion_source, task_is_pending_until_completed) {
  tpl::task_completion_source<int> tcs;
  EXPECT_EQ(tcs.get_task().status(), tpl::task_status::running);
}

TEST(task_completion_source, set_result_completes_the_task_with_the_value) {
  tpl::task_completion_source<std::string> tcs;
  tpl::task<std::string> t = tcs.get_task();
  tcs.set_result("done");
  EXPECT_TRUE(t.is_completed_successfully());
  EXPECT_EQ(t.get(), "done");
}

TEST(task_completion_source, void_source_completes_a_void_task) {
  tpl::task_completion_source<> tcs;
  tpl::task<> t = tcs.get_task();
  tcs.set_result();
  EXPECT_TRUE(t.is_completed_successfully());
}

TEST(task_completion_source, every_get_task_returns_the_same_task) {
  tpl::task_completion_source<int> tcs;
  EXPECT_TRUE(tcs.get_task() == tcs.get_task());
}

TEST(task_completion_source, copies_complete_the_same_task) {
  tpl::task_completion_source<int> tcs;
  tpl::task_completion_source<int> copy = tcs;
  copy.set_result(3);
  EXPECT_EQ(tcs.get_task().get(), 3);
  EXPECT_FALSE(tcs.try_set_result(4));
}

TEST(task_completion_source, try_set_result_returns_false_once_completed) {
  tpl::task_completion_source<int> tcs;
  EXPECT_TRUE(tcs.try_set_result(1));
  EXPECT_FALSE(tcs.try_set_result(2));
  EXPECT_EQ(tcs.get_task().get(), 1);
}

TEST(task_completion_source, try_set_exception_returns_false_once_completed) {
  tpl::task_completion_source<int> tcs;
  tcs.set_result(1);
  EXPECT_FALSE(tcs.try_set_exception(std::make_exception_ptr(test_error(1))));
  EXPECT_FALSE(tcs.try_set_exception(errors({1, 2})));
  EXPECT_TRUE(tcs.get_task().is_completed_successfully());
}

TEST(task_completion_source, try_set_canceled_returns_false_once_completed) {
  tpl::task_completion_source<int> tcs;
  tcs.set_exception(std::make_exception_ptr(test_error(1)));
  EXPECT_FALSE(tcs.try_set_canceled());
  EXPECT_TRUE(tcs.get_task().is_faulted());
}

TEST(task_completion_source, try_set_result_returns_false_after_cancellation) {
  tpl::task_completion_source<int> tcs;
  EXPECT_TRUE(tcs.try_set_canceled());
  EXPECT_FALSE(tcs.try_set_result(1));
  EXPECT_TRUE(tcs.get_task().is_canceled());
}

TEST(task_completion_source, set_result_twice_throws_invalid_operation) {
  tpl::task_completion_source<int> tcs;
  tcs.set_result(1);
  EXPECT_THROW(tcs.set_result(2), tpl::invalid_operation);
  EXPECT_EQ(tcs.get_task().get(), 1);
}

TEST(task_completion_source, set_exception_after_completion_throws_invalid_operation) {
  tpl::task_completion_source<int> tcs;
  tcs.set_result(1);
  EXPECT_THROW(tcs.set_exception(std::make_exception_ptr(test_error(1))), tpl::invalid_operation);
}

TEST(task_completion_source, set_canceled_after_completion_throws_invalid_operation) {
  tpl::task_completion_source<> tcs;
  tcs.set_canceled();
  EXPECT_THROW(tcs.set_canceled(), tpl::invalid_operation);
}

// ---- faults and cancellation ------------------------------------------------------------------

TEST(task_completion_source, set_exception_faults_the_task) {
  tpl::task_completion_source<int> tcs;
  tcs.set_exception(std::make_exception_ptr(test_error(4)));
  tpl::task<int> t = tcs.get_task();
  EXPECT_TRUE(t.is_faulted());
  EXPECT_EQ(test_error_id(exception_of_await(t).get()), 4);
  auto inner = wait_inner_exceptions(t);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(test_error_id(inner[0]), 4);
}

TEST(task_completion_source, set_exception_with_several_exceptions_wait_reports_them_all_in_order) {
  tpl::task_completion_source<int> tcs;
  tcs.set_exception(errors({1, 2, 3}));
  auto inner = wait_inner_exceptions(tcs.get_task());
  ASSERT_EQ(inner.size(), 3u);
  EXPECT_EQ(test_error_id(inner[0]), 1);
  EXPECT_EQ(test_error_id(inner[1]), 2);
  EXPECT_EQ(test_error_id(inner[2]), 3);
}

TEST(task_completion_source, set_exception_with_several_exceptions_await_rethrows_the_first) {
  tpl::task_completion_source<int> tcs;
  tcs.set_exception(errors({1, 2}));
  EXPECT_EQ(test_error_id(exception_of_await(tcs.get_task()).get()), 1);
}

TEST(task_completion_source, set_exception_with_several_exceptions_exception_holds_them_all) {
  tpl::task_completion_source<int> tcs;
  tcs.set_exception(errors({1, 2}));
  try {
    std::rethrow_exception(tcs.get_task().exception());
  } catch (const tpl::aggregate_exception& e) {
    ASSERT_EQ(e.size(), 2u);
    EXPECT_EQ(test_error_id(e.inner_exceptions()[0]), 1);
    EXPECT_EQ(test_error_id(e.inner_exceptions()[1]), 2);
  } catch (...) {
    ADD_FAILURE() << "exception() is not an aggregate_exception";
  }
}

TEST(task_completion_source, try_set_exception_with_several_exceptions_faults_with_all_of_them) {
  tpl::task_completion_source<int> tcs;
  EXPECT_TRUE(tcs.try_set_exception(errors({4, 5})));
  auto inner = wait_inner_exceptions(tcs.get_task());
  ASSERT_EQ(inner.size(), 2u);
  EXPECT_EQ(test_error_id(inner[0]), 4);
  EXPECT_EQ(test_error_id(inner[1]), 5);
}

TEST(task_completion_source, set_exception_with_several_exceptions_after_completion_throws_invalid_operation) {
  tpl::task_completion_source<int> tcs;
  tcs.set_result(1);
  EXPECT_THROW(tcs.set_exception(errors({1, 2})), tpl::invalid_operation);
}

TEST(task_completion_source, set_exception_accepts_an_exception_object) {
  tpl::task_completion_source<> tcs;
  tcs.set_exception(test_error(6));
  EXPECT_EQ(test_error_id(wait_inner_exceptions(tcs.get_task()).at(0)), 6);
  EXPECT_FALSE(tcs.try_set_exception(test_error(7)));
}

// As .NET's TrySetException(new OperationCanceledException()): Faulted; set_canceled cancels.
TEST(task_completion_source, set_exception_with_operation_canceled_faults_the_task_as_in_dotnet) {
  tpl::task_completion_source<int> tcs;
  tcs.set_exception(std::make_exception_ptr(tpl::operation_canceled()));
  tpl::task<int> t = tcs.get_task();
  EXPECT_TRUE(t.is_faulted());
  EXPECT_FALSE(t.is_canceled());
  EXPECT_TRUE(holds<tpl::operation_canceled>(exception_of_await(t).get()));

  tpl::task_completion_source<> by_object;
  EXPECT_TRUE(by_object.try_set_exception(tpl::operation_canceled()));
  EXPECT_TRUE(by_object.get_task().is_faulted());
}

TEST(task_completion_source, set_canceled_cancels_the_task) {
  tpl::task_completion_source<int> tcs;
  tcs.set_canceled();
  tpl::task<int> t = tcs.get_task();
  EXPECT_TRUE(t.is_canceled());
  EXPECT_TRUE(holds<tpl::operation_canceled>(exception_of_await(t).get()));
  auto inner = wait_inner_exceptions(t);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_TRUE(holds<tpl::operation_canceled>(inner[0]));
}

TEST(task_completion_source, exception_thrown_by_the_result_constructor_faults_the_task) {
  struct throws_on_copy {
    throws_on_copy() = default;
    throws_on_copy(const throws_on_copy&) { throw test_error(77); }
  };
  tpl::task_completion_source<throws_on_copy> tcs;
  throws_on_copy value;
  EXPECT_TRUE(tcs.try_set_result(value));
  tpl::task<throws_on_copy> t = tcs.get_task();
  EXPECT_TRUE(t.is_faulted());
  auto inner = wait_inner_exceptions(t);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(test_error_id(inner[0]), 77);
}

// ---- broken promise ---------------------------------------------------------------------------

TEST(task_completion_source, destroying_every_copy_without_completing_faults_with_invalid_operation) {
  tpl::task<int> t;
  {
    tpl::task_completion_source<int> tcs;
    tpl::task_completion_source<int> copy = tcs;
    t = tcs.get_task();
  }
  ASSERT_TRUE(t.is_completed());
  EXPECT_TRUE(t.is_faulted());
  auto inner = wait_inner_exceptions(t);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_TRUE(holds<tpl::invalid_operation>(inner[0]));
  EXPECT_TRUE(holds<tpl::invalid_operation>(exception_of_await(t).get()));
}

TEST(task_completion_source, copies_destroyed_concurrently_break_the_promise_exactly_once) {
  const int rounds = scaled(2'000, 500);
  constexpr int kCopies = 4;
  int broken = 0;
  for (int round = 0; round < rounds; ++round) {
    tpl::task<int> t;
    std::vector<std::thread> threads;
    std::latch start(kCopies);
    {
      tpl::task_completion_source<int> tcs;
      t = tcs.get_task();
      std::vector<tpl::task_completion_source<int>> copies(kCopies, tcs);
      for (auto& c : copies) {
        threads.emplace_back([&start, c = std::move(c)]() mutable {
          start.arrive_and_wait();
          tpl::task_completion_source<int> dropped = std::move(c);
        });
      }
    }  // the original goes here; the copies go on their threads
    for (auto& th : threads) th.join();
    ASSERT_TRUE(t.is_completed());
    auto inner = wait_inner_exceptions(t);
    if (inner.size() == 1 && holds<tpl::invalid_operation>(inner[0])) ++broken;
  }
  EXPECT_EQ(broken, rounds);
}

TEST(task_completion_source, destroying_one_copy_of_several_leaves_the_task_pending) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> t = tcs.get_task();
  { tpl::task_completion_source<int> copy = tcs; }
  EXPECT_FALSE(t.is_completed());
  tcs.set_result(1);
  EXPECT_EQ(t.get(), 1);
}

TEST(task_completion_source, broken_promise_resumes_a_waiting_awaiter) {
  tpl::task<std::exception_ptr> awaiter;
  {
    tpl::task_completion_source<int> tcs;
    awaiter = exception_of_await(tcs.get_task());
    EXPECT_FALSE(awaiter.is_completed());
  }
  EXPECT_TRUE(holds<tpl::invalid_operation>(awaiter.get()));
}

TEST(task_completion_source, moved_into_source_keeps_the_promise_alive) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> t = tcs.get_task();
  tpl::task_completion_source<int> moved = std::move(tcs);
  EXPECT_FALSE(t.is_completed());
  moved.set_result(9);
  EXPECT_EQ(t.get(), 9);
}

// ---- where continuations run ------------------------------------------------------------------

TEST(task_completion_source, first_awaiter_resumes_inline_on_the_thread_calling_set_result) {
  tpl::task_completion_source<int> tcs;
  tpl::task<std::thread::id> resumed_on = thread_after_awaiting(tcs.get_task());
  tcs.set_result(1);
  EXPECT_TRUE(resumed_on.is_completed());
  EXPECT_EQ(resumed_on.get(), std::this_thread::get_id());
}

TEST(task_completion_source, run_continuations_asynchronously_does_not_resume_on_the_setter_thread) {
  tpl::task_completion_source<int> tcs(tpl::task_creation_options::run_continuations_asynchronously);
  tpl::task<std::thread::id> resumed_on = thread_after_awaiting(tcs.get_task());
  tcs.set_result(1);
  EXPECT_NE(resumed_on.get(), std::this_thread::get_id());
}

TEST(task_completion_source, run_continuations_asynchronously_applies_to_faults_too) {
  tpl::task_completion_source<int> tcs(tpl::task_creation_options::run_continuations_asynchronously);
  tpl::task<std::thread::id> resumed_on = thread_after_awaiting(tcs.get_task());
  tcs.set_exception(std::make_exception_ptr(test_error(1)));
  EXPECT_THROW(resumed_on.wait(), tpl::aggregate_exception);
  // The awaiter rethrew on some thread; what matters is that set_exception returned before that.
}

TEST(task_completion_source, run_continuations_asynchronously_runs_execute_synchronously_continuations_off_the_setter) {
  tpl::task_completion_source<int> tcs(tpl::task_creation_options::run_continuations_asynchronously);
  tpl::task<std::thread::id> ran_on = tcs.get_task().continue_with(
      [] { return std::this_thread::get_id(); }, tpl::task_continuation_options::execute_synchronously);
  tcs.set_result(1);
  EXPECT_NE(ran_on.get(), std::this_thread::get_id());
}

// ---- move-only results ------------------------------------------------------------------------

TEST(task_completion_source, move_only_result_is_moved_out_by_awaiting_an_rvalue_task) {
  tpl::task<std::unique_ptr<int>> t;
  {
    tpl::task_completion_source<std::unique_ptr<int>> tcs;
    t = tcs.get_task();
    tcs.set_result(std::make_unique<int>(5));
  }  // the source's reference is gone: t is the sole owner
  tpl::task<std::unique_ptr<int>> taken = take_by_await(std::move(t));
  std::unique_ptr<int> p = std::move(taken).get();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);
}

TEST(task_completion_source, move_only_result_cannot_be_taken_while_the_source_still_shares_the_task) {
  // An awaiter resumed inside set_result shares the task with the source that is completing it.
  tpl::task_completion_source<std::unique_ptr<int>> tcs;
  tpl::task<std::unique_ptr<int>> taken = take_by_await(tcs.get_task());
  tcs.set_result(std::make_unique<int>(5));
  auto inner = wait_inner_exceptions(taken);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_TRUE(holds<tpl::invalid_operation>(inner[0]));
}

TEST(task_completion_source, move_only_result_is_moved_out_by_get_on_the_sole_owner) {
  tpl::task<std::unique_ptr<int>> t;
  {
    tpl::task_completion_source<std::unique_ptr<int>> tcs;
    t = tcs.get_task();
    tcs.set_result(std::make_unique<int>(8));
  }
  std::unique_ptr<int> p = std::move(t).get();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 8);
}

TEST(task_completion_source, move_only_result_shared_by_several_handles_cannot_be_taken) {
  tpl::task_completion_source<std::unique_ptr<int>> tcs;
  tcs.set_result(std::make_unique<int>(8));
  tpl::task<std::unique_ptr<int>> t = tcs.get_task();
  tpl::task<std::unique_ptr<int>> other = t;
  EXPECT_THROW((void)std::move(t).get(), tpl::invalid_operation);
  EXPECT_EQ(*other.get(), 8);  // the value was left in place
}

TEST(task_completion_source, move_only_result_can_be_read_by_reference_from_a_shared_task) {
  tpl::task_completion_source<std::unique_ptr<int>> tcs;
  tcs.set_result(std::make_unique<int>(2));
  tpl::task<std::unique_ptr<int>> t = tcs.get_task();
  EXPECT_EQ(*t.get(), 2);
}

// ---- completion racing registration -----------------------------------------------------------

namespace {

// Per way of registering: how many registrations observed their round's result.
struct race_counters {
  std::atomic<int> awaited{0};
  std::atomic<int> waited{0};
  std::atomic<int> timed_waited{0};
  std::atomic<int> continued{0};
  std::atomic<int> joined{0};
  std::atomic<int> raced{0};
};

}  // namespace

// Each round, one thread completes a fresh source while three others register on its task at the
// same moment, each in one of the ways there are (co_await, wait(), get(), a timed wait,
// continue_with, when_all, when_any), rotating every round. Every registration must observe the
// round's result exactly once.
TEST(task_completion_source, completion_racing_registration_from_several_threads_is_observed_exactly_once) {
  const int rounds = scaled(2'000, 1'000);
  constexpr int kRegistrars = 3;  // plus one completer thread
  race_counters counters;

  tpl::task_completion_source<int> tcs;  // replaced each round, before the start barrier
  int expected = 0;
  std::vector<std::vector<tpl::task<>>> outstanding(kRegistrars);
  tpl_test::barrier start(kRegistrars + 2);  // registrars, completer, main
  tpl_test::barrier finish(kRegistrars + 2);

  std::vector<std::thread> threads;
  for (int r = 0; r < kRegistrars; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 0; round < rounds; ++round) {
        start.arrive_and_wait();
        tpl::task<int> t = tcs.get_task();
        const int want = expected;
        switch ((round + r) % 3) {
          case 0:
            outstanding[r].push_back(observe_by_await(t, want, counters.awaited));
            if (t.get() == want) counters.waited.fetch_add(1, std::memory_order_relaxed);
            break;
          case 1:
            outstanding[r].push_back(t.continue_with([want, &counters](tpl::task<int>& a) {
              if (a.get() == want) counters.continued.fetch_add(1, std::memory_order_relaxed);
            }));
            if (t.wait_for(std::chrono::seconds(0))) {
              // Gave up or not, a timed wait must leave the task usable; count the successes.
              if (t.get() == want) counters.timed_waited.fetch_add(1, std::memory_order_relaxed);
            }
            t.wait();
            break;
          default:
            outstanding[r].push_back(tpl::when_all(t, tpl::task_from_result(1))
                                         .continue_with(
                                             [want, &counters](tpl::task<std::tuple<int, int>>& a) {
                                               if (std::get<0>(a.get()) == want)
                                                 counters.joined.fetch_add(1, std::memory_order_relaxed);
                                             },
                                             tpl::task_continuation_options::execute_synchronously));
            outstanding[r].push_back(tpl::when_any(t, tcs.get_task()).continue_with(
                [want, &counters](tpl::task<tpl::task<int>>& w) {
                  if (w.get().get() == want) counters.raced.fetch_add(1, std::memory_order_relaxed);
                },
                tpl::task_continuation_options::execute_synchronously));
            break;
        }
        finish.arrive_and_wait();
      }
    });
  }
  threads.emplace_back([&] {
    for (int round = 0; round < rounds; ++round) {
      start.arrive_and_wait();
      tcs.set_result(expected);
      finish.arrive_and_wait();
    }
  });

  int expected_awaited = 0, expected_continued = 0, expected_joined = 0;
  for (int round = 0; round < rounds; ++round) {
    tcs = tpl::task_completion_source<int>();
    expected = round;
    for (int r = 0; r < kRegistrars; ++r) {
      switch ((round + r) % 3) {
        case 0:
          ++expected_awaited;
          break;
        case 1:
          ++expected_continued;
          break;
        default:
          ++expected_joined;
          break;
      }
    }
    start.arrive_and_wait();
    finish.arrive_and_wait();
    for (auto& list : outstanding)
      for (auto& t : list) t.wait();
    for (auto& list : outstanding) list.clear();
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(counters.awaited.load(), expected_awaited);
  EXPECT_EQ(counters.waited.load(), expected_awaited);
  EXPECT_EQ(counters.continued.load(), expected_continued);
  EXPECT_LE(counters.timed_waited.load(), expected_continued);
  EXPECT_EQ(counters.joined.load(), expected_joined);
  EXPECT_EQ(counters.raced.load(), expected_joined);
}

TEST(task_completion_source, concurrent_try_set_calls_elect_exactly_one_completer) {
  const int rounds = scaled(2'000, 1'000);
  constexpr int kThreads = 4;
  std::atomic<int> winners{0};
  tpl::task_completion_source<int> tcs;
  tpl_test::barrier start(kThreads + 1);
  tpl_test::barrier finish(kThreads + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < rounds; ++round) {
        start.arrive_and_wait();
        bool won = false;
        switch (i % 3) {
          case 0:
            won = tcs.try_set_result(i);
            break;
          case 1:
            won = tcs.try_set_exception(std::make_exception_ptr(test_error(i)));
            break;
          default:
            won = tcs.try_set_canceled();
            break;
        }
        if (won) winners.fetch_add(1, std::memory_order_relaxed);
        finish.arrive_and_wait();
      }
    });
  }
  int completed = 0;
  for (int round = 0; round < rounds; ++round) {
    tcs = tpl::task_completion_source<int>();
    start.arrive_and_wait();
    finish.arrive_and_wait();
    if (tcs.get_task().is_completed()) ++completed;
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(winners.load(), rounds);
  EXPECT_EQ(completed, rounds);
}

}  // namespace task_completion_source_test_cpp
