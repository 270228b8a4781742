// Deep chains: a million tasks that complete one another must never overflow the stack, in any
// build configuration (Debug + ASan at -O0 included): neither while completing nor while the chain
// is destroyed afterwards. The workloads are those of seed 001 ("Myriads of running tasks in C#").
#include <gtest/gtest.h>

#include <thread>
#include <tuple>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace deep_chain_test_cpp {

namespace {

// Seed 001's chain: each link awaits the previous one and adds 1.
tpl::task<int> add_one(tpl::task<int> in) { co_return 1 + co_await in; }

// Seed 001's recursive async count, each level deferred through the pool (its Defer).
tpl::task<int> count_deferred(int n) {
  if (n == 0) co_return 0;
  co_return 1 + co_await tpl::run([n] { return count_deferred(n - 1); });
}

// The same count written as seed 001 wrote it: Defer(...).ContinueWith(rec => rec.Result + 1).
tpl::task<int> count_with_continue_with(int n) {
  if (n == 0) return tpl::task_from_result(0);
  return tpl::run([n] { return count_with_continue_with(n - 1); })
      .continue_with([](tpl::task<int>& rec) { return rec.get() + 1; });
}

// A stack overflow ends the whole process, so each deep chain runs in a child process (see
// expect_passes_in_a_child_process): an overflow fails that one test (killed by SIGSEGV, or ASan's
// "stack-overflow" report in the output) rather than ending the run. Each scenario builds the
// chain, completes it, drops it, and returns whether the result was right.
using tpl_test::check;
using tpl_test::check_eq;
using tpl_test::expect_passes_in_a_child_process;
using tpl_test::progress;

constexpr int kChainLinks = 1'000'000;
// Seed 001 counted to 100,000; the issue asks for 1,000,000 in every configuration (a few seconds
// under ASan at -O0).
constexpr int kCountDepth = 1'000'000;
constexpr int kSyncChainLinks = 100'000;

}  // namespace

TEST(deep_chain, million_link_chain_completed_on_the_calling_thread_yields_the_sum) {
  expect_passes_in_a_child_process([] {
    bool ok = true;
    {
      tpl::task_completion_source<int> tcs;
      tpl::task<int> right = tcs.get_task();
      for (int i = 0; i < kChainLinks; ++i) right = add_one(right);
      ok &= check(!right.is_completed(), "the chain is pending before set_result");

      tcs.set_result(-1);

      // The links complete inline through the trampoline, which moves on to the pool whenever
      // the nesting gets deep, so the end of the chain may complete after set_result returns.
      ok &= check_eq(right.get(), kChainLinks - 1, "final result");
      progress("chain completed and checked; destroying it");
    }  // the whole chain is destroyed here
    return ok;
  });
}

TEST(deep_chain, million_link_chain_completed_on_a_pool_thread_yields_the_sum) {
  expect_passes_in_a_child_process([] {
    bool ok = true;
    {
      tpl::task_completion_source<int> tcs;
      tpl::task<int> right = tcs.get_task();
      for (int i = 0; i < kChainLinks; ++i) right = add_one(right);

      tpl::task<> completer = tpl::run([tcs]() mutable { tcs.set_result(-1); });

      ok &= check_eq(right.get(), kChainLinks - 1, "final result");
      completer.wait();
      progress("chain completed and checked; destroying it");
    }
    return ok;
  });
}

TEST(deep_chain, million_link_chain_over_already_completed_tasks_completes_on_return) {
  // Every link awaits an already completed task: nothing suspends, each call completes before the
  // next starts. Only dropping the chain is deep here.
  expect_passes_in_a_child_process([] {
    bool ok = true;
    {
      tpl::task<int> right = tpl::task_from_result(0);
      for (int i = 0; i < kChainLinks; ++i) right = add_one(right);
      ok &= check(right.is_completed(), "completed on return");
      ok &= check_eq(right.get(), kChainLinks, "final result");
      progress("chain completed and checked; destroying it");
    }
    return ok;
  });
}

TEST(deep_chain, recursive_async_count_deferred_through_run_reaches_its_depth) {
  expect_passes_in_a_child_process(
      [] { return check_eq(count_deferred(kCountDepth).get(), kCountDepth, "count"); });
}

TEST(deep_chain, recursive_async_count_built_on_continue_with_reaches_its_depth) {
  expect_passes_in_a_child_process(
      [] { return check_eq(count_with_continue_with(kCountDepth).get(), kCountDepth, "count"); });
}

TEST(deep_chain, continue_with_execute_synchronously_chain_yields_the_sum) {
  expect_passes_in_a_child_process([] {
    bool ok = true;
    {
      tpl::task_completion_source<int> tcs;
      tpl::task<int> t = tcs.get_task();
      for (int i = 0; i < kSyncChainLinks; ++i)
        t = t.continue_with([](tpl::task<int>& prev) { return prev.get() + 1; },
                            tpl::task_continuation_options::execute_synchronously);

      tcs.set_result(0);

      ok &= check_eq(t.get(), kSyncChainLinks, "final result");
      progress("chain completed and checked; destroying it");
    }
    return ok;
  });
}

TEST(deep_chain, when_all_and_synchronous_continuation_chain_yields_the_sum) {
  expect_passes_in_a_child_process([] {
    bool ok = true;
    {
      tpl::task_completion_source<int> tcs;
      tpl::task<int> t = tcs.get_task();
      for (int i = 0; i < kSyncChainLinks; ++i)
        t = tpl::when_all(t).continue_with(
            [](tpl::task<std::tuple<int>>& all) { return std::get<0>(all.get()) + 1; },
            tpl::task_continuation_options::execute_synchronously);

      tcs.set_result(0);

      ok &= check_eq(t.get(), kSyncChainLinks, "final result");
      progress("chain completed and checked; destroying it");
    }
    return ok;
  });
}

TEST(deep_chain, chain_of_nested_when_all_completes) {
  expect_passes_in_a_child_process([] {
    bool ok = true;
    {
      tpl::task_completion_source<> tcs;
      tpl::task<> t = tcs.get_task();
      for (int i = 0; i < kSyncChainLinks; ++i) t = tpl::when_all(std::vector<tpl::task<>>{t});

      tcs.set_result();

      t.wait();
      ok &= check(t.is_completed_successfully(), "the chain completed successfully");
      progress("chain completed and checked; destroying it");
    }
    return ok;
  });
}

}  // namespace deep_chain_test_cpp
