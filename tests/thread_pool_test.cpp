// Where work runs: tpl::run, co_await tpl::yield(), co_await tpl::resume_on(scheduler), and
// tpl::thread_pool itself (every item runs exactly once, shutdown drains, options, stats).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include <tpl/detail/cpu_count.hpp>
#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace thread_pool_test_cpp {

namespace {

using tpl_test::dedicated_thread_scheduler;
using tpl_test::holds;
using tpl_test::scaled;
using tpl_test::test_error;
using tpl_test::test_error_id;
using tpl_test::wait_inner_exceptions;

struct where {
  std::thread::id thread;
  tpl::thread_pool* pool;
};

where here() { return {std::this_thread::get_id(), tpl::thread_pool::current()}; }

tpl::task<where> after_yield() {
  co_await tpl::yield();
  co_return here();
}

tpl::task<where> after_resume_on(tpl::scheduler& s) {
  co_await tpl::resume_on(s);
  co_return here();
}

tpl::task<std::vector<where>> hop_between(tpl::scheduler& first, tpl::scheduler& second) {
  std::vector<where> path;
  co_await tpl::resume_on(first);
  path.push_back(here());
  co_await tpl::resume_on(second);
  path.push_back(here());
  co_return path;
}

tpl::task<int> yields_then_returns(int v) {
  co_await tpl::yield();
  co_return v;
}

tpl::task<int> yields_then_throws(int id) {
  co_await tpl::yield();
  throw test_error(id);
}

/// Counts down to zero from `n` signals and completes its task then. Lets a test wait for a
/// number of work items without holding a task for each of them.
class countdown {
 public:
  explicit countdown(std::int64_t n) : remaining_(n) {
    if (n == 0) done_.set_result();
  }
  void signal() {
    // acq_rel: the last signaller publishes what every other item wrote before signalling.
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.set_result();
  }
  void wait() const { done_.get_task().wait(); }

 private:
  std::atomic<std::int64_t> remaining_;
  tpl::task_completion_source<> done_;
};

}  // namespace

// ---- tpl::run ---------------------------------------------------------------------------------

TEST(run, returns_the_value_of_the_function) {
  tpl::task<int> t = tpl::run([] { return 6 * 7; });
  EXPECT_EQ(t.get(), 42);
}

TEST(run, of_a_void_function_gives_a_void_task_that_completes_after_it_ran) {
  std::atomic<int> calls{0};
  auto t = tpl::run([&] { calls.fetch_add(1); });
  static_assert(std::is_same_v<decltype(t), tpl::task<>>);
  t.wait();
  EXPECT_EQ(calls.load(), 1);
}

TEST(run, unwraps_a_function_returning_a_task) {
  auto t = tpl::run([] { return yields_then_returns(5); });
  static_assert(std::is_same_v<decltype(t), tpl::task<int>>);
  EXPECT_EQ(t.get(), 5);
}

TEST(run, unwraps_a_function_returning_a_value_task) {
  auto t = tpl::run([] { return tpl::value_task<int>(8); });
  static_assert(std::is_same_v<decltype(t), tpl::task<int>>);
  EXPECT_EQ(t.get(), 8);
}

TEST(run, unwrapped_task_faults_with_the_inner_tasks_exception) {
  tpl::task<int> t = tpl::run([] { return yields_then_throws(3); });
  auto inner = wait_inner_exceptions(t);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(test_error_id(inner[0]), 3);
}

TEST(run, faults_when_the_function_throws) {
  tpl::task<int> t = tpl::run([]() -> int { throw test_error(4); });
  auto inner = wait_inner_exceptions(t);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(test_error_id(inner[0]), 4);
  EXPECT_TRUE(t.is_faulted());
}

TEST(run, is_canceled_when_the_function_throws_operation_canceled) {
  tpl::task<> t = tpl::run([] { throw tpl::operation_canceled(); });
  EXPECT_THROW(t.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(t.is_canceled());
}

TEST(run, executes_on_a_default_pool_thread) {
  where w = tpl::run(here).get();
  EXPECT_EQ(w.pool, &tpl::thread_pool::default_pool());
  EXPECT_NE(w.thread, std::this_thread::get_id());
}

TEST(run, on_a_user_pool_executes_on_that_pools_threads) {
  tpl::thread_pool pool({.thread_count = 2});
  where w = tpl::run(pool, here).get();
  EXPECT_EQ(w.pool, &pool);
  EXPECT_NE(w.thread, std::this_thread::get_id());
}

TEST(run, on_a_user_scheduler_executes_on_its_thread) {
  dedicated_thread_scheduler sched;
  where w = tpl::run(sched, here).get();
  EXPECT_EQ(w.thread, sched.thread_id());
  EXPECT_EQ(w.pool, nullptr);
}

TEST(run, takes_a_move_only_function_object) {
  auto p = std::make_unique<int>(9);
  tpl::task<int> t = tpl::run([p = std::move(p)] { return *p; });
  EXPECT_EQ(t.get(), 9);
}

TEST(run, nested_run_inside_pool_work_completes) {
  tpl::task<int> t = tpl::run([] { return tpl::run([] { return 1; }).get() + 1; });
  EXPECT_EQ(t.get(), 2);
}

// ---- yield ------------------------------------------------------------------------------------

TEST(yield, continues_on_a_pool_thread) {
  where w = after_yield().get();
  EXPECT_NE(w.thread, std::this_thread::get_id());
  EXPECT_EQ(w.pool, &tpl::thread_pool::default_pool());
}

TEST(yield, inside_a_user_pool_continues_on_that_pool) {
  tpl::thread_pool pool({.thread_count = 2});
  where w = tpl::run(pool, [] { return after_yield(); }).get();
  EXPECT_EQ(w.pool, &pool);
}

TEST(yield, lets_work_already_queued_run_first) {
  tpl::thread_pool pool({.thread_count = 1});
  std::mutex m;
  std::vector<std::string> order;
  auto record = [&](std::string s) {
    std::lock_guard g(m);
    order.push_back(std::move(s));
  };
  auto body = [&]() -> tpl::task<> {
    tpl::task<> queued = tpl::run(pool, [&] { record("queued before the yield"); });
    co_await tpl::yield();
    record("after the yield");
    co_await queued;
  };
  tpl::run(pool, body).wait();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], "queued before the yield");
  EXPECT_EQ(order[1], "after the yield");
}

// ---- resume_on ----------------------------------------------------------------------------------

TEST(resume_on, moves_to_a_user_scheduler) {
  dedicated_thread_scheduler sched;
  where w = after_resume_on(sched).get();
  EXPECT_EQ(w.thread, sched.thread_id());
  EXPECT_EQ(w.pool, nullptr);
  EXPECT_EQ(sched.scheduled_count(), 1u);
}

TEST(resume_on, makes_the_user_scheduler_current_while_its_item_runs) {
  dedicated_thread_scheduler sched;
  auto current_after_resume_on = [](tpl::scheduler& s) -> tpl::task<tpl::scheduler*> {
    co_await tpl::resume_on(s);
    co_return tpl::scheduler::current();
  };
  EXPECT_EQ(current_after_resume_on(sched).get(), &sched);
  EXPECT_EQ(tpl::scheduler::current(), nullptr);
}

TEST(yield, on_a_user_scheduler_continues_on_that_scheduler) {
  dedicated_thread_scheduler sched;
  auto yield_there = [](tpl::scheduler& s) -> tpl::task<where> {
    co_await tpl::resume_on(s);
    co_await tpl::yield();
    co_return here();
  };
  where w = yield_there(sched).get();
  EXPECT_EQ(w.thread, sched.thread_id());
  EXPECT_EQ(sched.scheduled_count(), 2u);
}

TEST(resume_on, moves_to_a_given_pool) {
  tpl::thread_pool pool({.thread_count = 1});
  where w = after_resume_on(pool).get();
  EXPECT_EQ(w.pool, &pool);
}

TEST(resume_on, moves_between_schedulers_in_turn) {
  // The pool outlives sched's thread here: see
  // thread_pool.destroying_a_pool_right_after_work_queued_from_another_thread_completes_is_safe.
  tpl::thread_pool pool({.thread_count = 1});
  dedicated_thread_scheduler sched;
  std::vector<where> path = hop_between(sched, pool).get();
  ASSERT_EQ(path.size(), 2u);
  EXPECT_EQ(path[0].thread, sched.thread_id());
  EXPECT_EQ(path[1].pool, &pool);
  EXPECT_NE(path[1].thread, sched.thread_id());
}

TEST(resume_on, inline_scheduler_continues_on_the_calling_thread) {
  tpl::task<where> t = after_resume_on(tpl::inline_scheduler::instance());
  EXPECT_TRUE(t.is_completed());
  EXPECT_EQ(t.get().thread, std::this_thread::get_id());
}

// ---- thread_pool: every item runs exactly once ------------------------------------------------

TEST(thread_pool, runs_every_work_item_queued_from_four_threads_exactly_once) {
  const int items = scaled(1'000'000, 100'000);
  constexpr int kProducers = 4;
  auto runs = std::make_unique<std::atomic<std::uint8_t>[]>(static_cast<std::size_t>(items));
  countdown done(items);
  {
    tpl::thread_pool pool;
    std::latch start(kProducers);
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        start.arrive_and_wait();
        for (int i = p; i < items; i += kProducers) {
          (void)tpl::run(pool, [&runs, &done, i] {
            runs[static_cast<std::size_t>(i)].fetch_add(1, std::memory_order_relaxed);
            done.signal();
          });
        }
      });
    }
    for (auto& t : producers) t.join();
    done.wait();
  }  // the pool is gone: nothing may run again after this point
  int missing = 0, repeated = 0;
  for (int i = 0; i < items; ++i) {
    const auto n = runs[static_cast<std::size_t>(i)].load(std::memory_order_relaxed);
    missing += n == 0;
    repeated += n > 1;
  }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(repeated, 0);
}

TEST(thread_pool, runs_every_coroutine_queued_from_four_threads_exactly_once) {
  const int items = scaled(200'000, 20'000);
  constexpr int kProducers = 4;
  std::atomic<std::int64_t> sum{0};
  countdown done(items);
  tpl::thread_pool pool;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = p; i < items; i += kProducers) {
        (void)tpl::run(pool, [&sum, &done, i]() -> tpl::task<> {
          co_await tpl::yield();  // a second trip through the pool's queues
          sum.fetch_add(i, std::memory_order_relaxed);
          done.signal();
        });
      }
    });
  }
  for (auto& t : producers) t.join();
  done.wait();
  EXPECT_EQ(sum.load(), static_cast<std::int64_t>(items) * (items - 1) / 2);
}

TEST(thread_pool, runs_all_work_queued_from_inside_pool_work) {
  const int outer = scaled(1'000, 200);
  constexpr int kInner = 100;
  tpl::thread_pool pool({.thread_count = 2});
  std::atomic<int> ran{0};
  countdown done(static_cast<std::int64_t>(outer) * kInner);
  for (int i = 0; i < outer; ++i) {
    (void)tpl::run(pool, [&] {
      for (int j = 0; j < kInner; ++j) {
        (void)tpl::run(pool, [&] {
          ran.fetch_add(1, std::memory_order_relaxed);
          done.signal();
        });
      }
    });
  }
  done.wait();
  EXPECT_EQ(ran.load(), outer * kInner);
}

// ---- thread_pool: shutdown ----------------------------------------------------------------------

TEST(thread_pool, destroying_a_pool_runs_every_queued_item_before_returning) {
  constexpr int kItems = 10'000;
  std::atomic<int> ran{0};
  {
    tpl::thread_pool pool({.thread_count = 2});
    for (int i = 0; i < kItems; ++i) (void)tpl::run(pool, [&] { ran.fetch_add(1, std::memory_order_relaxed); });
  }
  EXPECT_EQ(ran.load(), kItems);
}

TEST(thread_pool, destroying_a_pool_runs_work_queued_by_queued_work) {
  constexpr int kItems = 2'000;
  std::atomic<int> ran{0};
  {
    tpl::thread_pool pool({.thread_count = 2});
    for (int i = 0; i < kItems; ++i) {
      (void)tpl::run(pool, [&] {
        ran.fetch_add(1, std::memory_order_relaxed);
        (void)tpl::run(pool, [&] { ran.fetch_add(1, std::memory_order_relaxed); });
      });
    }
  }
  EXPECT_EQ(ran.load(), 2 * kItems);
}

TEST(thread_pool, destroying_a_pool_completes_the_tasks_of_queued_work) {
  std::vector<tpl::task<int>> tasks;
  {
    tpl::thread_pool pool({.thread_count = 1});
    for (int i = 0; i < 1'000; ++i) tasks.push_back(tpl::run(pool, [i] { return i; }));
  }
  for (int i = 0; i < 1'000; ++i) {
    ASSERT_TRUE(tasks[static_cast<std::size_t>(i)].is_completed()) << i;
    EXPECT_EQ(tasks[static_cast<std::size_t>(i)].get(), i);
  }
}

TEST(thread_pool, destroying_a_pool_waits_for_running_work_to_finish) {
  tpl::task_completion_source<> release;
  std::latch running(1);
  std::atomic<bool> finished{false};
  std::thread releaser;
  {
    tpl::thread_pool pool({.thread_count = 1});
    (void)tpl::run(pool, [&] {
      running.count_down();
      release.get_task().wait();
      finished = true;
    });
    running.wait();
    releaser = std::thread([release]() mutable { release.set_result(); });
  }  // the destructor blocks until the item ran to its end
  EXPECT_TRUE(finished.load());
  releaser.join();
}

TEST(thread_pool, work_queued_while_the_pool_shuts_down_runs_exactly_once) {
  const int rounds = scaled(200, 50);
  constexpr int kItemsPerRound = 2'000;
  for (int round = 0; round < rounds; ++round) {
    std::atomic<int> ran{0};
    {
      tpl::thread_pool pool({.thread_count = 2});
      std::latch producing(1);
      std::thread producer([&] {
        for (int i = 0; i < kItemsPerRound; ++i) {
          (void)tpl::run(pool, [&] { ran.fetch_add(1, std::memory_order_relaxed); });
          if (i == 0) producing.count_down();
        }
      });
      producing.wait();
      pool.shutdown();  // races the producer: its items run on the workers, the drain, or inline
      producer.join();
    }
    ASSERT_EQ(ran.load(), kItemsPerRound) << "round " << round;
  }
}

TEST(thread_pool, destroying_a_pool_right_after_work_queued_from_another_thread_completes_is_safe) {
  // A coroutine on another thread (here: a user scheduler's) moves to the pool and completes there;
  // the owner waits for it and destroys the pool at once. The queuing thread may still be inside
  // pool.schedule() at that moment, and the owner has no way to know: the pool must not touch its
  // state after the item it queued can have run (or its destruction must wait for the call).
  // Run in a child process: under ASan / TSan a violation is a report that ends the process.
  tpl_test::expect_passes_in_a_child_process(
      [] {
        const int rounds = scaled(2'000, 500);
        for (int round = 0; round < rounds; ++round) {
          dedicated_thread_scheduler sched;  // declared first: its thread is joined after the pool died
          {
            tpl::thread_pool pool({.thread_count = 1});
            hop_between(sched, pool).wait();
          }
        }
        return true;
      },
      std::chrono::seconds(120));
}

TEST(thread_pool, shutdown_is_idempotent) {
  tpl::thread_pool pool({.thread_count = 2});
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) (void)tpl::run(pool, [&] { ran.fetch_add(1); });
  pool.shutdown();
  EXPECT_EQ(ran.load(), 100);
  EXPECT_NO_THROW(pool.shutdown());
  EXPECT_NO_THROW(pool.shutdown());
}

TEST(thread_pool, work_scheduled_after_shutdown_runs_inline_on_the_scheduling_thread) {
  tpl::thread_pool pool({.thread_count = 2});
  pool.shutdown();
  tpl::task<std::thread::id> t = tpl::run(pool, [] { return std::this_thread::get_id(); });
  EXPECT_TRUE(t.is_completed());
  EXPECT_EQ(t.get(), std::this_thread::get_id());
}

TEST(thread_pool, resuming_on_a_shut_down_pool_continues_inline) {
  tpl::thread_pool pool({.thread_count = 1});
  pool.shutdown();
  tpl::task<where> t = after_resume_on(pool);
  EXPECT_TRUE(t.is_completed());
  EXPECT_EQ(t.get().thread, std::this_thread::get_id());
}

// ---- thread_pool: options, identity, stats --------------------------------------------------------

TEST(thread_pool, thread_count_option_is_honoured) {
  constexpr unsigned kThreads = 3;
  // max = min: the items below block, and the pool would otherwise add threads for them.
  tpl::thread_pool pool({.thread_count = kThreads, .max_threads = kThreads});
  EXPECT_EQ(pool.thread_count(), kThreads);
  EXPECT_EQ(pool.stats().thread_count, kThreads);

  // kThreads items that each wait until all of them run at once: proves kThreads workers exist.
  std::mutex m;
  std::set<std::thread::id> ids;
  std::atomic<unsigned> arrived{0};
  tpl::task_completion_source<> all_arrived;
  std::vector<tpl::task<>> items;
  for (unsigned i = 0; i < kThreads; ++i) {
    items.push_back(tpl::run(pool, [&] {
      {
        std::lock_guard g(m);
        ids.insert(std::this_thread::get_id());
      }
      if (arrived.fetch_add(1) + 1 == kThreads) all_arrived.try_set_result();
      all_arrived.get_task().wait();
    }));
  }
  // A safety net, not a timing assertion: if the workers never all start, release them anyway so
  // that the test fails instead of hanging.
  const bool all_started = all_arrived.get_task().wait_for(std::chrono::minutes(1));
  all_arrived.try_set_result();
  for (auto& t : items) t.wait();
  EXPECT_TRUE(all_started);

  // And no more than kThreads distinct workers ever run items.
  std::vector<tpl::task<>> more;
  for (int i = 0; i < 1'000; ++i)
    more.push_back(tpl::run(pool, [&] {
      std::lock_guard g(m);
      ids.insert(std::this_thread::get_id());
    }));
  for (auto& t : more) t.wait();
  EXPECT_EQ(ids.size(), kThreads);
}

TEST(thread_pool, thread_count_zero_means_one_thread_per_hardware_thread) {
  tpl::thread_pool pool;
  EXPECT_EQ(pool.thread_count(), std::max(1u, std::thread::hardware_concurrency()));
}

TEST(thread_pool, single_thread_pool_runs_everything_on_one_thread) {
  // A fixed size: min = max (hill climbing's wave could otherwise add a second thread).
  tpl::thread_pool pool({.thread_count = 1, .max_threads = 1});
  std::set<std::thread::id> ids;  // only ever touched by the single worker
  std::vector<tpl::task<>> items;
  for (int i = 0; i < 500; ++i) items.push_back(tpl::run(pool, [&] { ids.insert(std::this_thread::get_id()); }));
  for (auto& t : items) t.wait();
  pool.shutdown();  // joins the worker: its writes to ids are visible now
  EXPECT_EQ(ids.size(), 1u);
}

TEST(thread_pool, stats_count_every_item_executed) {
  constexpr int kItems = 1'000;
  tpl::thread_pool pool({.thread_count = 2, .max_threads = 2});
  std::vector<tpl::task<>> items;
  for (int i = 0; i < kItems; ++i) items.push_back(tpl::run(pool, [] {}));
  for (auto& t : items) t.wait();
  pool.shutdown();  // joins the workers, so their counters are final
  tpl::thread_pool_stats s = pool.stats();
  EXPECT_EQ(s.items_executed, static_cast<std::uint64_t>(kItems));
  EXPECT_EQ(s.thread_count, 2u);
  EXPECT_EQ(s.global_queue_length, 0u);
  EXPECT_EQ(s.local_queue_length, 0u);
}

TEST(thread_pool, current_is_null_outside_any_pool) {
  EXPECT_EQ(tpl::thread_pool::current(), nullptr);
  std::thread other([] { EXPECT_EQ(tpl::thread_pool::current(), nullptr); });
  other.join();
}

TEST(thread_pool, default_pool_is_one_process_wide_instance) {
  EXPECT_EQ(&tpl::thread_pool::default_pool(), &tpl::thread_pool::default_pool());
  tpl::thread_pool* from_other_thread = nullptr;
  std::thread other([&] { from_other_thread = &tpl::thread_pool::default_pool(); });
  other.join();
  EXPECT_EQ(from_other_thread, &tpl::thread_pool::default_pool());
}

TEST(thread_pool, pools_are_independent) {
  tpl::thread_pool a({.thread_count = 1});
  tpl::thread_pool b({.thread_count = 1});
  where in_a = tpl::run(a, here).get();
  where in_b = tpl::run(b, here).get();
  EXPECT_EQ(in_a.pool, &a);
  EXPECT_EQ(in_b.pool, &b);
  EXPECT_NE(in_a.thread, in_b.thread);
}

TEST(thread_pool, continuation_completed_on_a_user_pool_thread_is_queued_to_that_pool) {
  tpl::thread_pool pool({.thread_count = 1});
  tpl::task_completion_source<int> tcs(tpl::task_creation_options::run_continuations_asynchronously);
  tpl::task<where> continuation = tcs.get_task().continue_with([] { return here(); });
  tpl::run(pool, [tcs]() mutable { tcs.set_result(1); }).wait();
  EXPECT_EQ(continuation.get().pool, &pool);
}

#if defined(__linux__)
TEST(thread_pool, workers_carry_the_configured_thread_name) {
  tpl::thread_pool pool({.thread_count = 1, .thread_name = "tpltest"});
  std::string name = tpl::run(pool, [] {
                       char buf[32] = {};
                       pthread_getname_np(pthread_self(), buf, sizeof buf);
                       return std::string(buf);
                     }).get();
  EXPECT_EQ(name.rfind("tpltest", 0), 0u) << name;
}
#endif

// The park alarm (docs/internals.md): a parked worker's periodic look finds work nobody was woken
// for only after a lost wake-up, which the wake protocol never leaves. Bursts separated by idle
// periods longer than two alarm periods park every worker between them.
TEST(thread_pool, the_lost_wakeup_alarm_never_fires_across_bursts_and_idle_periods) {
  tpl::thread_pool pool({.thread_count = 2});
  for (int burst = 0; burst < 4; ++burst) {
    std::atomic<int> ran{0};
    std::vector<tpl::task<void>> items;
    for (int i = 0; i < 200; ++i) items.push_back(tpl::run(pool, [&] { ran.fetch_add(1); }));
    for (auto& t : items) t.wait();
    EXPECT_EQ(ran.load(), 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_EQ(pool.stats().wakeups_by_park_timeout, 0u);
}

// TPL_THREADPOOL_MAX_THREADS=1 alone on a machine with more cores must give a one-thread pool,
// not an error: the default size (one per core) yields to the cap. An explicit thread_count above
// the cap stays an error.
TEST(thread_pool, a_max_threads_below_the_core_count_caps_the_default_size) {
  {
    tpl::thread_pool pool({.max_threads = 1});
    EXPECT_EQ(pool.stats().min_threads, 1u);
    EXPECT_EQ(pool.stats().max_threads, 1u);
    EXPECT_EQ(tpl::sync_wait(tpl::run(pool, [] { return 3; })), 3);
  }
  ASSERT_EQ(setenv("TPL_THREADPOOL_MAX_THREADS", "1", 1), 0);
  {
    tpl::thread_pool pool(tpl::thread_pool_options::from_environment());
    EXPECT_EQ(pool.stats().min_threads, 1u);
    EXPECT_EQ(pool.stats().max_threads, 1u);
    EXPECT_EQ(tpl::sync_wait(tpl::run(pool, [] { return 4; })), 4);
  }
  unsetenv("TPL_THREADPOOL_MAX_THREADS");
  EXPECT_THROW(tpl::thread_pool pool({.thread_count = 2, .max_threads = 1}), std::invalid_argument);
}

TEST(thread_pool, a_malformed_trace_variable_is_rejected) {
  ASSERT_EQ(setenv("TPL_THREADPOOL_TRACE", "on", 1), 0);
  EXPECT_THROW(tpl::thread_pool pool({.thread_count = 1}), std::invalid_argument);
  ASSERT_EQ(setenv("TPL_THREADPOOL_TRACE", "0", 1), 0);
  {
    tpl::thread_pool pool({.thread_count = 1});
    EXPECT_EQ(tpl::sync_wait(tpl::run(pool, [] { return 5; })), 5);
  }
  unsetenv("TPL_THREADPOOL_TRACE");
}

TEST(thread_pool, a_malformed_park_alarm_variable_is_rejected) {
  ASSERT_EQ(setenv("TPL_THREADPOOL_PARK_ALARM", "yes", 1), 0);
  try {
    tpl::thread_pool pool({.thread_count = 1});
    ADD_FAILURE() << "TPL_THREADPOOL_PARK_ALARM=yes was accepted";
  } catch (const std::invalid_argument& e) {
    // The message every tpl variable gives (src/env_parse.hpp).
    EXPECT_STREQ(e.what(), "tpl: environment variable TPL_THREADPOOL_PARK_ALARM=\"yes\" is invalid: expected 0, 1, true or false");
  }
  ASSERT_EQ(setenv("TPL_THREADPOOL_PARK_ALARM", "false", 1), 0);
  {
    tpl::thread_pool pool({.thread_count = 1});
    EXPECT_EQ(tpl::sync_wait(tpl::run(pool, [] { return 6; })), 6);
  }
  ASSERT_EQ(setenv("TPL_THREADPOOL_PARK_ALARM", "0", 1), 0);
  {
    tpl::thread_pool pool({.thread_count = 1});
    EXPECT_EQ(tpl::sync_wait(tpl::run(pool, [] { return 7; })), 7);
  }
  unsetenv("TPL_THREADPOOL_PARK_ALARM");
}

#if defined(__linux__)
TEST(thread_pool, the_default_size_is_the_cpus_of_the_affinity_mask_not_of_the_machine) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  EXPECT_LE(tpl::detail::available_cpus(), static_cast<unsigned>(CPU_COUNT(&mine)));  // a quota may lower it
  int first = 0;
  while (!CPU_ISSET(first, &mine)) ++first;
  unsigned seen_cpus = 0, pool_min = 0;
  // A thread of its own, narrowed to one CPU (as `taskset -c N` would narrow the process): the
  // pool it creates inherits the mask, and sizes itself to it.
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return;
    seen_cpus = tpl::detail::available_cpus();
    tpl::thread_pool pool;
    pool_min = pool.min_threads();
    EXPECT_EQ(tpl::sync_wait(tpl::run(pool, [] { return 3; })), 3);
  }).join();
  EXPECT_EQ(seen_cpus, 1u);
  EXPECT_EQ(pool_min, 1u);
}
#endif

namespace {
// A fake /sys for cgroup_cpu_limit: path -> contents.
struct fake_files {
  std::map<std::string, std::string> files;
  std::optional<std::string> operator()(const std::string& path) const {
    const auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  }
};
}  // namespace

TEST(cpu_count, a_cgroup_v2_quota_caps_the_cpus_the_smallest_along_the_ancestors) {
  const std::string mountinfo =
      "25 1 0:23 / / rw,relatime - overlay overlay rw\n"
      "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate\n";
  fake_files fs{{{"/sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "max 100000\n"},
                 {"/sys/fs/cgroup/kubepods/pod1/cpu.max", "250000 100000\n"},
                 {"/sys/fs/cgroup/kubepods/cpu.max", "800000 100000\n"}}};
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit(mountinfo, "0::/kubepods/pod1/c1\n", std::cref(fs)), 3u);  // 2.5 -> 3
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit(mountinfo, "0::/kubepods\n", std::cref(fs)), 8u);
  fs.files["/sys/fs/cgroup/kubepods/pod1/cpu.max"] = "max 100000\n";
  fs.files["/sys/fs/cgroup/kubepods/cpu.max"] = "max 100000\n";
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit(mountinfo, "0::/kubepods/pod1/c1\n", std::cref(fs)), 0u);  // no quota
  // A quota below one CPU still leaves one.
  fs.files["/sys/fs/cgroup/kubepods/pod1/c1/cpu.max"] = "50000 100000";
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit(mountinfo, "0::/kubepods/pod1/c1", std::cref(fs)), 1u);
}

TEST(cpu_count, a_cgroup_v1_quota_is_read_through_the_cpu_hierarchy_and_a_container_root) {
  // Inside a container: the cpu hierarchy's mount shows the container's own cgroup as its root.
  const std::string mountinfo =
      "32 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
      "33 31 0:30 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n";
  const std::string self_cgroup = "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n";
  fake_files fs{{{"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "150000\n"},
                 {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n"}}};
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit(mountinfo, self_cgroup, std::cref(fs)), 2u);
  fs.files["/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"] = "-1\n";  // unlimited
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit(mountinfo, self_cgroup, std::cref(fs)), 0u);
}

TEST(cpu_count, missing_or_malformed_cgroup_files_mean_no_limit) {
  const std::string mountinfo = "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  fake_files fs{{{"/sys/fs/cgroup/a/cpu.max", "lots 100000\n"}, {"/sys/fs/cgroup/cpu.max", "100000 0\n"}}};
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit(mountinfo, "0::/a\n", std::cref(fs)), 0u);
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit("", "", std::cref(fs)), 0u);
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit("garbage without fields\n- x\n", "::::\n0:\n", std::cref(fs)), 0u);
  // The process's cgroup outside what the mount shows: nothing to read.
  const std::string nested = "30 25 0:26 /other / rw - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit(nested, "0::/a\n", std::cref(fs)), 0u);
  // A sibling whose name starts like the mount's root is not below it either.
  const std::string sibling = "30 25 0:26 /a /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  fake_files quota{{{"/sys/fs/cgroup/cpu.max", "100000 100000\n"}, {"/sys/fs/cgroupb/cpu.max", "100000 100000\n"}}};
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit(sibling, "0::/ab\n", std::cref(quota)), 0u);
  EXPECT_EQ(tpl::detail::cgroup_cpu_limit(sibling, "0::/a\n", std::cref(quota)), 1u);
}

TEST(cpu_count, available_cpus_is_at_least_one_and_at_most_the_affinity_mask) {
  const unsigned n = tpl::detail::available_cpus();
  EXPECT_GE(n, 1u);
#if defined(__linux__)
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  EXPECT_LE(n, static_cast<unsigned>(CPU_COUNT(&mine)));
#endif
}

}  // namespace thread_pool_test_cpp
