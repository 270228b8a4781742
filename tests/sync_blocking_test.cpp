// The blocking synchronization primitives: barrier, countdown_event, manual_reset_event_slim,
// reader_writer_lock, spin_wait, spin_lock. Participants are std::threads (never more pool threads
// than the pool has); threads are sequenced with latches and the primitives themselves, never with
// sleeps. Timeouts are only tested at zero or as "does not time out".
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <tpl/testing/wait_queues.hpp>
#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace sync_blocking_test_cpp {

namespace {

using namespace std::chrono_literals;
using tpl_test::test_error;

// ---- barrier -------------------------------------------------------------------------------------

TEST(barrier, threads_advance_through_phases_together) {
  constexpr int n = 3;
  const int rounds = tpl_test::scaled(200, 40);
  std::atomic<int> post_phase_runs{0};
  std::vector<int> progress(n, 0);
  std::atomic<int> mismatches{0};
  tpl::barrier b(n, [&](std::int64_t phase) {
    post_phase_runs++;
    // Every participant finished step `phase` before the action runs.
    for (int p = 0; p < n; ++p)
      if (progress[static_cast<std::size_t>(p)] != phase + 1) mismatches++;
  });
  std::vector<std::thread> ts;
  for (int p = 0; p < n; ++p) {
    ts.emplace_back([&, p] {
      for (int r = 0; r < rounds; ++r) {
        progress[static_cast<std::size_t>(p)] = r + 1;
        b.signal_and_wait();
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(post_phase_runs.load(), rounds);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(b.current_phase_number(), rounds);
}

TEST(barrier, a_zero_timeout_withdraws_the_arrival) {
  tpl::barrier b(2);
  EXPECT_FALSE(b.signal_and_wait(0ns));
  EXPECT_EQ(b.participants_remaining(), 2);
}

TEST(barrier, a_canceled_wait_throws_and_withdraws_the_arrival) {
  tpl::barrier b(2);
  tpl::cancellation_token_source cts;
  std::thread canceler;
  canceler = std::thread([&] {
    // Wait until the main thread has arrived, then cancel it.
    while (b.participants_remaining() != 1) std::this_thread::yield();
    cts.cancel();
  });
  EXPECT_THROW(b.signal_and_wait(cts.token()), tpl::operation_canceled);
  canceler.join();
  EXPECT_EQ(b.participants_remaining(), 2);
}

TEST(barrier, a_throwing_post_phase_action_reaches_every_participant) {
  tpl::barrier b(2, [](std::int64_t) { throw test_error(4); });
  std::atomic<int> errors{0};
  auto participant = [&] {
    try {
      b.signal_and_wait();
    } catch (const tpl::barrier_post_phase_error& e) {
      if (tpl_test::test_error_id(e.inner()) == 4) errors++;
    }
  };
  std::thread other(participant);
  participant();
  other.join();
  EXPECT_EQ(errors.load(), 2);
}

TEST(barrier, bad_counts_are_errors) {
  EXPECT_THROW(tpl::barrier(-1), std::invalid_argument);
  tpl::barrier none(0);
  EXPECT_THROW(none.signal_and_wait(), tpl::invalid_operation);
  tpl::barrier b(1);
  EXPECT_THROW(b.remove_participants(2), std::invalid_argument);
  EXPECT_THROW(b.signal_and_wait(-5ms), std::invalid_argument);
  b.signal_and_wait();  // a single participant never waits
  EXPECT_EQ(b.current_phase_number(), 1);
}

TEST(barrier, pool_items_blocking_on_a_barrier_are_counted_as_blocked) {
  // Seed 000's barrier repro needs the pool to add threads for blocked workers; here one pool item
  // and the test thread meet, and the pool reports its worker as blocked meanwhile.
  tpl::barrier b(2);
  auto item = tpl::run([&] { b.signal_and_wait(); });
  while (b.participants_remaining() != 1) std::this_thread::yield();  // the item has arrived
  // It marks itself blocked right after arriving; look a bounded number of times (no hang if not).
  bool saw_blocked = false;
  for (int i = 0; i < 1'000'000 && !saw_blocked; ++i) {
    saw_blocked = tpl::thread_pool::default_pool().stats().blocked_threads > 0;
    if (!saw_blocked) std::this_thread::yield();
  }
  b.signal_and_wait();
  item.wait();
  EXPECT_TRUE(saw_blocked);
}

// ---- countdown_event -----------------------------------------------------------------------------

TEST(countdown_event, wait_returns_once_every_signal_arrived) {
  constexpr int n = 4;
  tpl::countdown_event c(n);
  std::atomic<int> done{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back([&] {
    done++;
    c.signal();
  });
  c.wait();
  EXPECT_EQ(done.load(), n);
  EXPECT_TRUE(c.is_set());
  for (auto& t : ts) t.join();
}

TEST(countdown_event, signal_below_zero_and_add_on_set_are_errors) {
  tpl::countdown_event c(1);
  EXPECT_THROW(c.signal(2), tpl::invalid_operation);
  EXPECT_EQ(c.current_count(), 1);
  EXPECT_TRUE(c.signal());
  EXPECT_THROW(c.signal(), tpl::invalid_operation);
  EXPECT_THROW(c.add_count(), tpl::invalid_operation);
  EXPECT_FALSE(c.try_add_count());
  EXPECT_THROW(tpl::countdown_event(-3), std::invalid_argument);
}

TEST(countdown_event, a_zero_timeout_reports_not_set) {
  tpl::countdown_event c(1);
  EXPECT_FALSE(c.wait(0ns));
  c.signal();
  EXPECT_TRUE(c.wait(0ns));
}

TEST(countdown_event, a_canceled_wait_throws) {
  tpl::countdown_event c(1);
  tpl::cancellation_token_source cts;
  cts.cancel();
  EXPECT_THROW(c.wait(cts.token()), tpl::operation_canceled);
}

// ---- manual_reset_event_slim ------------------------------------------------------------------------

TEST(manual_reset_event_slim, set_wakes_every_blocked_thread) {
  tpl::manual_reset_event_slim e;
  std::atomic<int> woke{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; ++i) ts.emplace_back([&] {
    e.wait();
    woke++;
  });
  // Past their spinning, all three are queued to be woken (else set() would find some spinning).
  (void)tpl_test::wait_until([&] { return tpl::testing::queued_waiters(e) == 3; }, "three threads blocked in wait()");
  EXPECT_EQ(woke.load(), 0);
  e.set();
  for (auto& t : ts) t.join();
  EXPECT_EQ(woke.load(), 3);
}

TEST(manual_reset_event_slim, a_set_event_passes_and_reset_closes_it) {
  tpl::manual_reset_event_slim e(true);
  EXPECT_TRUE(e.wait(0ns));
  e.reset();
  EXPECT_FALSE(e.wait(0ns));
  EXPECT_FALSE(e.is_set());
}

TEST(manual_reset_event_slim, cancellation_wakes_a_blocked_wait) {
  tpl::manual_reset_event_slim e(false, 0);
  tpl::cancellation_token_source cts;
  std::atomic<bool> threw{false};
  std::thread waiter([&] {
    try {
      e.wait(cts.token());
    } catch (const tpl::operation_canceled&) {
      threw = true;
    }
  });
  // Blocked, not merely about to look at the token (which would throw without ever blocking).
  (void)tpl_test::wait_until([&] { return tpl::testing::queued_waiters(e) == 1; }, "the wait blocked");
  cts.cancel();
  waiter.join();
  EXPECT_TRUE(threw.load());
  EXPECT_EQ(tpl::testing::queued_waiters(e), 0u);  // the canceled wait left the queue
}

TEST(manual_reset_event_slim, bad_arguments_are_errors) {
  EXPECT_THROW(tpl::manual_reset_event_slim(false, -1), std::invalid_argument);
  tpl::manual_reset_event_slim e;
  EXPECT_THROW((void)e.wait(-2ms), std::invalid_argument);
}

// ---- reader_writer_lock ---------------------------------------------------------------------------

TEST(reader_writer_lock, many_readers_share_the_lock) {
  tpl::reader_writer_lock rw;
  rw.enter_read_lock();
  std::thread other([&] {
    EXPECT_TRUE(rw.try_enter_read_lock());
    EXPECT_EQ(rw.current_read_count(), 2u);
    rw.exit_read_lock();
  });
  other.join();
  std::thread writer([&] { EXPECT_FALSE(rw.try_enter_write_lock()); });
  writer.join();
  rw.exit_read_lock();
  EXPECT_TRUE(rw.try_enter_write_lock());
  EXPECT_TRUE(rw.is_write_lock_held_by_current_thread());
  rw.exit_write_lock();
}

TEST(reader_writer_lock, a_writer_excludes_readers_and_writers) {
  tpl::reader_writer_lock rw;
  rw.enter_write_lock();
  std::atomic<int> got{-1};
  std::thread other([&] { got = (rw.try_enter_read_lock() ? 1 : 0) + (rw.try_enter_write_lock() ? 2 : 0); });
  other.join();
  EXPECT_EQ(got.load(), 0);
  rw.exit_write_lock();
}

TEST(reader_writer_lock, readers_and_writers_never_overlap_under_contention) {
  tpl::reader_writer_lock rw;
  std::atomic<int> readers{0};
  std::atomic<int> writers{0};
  std::atomic<int> violations{0};
  long long value = 0;  // written only under the write lock
  const int iterations = tpl_test::scaled(3000, 400);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < iterations; ++i) {
        if ((i + t) % 5 == 0) {
          tpl::write_lock w(rw);
          if (writers.fetch_add(1) != 0 || readers.load() != 0) violations++;
          ++value;
          writers.fetch_sub(1);
        } else {
          tpl::read_lock r(rw);
          readers.fetch_add(1);
          if (writers.load() != 0) violations++;
          readers.fetch_sub(1);
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(violations.load(), 0);
  long long expected = 0;
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < iterations; ++i)
      if ((i + t) % 5 == 0) ++expected;
  EXPECT_EQ(value, expected);
}

TEST(reader_writer_lock, a_waiting_writer_holds_back_new_readers) {
  tpl::reader_writer_lock rw;
  rw.enter_read_lock();
  std::thread writer([&] {
    rw.enter_write_lock();
    rw.exit_write_lock();
  });
  while (rw.waiting_writer_count() == 0) std::this_thread::yield();
  std::thread reader([&] { EXPECT_FALSE(rw.try_enter_read_lock()); });  // writer preference
  reader.join();
  rw.exit_read_lock();
  writer.join();
  EXPECT_TRUE(rw.try_enter_read_lock());
  rw.exit_read_lock();
}

TEST(reader_writer_lock, misuse_is_reported) {
  tpl::reader_writer_lock rw;
  EXPECT_THROW(rw.exit_read_lock(), tpl::synchronization_lock_error);
  EXPECT_THROW(rw.exit_write_lock(), tpl::synchronization_lock_error);
  rw.enter_write_lock();
  EXPECT_THROW(rw.enter_write_lock(), tpl::lock_recursion_error);  // no recursion
  std::thread other([&] { EXPECT_THROW(rw.exit_write_lock(), tpl::synchronization_lock_error); });
  other.join();
  rw.exit_write_lock();
  EXPECT_THROW((void)rw.try_enter_read_lock(-3ms), std::invalid_argument);
  // Both derive from invalid_operation, what misuse reported before they existed.
  EXPECT_THROW(rw.exit_read_lock(), tpl::invalid_operation);
}

// As .NET's ReaderWriterLockSlim with LockRecursionPolicy.NoRecursion: every recursive acquisition
// (read in read, write in write, read in write, write in read), by enter_ or try_enter_, throws
// LockRecursionException (here lock_recursion_error) instead of deadlocking once a writer waits,
// and leaves the lock as it was.
TEST(reader_writer_lock, every_recursive_acquisition_throws_lock_recursion_error) {
  tpl::reader_writer_lock rw;
  rw.enter_read_lock();
  EXPECT_THROW(rw.enter_read_lock(), tpl::lock_recursion_error);
  EXPECT_THROW((void)rw.try_enter_read_lock(), tpl::lock_recursion_error);
  EXPECT_THROW((void)rw.try_enter_read_lock(1s), tpl::lock_recursion_error);
  EXPECT_THROW(rw.enter_write_lock(), tpl::lock_recursion_error);
  EXPECT_THROW((void)rw.try_enter_write_lock(1s), tpl::lock_recursion_error);
  EXPECT_EQ(rw.current_read_count(), 1u);
  EXPECT_EQ(rw.waiting_writer_count(), 0u);
  rw.exit_read_lock();
  EXPECT_EQ(rw.current_read_count(), 0u);

  rw.enter_write_lock();
  EXPECT_THROW(rw.enter_read_lock(), tpl::lock_recursion_error);
  EXPECT_THROW((void)rw.try_enter_read_lock(), tpl::lock_recursion_error);
  EXPECT_THROW(rw.enter_write_lock(), tpl::lock_recursion_error);
  EXPECT_THROW((void)rw.try_enter_write_lock(), tpl::lock_recursion_error);
  EXPECT_EQ(rw.current_read_count(), 0u);
  EXPECT_TRUE(rw.is_write_lock_held_by_current_thread());
  rw.exit_write_lock();

  // The lock is usable as usual afterwards, by this thread and others.
  { tpl::read_lock r(rw); }
  { tpl::write_lock w(rw); }
  std::thread other([&] { tpl::write_lock w(rw); });
  other.join();
  EXPECT_FALSE(rw.is_write_lock_held());
}

// As .NET (SynchronizationLockException): a thread that holds no read lock cannot release the
// read lock another thread holds.
TEST(reader_writer_lock, exit_read_lock_by_a_thread_that_holds_none_throws_and_releases_nothing) {
  tpl::reader_writer_lock rw;
  rw.enter_read_lock();
  std::thread other([&] {
    EXPECT_THROW(rw.exit_read_lock(), tpl::synchronization_lock_error);
    EXPECT_EQ(rw.current_read_count(), 1u);
    EXPECT_FALSE(rw.try_enter_write_lock());  // still held by the first thread
  });
  other.join();
  EXPECT_EQ(rw.current_read_count(), 1u);
  rw.exit_read_lock();
  EXPECT_THROW(rw.exit_read_lock(), tpl::synchronization_lock_error);  // released once only
  EXPECT_EQ(rw.current_read_count(), 0u);
}

// The per-thread record of held read locks holds any number of locks at once, and tells them apart.
TEST(reader_writer_lock, a_thread_holds_read_locks_on_many_locks_at_once) {
  constexpr int kLocks = 20;  // past the record's inline slots
  std::vector<std::unique_ptr<tpl::reader_writer_lock>> locks;
  for (int i = 0; i < kLocks; ++i) locks.push_back(std::make_unique<tpl::reader_writer_lock>());
  for (auto& l : locks) l->enter_read_lock();
  for (auto& l : locks) {
    EXPECT_EQ(l->current_read_count(), 1u);
    EXPECT_THROW(l->enter_read_lock(), tpl::lock_recursion_error);
  }
  // Released in an order unlike the acquisition's: every other one, then the rest backwards.
  for (int i = 0; i < kLocks; i += 2) locks[static_cast<std::size_t>(i)]->exit_read_lock();
  for (int i = kLocks - 1; i >= 0; --i)
    if (i % 2 == 1) locks[static_cast<std::size_t>(i)]->exit_read_lock();
  for (auto& l : locks) {
    EXPECT_EQ(l->current_read_count(), 0u);
    EXPECT_THROW(l->exit_read_lock(), tpl::synchronization_lock_error);
    EXPECT_TRUE(l->try_enter_write_lock());
    l->exit_write_lock();
  }
}

TEST(reader_writer_lock, a_timed_out_writer_lets_readers_in_again) {
  tpl::reader_writer_lock rw;
  rw.enter_read_lock();
  std::thread writer([&] { EXPECT_FALSE(rw.try_enter_write_lock(1ms)); });
  writer.join();
  EXPECT_EQ(rw.waiting_writer_count(), 0u);
  std::thread reader([&] {
    EXPECT_TRUE(rw.try_enter_read_lock());
    rw.exit_read_lock();
  });
  reader.join();
  rw.exit_read_lock();
}

// ---- spin_wait / spin_lock ----------------------------------------------------------------------

TEST(spin_wait, spins_then_yields_after_the_threshold) {
  tpl::spin_wait sw;
  for (int i = 0; i < tpl::spin_wait::yield_threshold; ++i) {
    if (!tpl::spin_wait::single_core()) {
      EXPECT_FALSE(sw.next_spin_will_yield());
    }
    sw.spin_once();
  }
  EXPECT_TRUE(sw.next_spin_will_yield());
  EXPECT_EQ(sw.count(), tpl::spin_wait::yield_threshold);
  sw.reset();
  EXPECT_EQ(sw.count(), 0);
}

TEST(spin_wait, the_pause_cost_is_measured_and_measured_again) {
  EXPECT_GE(tpl::detail::pauses_per_spin_unit(), 1u);
  const auto before = tpl::detail::pause_calibrations();
  EXPECT_GE(before, 1u);
  tpl::detail::recalibrate_pause();
  EXPECT_GT(tpl::detail::pause_calibrations(), before);
  EXPECT_GT(tpl::detail::measured_pause_picoseconds(), 0u);
}

TEST(spin_wait, spin_until_returns_once_the_condition_holds) {
  // The setter waits until the condition has been found false once, so spin_until must spin and
  // look again; it must return at the first true and not before.
  std::atomic<bool> flag{false};
  std::atomic<int> false_evaluations{0};
  int true_evaluations = 0;  // only the spinning thread touches it
  std::thread setter([&] {
    while (false_evaluations.load() == 0) std::this_thread::yield();
    flag = true;
  });
  tpl::spin_wait::spin_until([&] {
    if (flag.load()) {
      ++true_evaluations;
      return true;
    }
    false_evaluations.fetch_add(1);
    return false;
  });
  setter.join();
  EXPECT_GE(false_evaluations.load(), 1);
  EXPECT_EQ(true_evaluations, 1);
}

TEST(spin_lock, protects_a_counter) {
  tpl::spin_lock lock;
  long long counter = 0;
  const int per_thread = tpl_test::scaled(20000, 2000);
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t) ts.emplace_back([&] {
    for (int i = 0; i < per_thread; ++i) {
      std::lock_guard g(lock);
      ++counter;
    }
  });
  for (auto& t : ts) t.join();
  EXPECT_EQ(counter, 3LL * per_thread);
}

TEST(spin_lock, owner_tracking_reports_recursion_and_foreign_unlock) {
  tpl::spin_lock lock(true);
  lock.lock();
  EXPECT_TRUE(lock.is_held_by_current_thread());
  EXPECT_THROW(lock.lock(), tpl::lock_recursion_error);
  std::thread other([&] {
    EXPECT_FALSE(lock.is_held_by_current_thread());
    EXPECT_THROW(lock.unlock(), tpl::synchronization_lock_error);
    EXPECT_FALSE(lock.try_lock());
  });
  other.join();
  lock.unlock();
  EXPECT_FALSE(lock.is_held());
}

TEST(spin_lock, unlocking_an_unheld_lock_is_an_error) {
  tpl::spin_lock lock;
  EXPECT_THROW(lock.unlock(), tpl::synchronization_lock_error);
}

}  // namespace

}  // namespace sync_blocking_test_cpp
