// async_semaphore: a counting semaphore with asynchronous and blocking waits (.NET SemaphoreSlim).
// Timed waits are specified with fake time; blocking waits are sequenced with the semaphore's queue
// (tpl/testing/wait_queues.hpp: a test acts once the waits it is about are queued), never sleeps.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include <tpl/testing/fake_time_provider.hpp>
#include <tpl/testing/wait_queues.hpp>
#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace async_semaphore_test_cpp {

namespace {

using tpl_test::exception_of_await;

using namespace std::chrono_literals;
using tpl_test::holds;
using tpl_test::thrown_by;
using tpl::testing::fake_time_provider;

constexpr auto forever = std::chrono::nanoseconds(tpl::infinite_timeout);

/// Records the order in which waiters acquired the semaphore.
using acquisition_log = tpl_test::ordered_log<int>;

tpl::task<> acquire_and_log(tpl::async_semaphore& sem, int id, acquisition_log& log) {
  co_await sem.wait_async();
  log.add(id);
}

/// The guarded-section pattern from the header: at most `limit` bodies at once.
tpl::task<> guarded_section(tpl::async_semaphore& gate, std::atomic<int>& inside, std::atomic<int>& peak,
                            tpl::task<> body) {
  co_await gate.wait_async();
  const int now = inside.fetch_add(1) + 1;
  int seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
  co_await body;
  inside.fetch_sub(1);
  gate.release();
}

// ---- construction -------------------------------------------------------------------------------

TEST(async_semaphore, constructor_rejects_a_negative_initial_count) {
  EXPECT_THROW(tpl::async_semaphore(-1), std::invalid_argument);
  EXPECT_THROW(tpl::async_semaphore(-1, 5), std::invalid_argument);
}

TEST(async_semaphore, constructor_rejects_a_max_count_that_is_not_positive) {
  EXPECT_THROW(tpl::async_semaphore(0, 0), std::invalid_argument);
  EXPECT_THROW(tpl::async_semaphore(0, -3), std::invalid_argument);
}

TEST(async_semaphore, constructor_rejects_an_initial_count_above_max_count) {
  EXPECT_THROW(tpl::async_semaphore(3, 2), std::invalid_argument);
}

TEST(async_semaphore, reports_its_counts) {
  tpl::async_semaphore bounded(2, 5);
  EXPECT_EQ(bounded.current_count(), 2);
  EXPECT_EQ(bounded.max_count(), 5);
  tpl::async_semaphore unbounded(0);
  EXPECT_EQ(unbounded.current_count(), 0);
  EXPECT_EQ(unbounded.max_count(), std::numeric_limits<std::int64_t>::max());
  tpl::async_semaphore full(5, 5);
  EXPECT_EQ(full.current_count(), 5);
}

// ---- asynchronous waits -------------------------------------------------------------------------

TEST(async_semaphore, wait_async_with_a_free_count_completes_immediately_and_takes_it) {
  tpl::async_semaphore sem(2);
  auto a = sem.wait_async();
  EXPECT_TRUE(a.is_completed_successfully());
  EXPECT_EQ(sem.current_count(), 1);
  fake_time_provider clock;
  auto b = sem.wait_async(1s, tpl::cancellation_token{}, clock);
  ASSERT_TRUE(b.is_completed_successfully());
  EXPECT_TRUE(b.get());
  EXPECT_EQ(sem.current_count(), 0);
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(async_semaphore, wait_async_with_no_count_waits_for_a_release) {
  tpl::async_semaphore sem(0);
  auto w = sem.wait_async();
  EXPECT_FALSE(w.is_completed());
  sem.release();
  EXPECT_TRUE(w.is_completed_successfully());
  EXPECT_EQ(sem.current_count(), 0);  // the released count went to the waiter
}

TEST(async_semaphore, waiters_are_served_first_come_first_served) {
  tpl::async_semaphore sem(0);
  acquisition_log log;
  std::vector<tpl::task<>> waiters;
  for (int i = 0; i < 5; ++i) waiters.push_back(acquire_and_log(sem, i, log));
  sem.release();
  sem.release();
  EXPECT_EQ(log.entries(), (std::vector<int>{0, 1}));
  sem.release(3);
  tpl::when_all(waiters).wait();
  EXPECT_EQ(log.entries(), (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(async_semaphore, a_new_waiter_does_not_overtake_queued_ones) {
  tpl::async_semaphore sem(0);
  auto first = sem.wait_async();
  sem.release();  // goes to `first`
  auto second = sem.wait_async();
  EXPECT_TRUE(first.is_completed_successfully());
  EXPECT_FALSE(second.is_completed());
  sem.release();
  EXPECT_TRUE(second.is_completed_successfully());
}

TEST(async_semaphore, release_returns_the_previous_count) {
  tpl::async_semaphore sem(2, 10);
  EXPECT_EQ(sem.release(3), 2);
  EXPECT_EQ(sem.current_count(), 5);
  EXPECT_EQ(sem.release(), 5);
  EXPECT_EQ(sem.current_count(), 6);
}

TEST(async_semaphore, release_n_wakes_up_to_n_waiters_and_keeps_the_rest_of_the_count) {
  tpl::async_semaphore sem(0);
  auto a = sem.wait_async();
  auto b = sem.wait_async();
  auto c = sem.wait_async();
  EXPECT_EQ(sem.release(2), 0);
  EXPECT_TRUE(a.is_completed_successfully());
  EXPECT_TRUE(b.is_completed_successfully());
  EXPECT_FALSE(c.is_completed());
  EXPECT_EQ(sem.current_count(), 0);
  EXPECT_EQ(sem.release(3), 0);
  EXPECT_TRUE(c.is_completed_successfully());
  EXPECT_EQ(sem.current_count(), 2);
}

TEST(async_semaphore, release_beyond_max_count_throws_semaphore_full_and_changes_nothing) {
  tpl::async_semaphore sem(1, 2);
  EXPECT_THROW(sem.release(2), tpl::semaphore_full);
  EXPECT_EQ(sem.current_count(), 1);
  EXPECT_EQ(sem.release(), 1);
  EXPECT_THROW(sem.release(), tpl::semaphore_full);
  EXPECT_EQ(sem.current_count(), 2);
}

TEST(async_semaphore, semaphore_full_is_an_invalid_operation) {
  tpl::async_semaphore sem(1, 1);
  const auto e = thrown_by([&] { sem.release(); });
  EXPECT_TRUE(holds<tpl::semaphore_full>(e));
  EXPECT_TRUE(holds<tpl::invalid_operation>(e));
}

TEST(async_semaphore, max_count_is_checked_against_the_count_not_the_queued_waiters) {
  // As SemaphoreSlim: with the count at 0 and max_count 1, release(2) is refused even though two
  // waiters could take the counts; no waiter is woken.
  tpl::async_semaphore sem(0, 1);
  auto a = sem.wait_async();
  auto b = sem.wait_async();
  EXPECT_THROW(sem.release(2), tpl::semaphore_full);
  EXPECT_FALSE(a.is_completed());
  EXPECT_FALSE(b.is_completed());
  sem.release();
  sem.release();
  EXPECT_TRUE(a.is_completed_successfully());
  EXPECT_TRUE(b.is_completed_successfully());
}

TEST(async_semaphore, release_of_zero_or_a_negative_count_throws_invalid_argument) {
  tpl::async_semaphore sem(1);
  EXPECT_THROW(sem.release(0), std::invalid_argument);
  EXPECT_THROW(sem.release(-1), std::invalid_argument);
  EXPECT_EQ(sem.current_count(), 1);
}

// ---- timeouts (fake time) -----------------------------------------------------------------------

TEST(async_semaphore, timed_wait_gives_false_exactly_at_the_timeout) {
  fake_time_provider clock;
  tpl::async_semaphore sem(0);
  auto w = sem.wait_async(5s, tpl::cancellation_token{}, clock);
  clock.advance(5s - 1ns);
  EXPECT_FALSE(w.is_completed());
  clock.advance(1ns);
  ASSERT_TRUE(w.is_completed_successfully());
  EXPECT_FALSE(w.get());
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(async_semaphore, timed_out_waiter_leaves_the_queue_and_consumes_no_count) {
  fake_time_provider clock;
  tpl::async_semaphore sem(0);
  auto w = sem.wait_async(5s, tpl::cancellation_token{}, clock);
  clock.advance(5s);
  ASSERT_FALSE(w.get());
  EXPECT_EQ(sem.release(), 0);
  EXPECT_EQ(sem.current_count(), 1);  // nobody was left to take it
}

TEST(async_semaphore, timed_out_waiter_in_the_middle_of_the_queue_is_skipped) {
  fake_time_provider clock;
  tpl::async_semaphore sem(0);
  auto first = sem.wait_async();
  auto middle = sem.wait_async(1s, tpl::cancellation_token{}, clock);
  auto last = sem.wait_async();
  clock.advance(1s);
  ASSERT_FALSE(middle.get());
  sem.release(2);
  EXPECT_TRUE(first.is_completed_successfully());
  EXPECT_TRUE(last.is_completed_successfully());
  EXPECT_EQ(sem.current_count(), 0);
}

TEST(async_semaphore, timed_wait_granted_in_time_gives_true_and_disposes_its_timer) {
  fake_time_provider clock;
  tpl::async_semaphore sem(0);
  auto w = sem.wait_async(5s, tpl::cancellation_token{}, clock);
  clock.advance(4s);
  sem.release();
  ASSERT_TRUE(w.is_completed_successfully());
  EXPECT_TRUE(w.get());
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(1h);
  EXPECT_TRUE(w.get());
  EXPECT_EQ(sem.current_count(), 0);
}

TEST(async_semaphore, zero_timeout_with_no_count_gives_false_at_once_without_queueing) {
  fake_time_provider clock;
  tpl::async_semaphore sem(0);
  auto w = sem.wait_async(0s, tpl::cancellation_token{}, clock);
  ASSERT_TRUE(w.is_completed_successfully());
  EXPECT_FALSE(w.get());
  EXPECT_EQ(clock.armed_timers(), 0u);
  sem.release();
  EXPECT_EQ(sem.current_count(), 1);
}

TEST(async_semaphore, infinite_timeout_waits_without_a_timer) {
  fake_time_provider clock;
  tpl::async_semaphore sem(0);
  auto w = sem.wait_async(forever, tpl::cancellation_token{}, clock);
  EXPECT_EQ(clock.armed_timers(), 0u);
  clock.advance(24h);
  EXPECT_FALSE(w.is_completed());
  sem.release();
  EXPECT_TRUE(w.get());
}

TEST(async_semaphore, negative_timeout_other_than_infinite_throws_invalid_argument) {
  fake_time_provider clock;
  tpl::async_semaphore sem(1);
  EXPECT_THROW((void)sem.wait_async(-2ms, tpl::cancellation_token{}, clock), std::invalid_argument);
  EXPECT_THROW(sem.wait(-2ms), std::invalid_argument);
  EXPECT_EQ(sem.current_count(), 1);
}

TEST(async_semaphore, system_timed_wait_gives_false_when_nothing_is_released) {
  tpl::async_semaphore sem(0);
  EXPECT_FALSE(tpl::sync_wait(sem.wait_async(1ms)));
  EXPECT_EQ(sem.release(), 0);
}

// ---- cancellation -------------------------------------------------------------------------------

TEST(async_semaphore, canceled_wait_is_canceled_and_consumes_no_count) {
  fake_time_provider clock;
  tpl::async_semaphore sem(0);
  tpl::cancellation_token_source cts;
  auto plain = sem.wait_async(cts.token());
  auto timed = sem.wait_async(1h, cts.token(), clock);
  cts.cancel();
  EXPECT_TRUE(plain.is_canceled());
  EXPECT_TRUE(timed.is_canceled());
  EXPECT_TRUE(holds<tpl::operation_canceled>(tpl::sync_wait(exception_of_await(plain))));
  EXPECT_EQ(clock.armed_timers(), 0u);
  sem.release();
  EXPECT_EQ(sem.current_count(), 1);
}

TEST(async_semaphore, already_canceled_token_gives_a_canceled_task_even_with_a_free_count) {
  fake_time_provider clock;
  tpl::async_semaphore sem(1);
  tpl::cancellation_token_source cts;
  cts.cancel();
  EXPECT_TRUE(sem.wait_async(cts.token()).is_canceled());
  EXPECT_TRUE(sem.wait_async(1s, cts.token(), clock).is_canceled());
  EXPECT_EQ(sem.current_count(), 1);
}

TEST(async_semaphore, cancel_after_granting_changes_nothing) {
  tpl::async_semaphore sem(0);
  tpl::cancellation_token_source cts;
  auto w = sem.wait_async(cts.token());
  sem.release();
  cts.cancel();
  EXPECT_TRUE(w.is_completed_successfully());
  EXPECT_EQ(sem.current_count(), 0);
}

TEST(async_semaphore, cancel_after_on_the_token_gives_up_at_that_fake_time) {
  fake_time_provider clock;
  tpl::async_semaphore sem(0);
  tpl::cancellation_token_source cts(3s, clock);
  auto w = sem.wait_async(cts.token());
  clock.advance(3s);
  EXPECT_TRUE(w.is_canceled());
}

// ---- destruction --------------------------------------------------------------------------------

TEST(async_semaphore, destroying_it_faults_queued_async_waiters_with_invalid_operation) {
  fake_time_provider clock;
  tpl::cancellation_token_source cts;
  auto sem = std::make_unique<tpl::async_semaphore>(0);
  auto plain = sem->wait_async();
  auto timed = sem->wait_async(1h, cts.token(), clock);
  sem.reset();
  ASSERT_TRUE(plain.is_faulted());
  ASSERT_TRUE(timed.is_faulted());
  const auto e = tpl::sync_wait(exception_of_await(plain));
  EXPECT_TRUE(holds<tpl::invalid_operation>(e));
  EXPECT_FALSE(holds<tpl::semaphore_full>(e));
  EXPECT_TRUE(holds<tpl::invalid_operation>(tpl::sync_wait(exception_of_await(timed))));
  EXPECT_EQ(clock.armed_timers(), 0u);
  // Their timer and token registration are gone: neither may touch the destroyed semaphore.
  cts.cancel();
  clock.advance(2h);
}

// ---- blocking waits -----------------------------------------------------------------------------

TEST(async_semaphore, blocking_wait_takes_a_free_count_without_blocking) {
  tpl::async_semaphore sem(1);
  sem.wait();
  EXPECT_EQ(sem.current_count(), 0);
}

TEST(async_semaphore, zero_timeout_blocking_wait_reports_whether_a_count_was_free) {
  tpl::async_semaphore sem(1);
  EXPECT_TRUE(sem.wait(0s));
  EXPECT_EQ(sem.current_count(), 0);
  EXPECT_FALSE(sem.wait(0s));
  sem.release();
  EXPECT_EQ(sem.current_count(), 1);  // the failed try left nothing queued
}

TEST(async_semaphore, blocking_waits_on_several_threads_are_released_from_another) {
  constexpr int n = 4;
  tpl::async_semaphore sem(0);
  std::atomic<int> acquired{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < n; ++i) {
    waiters.emplace_back([&] {
      sem.wait();
      acquired.fetch_add(1);
    });
  }
  std::thread releaser([&] {
    (void)tpl_test::wait_until([&] { return tpl::testing::queued_waiters(sem) == n; }, "every wait blocked");
    sem.release(n);
  });
  releaser.join();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(acquired.load(), n);
  EXPECT_EQ(sem.current_count(), 0);
}

TEST(async_semaphore, blocking_waits_released_one_at_a_time_all_return) {
  constexpr int n = 3;
  tpl::async_semaphore sem(0);
  std::atomic<int> acquired{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < n; ++i) {
    waiters.emplace_back([&] {
      sem.wait();
      acquired.fetch_add(1);
    });
  }
  (void)tpl_test::wait_until([&] { return tpl::testing::queued_waiters(sem) == n; }, "every wait blocked");
  EXPECT_EQ(acquired.load(), 0);
  for (int i = 0; i < n; ++i) {
    sem.release();
    // One release, one waiter: exactly one more returns, the others stay queued.
    (void)tpl_test::wait_until([&] { return acquired.load() == i + 1; }, "the release woke a waiter");
    EXPECT_EQ(tpl::testing::queued_waiters(sem), static_cast<std::size_t>(n - i - 1));
  }
  for (auto& t : waiters) t.join();
  EXPECT_EQ(acquired.load(), n);
  EXPECT_EQ(sem.current_count(), 0);
}

TEST(async_semaphore, blocking_wait_with_a_canceled_token_throws_even_with_a_free_count) {
  tpl::async_semaphore sem(1);
  tpl::cancellation_token_source cts;
  cts.cancel();
  EXPECT_THROW(sem.wait(forever, cts.token()), tpl::operation_canceled);
  EXPECT_EQ(sem.current_count(), 1);
}

TEST(async_semaphore, blocking_wait_canceled_from_another_thread_throws_and_consumes_no_count) {
  // The cancel lands anywhere in the waiter's wait: before it queues, while it registers on the
  // token, before it sleeps, while it sleeps. Each round must end with operation_canceled.
  // Child process: a waiter that misses the cancellation sleeps for good, and the watchdog then
  // fails this test instead of hanging the run.
  tpl_test::expect_passes_in_a_child_process(
      [] {
        const int rounds = tpl_test::scaled(300, 50);
        for (int r = 0; r < rounds; ++r) {
          tpl::async_semaphore sem(0);
          tpl::cancellation_token_source cts;
          std::atomic<bool> starting{false};
          std::atomic<bool> threw_canceled{false};
          std::thread waiter([&] {
            starting.store(true);
            try {
              (void)sem.wait(forever, cts.token());
            } catch (const tpl::operation_canceled&) {
              threw_canceled.store(true);
            }
          });
          while (!starting.load()) {
          }
          cts.cancel();
          waiter.join();
          if (!tpl_test::check(threw_canceled.load(), "the canceled wait did not throw operation_canceled"))
            return false;
          sem.release();
          if (!tpl_test::check_eq(sem.current_count(), 1, "count after the canceled wait and one release"))
            return false;
        }
        return true;
      },
      std::chrono::seconds(60));
}

TEST(async_semaphore, blocking_wait_with_a_system_timeout_gives_false_when_nothing_is_released) {
  tpl::async_semaphore sem(0);
  EXPECT_FALSE(sem.wait(1ms));
  sem.release();
  EXPECT_EQ(sem.current_count(), 1);
}

TEST(async_semaphore, blocking_wait_with_a_timeout_returns_true_when_released) {
  tpl::async_semaphore sem(0);
  std::atomic<bool> result{false};
  std::thread waiter([&] { result.store(sem.wait(1h)); });
  (void)tpl_test::wait_until([&] { return tpl::testing::queued_waiters(sem) == 1; }, "the wait blocked");
  sem.release();
  waiter.join();
  EXPECT_TRUE(result.load());
  EXPECT_EQ(sem.current_count(), 0);
}

TEST(async_semaphore, blocking_wait_with_a_timeout_beyond_the_clocks_range_does_not_give_up_early) {
  // steady_clock::now() + timeout overflows: the wait must not treat that as a deadline in the past.
  // Undefined behaviour in the buggy case, which UBSan aborts on: child process.
  tpl_test::expect_passes_in_a_child_process([] {
    tpl::async_semaphore sem(0);
    std::atomic<bool> wait_returned{false};
    std::thread releaser([&] {
      // Released only once the wait is queued (or has returned: a wait that gave up at once).
      (void)tpl_test::wait_until(
          [&] { return tpl::testing::queued_waiters(sem) == 1 || wait_returned.load(); }, "the wait blocked");
      sem.release();
    });
    bool result = false;
    try {
      result = sem.wait(std::chrono::nanoseconds::max());
    } catch (const std::invalid_argument&) {
      wait_returned.store(true);
      releaser.join();
      return true;  // rejecting the timeout is right too
    }
    wait_returned.store(true);
    releaser.join();
    return tpl_test::check(result, "wait(nanoseconds::max()) gave up before the release");
  });
}

TEST(async_semaphore, blocking_wait_on_a_pool_thread_is_counted_in_the_pools_blocked_threads) {
  // Child process: a clean default pool, and a watchdog if the wait is never counted.
  tpl_test::expect_passes_in_a_child_process(
      [] {
        auto& pool = tpl::thread_pool::default_pool();
        tpl::async_semaphore sem(0);
        auto waiter = tpl::run([&] { sem.wait(); });
        while (pool.stats().blocked_threads == 0) std::this_thread::yield();
        tpl_test::progress("the blocked wait is counted");
        sem.release();
        waiter.wait();
        return tpl_test::check_eq(pool.stats().blocked_threads, 0, "blocked threads once the wait returned");
      },
      std::chrono::seconds(60));
}

TEST(async_semaphore, blocking_and_async_waiters_share_one_queue) {
  // A blocking waiter queued first is served before the async waiters queued after it, and they
  // in their order: one release at a time, each goes to the oldest waiter.
  tpl::async_semaphore sem(0);
  std::atomic<bool> blocked_wait_returned{false};
  std::thread blocked([&] {
    sem.wait();
    blocked_wait_returned.store(true);
  });
  (void)tpl_test::wait_until([&] { return tpl::testing::queued_waiters(sem) == 1; }, "the blocking wait queued");
  auto a = sem.wait_async();
  auto b = sem.wait_async();
  EXPECT_EQ(tpl::testing::queued_waiters(sem), 3u);

  sem.release();
  (void)tpl_test::wait_until([&] { return blocked_wait_returned.load() || a.is_completed() || b.is_completed(); },
                             "the first release granted a waiter");
  EXPECT_TRUE(blocked_wait_returned.load()) << "the blocking waiter, queued first, was not served first";
  EXPECT_FALSE(a.is_completed());
  EXPECT_FALSE(b.is_completed());

  sem.release();
  a.wait();
  EXPECT_FALSE(b.is_completed());
  sem.release();
  b.wait();
  blocked.join();
  EXPECT_TRUE(a.is_completed_successfully());
  EXPECT_TRUE(b.is_completed_successfully());
  EXPECT_EQ(sem.current_count(), 0);
  EXPECT_EQ(tpl::testing::queued_waiters(sem), 0u);
}

// ---- usage patterns -----------------------------------------------------------------------------

TEST(async_semaphore, seed_000_hundred_waiters_then_release_100_then_when_all_completes) {
  // Seed 000: 100 × SemaphoreSlim.WaitAsync() on a zero semaphore, Release(100), Task.WhenAll.
  tpl::async_semaphore sem(0);
  std::vector<tpl::task<>> waits;
  for (int i = 0; i < 100; ++i) waits.push_back(sem.wait_async());
  for (const auto& w : waits) EXPECT_FALSE(w.is_completed());
  EXPECT_EQ(sem.release(100), 0);
  auto all = tpl::when_all(waits);
  all.wait();
  EXPECT_TRUE(all.is_completed_successfully());
  EXPECT_EQ(sem.current_count(), 0);
}

TEST(async_semaphore, limits_concurrency_of_guarded_sections) {
  tpl::async_semaphore gate(2);
  std::atomic<int> inside{0};
  std::atomic<int> peak{0};
  std::vector<tpl::task_completion_source<>> bodies(6);
  std::vector<tpl::task<>> sections;
  for (auto& b : bodies) sections.push_back(guarded_section(gate, inside, peak, b.get_task()));
  EXPECT_EQ(inside.load(), 2);
  for (auto& b : bodies) b.set_result();
  tpl::when_all(sections).wait();
  EXPECT_EQ(peak.load(), 2);
  EXPECT_EQ(inside.load(), 0);
  EXPECT_EQ(gate.current_count(), 2);
}

TEST(async_semaphore, stress_mixed_waits_releases_timeouts_and_cancellations_lose_nothing) {
  // Several threads acquire in every way (blocking, try, async with a token canceled at random,
  // async with a fake-time timeout) and give the counts back; the main thread alone advances fake
  // time. Invariants: acquired - released == initial - current_count at the end, every wait is
  // decided (all tasks complete), no timer is left armed.
  constexpr std::int64_t initial = 3;
  constexpr int threads = 4;
  const int ops = tpl_test::scaled(1'500, 200);
  tpl::async_semaphore sem(initial);
  fake_time_provider clock;
  std::atomic<std::int64_t> acquired{0};
  std::atomic<std::int64_t> released{0};
  std::atomic<int> canceled{0};
  std::atomic<int> timed_out{0};
  std::atomic<int> running{threads};
  std::mutex tasks_mutex;
  std::vector<tpl::task<>> tasks;

  // An async acquisition hands its count straight back, so no count is held while a thread blocks.
  auto use_then_release = [&](tpl::task<> w) -> tpl::task<> {
    try {
      co_await w;
    } catch (const tpl::operation_canceled&) {
      canceled.fetch_add(1);
      co_return;
    }
    acquired.fetch_add(1);
    released.fetch_add(1);
    sem.release();
  };
  auto use_if_granted = [&](tpl::task<bool> w) -> tpl::task<> {
    const bool granted = co_await w;
    if (!granted) {
      timed_out.fetch_add(1);
      co_return;
    }
    acquired.fetch_add(1);
    released.fetch_add(1);
    sem.release();
  };

  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      std::vector<tpl::task<>> mine;
      std::int64_t held = 0;  // counts taken by try-waits, given back later by this thread
      for (int i = 0; i < ops; ++i) {
        switch (rng() % 5) {
          case 0:
            if (held == 0) {  // never block while holding a count
              sem.wait();
              acquired.fetch_add(1);
              released.fetch_add(1);
              sem.release();
            }
            break;
          case 1:
            if (sem.wait(0s)) {
              acquired.fetch_add(1);
              ++held;
            }
            break;
          case 2: {
            tpl::cancellation_token_source cts;
            mine.push_back(use_then_release(sem.wait_async(cts.token())));
            if (rng() % 2 == 0) cts.cancel();
            break;
          }
          case 3:
            mine.push_back(use_if_granted(sem.wait_async(std::chrono::seconds(1 + rng() % 3),
                                                         tpl::cancellation_token{}, clock)));
            break;
          default:
            if (held > 0) {
              --held;
              released.fetch_add(1);
              sem.release();
            }
            break;
        }
      }
      released.fetch_add(held);
      if (held > 0) sem.release(held);
      std::lock_guard g(tasks_mutex);
      for (auto& m : mine) tasks.push_back(std::move(m));
      running.fetch_sub(1);
    });
  }
  while (running.load() > 0) {
    clock.advance(1s);
    std::this_thread::yield();
  }
  for (auto& w : workers) w.join();
  clock.advance(1min);  // any timed wait still queued gives up now
  tpl::when_all(tasks).wait();

  EXPECT_EQ(acquired.load() - released.load(), initial - sem.current_count());
  EXPECT_EQ(sem.current_count(), initial);
  EXPECT_EQ(clock.armed_timers(), 0u);
  for (const auto& task : tasks) EXPECT_TRUE(task.is_completed_successfully());
}

}  // namespace

}  // namespace async_semaphore_test_cpp
