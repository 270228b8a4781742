// tpl::when_any: completes with the first task to complete (the task, not its value); never
// faults itself; takes its registrations back from the losers.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace when_any_test_cpp {

namespace {

using tpl_test::ref_count;
using tpl_test::scaled;
using tpl_test::test_error;

tpl::task<int> yields_then_returns(int v) {
  co_await tpl::yield();
  co_return v;
}

tpl::task<int> value_of_winner(tpl::task<int> a, tpl::task<int> b) {
  tpl::task<int> winner = co_await tpl::when_any(a, b);
  co_return co_await winner;
}

tpl::task<> count_completion(tpl::task<int> t, std::atomic<int>& count) {
  co_await t;
  count.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

// ---- which task wins --------------------------------------------------------------------------

TEST(when_any, result_is_the_first_task_to_complete) {
  tpl::task_completion_source<int> a, b, c;
  tpl::task<tpl::task<int>> any = tpl::when_any(a.get_task(), b.get_task(), c.get_task());
  static_assert(std::is_same_v<decltype(any), tpl::task<tpl::task<int>>>);
  EXPECT_FALSE(any.is_completed());

  b.set_result(2);

  EXPECT_TRUE(any.is_completed_successfully());
  EXPECT_TRUE(any.get() == b.get_task());
  a.set_result(1);
  c.set_result(3);
  EXPECT_TRUE(any.get() == b.get_task());  // later completions do not change the winner
}

TEST(when_any, two_argument_form_returns_the_first_to_complete) {
  tpl::task_completion_source<int> a, b;
  auto any = tpl::when_any(a.get_task(), b.get_task());
  a.set_result(1);
  EXPECT_TRUE(any.get() == a.get_task());
  b.set_result(2);
}

TEST(when_any, two_argument_form_with_an_already_completed_argument_completes_synchronously) {
  tpl::task_completion_source<int> pending;
  tpl::task<int> done = tpl::task_from_result(1000);
  auto any = tpl::when_any(pending.get_task(), done);
  EXPECT_TRUE(any.is_completed_successfully());
  EXPECT_TRUE(any.get() == done);
}

TEST(when_any, two_argument_form_prefers_the_first_when_both_are_completed) {
  tpl::task<int> first = tpl::task_from_result(1000);
  tpl::task<int> second = tpl::task_from_result(2000);
  EXPECT_TRUE(tpl::when_any(first, second).get() == first);
}

TEST(when_any, variadic_form_with_an_already_completed_argument_completes_synchronously) {
  tpl::task_completion_source<int> a, c;
  tpl::task<int> done = tpl::task_from_result(1000);
  auto any = tpl::when_any(a.get_task(), done, c.get_task());
  EXPECT_TRUE(any.is_completed());
  EXPECT_TRUE(any.get() == done);
}

TEST(when_any, range_result_is_the_first_task_to_complete) {
  std::vector<tpl::task_completion_source<int>> sources(5);
  std::vector<tpl::task<int>> tasks;
  for (auto& s : sources) tasks.push_back(s.get_task());
  auto any = tpl::when_any(tasks);
  static_assert(std::is_same_v<decltype(any), tpl::task<tpl::task<int>>>);

  sources[3].set_result(3);

  EXPECT_TRUE(any.is_completed());
  EXPECT_TRUE(any.get() == tasks[3]);
  for (int i : {0, 1, 2, 4}) sources[i].set_result(i);
}

TEST(when_any, range_with_an_already_completed_task_completes_synchronously) {
  tpl::task_completion_source<int> pending;
  std::vector<tpl::task<int>> tasks{pending.get_task(), tpl::task_from_result(1000)};
  auto any = tpl::when_any(tasks);
  EXPECT_TRUE(any.is_completed());
  EXPECT_TRUE(any.get() == tasks[1]);
}

TEST(when_any, of_void_tasks_returns_the_winner) {
  tpl::task_completion_source<> a, b;
  tpl::task<tpl::task<>> any = tpl::when_any(a.get_task(), b.get_task());
  b.set_result();
  EXPECT_TRUE(any.get() == b.get_task());
  a.set_result();
}

TEST(when_any, awaiting_it_yields_the_winner_whose_value_can_then_be_awaited) {
  EXPECT_EQ(value_of_winner(tpl::task_from_result(1000), yields_then_returns(1)).get(), 1000);
}

TEST(when_any, waits_for_tasks_completing_on_the_pool) {
  tpl::task_completion_source<int> never;  // completed at the end only
  tpl::task<int> pool_task = yields_then_returns(5);
  auto any = tpl::when_any(never.get_task(), pool_task);
  EXPECT_TRUE(any.get() == pool_task);
  never.set_result(0);
}

// ---- outcome ----------------------------------------------------------------------------------

TEST(when_any, does_not_fault_when_the_winner_faulted) {
  tpl::task_completion_source<int> a, b;
  auto any = tpl::when_any(a.get_task(), b.get_task());
  a.set_exception(std::make_exception_ptr(test_error(1)));
  EXPECT_TRUE(any.is_completed_successfully());
  tpl::task<int> winner = any.get();
  EXPECT_TRUE(winner.is_faulted());
  EXPECT_THROW((void)winner.get(), tpl::aggregate_exception);
  b.set_result(2);
}

TEST(when_any, does_not_cancel_when_the_winner_was_canceled) {
  tpl::task_completion_source<int> a, b, c;
  auto any = tpl::when_any(a.get_task(), b.get_task(), c.get_task());
  c.set_canceled();
  EXPECT_TRUE(any.is_completed_successfully());
  EXPECT_TRUE(any.get().is_canceled());
  a.set_result(1);
  b.set_result(2);
}

TEST(when_any, losers_keep_running_and_complete_normally) {
  tpl::task_completion_source<int> a, b;
  tpl::task<int> loser = b.get_task();
  auto any = tpl::when_any(a.get_task(), loser);
  a.set_result(1);
  EXPECT_FALSE(loser.is_completed());
  b.set_result(2);
  EXPECT_EQ(loser.get(), 2);
}

// ---- registrations on long-lived tasks ---------------------------------------------------------

TEST(when_any, repeated_against_a_long_lived_task_does_not_accumulate_waiters) {
  constexpr int iterations = 10'000;
  tpl::task_completion_source<int> long_lived_source;
  tpl::task<int> long_lived = long_lived_source.get_task();
  std::atomic<int> long_lived_completions{0};
  tpl::task<> observer = count_completion(long_lived, long_lived_completions);
  const std::uint32_t baseline_refs = ref_count(long_lived);

  for (int i = 0; i < iterations; ++i) {
    tpl::task_completion_source<int> tcs;
    auto any = tpl::when_any(long_lived, tcs.get_task());
    ASSERT_FALSE(any.is_completed());
    tcs.set_result(i);
    ASSERT_TRUE(any.get() == tcs.get_task());
  }

  // Every when_any is gone: none of them still holds the long-lived task through a registration.
  EXPECT_EQ(ref_count(long_lived), baseline_refs);

  long_lived_source.set_result(-1);
  observer.wait();
  EXPECT_EQ(long_lived_completions.load(), 1);
}

TEST(when_any, range_repeated_against_a_long_lived_task_does_not_accumulate_waiters) {
  constexpr int iterations = 10'000;
  tpl::task_completion_source<int> long_lived_source;
  tpl::task<int> long_lived = long_lived_source.get_task();
  const std::uint32_t baseline_refs = ref_count(long_lived);

  for (int i = 0; i < iterations; ++i) {
    tpl::task_completion_source<int> tcs;
    auto any = tpl::when_any(std::vector{long_lived, tcs.get_task(), long_lived});
    tcs.set_result(i);
    ASSERT_TRUE(any.get() == tcs.get_task());
  }

  EXPECT_EQ(ref_count(long_lived), baseline_refs);
  long_lived_source.set_result(-1);
  EXPECT_EQ(long_lived.get(), -1);
}

TEST(when_any, dropping_the_result_before_any_input_completes_leaks_nothing) {
  // The when_any state holds both input tasks, so their results live as long as it does: once
  // every handle is gone, a result still alive means the state was never freed (LeakSanitizer in
  // debug-asan reports the block as well).
  struct result_tag {};
  using result = tpl_test::counted<result_tag>;
  {
    tpl::task_completion_source<result> a, b;
    tpl::task<result> ta = a.get_task();
    tpl::task<result> tb = b.get_task();
    const std::uint32_t baseline_a = ref_count(ta);
    const std::uint32_t baseline_b = ref_count(tb);
    { auto any = tpl::when_any(ta, tb); }
    EXPECT_GT(ref_count(tb), baseline_b);  // still registered on b: the state is alive
    a.set_result(result{});
    // a won: the state let go of both inputs, the loser's registration included.
    EXPECT_EQ(ref_count(ta), baseline_a);
    EXPECT_EQ(ref_count(tb), baseline_b);
    b.set_result(result{});
    EXPECT_EQ(result::live(), 2);  // one in each completed task
  }
  EXPECT_EQ(result::live(), 0);
}

TEST(when_any, completion_racing_registration_from_another_thread_picks_exactly_one_winner) {
  const int rounds = scaled(2'000, 300);
  for (int round = 0; round < rounds; ++round) {
    tpl::task_completion_source<int> a, b, c;
    tpl::task<> completer = tpl::run([a, c]() mutable {
      c.set_result(3);
      a.set_result(1);
    });
    auto any = tpl::when_any(a.get_task(), b.get_task(), c.get_task());
    tpl::task<int> winner = any.get();
    EXPECT_TRUE(winner == a.get_task() || winner == c.get_task());
    EXPECT_TRUE(winner.is_completed_successfully());
    completer.wait();
    b.set_result(2);
  }
}

}  // namespace when_any_test_cpp
