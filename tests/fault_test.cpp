// Faults in user callbacks (issue 8): for each kind of callback tpl runs on the user's behalf, an
// exception it throws ends up where .NET would put it (or where tpl documents it goes, where tpl
// chose differently) and never kills a pool thread: after the fault, a fixed-size pool still has
// all its threads and every one of them still runs new work.
//
// Kinds: task bodies (coroutines, tpl::run, start_new long_running, dedicated_thread_scheduler),
// continue_with continuations, cancellation callbacks (cancel() on a user thread, on a pool
// thread, from cancel_after on the fake and on the system clock), timer callbacks (system and fake
// clock), channel item-dropped callbacks (drop_oldest, drop_newest, drop_write; try_write and
// write_async), parallel loop bodies (for_, for_each, for_async, for_each_async, and the source
// range of for_each_async), and raw coroutine handles resumed by the pool (a user coroutine type
// whose resumption throws: std::terminate, as .NET's unhandled exception on a pool thread). The
// pool's event listener is covered by pool_policy_live.a_throwing_listener_does_not_disturb_the_pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstdio>
#include <exception>
#include <iterator>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace fault_test_cpp {

using namespace std::chrono_literals;
using tpl_test::test_error;
using tpl_test::test_error_id;

namespace {

constexpr unsigned kThreads = 2;

tpl::thread_pool_options fixed_options() {
  tpl::thread_pool_options o;
  o.thread_count = kThreads;
  o.thread_name = "tpl-fault";
  o.max_threads = kThreads;  // fixed size: blocking and hill climbing cannot add threads
  o.idle_timeout = std::chrono::hours(1);
  return o;
}

/// Counts arrivals; wait() returns once `expected` arrived, or false after a generous safety net
/// (a hang guard, not a timing assertion).
class rendezvous {
 public:
  explicit rendezvous(unsigned expected) : expected_(expected) {}
  bool arrive_and_wait() {
    std::unique_lock g(m_);
    if (++arrived_ >= expected_) cv_.notify_all();
    return cv_.wait_for(g, 60s, [this] { return arrived_ >= expected_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  unsigned arrived_ = 0;
  const unsigned expected_;
};

/// The pool still has all its threads, each of them runs new work (kThreads items that can only
/// all finish if they run at once, on distinct threads), and it completes many more items.
void expect_pool_intact(tpl::thread_pool& pool) {
  EXPECT_EQ(pool.stats().thread_count, kThreads);
  rendezvous all(kThreads);
  std::mutex m;
  std::set<std::thread::id> ids;
  std::vector<tpl::task<bool>> meet;
  for (unsigned k = 0; k < kThreads; ++k) {
    meet.push_back(tpl::run(pool, [&] {
      {
        std::lock_guard g(m);
        ids.insert(std::this_thread::get_id());
      }
      return all.arrive_and_wait();
    }));
  }
  for (auto& t : meet) EXPECT_TRUE(t.get()) << "a pool thread did not take new work";
  EXPECT_EQ(ids.size(), kThreads);
  std::atomic<int> done{0};
  std::vector<tpl::task<>> items;
  for (int k = 0; k < 1000; ++k) items.push_back(tpl::run(pool, [&done] { done.fetch_add(1); }));
  for (auto& t : items) t.wait();
  EXPECT_EQ(done.load(), 1000);
  EXPECT_EQ(pool.stats().thread_count, kThreads);
}

/// The default pool (not fixed-size, so only "it still runs work") after a fault on it.
void expect_default_pool_runs_work() {
  std::atomic<int> done{0};
  std::vector<tpl::task<>> items;
  for (int k = 0; k < 200; ++k) items.push_back(tpl::run([&done] { done.fetch_add(1); }));
  for (auto& t : items) t.wait();
  EXPECT_EQ(done.load(), 200);
}

/// Waits for t to complete, whatever its outcome.
template <class T>
void settle(const tpl::task<T>& t) {
  try {
    t.wait();
  } catch (...) {
  }
}

std::vector<int> inner_ids(const std::exception_ptr& aggregate) {
  std::vector<int> ids;
  try {
    std::rethrow_exception(aggregate);
  } catch (const tpl::aggregate_exception& e) {
    for (const auto& inner : e.inner_exceptions()) ids.push_back(test_error_id(inner));
  } catch (...) {
    ADD_FAILURE() << "not an aggregate_exception";
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

// ---- 1. task bodies ------------------------------------------------------------------------------

TEST(fault, task_bodies_fault_their_task_rethrow_on_await_and_get_and_leave_the_pool_whole) {
  tpl::thread_pool pool(fixed_options());
  auto coroutine = [&](int id) -> tpl::task<int> {
    co_await tpl::resume_on(pool);
    if (id >= 0) throw test_error(id);
    co_return 0;
  };
  std::vector<tpl::task<int>> faulted;
  for (int k = 0; k < 64; ++k) faulted.push_back(coroutine(k));
  std::vector<tpl::task<int>> run_faulted;
  for (int k = 0; k < 64; ++k) run_faulted.push_back(tpl::run(pool, [k]() -> int { throw test_error(100 + k); }));
  for (int k = 0; k < 64; ++k) {
    // wait()/get(): an aggregate_exception holding the body's exception itself.
    const auto inner = tpl_test::wait_inner_exceptions(faulted[static_cast<std::size_t>(k)]);
    ASSERT_EQ(inner.size(), 1u);
    EXPECT_EQ(test_error_id(inner[0]), k);
    EXPECT_TRUE(faulted[static_cast<std::size_t>(k)].is_faulted());
    // co_await and sync_wait: the exception itself.
    EXPECT_EQ(test_error_id(tpl::sync_wait(tpl_test::exception_of_await(faulted[static_cast<std::size_t>(k)]))), k);
    EXPECT_EQ(test_error_id(tpl_test::thrown_by([&] { tpl::sync_wait(run_faulted[static_cast<std::size_t>(k)]); })),
              100 + k);
    EXPECT_EQ(inner_ids(run_faulted[static_cast<std::size_t>(k)].exception()), std::vector<int>{100 + k});
  }
  // operation_canceled from a body cancels the task instead.
  auto canceled = tpl::run(pool, []() -> int { throw tpl::operation_canceled(); });
  settle(canceled);
  EXPECT_TRUE(canceled.is_canceled());
  expect_pool_intact(pool);
}

TEST(fault, start_new_long_running_and_dedicated_thread_bodies_fault_their_task_and_the_threads_go_on) {
  // task_factory::start_new(long_running): the body runs on a thread of its own.
  auto lr = tpl::task_factory::start_new([]() -> int { throw test_error(41); },
                                         tpl::task_creation_options::long_running);
  EXPECT_EQ(test_error_id(tpl_test::thrown_by([&] { tpl::sync_wait(lr); })), 41);
  EXPECT_TRUE(lr.is_faulted());
  // A dedicated_thread_scheduler with one thread: after a faulting item, the same thread runs the
  // next items, in order.
  tpl::dedicated_thread_scheduler one(1, "tpl-fault-dedicated");
  std::thread::id first_thread;
  auto bad = tpl::run(one, [&]() -> int {
    first_thread = std::this_thread::get_id();
    throw test_error(42);
  });
  std::vector<int> order;
  std::vector<tpl::task<>> next;
  for (int k = 0; k < 10; ++k)
    next.push_back(tpl::run(one, [&, k] {
      EXPECT_EQ(std::this_thread::get_id(), first_thread);
      order.push_back(k);
    }));
  EXPECT_EQ(inner_ids(tpl_test::thrown_by([&] { bad.wait(); }) ? bad.exception() : nullptr), std::vector<int>{42});
  for (auto& t : next) t.wait();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

// ---- 2. continuations ----------------------------------------------------------------------------

TEST(fault, a_throwing_continuation_faults_only_the_continuation_task) {
  tpl::thread_pool pool(fixed_options());
  // Queued continuation (the default) of a successful antecedent running on the pool.
  auto antecedent = tpl::run(pool, [] { return 7; });
  auto cont = antecedent.continue_with([](tpl::task<int>& t) -> int { throw test_error(t.get()); });
  EXPECT_EQ(inner_ids(tpl::sync_wait(cont.continue_with([](tpl::task<int>& c) { return c.exception(); }))),
            std::vector<int>{7});
  EXPECT_TRUE(cont.is_faulted());
  EXPECT_TRUE(antecedent.is_completed_successfully());
  EXPECT_EQ(antecedent.get(), 7);

  // execute_synchronously: the continuation runs inside set_result() on the completing thread (a
  // pool thread here); set_result() does not throw, the antecedent keeps its result.
  tpl::task_completion_source<int> tcs;
  auto sync_cont = tcs.get_task().continue_with([](tpl::task<int>&) -> int { throw test_error(8); },
                                                 tpl::task_continuation_options::execute_synchronously);
  auto setter = tpl::run(pool, [&tcs] { tcs.set_result(5); });
  EXPECT_NO_THROW(setter.get());
  EXPECT_EQ(tcs.get_task().get(), 5);
  EXPECT_TRUE(sync_cont.is_faulted());  // ran inside set_result(), before it returned
  EXPECT_EQ(inner_ids(sync_cont.exception()), std::vector<int>{8});

  // A faulted antecedent keeps its own exception; the continuation's is its own.
  auto bad = tpl::run(pool, []() -> int { throw test_error(1); });
  auto bad_cont = bad.continue_with([](tpl::task<int>&) -> int { throw test_error(2); });
  EXPECT_EQ(inner_ids(tpl::sync_wait(bad_cont.continue_with([](tpl::task<int>& c) { return c.exception(); }))),
            std::vector<int>{2});
  EXPECT_EQ(inner_ids(bad.exception()), std::vector<int>{1});
  // operation_canceled from a continuation cancels it.
  auto canceled_cont = antecedent.continue_with([](tpl::task<int>&) -> int { throw tpl::operation_canceled(); });
  tpl::sync_wait(canceled_cont.continue_with([] {}));
  EXPECT_TRUE(canceled_cont.is_canceled());
  expect_pool_intact(pool);
  expect_default_pool_runs_work();
}

// ---- 3. cancellation callbacks -------------------------------------------------------------------

TEST(fault, cancel_on_a_pool_thread_runs_every_callback_then_faults_that_item_with_an_aggregate) {
  tpl::thread_pool pool(fixed_options());
  tpl::cancellation_token_source cts;
  std::vector<int> ran;  // written on the canceling thread only; read after the task completed
  auto awaited = tpl::when_cancelled(cts.token());
  auto r1 = cts.token().register_callback([&] { ran.push_back(1); });
  auto r2 = cts.token().register_callback([&] {
    ran.push_back(2);
    throw test_error(2);
  });
  auto r3 = cts.token().register_callback([&] { ran.push_back(3); });
  auto r4 = cts.token().register_callback([&] {
    ran.push_back(4);
    throw test_error(4);
  });
  auto canceler = tpl::run(pool, [&cts] { cts.cancel(); });
  const auto inner = tpl_test::wait_inner_exceptions(canceler);
  ASSERT_EQ(inner.size(), 1u);  // the aggregate cancel() threw, as the body's one exception
  EXPECT_EQ(inner_ids(inner[0]), (std::vector<int>{2, 4}));
  {
    // In the order the callbacks ran: newest first.
    std::vector<int> order;
    try {
      std::rethrow_exception(inner[0]);
    } catch (const tpl::aggregate_exception& e) {
      for (const auto& x : e.inner_exceptions()) order.push_back(test_error_id(x));
    }
    EXPECT_EQ(order, (std::vector<int>{4, 2}));
  }
  EXPECT_EQ(ran, (std::vector<int>{4, 3, 2, 1}));  // every callback ran, newest first
  EXPECT_TRUE(cts.is_cancellation_requested());
  EXPECT_TRUE(awaited.is_completed_successfully());  // registered first: ran last, despite the throws
  EXPECT_NO_THROW(cts.cancel());                     // a second cancel does nothing
  expect_pool_intact(pool);
}

TEST(fault, cancel_after_on_fake_time_throws_the_aggregate_out_of_advance_and_the_clock_goes_on) {
  tpl::testing::fake_time_provider clock;
  tpl::cancellation_token_source cts;
  int after = 0;
  auto r1 = cts.token().register_callback([&] { ++after; });
  auto r2 = cts.token().register_callback([] { throw test_error(9); });
  cts.cancel_after(5s, clock);
  auto later = tpl::delay(10s, clock);
  clock.advance(4s);
  EXPECT_FALSE(cts.is_cancellation_requested());
  const auto e = tpl_test::thrown_by([&] { clock.advance(2s); });
  EXPECT_EQ(inner_ids(e), std::vector<int>{9});
  EXPECT_TRUE(cts.is_cancellation_requested());
  EXPECT_EQ(after, 1);
  EXPECT_EQ(clock.utc_now(), tpl::testing::fake_time_provider::default_start() + 5s);  // stopped at the timer
  clock.advance(5s);
  EXPECT_TRUE(later.is_completed_successfully());
  EXPECT_EQ(clock.armed_timers(), 0u);
}

TEST(fault, cancel_after_on_the_system_clock_reports_on_stderr_and_the_timer_thread_goes_on) {
  testing::internal::CaptureStderr();
  std::string err;
  {
    tpl::cancellation_token_source cts;
    tpl::task_completion_source<> last_ran;
    auto r1 = cts.token().register_callback([&] { last_ran.try_set_result(); });  // runs last
    auto r2 = cts.token().register_callback([] { throw test_error(11); });
    cts.cancel_after(1ms);
    tpl::sync_wait(last_ran.get_task());
    EXPECT_TRUE(cts.is_cancellation_requested());
  }  // the source's destructor disposes its timer: waits for the callback, the report included
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("exception escaped a timer callback"), std::string::npos) << err;
  EXPECT_NE(err.find("test_error 11"), std::string::npos) << err;
  // The timer thread and the pool thread that ran the callback are still in service.
  for (int k = 0; k < 3; ++k) tpl::sync_wait(tpl::delay(1ms));
  tpl::cancellation_token_source again(1ms);
  tpl::sync_wait(tpl::when_cancelled(again.token()));
  expect_default_pool_runs_work();
}

// ---- 4. timer callbacks --------------------------------------------------------------------------

TEST(fault, system_timer_callback_exception_is_reported_and_other_timers_and_the_pool_go_on) {
  testing::internal::CaptureStderr();
  std::atomic<int> calls{0};
  {
    tpl::task_completion_source<> thrown;
    auto t = tpl::system_time_provider().create_timer(
        [&] {
          calls.fetch_add(1);
          thrown.try_set_result();
          throw test_error(21);
        },
        1ms, tpl::infinite_timeout);
    tpl::sync_wait(thrown.get_task());
    t.dispose();  // waits for the callback, the report included
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_NE(err.find("exception escaped a timer callback: test_error 21"), std::string::npos) << err;
  tpl::task_completion_source<> other;
  auto t2 = tpl::system_time_provider().create_timer([&] { other.try_set_result(); }, 1ms, tpl::infinite_timeout);
  tpl::sync_wait(other.get_task());
  expect_default_pool_runs_work();
}

TEST(fault, fake_timer_callback_exception_propagates_out_of_advance_and_the_timers_stay_consistent) {
  tpl::testing::fake_time_provider clock;
  std::vector<std::string> log;
  int periodic_ticks = 0;
  auto periodic = clock.create_timer(
      [&] {
        ++periodic_ticks;
        log.push_back("p" + std::to_string(periodic_ticks));
        if (periodic_ticks == 2) throw test_error(2);
      },
      1s, 1s);
  auto once = clock.create_timer([&] { log.push_back("once"); }, 3s, tpl::infinite_timeout);
  // The second tick throws: the exception itself (not wrapped) leaves advance(), with the clock on
  // that tick's due time; nothing after it ran.
  const auto e = tpl_test::thrown_by([&] { clock.advance(10s); });
  EXPECT_EQ(test_error_id(e), 2);
  EXPECT_EQ(clock.utc_now(), tpl::testing::fake_time_provider::default_start() + 2s);
  EXPECT_EQ(log, (std::vector<std::string>{"p1", "p2"}));
  // The periodic timer was re-armed before its callback ran; the one-shot is still armed.
  EXPECT_EQ(clock.armed_timers(), 2u);
  clock.advance(1s);
  EXPECT_EQ(log, (std::vector<std::string>{"p1", "p2", "p3", "once"}));
  periodic.dispose();
  EXPECT_EQ(clock.armed_timers(), 0u);
}

// ---- 5. channel item-dropped callbacks ----------------------------------------------------------

namespace {
struct drop_case {
  tpl::bounded_channel_full_mode mode;
  int dropped;                 // which of 1, 2, 3 the write of 3 drops
  std::vector<int> remaining;  // what the channel holds afterwards
};
}  // namespace

TEST(fault, a_throwing_item_dropped_callback_propagates_to_the_writer_after_the_write_took_effect) {
  const drop_case cases[] = {
      {tpl::bounded_channel_full_mode::drop_oldest, 1, {2, 3}},
      {tpl::bounded_channel_full_mode::drop_newest, 2, {1, 3}},
      {tpl::bounded_channel_full_mode::drop_write, 3, {1, 2}},
  };
  tpl::thread_pool pool(fixed_options());
  for (const auto& c : cases) {
    for (const bool async_write : {false, true}) {
      SCOPED_TRACE(std::string(async_write ? "write_async " : "try_write ") + std::to_string(static_cast<int>(c.mode)));
      std::vector<int> dropped;
      bool throwing = true;
      auto ch = tpl::make_bounded_channel<int>({.capacity = 2, .full_mode = c.mode}, [&](int v) {
        dropped.push_back(v);
        if (throwing) throw test_error(v);
      });
      auto w = ch.writer();
      auto r = ch.reader();
      ASSERT_TRUE(w.try_write(1));
      ASSERT_TRUE(w.try_write(2));
      std::exception_ptr e;
      if (async_write) {
        // On a pool thread: the exception leaves co_await write_async (as .NET's WriteAsync
        // throws it synchronously) and faults that task; the thread survives.
        auto writer = [](tpl::thread_pool& p, tpl::channel_writer<int> out) -> tpl::task<> {
          co_await tpl::resume_on(p);
          co_await out.write_async(3);
        };
        auto t = writer(pool, w);
        e = tpl::sync_wait(tpl_test::exception_of_await(t));
      } else {
        e = tpl_test::thrown_by([&] { (void)w.try_write(3); });
      }
      EXPECT_EQ(test_error_id(e), c.dropped);  // the callback's own exception
      EXPECT_EQ(dropped, std::vector<int>{c.dropped});
      // The write took effect and the channel is consistent: the item is accounted for (in the
      // channel, or handed to the callback), nothing is lost or duplicated.
      EXPECT_EQ(r.count(), 2u);
      throwing = false;
      EXPECT_TRUE(w.try_write(4));  // dropping again, quietly
      ASSERT_EQ(dropped.size(), 2u);
      w.complete();
      std::vector<int> got;
      while (auto v = r.try_read()) got.push_back(*v);
      std::vector<int> all = got;
      all.insert(all.end(), dropped.begin(), dropped.end());
      std::sort(all.begin(), all.end());
      EXPECT_EQ(all, (std::vector<int>{1, 2, 3, 4}));
      // The first three writes left c.remaining; the fourth applied the same rule to it.
      std::vector<int> expect_got = c.remaining;
      if (c.mode == tpl::bounded_channel_full_mode::drop_oldest) expect_got = {expect_got[1], 4};
      if (c.mode == tpl::bounded_channel_full_mode::drop_newest) expect_got = {expect_got[0], 4};
      EXPECT_EQ(got, expect_got);
      EXPECT_TRUE(r.completion().is_completed_successfully());
    }
  }
  expect_pool_intact(pool);
}

TEST(fault, a_throwing_item_dropped_callback_leaves_the_buffer_intact_for_readers) {
  tpl::thread_pool pool(fixed_options());
  auto ch = tpl::make_bounded_channel<int>({.capacity = 1, .full_mode = tpl::bounded_channel_full_mode::drop_write},
                                           [](int v) { throw test_error(v); });
  auto reader = [](tpl::thread_pool& p, tpl::channel_reader<int> in) -> tpl::task<int> {
    co_await tpl::resume_on(p);
    co_return co_await in.read_async();
  };
  auto r = reader(pool, ch.reader());
  EXPECT_TRUE(ch.writer().try_write(1));  // to the waiting reader, or buffered: no drop either way
  EXPECT_EQ(r.get(), 1);
  EXPECT_TRUE(ch.writer().try_write(2));
  EXPECT_EQ(test_error_id(tpl_test::thrown_by([&] { (void)ch.writer().try_write(3); })), 3);
  EXPECT_EQ(ch.reader().try_read(), std::optional<int>(2));
  expect_pool_intact(pool);
}

// ---- 6. parallel loop bodies ---------------------------------------------------------------------

TEST(fault, blocking_loops_report_every_body_exception_and_stop) {
  tpl::thread_pool pool(fixed_options());
  tpl::parallel_options on_pool;
  on_pool.scheduler = &pool;
  constexpr unsigned workers = kThreads + 1;  // the pool threads and the caller
  {
    // Every one of `workers` bodies is running when any of them throws: all are reported.
    rendezvous all(workers);
    const auto e = tpl_test::thrown_by([&] {
      (void)tpl::parallel::for_(0, static_cast<int>(workers), [&](int i) {
        all.arrive_and_wait();
        throw test_error(i);
      }, on_pool);
    });
    EXPECT_EQ(inner_ids(e), (std::vector<int>{0, 1, 2}));
  }
  {
    std::vector<int> items{10, 11, 12};
    rendezvous all(workers);
    const auto e = tpl_test::thrown_by([&] {
      (void)tpl::parallel::for_each(items, [&](int v) {
        all.arrive_and_wait();
        throw test_error(v);
      }, on_pool);
    });
    EXPECT_EQ(inner_ids(e), (std::vector<int>{10, 11, 12}));
  }
  {
    // The first exception stops the loop: far fewer than n bodies run.
    constexpr int n = 100'000;
    std::atomic<int> ran{0};
    const auto e = tpl_test::thrown_by([&] {
      (void)tpl::parallel::for_(0, n, [&](int i) {
        ran.fetch_add(1);
        if (i == 0) throw test_error(0);
      }, on_pool);
    });
    EXPECT_EQ(inner_ids(e), std::vector<int>{0});
    EXPECT_LT(ran.load(), n);
  }
  expect_pool_intact(pool);
}

TEST(fault, async_loops_report_every_body_exception_and_cancel_the_rest) {
  tpl::thread_pool pool(fixed_options());
  tpl::parallel_options opts;
  opts.scheduler = &pool;
  opts.max_degree_of_parallelism = 3;
  {
    // Three bodies, all started before any throws (they meet on an async gate).
    std::atomic<int> started{0};
    tpl::task_completion_source<> gate;
    auto loop = tpl::parallel::for_async(0, 3, [&](int i, const tpl::cancellation_token&) -> tpl::task<> {
      if (started.fetch_add(1) + 1 == 3) gate.set_result();
      co_await gate.get_task();
      throw test_error(i);
    }, opts);
    settle(loop);
    EXPECT_TRUE(loop.is_faulted());
    EXPECT_EQ(inner_ids(loop.exception()), (std::vector<int>{0, 1, 2}));
    const auto first = tpl::sync_wait(tpl_test::exception_of_await(loop));  // co_await: the first itself
    EXPECT_GE(test_error_id(first), 0);
  }
  {
    std::vector<int> items{20, 21, 22};
    std::atomic<int> started{0};
    tpl::task_completion_source<> gate;
    auto loop = tpl::parallel::for_each_async(items, [&](int v, const tpl::cancellation_token&) -> tpl::task<> {
      if (started.fetch_add(1) + 1 == 3) gate.set_result();
      co_await gate.get_task();
      throw test_error(v);
    }, opts);
    settle(loop);
    EXPECT_EQ(inner_ids(loop.exception()), (std::vector<int>{20, 21, 22}));
  }
  {
    // The first failure cancels the other bodies' token (operation_canceled thrown by them is the
    // loop's own cancellation, not reported) and the loop stops claiming: the other bodies wait
    // for that cancellation, so exactly `degree` bodies ever start.
    constexpr int n = 100'000;
    std::atomic<int> ran{0};
    std::atomic<int> saw_cancel{0};
    tpl::task_completion_source<> others_started;
    auto loop = tpl::parallel::for_async(0, n, [&](int i, const tpl::cancellation_token& t) -> tpl::task<> {
      if (ran.fetch_add(1) + 1 == 3) others_started.set_result();
      if (i == 0) {
        co_await others_started.get_task();
        throw test_error(0);
      }
      co_await t;  // until the loop cancels it
      saw_cancel.fetch_add(1);
      t.throw_if_cancellation_requested();
    }, opts);
    settle(loop);
    EXPECT_TRUE(loop.is_faulted());
    EXPECT_EQ(inner_ids(loop.exception()), std::vector<int>{0});
    EXPECT_EQ(saw_cancel.load(), 2);
    EXPECT_EQ(ran.load(), 3);
  }
  expect_pool_intact(pool);
}

namespace {
/// An input range whose iterator throws test_error(k) when advanced past position k: a user
/// sequence (a parser, a generator) failing while the loop enumerates it.
struct throwing_sequence {
  int fail_at;
  struct iterator {
    using value_type = int;
    using difference_type = std::ptrdiff_t;
    int pos = 0;
    int fail_at = 0;
    int operator*() const { return pos; }
    iterator& operator++() {
      if (++pos == fail_at) throw test_error(1000 + pos);
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& a, std::default_sentinel_t) { return a.pos >= 1'000'000; }
  };
  iterator begin() const { return {0, fail_at}; }
  std::default_sentinel_t end() const { return {}; }
};
static_assert(std::ranges::input_range<throwing_sequence>);
}  // namespace

TEST(fault, an_exception_from_the_source_range_of_for_each_async_faults_the_loop) {
  // .NET's ForEachAsync records an exception from the enumerator's MoveNext like a body's: the
  // loop's task faults with it. (Before the fix, it escaped tpl's loop worker coroutine, whose
  // promise calls std::terminate.)
  tpl::thread_pool pool(fixed_options());
  for (int degree : {1, 2, 3}) {
    tpl::parallel_options opts;
    opts.scheduler = &pool;
    opts.max_degree_of_parallelism = degree;
    std::atomic<int> bodies{0};
    auto loop = tpl::parallel::for_each_async(throwing_sequence{5},
                                              [&](int, const tpl::cancellation_token&) -> tpl::task<> {
                                                bodies.fetch_add(1);
                                                co_return;
                                              },
                                              opts);
    settle(loop);
    ASSERT_TRUE(loop.is_faulted());
    EXPECT_EQ(inner_ids(loop.exception()), std::vector<int>{1005});
    EXPECT_EQ(bodies.load(), 5);  // items 0..4 were produced before the source failed
  }
  expect_pool_intact(pool);
}

// ---- raw work items ------------------------------------------------------------------------------

namespace {
/// A user coroutine type (not a tpl task) whose promise lets exceptions escape resume(): the raw
/// form of a work item. tpl tasks never do this (their promise stores the exception).
struct raw_item {
  struct promise_type {
    raw_item get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() { throw; }
  };
};
raw_item throw_on(tpl::scheduler& s) {
  co_await tpl::resume_on(s);
  throw test_error(31);
}
}  // namespace

TEST(fault_death, an_exception_escaping_a_raw_coroutine_resumed_by_the_pool_terminates_the_process) {
  // .NET: an unhandled exception in a QueueUserWorkItem callback ends the process. tpl's pool
  // resumes handles through scheduler::run, which is noexcept: std::terminate (documented in
  // docs/thread-pool.md). Every tpl coroutine type stores the exception instead.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        tpl::thread_pool pool(fixed_options());
        throw_on(pool);
        std::this_thread::sleep_for(60s);  // the pool thread terminates the process first
      },
      "test_error 31");
}

}  // namespace fault_test_cpp
