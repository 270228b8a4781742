// tpl::spawn (fork-join with one frame per child) and the start guard that also keeps deep
// recursion of hot coroutines off the end of the stack (tpl/detail/start_guard.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <thread>

#include <tpl/testing/deterministic_scheduler.hpp>
#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace spawn_test_cpp {

namespace {

tpl::task<int> record_and_return(std::atomic<bool>& ran, int v) {
  ran = true;
  co_return v;
}

tpl::task<std::thread::id> thread_of_body() { co_return std::this_thread::get_id(); }

tpl::task<long> fib(int n) {
  if (n < 2) co_return n;
  tpl::task<long> left = tpl::spawn([n] { return fib(n - 1); });
  const long right = co_await fib(n - 2);
  co_return co_await left + right;
}

tpl::task<std::int64_t> skynet(std::int64_t num, std::int64_t size) {
  if (size == 1) co_return num;
  const std::int64_t sub = size / 10;
  tpl::task<std::int64_t> children[9];
  for (int i = 0; i < 9; ++i) children[i] = tpl::spawn([=] { return skynet(num + i * sub, sub); });
  std::int64_t sum = co_await skynet(num + 9 * sub, sub);
  for (int i = 8; i >= 0; --i) sum += co_await children[i];  // newest first
  co_return sum;
}

// Each level spawns the next and awaits it at once: on one worker, every await takes the child
// back from the top of the deque and runs it inline, `depth` resumptions deep.
tpl::task<int> spawned_chain(int depth) {
  if (depth == 0) co_return 0;
  tpl::task<int> next = tpl::spawn([depth] { return spawned_chain(depth - 1); });
  co_return 1 + co_await next;
}

tpl::task<int> wait_for_gate(tpl::task<int> gate) { co_return 1 + co_await gate; }

tpl::task<int> record_and_return_7() { co_return 7; }

tpl::thread_pool_options one_worker() {
  tpl::thread_pool_options o;
  o.thread_count = 1;
  o.max_threads = 1;
  return o;
}

// Hot, no deferral, one stack frame per level when nothing stops it.
tpl::task<std::int64_t> count(std::int64_t n) {
  if (n == 0) co_return 0;
  co_return 1 + co_await count(n - 1);
}

}  // namespace

TEST(spawn, queues_the_coroutine_instead_of_running_it_inline) {
  tpl::testing::deterministic_scheduler sched(1);
  std::atomic<bool> ran{false};
  bool ran_at_spawn = true;
  tpl::task<int> driver = sched.start([&]() -> tpl::task<int> {
    tpl::task<int> child = tpl::spawn([&] { return record_and_return(ran, 5); });
    ran_at_spawn = ran.load();
    co_return co_await child;
  });
  sched.run_until_idle();
  EXPECT_FALSE(ran_at_spawn);
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(driver.get(), 5);
}

TEST(spawn, from_a_thread_outside_the_pool_the_body_runs_on_the_pool) {
  tpl::task<std::thread::id> t = tpl::spawn([] { return thread_of_body(); });
  EXPECT_NE(t.get(), std::this_thread::get_id());
}

TEST(spawn, only_the_first_coroutine_is_queued_and_the_request_does_not_leak) {
  tpl::testing::deterministic_scheduler sched(1);
  std::atomic<bool> first{false};
  std::atomic<bool> later{false};
  bool later_ran_inline = false;
  tpl::task<> driver = sched.start([&]() -> tpl::task<> {
    tpl::task<int> a = tpl::spawn([&] { return record_and_return(first, 1); });
    tpl::task<int> b = record_and_return(later, 2);  // an ordinary hot call afterwards
    later_ran_inline = later.load();
    co_await a;
    co_await b;
  });
  sched.run_until_idle();
  driver.get();
  EXPECT_TRUE(later_ran_inline);
  EXPECT_TRUE(first.load());
}

TEST(spawn, a_function_that_starts_no_coroutine_returns_its_task_and_withdraws_the_request) {
  std::atomic<bool> ran{false};
  tpl::task<int> done = tpl::spawn([] { return tpl::task_from_result(3); });
  EXPECT_EQ(done.get(), 3);
  tpl::task<int> hot = record_and_return(ran, 4);
  EXPECT_TRUE(ran.load());  // not deferred by a request left behind
  EXPECT_EQ(hot.get(), 4);
}

TEST(spawn, a_function_that_throws_propagates_and_withdraws_the_request) {
  EXPECT_THROW((void)tpl::spawn([]() -> tpl::task<int> { throw std::runtime_error("no"); }),
               std::runtime_error);
  std::atomic<bool> ran{false};
  tpl::task<int> hot = record_and_return(ran, 1);
  EXPECT_TRUE(ran.load());
  hot.get();
}

TEST(spawn, a_spawned_task_awaited_elsewhere_still_completes) {
  // Awaited from the main thread (not the worker whose deque holds it): the awaiter waits.
  tpl::task<long> t = tpl::spawn([] { return fib(15); });
  EXPECT_EQ(t.get(), 610);
}

TEST(spawn, fib_forks_and_joins_on_the_pool) {
  const int n = tpl_test::scaled(25, 18);
  const long expected = n == 25 ? 75025 : 2584;
  EXPECT_EQ(tpl::run([=] { return fib(n); }).get(), expected);
}

TEST(spawn, skynet_sums_every_leaf) {
  const std::int64_t leaves = tpl_test::scaled(100'000, 10'000);
  EXPECT_EQ(tpl::run([=] { return skynet(0, leaves); }).get(), leaves * (leaves - 1) / 2);
}

TEST(spawn, a_value_task_function_is_accepted) {
  tpl::value_task<int> v = tpl::spawn([]() -> tpl::value_task<int> { co_return 9; });
  EXPECT_EQ(tpl::sync_wait(std::move(v)), 9);
}

TEST(spawn, a_chain_of_takebacks_deeper_than_the_inline_resume_limit_completes_on_one_worker) {
  // Past the trampoline's depth limit the awaiter leaves the child queued and waits for it, and
  // the waits unwind the stack before the rest of the chain runs.
  tpl::thread_pool pool(one_worker());
  EXPECT_EQ(tpl::run(pool, [] { return spawned_chain(200); }).get(), 200);
}

TEST(spawn, a_child_taken_back_that_then_suspends_resumes_its_awaiter) {
  // The awaiter runs the child inline; the child suspends on an unfinished task, so the awaiter
  // registers and waits; the child's completion on another thread must fire it.
  tpl::thread_pool pool(one_worker());
  tpl::task_completion_source<int> gate;
  std::atomic<bool> child_started{false};
  tpl::task<int> parent = tpl::run(pool, [&]() -> tpl::task<int> {
    tpl::task<int> child = tpl::spawn([&] {
      return [](tpl::task<int> g, std::atomic<bool>& started) -> tpl::task<int> {
        started = true;
        co_return 1 + co_await g;
      }(gate.get_task(), child_started);
    });
    co_return 1 + co_await child;
  });
  while (!child_started.load()) std::this_thread::yield();
  EXPECT_FALSE(parent.is_completed());
  gate.set_result(40);
  EXPECT_EQ(parent.get(), 42);
}

namespace {
// Runs parent on a fresh one-worker pool and returns how many work items the pool executed: a
// child taken back by its awaiter runs inside its parent's item, so the whole fork-join is one.
template <class F>
std::uint64_t items_for(F parent_fn, int expect) {
  tpl::thread_pool pool(one_worker());
  EXPECT_EQ(tpl::run(pool, parent_fn).get(), expect);
  pool.shutdown();  // joins the worker: its counters are final
  return pool.stats().items_executed;
}
}  // namespace

TEST(spawn, an_awaited_child_still_on_top_runs_inside_its_parents_item) {
  EXPECT_EQ(items_for([]() -> tpl::task<int> {
              tpl::task<int> child = tpl::spawn([] { return record_and_return_7(); });
              co_return co_await child;
            }, 7),
            1u);
}

TEST(spawn, an_awaited_value_task_child_still_on_top_runs_inside_its_parents_item) {
  EXPECT_EQ(items_for([]() -> tpl::task<int> {
              tpl::value_task<int> child = tpl::spawn([]() -> tpl::value_task<int> { co_return 7; });
              co_return co_await std::move(child);
            }, 7),
            1u);
}

TEST(spawn, a_child_whose_handle_is_shared_completes_for_every_holder) {
  // Another coroutine holds a copy of the child's handle and already waits on it when the parent
  // takes the child back and runs it: its completion must still fire that waiter.
  tpl::thread_pool pool(one_worker());
  tpl::task<int> other_waiter;
  tpl::task<int> parent = tpl::run(pool, [&]() -> tpl::task<int> {
    tpl::task<int> child = tpl::spawn([] { return wait_for_gate(tpl::task_from_result(1)); });
    tpl::task<int> above = tpl::spawn([] { return wait_for_gate(tpl::task_from_result(0)); });
    other_waiter = wait_for_gate(child);  // child is not on top: this registers and suspends
    int sum = co_await above;             // on top: taken back and run here
    sum += co_await child;                // now on top: taken back and run here
    co_return sum;
  });
  EXPECT_EQ(parent.get(), 3);
  EXPECT_EQ(other_waiter.get(), 3);
}

// ---- the stack guard ------------------------------------------------------------------------------

TEST(start_guard, a_million_levels_of_hot_recursion_complete_from_the_main_thread) {
  const std::int64_t n = tpl_test::scaled(1'000'000, 1'000'000);
  EXPECT_EQ(tpl::sync_wait(count(n)), n);
  EXPECT_NE(tpl::detail::stack_threshold_for_testing(), 0u);
}

TEST(start_guard, a_million_levels_of_hot_recursion_complete_on_a_pool_thread) {
  const std::int64_t n = tpl_test::scaled(1'000'000, 1'000'000);
  EXPECT_EQ(tpl::run([=] { return count(n); }).get(), n);
}

TEST(start_guard, shallow_recursion_is_never_deferred) {
  // Far from the threshold: everything runs inline, so the whole recursion completes in the call.
  tpl::task<std::int64_t> t = count(1000);
  EXPECT_TRUE(t.is_completed());
  EXPECT_EQ(t.get(), 1000);
}

// ---- tpl::run's start (a deferred start to the run's scheduler) ---------------------------------

namespace {
/// A scheduler that refuses every coroutine, as a closed one does.
class refusing_scheduler final : public tpl::scheduler {
 public:
  void schedule(std::coroutine_handle<>) override { throw std::runtime_error("refused"); }
};

/// No start request is left pending on this thread: the next coroutine runs inside its call.
void expect_the_next_start_inline() {
  std::atomic<bool> ran{false};
  tpl::task<int> next = record_and_return(ran, 5);
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(next.get(), 5);
}
}  // namespace

TEST(run_start, a_scheduler_that_refuses_the_work_faults_the_task_and_never_calls_the_function) {
  refusing_scheduler s;
  std::atomic<int> calls{0};
  tpl::task<int> t = tpl::run(s, [&] {
    ++calls;
    return 1;
  });
  ASSERT_TRUE(t.is_faulted());
  EXPECT_THROW(tpl::sync_wait(t), std::runtime_error);  // the scheduler's own exception
  tpl::task<> v = tpl::run(s, [&] { ++calls; });
  ASSERT_TRUE(v.is_faulted());
  tpl::task<int> u = tpl::run(s, [&]() -> tpl::task<int> {
    ++calls;
    co_return 1;
  });
  ASSERT_TRUE(u.is_faulted());
  EXPECT_EQ(calls.load(), 0);
  // The refusal leaves no request behind.
  expect_the_next_start_inline();
}

TEST(run_start, refused_on_a_pool_worker_faults_the_task_there_too) {
  refusing_scheduler s;
  tpl::task<bool> t = tpl::run([&]() -> tpl::task<bool> {
    tpl::task<int> inner = tpl::run(s, [] { return 1; });
    co_return inner.is_faulted();
  });
  EXPECT_TRUE(t.get());
}

TEST(run_start, an_awaited_run_task_is_never_taken_back_into_its_awaiters_item) {
  // Unlike a spawned child (above), a tpl::run task still queued on the awaiting worker stays
  // queued: .NET's await of Task.Run's task does not inline it either. Two items: the parent's and
  // the child's (whose completion resumes the parent inline).
  EXPECT_EQ(items_for([]() -> tpl::task<int> {
              tpl::task<int> child = tpl::run(*tpl::scheduler::current(), [] { return 7; });
              co_return co_await child;
            }, 7),
            2u);
}

TEST(run_start, a_run_inside_a_spawned_function_is_queued_as_a_run) {
  std::atomic<int> calls{0};
  tpl::task<int> t = tpl::spawn([&] {
    return tpl::run([&] {
      ++calls;
      return 3;
    });
  });
  EXPECT_EQ(t.get(), 3);
  EXPECT_EQ(calls.load(), 1);
  // Nothing is left pending.
  expect_the_next_start_inline();
}

TEST(run_start, the_function_is_not_called_inside_the_run_call) {
  // From a thread outside the pool and from a worker alike, tpl::run returns before fn runs
  // (here fn waits for a gate the caller opens only after the call returned).
  tpl::task_completion_source<int> gate;
  tpl::task<int> t = tpl::run([g = gate.get_task()]() { return g.get() + 1; });
  EXPECT_FALSE(t.is_completed());
  gate.set_result(1);
  EXPECT_EQ(t.get(), 2);
}

TEST(run_start, on_the_inline_scheduler_the_function_runs_inside_the_call) {
  std::thread::id ran_on;
  tpl::task<int> t = tpl::run(tpl::inline_scheduler::instance(), [&] {
    ran_on = std::this_thread::get_id();
    return 6;
  });
  EXPECT_TRUE(t.is_completed());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(t.get(), 6);
}

TEST(run_start, on_a_deterministic_scheduler_the_function_waits_for_its_item) {
  tpl::testing::deterministic_scheduler s(1);
  int calls = 0;
  tpl::task<int> t = tpl::run(s, [&] { return ++calls; });
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(t.is_completed());
  s.run_until_idle();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(tpl::sync_wait(t), 1);
}

}  // namespace spawn_test_cpp
