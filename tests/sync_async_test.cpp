// The asynchronous synchronization primitives: async_mutex, async_manual_reset_event,
// async_auto_reset_event, async_countdown_event, async_barrier. Waiters are coroutines; the tests
// drive them from the test thread (set / unlock / signal resume waiters inline), so every order
// asserted is deterministic.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace sync_async_test_cpp {

namespace {

using tpl_test::holds;
using tpl_test::test_error;
using log_t = tpl_test::ordered_log<int>;

// ---- async_mutex ----------------------------------------------------------------------------------

tpl::task<> hold_mutex(tpl::async_mutex& m, int id, log_t& log, tpl::async_manual_reset_event& release) {
  auto guard = co_await m.lock_async();
  log.add(id);
  co_await release.wait_async();
}

TEST(async_mutex, an_uncontended_lock_completes_at_once_and_the_guard_unlocks) {
  tpl::async_mutex m;
  {
    auto lock = m.lock_async();
    ASSERT_TRUE(lock.is_completed());
    auto guard = lock.get();
    EXPECT_TRUE(guard.owns_lock());
    EXPECT_TRUE(m.is_locked());
  }
  EXPECT_FALSE(m.is_locked());
}

TEST(async_mutex, waiters_get_the_lock_in_fifo_order) {
  tpl::async_mutex m;
  log_t log;
  tpl::async_manual_reset_event hold;
  ASSERT_TRUE(m.try_lock());
  std::vector<tpl::task<>> waiters;
  for (int i = 0; i < 5; ++i) waiters.push_back(hold_mutex(m, i, log, hold));
  EXPECT_TRUE(log.entries().empty());
  hold.set();    // every holder leaves at once after logging
  m.unlock();    // hands the lock down the queue
  tpl::when_all(waiters).wait();
  EXPECT_EQ(log.entries(), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(m.is_locked());
}

TEST(async_mutex, unlock_hands_over_without_letting_a_newcomer_barge_in) {
  tpl::async_mutex m;
  ASSERT_TRUE(m.try_lock());
  tpl::async_manual_reset_event hold;
  log_t log;
  auto waiter = hold_mutex(m, 1, log, hold);  // queued
  m.unlock();                                 // handed to waiter, which now holds it
  EXPECT_TRUE(m.is_locked());
  EXPECT_FALSE(m.try_lock());
  hold.set();
  waiter.wait();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST(async_mutex, mutual_exclusion_holds_under_contention) {
  tpl::async_mutex m;
  int counter = 0;  // deliberately not atomic: the mutex protects it
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  const int per_task = tpl_test::scaled(500, 100);
  std::vector<tpl::task<>> tasks;
  for (int t = 0; t < 8; ++t) {
    tasks.push_back(tpl::run([&]() -> tpl::task<> {
      for (int i = 0; i < per_task; ++i) {
        auto guard = co_await m.lock_async();
        if (inside.fetch_add(1) != 0) overlaps++;
        ++counter;
        if (i % 16 == 0) co_await tpl::yield();  // hold it across a suspension now and then
        inside.fetch_sub(1);
      }
    }));
  }
  tpl::when_all(tasks).wait();
  EXPECT_EQ(counter, 8 * per_task);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(async_mutex, a_canceled_wait_leaves_the_queue_and_holds_nothing) {
  tpl::async_mutex m;
  ASSERT_TRUE(m.try_lock());
  tpl::cancellation_token_source cts;
  auto canceled = m.lock_async_unguarded(cts.token());
  tpl::async_manual_reset_event hold;
  log_t log;
  auto next = hold_mutex(m, 7, log, hold);
  cts.cancel();
  EXPECT_TRUE(canceled.is_canceled());
  m.unlock();  // goes to `next`, not to the canceled wait
  EXPECT_EQ(log.entries(), std::vector<int>{7});
  hold.set();
  next.wait();
  EXPECT_FALSE(m.is_locked());
}

TEST(async_mutex, a_pre_canceled_token_gives_a_canceled_wait_even_when_free) {
  tpl::async_mutex m;
  tpl::cancellation_token_source cts;
  cts.cancel();
  auto t = m.lock_async(cts.token()).as_task();
  EXPECT_TRUE(t.is_canceled());
  EXPECT_FALSE(m.is_locked());
}

TEST(async_mutex, unlocking_an_unheld_mutex_is_an_error) {
  tpl::async_mutex m;
  EXPECT_THROW(m.unlock(), tpl::invalid_operation);
  ASSERT_TRUE(m.try_lock());
  m.unlock();
  EXPECT_THROW(m.unlock(), tpl::invalid_operation);
}

TEST(async_mutex, destroying_with_waiters_fails_their_waits) {
  auto m = std::make_unique<tpl::async_mutex>();
  ASSERT_TRUE(m->try_lock());
  auto waiter = m->lock_async_unguarded();
  m.reset();
  EXPECT_TRUE(waiter.is_faulted());
  EXPECT_TRUE(holds<tpl::invalid_operation>(tpl_test::wait_inner_exceptions(waiter).at(0)));
}

TEST(async_mutex, guards_move_and_release) {
  tpl::async_mutex m;
  auto g1 = m.lock_async().get();
  tpl::async_mutex_lock g2 = std::move(g1);
  EXPECT_FALSE(g1.owns_lock());
  EXPECT_TRUE(g2.owns_lock());
  tpl::async_mutex* raw = g2.release();
  EXPECT_EQ(raw, &m);
  EXPECT_TRUE(m.is_locked());
  tpl::async_mutex_lock adopted(m, std::adopt_lock);
  adopted.unlock();
  EXPECT_FALSE(m.is_locked());
}

// ---- async_manual_reset_event ------------------------------------------------------------------

tpl::task<> wait_and_log(tpl::async_manual_reset_event& e, int id, log_t& log) {
  co_await e.wait_async();
  log.add(id);
}
tpl::task<> wait_and_log(tpl::async_auto_reset_event& e, int id, log_t& log) {
  co_await e.wait_async();
  log.add(id);
}

TEST(async_manual_reset_event, set_releases_every_waiter_oldest_first) {
  tpl::async_manual_reset_event e;
  log_t log;
  std::vector<tpl::task<>> ws;
  for (int i = 0; i < 4; ++i) ws.push_back(wait_and_log(e, i, log));
  EXPECT_TRUE(log.entries().empty());
  e.set();
  EXPECT_EQ(log.entries(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(e.is_set());
}

TEST(async_manual_reset_event, a_set_event_lets_waits_through_until_reset) {
  tpl::async_manual_reset_event e(true);
  EXPECT_TRUE(e.wait_async().is_completed_successfully());
  e.reset();
  EXPECT_FALSE(e.is_set());
  auto t = e.wait_async();
  EXPECT_FALSE(t.is_completed());
  e.set();
  EXPECT_TRUE(t.is_completed_successfully());
}

TEST(async_manual_reset_event, a_canceled_wait_is_canceled_and_others_still_wait) {
  tpl::async_manual_reset_event e;
  tpl::cancellation_token_source cts;
  auto a = e.wait_async(cts.token());
  auto b = e.wait_async();
  cts.cancel();
  EXPECT_TRUE(a.is_canceled());
  EXPECT_FALSE(b.is_completed());
  e.set();
  EXPECT_TRUE(b.is_completed_successfully());
}

TEST(async_manual_reset_event, destroying_with_waiters_fails_them) {
  auto e = std::make_unique<tpl::async_manual_reset_event>();
  auto t = e->wait_async();
  e.reset();
  EXPECT_TRUE(t.is_faulted());
}

TEST(async_manual_reset_event, set_from_another_thread_wakes_a_waiter) {
  tpl::async_manual_reset_event e;
  auto t = e.wait_async();
  ASSERT_FALSE(t.is_completed());  // queued as a waiter before the setter exists
  std::thread setter([&] { e.set(); });
  t.wait();
  setter.join();
  EXPECT_TRUE(t.is_completed_successfully());
  EXPECT_TRUE(e.is_set());
}

// ---- async_auto_reset_event ------------------------------------------------------------------------

TEST(async_auto_reset_event, each_set_releases_exactly_one_waiter_in_fifo_order) {
  tpl::async_auto_reset_event e;
  log_t log;
  std::vector<tpl::task<>> ws;
  for (int i = 0; i < 3; ++i) ws.push_back(wait_and_log(e, i, log));
  e.set();
  EXPECT_EQ(log.entries(), std::vector<int>{0});
  EXPECT_FALSE(e.is_set());
  e.set();
  e.set();
  EXPECT_EQ(log.entries(), (std::vector<int>{0, 1, 2}));
}

TEST(async_auto_reset_event, a_set_with_no_waiter_is_consumed_by_the_next_wait) {
  tpl::async_auto_reset_event e;
  e.set();
  e.set();  // setting a set event does nothing
  EXPECT_TRUE(e.is_set());
  EXPECT_TRUE(e.wait_async().is_completed_successfully());
  EXPECT_FALSE(e.is_set());
  EXPECT_FALSE(e.wait_async().is_completed());
}

TEST(async_auto_reset_event, a_canceled_wait_never_consumes_a_set) {
  tpl::async_auto_reset_event e;
  tpl::cancellation_token_source cts;
  auto a = e.wait_async(cts.token());
  cts.cancel();
  EXPECT_TRUE(a.is_canceled());
  e.set();
  EXPECT_TRUE(e.is_set());
}

// ---- async_countdown_event ---------------------------------------------------------------------

TEST(async_countdown_event, completes_waiters_when_the_count_reaches_zero) {
  tpl::async_countdown_event c(3);
  auto t = c.wait_async();
  EXPECT_FALSE(c.signal());
  EXPECT_FALSE(c.signal());
  EXPECT_FALSE(t.is_completed());
  EXPECT_TRUE(c.signal());
  EXPECT_TRUE(t.is_completed_successfully());
  EXPECT_TRUE(c.is_set());
  EXPECT_TRUE(c.wait_async().is_completed_successfully());
}

TEST(async_countdown_event, signal_below_zero_is_an_error_and_changes_nothing) {
  tpl::async_countdown_event c(2);
  EXPECT_THROW(c.signal(3), tpl::invalid_operation);
  EXPECT_EQ(c.current_count(), 2);
  EXPECT_TRUE(c.signal(2));
  EXPECT_THROW(c.signal(), tpl::invalid_operation);  // already set
  EXPECT_THROW(c.signal(0), std::invalid_argument);
  EXPECT_THROW(c.signal(-1), std::invalid_argument);
}

TEST(async_countdown_event, add_count_on_a_set_event_is_an_error) {
  tpl::async_countdown_event c(1);
  c.add_count(2);
  EXPECT_EQ(c.current_count(), 3);
  EXPECT_TRUE(c.signal(3));
  EXPECT_THROW(c.add_count(), tpl::invalid_operation);
  EXPECT_FALSE(c.try_add_count());
  EXPECT_THROW(c.add_count(0), std::invalid_argument);
}

TEST(async_countdown_event, a_negative_initial_count_is_rejected) {
  EXPECT_THROW(tpl::async_countdown_event(-1), std::invalid_argument);
  tpl::async_countdown_event zero(0);
  EXPECT_TRUE(zero.is_set());
}

TEST(async_countdown_event, reset_restores_the_count) {
  tpl::async_countdown_event c(2);
  c.signal(2);
  c.reset();
  EXPECT_EQ(c.current_count(), 2);
  EXPECT_FALSE(c.is_set());
  c.reset(5);
  EXPECT_EQ(c.initial_count(), 5);
  auto t = c.wait_async();
  c.reset(0);
  EXPECT_TRUE(t.is_completed_successfully());
}

TEST(async_countdown_event, a_canceled_wait_is_canceled) {
  tpl::async_countdown_event c(1);
  tpl::cancellation_token_source cts;
  auto t = c.wait_async(cts.token());
  cts.cancel();
  EXPECT_TRUE(t.is_canceled());
}

// ---- async_barrier --------------------------------------------------------------------------------

TEST(async_barrier, completes_a_phase_when_every_participant_arrived) {
  std::vector<std::int64_t> phases;
  tpl::async_barrier b(3, [&](std::int64_t p) { phases.push_back(p); });
  auto a1 = b.arrive_and_wait_async();
  auto a2 = b.arrive_and_wait_async();
  EXPECT_EQ(b.participants_remaining(), 1);
  EXPECT_FALSE(a1.is_completed());
  auto a3 = b.arrive_and_wait_async();
  EXPECT_TRUE(a1.is_completed());
  EXPECT_EQ(a1.get(), 0);
  EXPECT_EQ(a2.get(), 0);
  EXPECT_EQ(a3.get(), 0);
  EXPECT_EQ(phases, std::vector<std::int64_t>{0});
  EXPECT_EQ(b.current_phase_number(), 1);
  EXPECT_EQ(b.participants_remaining(), 3);
}

TEST(async_barrier, participants_loop_through_many_phases) {
  tpl::async_barrier b(4);
  std::atomic<int> steps{0};
  const int rounds = tpl_test::scaled(200, 50);
  std::vector<tpl::task<>> ps;
  for (int p = 0; p < 4; ++p) {
    ps.push_back(tpl::run([&]() -> tpl::task<> {
      for (int r = 0; r < rounds; ++r) {
        steps++;
        co_await b.arrive_and_wait_async();
      }
    }));
  }
  tpl::when_all(ps).wait();
  EXPECT_EQ(steps.load(), 4 * rounds);
  EXPECT_EQ(b.current_phase_number(), rounds);
}

TEST(async_barrier, a_canceled_arrival_is_withdrawn) {
  tpl::async_barrier b(2);
  tpl::cancellation_token_source cts;
  auto a = b.arrive_and_wait_async(cts.token());
  EXPECT_EQ(b.participants_remaining(), 1);
  cts.cancel();
  EXPECT_TRUE(a.is_canceled());
  EXPECT_EQ(b.participants_remaining(), 2);
  auto x = b.arrive_and_wait_async();
  auto y = b.arrive_and_wait_async();
  EXPECT_TRUE(x.is_completed_successfully());
  EXPECT_TRUE(y.is_completed_successfully());
}

TEST(async_barrier, a_throwing_post_phase_action_fails_every_participant_of_the_phase) {
  tpl::async_barrier b(2, [](std::int64_t) { throw test_error(9); });
  auto a = b.arrive_and_wait_async();
  auto c = b.arrive_and_wait_async();
  for (auto* t : {&a, &c}) {
    auto inner = tpl_test::wait_inner_exceptions(*t);
    ASSERT_EQ(inner.size(), 1u);
    try {
      std::rethrow_exception(inner[0]);
    } catch (const tpl::barrier_post_phase_error& e) {
      EXPECT_EQ(tpl_test::test_error_id(e.inner()), 9);
    } catch (...) {
      ADD_FAILURE() << "expected barrier_post_phase_error";
    }
  }
  EXPECT_EQ(b.current_phase_number(), 1);  // the barrier moved on
}

TEST(async_barrier, bad_participant_counts_are_errors) {
  EXPECT_THROW(tpl::async_barrier(-1), std::invalid_argument);
  tpl::async_barrier empty(0);
  EXPECT_TRUE(holds<tpl::invalid_operation>(tpl_test::wait_inner_exceptions(empty.arrive_and_wait_async()).at(0)));
  tpl::async_barrier b(2);
  EXPECT_THROW(b.remove_participants(3), std::invalid_argument);
  EXPECT_THROW(b.add_participants(0), std::invalid_argument);
}

TEST(async_barrier, removing_the_last_missing_participant_finishes_the_phase) {
  tpl::async_barrier b(3);
  auto a = b.arrive_and_wait_async();
  auto c = b.arrive_and_wait_async();
  b.remove_participants(1);
  EXPECT_TRUE(a.is_completed_successfully());
  EXPECT_TRUE(c.is_completed_successfully());
  EXPECT_EQ(b.participant_count(), 2);
  EXPECT_EQ(b.add_participants(1), 1);
}

}  // namespace

namespace {

TEST(async_barrier, pool_tasks_and_a_blocked_test_thread_meet_for_many_phases) {
  tpl::async_barrier b(3);
  const int rounds = tpl_test::scaled(100, 20);
  std::vector<tpl::task<>> ps;
  for (int p = 0; p < 2; ++p) {
    ps.push_back(tpl::run([&]() -> tpl::task<> {
      for (int r = 0; r < rounds; ++r) co_await b.arrive_and_wait_async();
    }));
  }
  for (int r = 0; r < rounds; ++r) tpl::sync_wait(b.arrive_and_wait_async());
  tpl::when_all(ps).wait();
  EXPECT_EQ(b.current_phase_number(), rounds);
}

TEST(async_auto_reset_event, passes_a_signal_between_pool_tasks_without_losing_any) {
  tpl::async_auto_reset_event ping;
  tpl::async_auto_reset_event pong;
  const int rounds = tpl_test::scaled(2000, 200);
  auto a = tpl::run([&]() -> tpl::task<> {
    for (int i = 0; i < rounds; ++i) {
      ping.set();
      co_await pong.wait_async();
    }
  });
  auto b = tpl::run([&]() -> tpl::task<> {
    for (int i = 0; i < rounds; ++i) {
      co_await ping.wait_async();
      pong.set();
    }
  });
  tpl::when_all(a, b).wait();
  EXPECT_FALSE(ping.is_set());
  EXPECT_FALSE(pong.is_set());
}

TEST(async_countdown_event, signals_from_many_pool_tasks_complete_the_wait_once) {
  const int n = tpl_test::scaled(500, 100);
  tpl::async_countdown_event c(n);
  std::atomic<int> zero_reports{0};
  auto waiter = c.wait_async();
  std::vector<tpl::task<>> ts;
  for (int i = 0; i < n; ++i) ts.push_back(tpl::run([&] {
    if (c.signal()) zero_reports++;
  }));
  tpl::when_all(ts).wait();
  waiter.wait();
  EXPECT_EQ(zero_reports.load(), 1);
  EXPECT_TRUE(c.is_set());
}

}  // namespace

}  // namespace sync_async_test_cpp
