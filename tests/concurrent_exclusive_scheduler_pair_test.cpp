// concurrent_exclusive_scheduler_pair: exclusion, the concurrency limit, exclusive preference,
// max_items_per_task, completion, rejection after complete(), faults, bad input; and, over the
// deterministic scheduler, every order in which processing items, producers and complete() can
// interleave (seeded).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <coroutine>
#include <exception>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace concurrent_exclusive_scheduler_pair_test_cpp {

namespace {

using pair_t = tpl::concurrent_exclusive_scheduler_pair;

// A coroutine whose exceptions escape resume() (its promise rethrows), unlike tpl's tasks.
struct rethrowing_coroutine {
  struct promise_type {
    rethrowing_coroutine get_return_object() {
      return {std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() { throw; }
  };
  std::coroutine_handle<promise_type> handle;
};

rethrowing_coroutine throws_when_resumed() {
  throw std::runtime_error("escaped the work item");
  co_return;
}

void run_and_wait_all(std::vector<tpl::task<>>& tasks) {
  for (auto& t : tasks) t.wait();
}

}  // namespace

TEST(concurrent_exclusive_scheduler_pair, limits_must_be_positive_or_unlimited) {
  tpl::inline_scheduler& s = tpl::inline_scheduler::instance();
  EXPECT_THROW(pair_t(s, 0), std::invalid_argument);
  EXPECT_THROW(pair_t(s, -2), std::invalid_argument);
  EXPECT_THROW(pair_t(s, INT_MIN), std::invalid_argument);
  EXPECT_THROW(pair_t(s, 1, 0), std::invalid_argument);
  EXPECT_THROW(pair_t(s, 1, -7), std::invalid_argument);
  pair_t unlimited(s, pair_t::unlimited, pair_t::unlimited);
  EXPECT_EQ(unlimited.max_concurrency_level(), INT_MAX);
  EXPECT_EQ(unlimited.max_items_per_task(), INT_MAX);
  pair_t limited(s, 3, 5);
  EXPECT_EQ(limited.max_concurrency_level(), 3);
  EXPECT_EQ(limited.max_items_per_task(), 5);
}

TEST(concurrent_exclusive_scheduler_pair, exclusive_items_run_alone_under_stress) {
  tpl::dedicated_thread_scheduler threads(4, "tpl-pair-test");
  pair_t pair(threads, 3, 4);
  std::atomic<int> concurrent_running{0};
  std::atomic<int> exclusive_running{0};
  std::atomic<int> violations{0};
  std::atomic<int> exclusive_ran{0};
  std::atomic<int> concurrent_ran{0};
  const int items = tpl_test::scaled(4000, 600);
  std::vector<tpl::task<>> tasks;
  for (int i = 0; i < items; ++i) {
    if (i % 5 == 0) {
      tasks.push_back(tpl::run(pair.exclusive_scheduler(), [&] {
        if (exclusive_running.fetch_add(1) != 0 || concurrent_running.load() != 0) ++violations;
        for (int k = 0; k < 3; ++k) std::this_thread::yield();  // widen the window for an overlap
        if (concurrent_running.load() != 0) ++violations;
        exclusive_running.fetch_sub(1);
        ++exclusive_ran;
      }));
    } else {
      tasks.push_back(tpl::run(pair.concurrent_scheduler(), [&] {
        if (concurrent_running.fetch_add(1) >= 3 || exclusive_running.load() != 0) ++violations;
        for (int k = 0; k < 3; ++k) std::this_thread::yield();  // widen the window for an overlap
        if (exclusive_running.load() != 0) ++violations;
        concurrent_running.fetch_sub(1);
        ++concurrent_ran;
      }));
    }
  }
  run_and_wait_all(tasks);
  pair.complete();
  pair.completion().wait();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(exclusive_ran.load(), (items + 4) / 5);
  EXPECT_EQ(concurrent_ran.load(), items - (items + 4) / 5);
}

TEST(concurrent_exclusive_scheduler_pair, concurrency_reaches_the_limit_and_never_exceeds_it) {
  tpl::dedicated_thread_scheduler threads(4, "tpl-pair-test");
  pair_t pair(threads, 2);
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  auto enter = [&] {
    const int now = running.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
  };
  // Two items that can only finish together: the pair must run two at once.
  std::latch both_running(2);
  std::vector<tpl::task<>> tasks;
  for (int i = 0; i < 2; ++i)
    tasks.push_back(tpl::run(pair.concurrent_scheduler(), [&] {
      enter();
      both_running.arrive_and_wait();
      running.fetch_sub(1);
    }));
  // Then many more, which four threads could run four at a time if the pair let them.
  std::latch release(1);
  for (int i = 0; i < tpl_test::scaled(400, 100); ++i)
    tasks.push_back(tpl::run(pair.concurrent_scheduler(), [&] {
      enter();
      release.wait();
      running.fetch_sub(1);
    }));
  tasks.front().wait();
  release.count_down();
  run_and_wait_all(tasks);
  EXPECT_EQ(most.load(), 2);
}

TEST(concurrent_exclusive_scheduler_pair, waiting_exclusive_work_goes_before_waiting_concurrent_work) {
  auto report = tpl::testing::for_each_seed(50, [](tpl::testing::deterministic_scheduler& s) {
    pair_t pair(s);
    std::string order;
    auto c1 = tpl::run(pair.concurrent_scheduler(), [&] { order += "c1 "; });
    auto c2 = tpl::run(pair.concurrent_scheduler(), [&] { order += "c2 "; });
    auto e1 = tpl::run(pair.exclusive_scheduler(), [&] { order += "e1 "; });  // queued last
    s.run_until_idle();
    pair.complete();
    s.run_until_idle();
    return order == "e1 c1 c2 " && pair.completion().is_completed_successfully();
  });
  EXPECT_TRUE(report.ok) << report.message;
}

TEST(concurrent_exclusive_scheduler_pair, a_processing_item_runs_at_most_max_items_per_task) {
  for (const int per_task : {1, 2, pair_t::unlimited}) {
    tpl::testing::deterministic_scheduler s(1);
    pair_t pair(s, 1, per_task);
    int ran = 0;
    std::vector<tpl::task<>> tasks;
    for (int i = 0; i < 5; ++i) tasks.push_back(tpl::run(pair.exclusive_scheduler(), [&] { ++ran; }));
    s.run_until_idle();
    EXPECT_EQ(ran, 5);
    // The underlying scheduler ran only the pair's processing items: 5 items in batches.
    const std::size_t expected = per_task == pair_t::unlimited ? 1 : static_cast<std::size_t>((5 + per_task - 1) / per_task);
    EXPECT_EQ(s.items_run(), expected) << "max_items_per_task=" << per_task;
  }
}

TEST(concurrent_exclusive_scheduler_pair, completion_waits_for_the_work_queued_before_complete) {
  tpl::testing::deterministic_scheduler s(7);
  pair_t pair(s);
  int ran = 0;
  auto a = tpl::run(pair.exclusive_scheduler(), [&] { ++ran; });
  auto b = tpl::run(pair.concurrent_scheduler(), [&] { ++ran; });
  pair.complete();
  pair.complete();  // idempotent
  auto done = pair.completion();
  EXPECT_FALSE(done.is_completed());
  s.run_until_idle();
  EXPECT_EQ(ran, 2);
  EXPECT_TRUE(done.is_completed_successfully());
}

TEST(concurrent_exclusive_scheduler_pair, completion_of_an_idle_pair_is_immediate) {
  pair_t pair;
  pair.complete();
  EXPECT_NO_THROW(pair.completion().wait());
}

TEST(concurrent_exclusive_scheduler_pair, work_queued_after_complete_is_rejected) {
  tpl::testing::deterministic_scheduler s(3);
  pair_t pair(s);
  pair.complete();
  auto late = tpl::run(pair.exclusive_scheduler(), [] {});
  ASSERT_TRUE(late.is_faulted());
  try {
    tpl::sync_wait(late);
    FAIL() << "no exception";
  } catch (const tpl::invalid_operation& e) {
    EXPECT_NE(std::string(e.what()).find("after complete()"), std::string::npos) << e.what();
  }
  auto late_concurrent = tpl::run(pair.concurrent_scheduler(), [] {});
  EXPECT_THROW(tpl::sync_wait(late_concurrent), tpl::invalid_operation);
}

TEST(concurrent_exclusive_scheduler_pair, an_accepted_item_may_still_queue_its_own_continuations) {
  tpl::testing::deterministic_scheduler s(5);
  pair_t pair(s);
  int steps = 0;
  auto t = tpl::run(pair.exclusive_scheduler(), [&]() -> tpl::task<> {
    ++steps;
    pair.complete();
    co_await tpl::yield();  // back to the exclusive scheduler: part of accepted work
    ++steps;
  });
  s.run_until_idle();
  EXPECT_EQ(steps, 2);
  EXPECT_TRUE(t.is_completed_successfully());
  EXPECT_TRUE(pair.completion().is_completed_successfully());
}

TEST(concurrent_exclusive_scheduler_pair, an_exception_escaping_a_work_item_faults_completion) {
  tpl::testing::deterministic_scheduler s(9);
  pair_t pair(s);
  auto coro = throws_when_resumed();
  pair.exclusive_scheduler().schedule(coro.handle);
  int after = 0;
  auto later = tpl::run(pair.concurrent_scheduler(), [&] { ++after; });  // queued before the fault
  s.run_until_idle();
  EXPECT_EQ(after, 1) << "accepted work still runs";
  auto done = pair.completion();
  ASSERT_TRUE(done.is_faulted()) << "the fault requests completion";
  EXPECT_THROW(tpl::sync_wait(done), std::runtime_error);
  EXPECT_THROW(tpl::sync_wait(tpl::run(pair.exclusive_scheduler(), [] {})), tpl::invalid_operation);
  coro.handle.destroy();
}

TEST(concurrent_exclusive_scheduler_pair, yield_inside_an_item_comes_back_to_the_same_scheduler) {
  tpl::testing::deterministic_scheduler s(11);
  pair_t pair(s);
  bool on_exclusive_after_yield = false;
  auto t = tpl::run(pair.exclusive_scheduler(), [&]() -> tpl::task<> {
    co_await tpl::yield();
    on_exclusive_after_yield = tpl::scheduler::current() == &pair.exclusive_scheduler();
  });
  s.run_until_idle();
  EXPECT_TRUE(t.is_completed_successfully());
  EXPECT_TRUE(on_exclusive_after_yield);
}

// Producers running on the deterministic scheduler queue work to both schedulers between yields,
// one of them calls complete() at a seeded moment, and the pair's processing items interleave
// with them in the seed's order. Every item accepted must run exactly once, each kind in the
// order it was queued, no item queued after complete() may be accepted, and completion() must
// complete exactly when everything accepted has run.
TEST(concurrent_exclusive_scheduler_pair, every_interleaving_runs_accepted_work_once_and_then_completes) {
  auto report = tpl::testing::for_each_seed(tpl_test::scaled(300, 60), [](tpl::testing::deterministic_scheduler& s) {
    const int max_concurrency = 1 + static_cast<int>(s.random(3));
    const int per_task = s.random(2) == 0 ? pair_t::unlimited : 1 + static_cast<int>(s.random(3));
    pair_t pair(s, max_concurrency, per_task);
    constexpr int kProducers = 3;
    constexpr int kItemsEach = 6;
    const int complete_after = static_cast<int>(s.random(kProducers * kItemsEach + 1));
    int queued = 0;
    int accepted = 0;
    int rejected = 0;
    std::vector<int> runs(kProducers * kItemsEach, 0);
    int last_run_sequence[2] = {-1, -1};  // per kind: the queue position of the last item run
    bool out_of_order = false;
    std::vector<tpl::task<>> items;
    auto producer = [&](int p) -> tpl::task<> {  // NOLINT: captures outlive the run
      for (int i = 0; i < kItemsEach; ++i) {
        const int id = p * kItemsEach + i;
        const bool exclusive = (id % 3) == 0;
        const int sequence = queued++;
        if (sequence == complete_after) pair.complete();
        auto t = tpl::run(exclusive ? pair.exclusive_scheduler() : pair.concurrent_scheduler(), [&, id, sequence, exclusive] {
          ++runs[id];
          int& last = last_run_sequence[exclusive ? 1 : 0];
          if (sequence < last) out_of_order = true;
          last = sequence;
        });
        if (t.is_faulted()) {
          ++rejected;
        } else {
          ++accepted;
          items.push_back(std::move(t));
        }
        co_await tpl::yield();
      }
    };
    std::vector<tpl::task<>> producers;
    for (int p = 0; p < kProducers; ++p) producers.push_back(s.start([&, p] { return producer(p); }));
    s.run_until_idle();
    pair.complete();
    s.run_until_idle();
    int ran = 0;
    for (int r : runs) {
      if (r > 1) return false;
      ran += r;
    }
    const bool all_items_done = [&] {
      for (auto& t : items)
        if (!t.is_completed_successfully()) return false;
      return true;
    }();
    return !out_of_order && ran == accepted && accepted + rejected == kProducers * kItemsEach &&
           rejected == kProducers * kItemsEach - std::min(complete_after, kProducers * kItemsEach) && all_items_done &&
           pair.completion().is_completed_successfully() && pair.queued_concurrent() == 0 && pair.queued_exclusive() == 0;
  });
  EXPECT_TRUE(report.ok) << report.message;
}

}  // namespace concurrent_exclusive_scheduler_pair_test_cpp
