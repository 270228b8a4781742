// tpl::parallel: blocking for_ / for_each (results, early exit, errors, cancellation, degree) and
// asynchronous for_async / for_each_async (results, degree limits, errors, cancellation). No test
// needs more pool threads at once than the pool has: bodies that wait do so asynchronously.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <ranges>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace parallel_test_cpp {

namespace {

using tpl_test::holds;
using tpl_test::test_error;
using tpl_test::test_error_id;
using tpl_test::thrown_by;

/// Counts bodies running at once and remembers the peak.
struct concurrency_meter {
  std::atomic<int> now{0};
  std::atomic<int> peak{0};
  void enter() {
    const int n = now.fetch_add(1) + 1;
    int seen = peak.load();
    while (n > seen && !peak.compare_exchange_weak(seen, n)) {
    }
  }
  void leave() { now.fetch_sub(1); }
};

tpl::parallel_options degree(int d) {
  tpl::parallel_options o;
  o.max_degree_of_parallelism = d;
  return o;
}

// ---- for_: results ------------------------------------------------------------------------------

TEST(parallel_for, runs_every_index_exactly_once) {
  const int n = tpl_test::scaled(20000, 4000);
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  auto r = tpl::parallel::for_(0, n, [&](int i) { hits[static_cast<std::size_t>(i)].fetch_add(1); });
  EXPECT_TRUE(r.is_completed);
  EXPECT_FALSE(r.lowest_break_iteration.has_value());
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(parallel_for, an_empty_or_reversed_range_runs_nothing) {
  std::atomic<int> calls{0};
  EXPECT_TRUE(tpl::parallel::for_(5, 5, [&](int) { calls++; }).is_completed);
  EXPECT_TRUE(tpl::parallel::for_(7, 3, [&](int) { calls++; }).is_completed);
  EXPECT_EQ(calls.load(), 0);
}

TEST(parallel_for, handles_negative_bounds_and_narrow_or_unsigned_index_types) {
  std::atomic<long long> sum{0};
  tpl::parallel::for_(-50, 50, [&](int i) { sum += i; });
  EXPECT_EQ(sum.load(), -50);
  std::atomic<int> count{0};
  tpl::parallel::for_(std::int8_t{-128}, std::int8_t{127}, [&](std::int8_t) { count++; });
  EXPECT_EQ(count.load(), 255);
  std::atomic<std::uint64_t> usum{0};
  tpl::parallel::for_(std::uint64_t{10}, std::uint64_t{20}, [&](std::uint64_t i) { usum += i; });
  EXPECT_EQ(usum.load(), 145u);
}

TEST(parallel_for, degree_one_runs_everything_in_order_on_the_calling_thread) {
  std::vector<int> order;
  std::set<std::thread::id> threads;
  tpl::parallel::for_(0, 100, [&](int i) {
    order.push_back(i);
    threads.insert(std::this_thread::get_id());
  }, degree(1));
  ASSERT_EQ(order.size(), 100u);
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_EQ(*threads.begin(), std::this_thread::get_id());
}

TEST(parallel_for, never_runs_more_bodies_at_once_than_the_degree) {
  for (int d : {1, 2, 3}) {
    concurrency_meter meter;
    tpl::parallel::for_(0, tpl_test::scaled(2000, 400), [&](int) {
      meter.enter();
      for (int k = 0; k < 100; ++k) std::atomic_signal_fence(std::memory_order_seq_cst);
      meter.leave();
    }, degree(d));
    EXPECT_LE(meter.peak.load(), d) << "degree " << d;
    EXPECT_GE(meter.peak.load(), 1);
  }
}

TEST(parallel_for, a_negative_degree_other_than_minus_one_is_rejected) {
  EXPECT_THROW(tpl::parallel::for_(0, 10, [](int) {}, degree(-2)), std::invalid_argument);
  EXPECT_THROW(tpl::parallel::for_(0, 0, [](int) {}, degree(-7)), std::invalid_argument);
  std::atomic<int> calls{0};
  tpl::parallel::for_(0, 10, [&](int) { calls++; }, degree(-1));
  EXPECT_EQ(calls.load(), 10);
}

TEST(parallel_for, runs_from_a_pool_thread_and_nested_without_deadlock) {
  // Helpers may never start (the pool is busy with us); the caller then does the work itself.
  std::atomic<int> total{0};
  tpl::run([&] {
    tpl::parallel::for_(0, 8, [&](int) { tpl::parallel::for_(0, 100, [&](int) { total++; }); });
  }).get();
  EXPECT_EQ(total.load(), 800);
}

TEST(parallel_for, helpers_run_on_the_given_scheduler) {
  tpl_test::dedicated_thread_scheduler sched;
  tpl::parallel_options o;
  o.scheduler = &sched;
  o.max_degree_of_parallelism = 2;
  std::set<std::thread::id> threads;
  std::mutex m;
  tpl::parallel::for_(0, 2000, [&](int) {
    std::lock_guard g(m);
    threads.insert(std::this_thread::get_id());
  }, o);
  for (auto id : threads) EXPECT_TRUE(id == std::this_thread::get_id() || id == sched.thread_id());
  EXPECT_GE(sched.scheduled_count(), 1u);  // the helper was queued there
}

// ---- for_: early exit ---------------------------------------------------------------------------

TEST(parallel_for, stop_starts_no_more_iterations_and_reports_not_completed) {
  std::vector<int> ran;
  auto r = tpl::parallel::for_(0, 1000, [&](int i, tpl::parallel_loop_state& s) {
    ran.push_back(i);
    if (i == 10) s.stop();
  }, degree(1));
  EXPECT_FALSE(r.is_completed);
  EXPECT_FALSE(r.lowest_break_iteration.has_value());
  EXPECT_EQ(ran.back(), 10);
}

TEST(parallel_for, break_runs_every_iteration_below_the_break_and_reports_it) {
  const int n = tpl_test::scaled(20000, 4000);
  const int brk = n / 3;
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  auto r = tpl::parallel::for_(0, n, [&](int i, tpl::parallel_loop_state& s) {
    hits[static_cast<std::size_t>(i)]++;
    if (i == brk) s.break_();
  });
  EXPECT_FALSE(r.is_completed);
  ASSERT_TRUE(r.lowest_break_iteration.has_value());
  EXPECT_EQ(*r.lowest_break_iteration, brk);
  for (int i = 0; i <= brk; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << i;
}

TEST(parallel_for, break_reports_the_lowest_of_several_breaks_in_iteration_terms) {
  auto r = tpl::parallel::for_(100, 200, [&](int i, tpl::parallel_loop_state& s) {
    if (i == 150 || i == 120 || i == 180) s.break_();
  }, degree(1));
  ASSERT_TRUE(r.lowest_break_iteration.has_value());
  EXPECT_EQ(*r.lowest_break_iteration, 120);
}

TEST(parallel_for, loop_state_tells_iterations_above_a_break_to_exit) {
  std::atomic<bool> saw_exit{false};
  tpl::parallel::for_(0, 10, [&](int i, tpl::parallel_loop_state& s) {
    if (i == 2) s.break_();
    if (i == 2) saw_exit = s.should_exit_current_iteration();
    EXPECT_EQ(s.lowest_break_iteration().value_or(-1), i >= 2 ? 2 : -1);
  }, degree(1));
  EXPECT_FALSE(saw_exit.load());  // the breaking iteration itself is not above the break
}

TEST(parallel_for, stop_after_break_is_an_error) {
  auto e = thrown_by([] {
    tpl::parallel::for_(0, 10, [](int i, tpl::parallel_loop_state& s) {
      if (i == 1) s.break_();
      if (i == 1) s.stop();
    }, degree(1));
  });
  try {
    std::rethrow_exception(e);
  } catch (const tpl::aggregate_exception& a) {
    ASSERT_EQ(a.size(), 1u);
    EXPECT_TRUE(holds<tpl::invalid_operation>(a.inner_exceptions()[0]));
  } catch (...) {
    ADD_FAILURE() << "expected aggregate_exception";
  }
}

// ---- for_: errors and cancellation ----------------------------------------------------------------

TEST(parallel_for, an_exception_stops_the_loop_and_is_reported_in_an_aggregate) {
  std::vector<int> ran;
  try {
    tpl::parallel::for_(0, 100, [&](int i) {
      ran.push_back(i);
      if (i == 3) throw test_error(3);
    }, degree(1));
    ADD_FAILURE() << "no exception";
  } catch (const tpl::aggregate_exception& a) {
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(test_error_id(a.inner_exceptions()[0]), 3);
  }
  EXPECT_EQ(ran.back(), 3);
}

TEST(parallel_for, every_concurrent_exception_is_reported) {
  // Each worker throws on its first iteration; all of them must be in the aggregate.
  std::atomic<int> thrown{0};
  try {
    tpl::parallel::for_(0, 1000, [&](int i) {
      thrown++;
      throw test_error(i);
    });
    ADD_FAILURE() << "no exception";
  } catch (const tpl::aggregate_exception& a) {
    EXPECT_EQ(static_cast<int>(a.size()), thrown.load());
    EXPECT_GE(a.size(), 1u);
  }
}

TEST(parallel_for, a_canceled_token_throws_operation_canceled) {
  tpl::cancellation_token_source cts;
  cts.cancel();
  tpl::parallel_options o;
  o.token = cts.token();
  std::atomic<int> calls{0};
  EXPECT_THROW(tpl::parallel::for_(0, 10, [&](int) { calls++; }, o), tpl::operation_canceled);
  EXPECT_EQ(calls.load(), 0);
}

TEST(parallel_for, cancellation_during_the_loop_stops_it_and_throws_operation_canceled) {
  tpl::cancellation_token_source cts;
  tpl::parallel_options o;
  o.token = cts.token();
  o.max_degree_of_parallelism = 1;
  // Chunks are claimed whole, so a few more iterations of the current chunk may run; far fewer
  // than all of them.
  std::atomic<int> calls{0};
  EXPECT_THROW(tpl::parallel::for_(0, 100000, [&](int i) {
    calls++;
    if (i == 10) cts.cancel();
  }, o), tpl::operation_canceled);
  EXPECT_LT(calls.load(), 100000);
}

// ---- for_each -----------------------------------------------------------------------------------

TEST(parallel_for_each, visits_every_item_of_a_vector_by_reference) {
  std::vector<int> v(5000, 1);
  tpl::parallel::for_each(v, [](int& x) { x *= 3; });
  for (int x : v) ASSERT_EQ(x, 3);
}

TEST(parallel_for_each, visits_every_item_of_a_list_and_a_view) {
  std::list<int> l;
  for (int i = 0; i < 1000; ++i) l.push_back(i);
  std::atomic<long long> sum{0};
  tpl::parallel::for_each(l, [&](int x) { sum += x; });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
  sum = 0;
  tpl::parallel::for_each(std::views::iota(0, 100), [&](int x) { sum += x; });
  EXPECT_EQ(sum.load(), 99 * 100 / 2);
}

TEST(parallel_for_each, break_reports_the_item_position) {
  std::list<int> l(50, 7);
  auto r = tpl::parallel::for_each(l, [](int, tpl::parallel_loop_state& s) { s.break_(); }, degree(1));
  ASSERT_TRUE(r.lowest_break_iteration.has_value());
  EXPECT_EQ(*r.lowest_break_iteration, 0);
}

// ---- for_async ------------------------------------------------------------------------------------

tpl::task<> no_op(std::int64_t, const tpl::cancellation_token&) { co_return; }

TEST(parallel_for_async, runs_every_index_exactly_once_with_synchronous_bodies) {
  const int n = tpl_test::scaled(50000, 5000);
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  tpl::parallel::for_async(0, n, [&](int i, const tpl::cancellation_token&) -> tpl::task<> {
    hits[static_cast<std::size_t>(i)]++;
    co_return;
  }).wait();
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(parallel_for_async, runs_every_index_exactly_once_with_suspending_bodies) {
  const int n = tpl_test::scaled(2000, 400);
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  tpl::parallel::for_async(0, n, [&](int i, const tpl::cancellation_token&) -> tpl::task<> {
    co_await tpl::yield();
    hits[static_cast<std::size_t>(i)]++;
  }, degree(8)).wait();
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(parallel_for_async, accepts_value_task_bodies) {
  std::atomic<int> sum{0};
  tpl::parallel::for_async(0, 100, [&](int i, const tpl::cancellation_token&) -> tpl::value_task<> {
    sum += i;
    co_return;
  }).wait();
  EXPECT_EQ(sum.load(), 4950);
}

TEST(parallel_for_async, an_empty_range_completes_at_once) {
  auto t = tpl::parallel::for_async(3, 3, no_op);
  EXPECT_TRUE(t.is_completed_successfully());
  auto u = tpl::parallel::for_async(5, 1, no_op);
  EXPECT_TRUE(u.is_completed_successfully());
}

TEST(parallel_for_async, never_has_more_bodies_in_flight_than_the_degree) {
  for (int d : {1, 2, 5}) {
    concurrency_meter meter;
    tpl::parallel::for_async(0, tpl_test::scaled(300, 100), [&](int, const tpl::cancellation_token&) -> tpl::task<> {
      meter.enter();
      co_await tpl::yield();
      co_await tpl::yield();
      meter.leave();
    }, degree(d)).wait();
    EXPECT_LE(meter.peak.load(), d) << "degree " << d;
  }
}

TEST(parallel_for_async, default_degree_is_the_number_of_cores) {
  concurrency_meter meter;
  tpl::parallel::for_async(0, 200, [&](int, const tpl::cancellation_token&) -> tpl::task<> {
    meter.enter();
    co_await tpl::yield();
    meter.leave();
  }).wait();
  EXPECT_LE(meter.peak.load(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

/// Runs `n` bodies of for_async(0, n) with `options`, each suspended on one event that opens only
/// once all `n` have arrived, and checks that all `n` were in flight at once (below that the loop
/// would never open the event: the test's hang guard names it), that every index ran exactly once
/// and that the loop completed successfully.
void expect_all_bodies_in_flight_at_once(int n, const tpl::parallel_options& options) {
  std::vector<std::atomic<int>> runs(static_cast<std::size_t>(n));
  concurrency_meter waiting;
  tpl::async_countdown_event arrived(n);
  tpl::async_manual_reset_event go;
  auto loop = tpl::parallel::for_async(0, n, [&](int i, const tpl::cancellation_token&) -> tpl::task<> {
    runs[static_cast<std::size_t>(i)].fetch_add(1);
    waiting.enter();
    arrived.signal();
    co_await go.wait_async();
    waiting.leave();
  }, options);
  tpl::sync_wait(arrived.wait_async());
  // Every body has arrived and none can leave before go opens: all n are in flight now.
  EXPECT_EQ(waiting.now.load(), n);
  EXPECT_FALSE(loop.is_completed());
  go.set();
  loop.wait();
  EXPECT_TRUE(loop.is_completed_successfully());
  EXPECT_EQ(waiting.now.load(), 0);
  EXPECT_EQ(waiting.peak.load(), n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(runs[static_cast<std::size_t>(i)].load(), 1) << "index " << i;
}

TEST(parallel_for_async, the_degree_is_reached_when_bodies_wait) {
  expect_all_bodies_in_flight_at_once(6, degree(6));
}

TEST(parallel_for_async, unlimited_degree_puts_every_waiting_body_in_flight) {
  expect_all_bodies_in_flight_at_once(40, degree(-1));
}

TEST(parallel_for_async, a_negative_degree_other_than_minus_one_throws_at_once) {
  EXPECT_THROW((void)tpl::parallel::for_async(0, 10, no_op, degree(-2)), std::invalid_argument);
  EXPECT_THROW((void)tpl::parallel::for_async(0, 0, no_op, degree(-3)), std::invalid_argument);
}

TEST(parallel_for_async, the_first_exception_cancels_the_other_bodies) {
  std::atomic<int> canceled_bodies{0};
  std::atomic<int> started{0};
  auto loop = tpl::parallel::for_async(0, 4, [&](int i, const tpl::cancellation_token& token) -> tpl::task<> {
    started++;
    if (i == 0) {
      co_await tpl::yield();
      throw test_error(0);
    }
    try {
      co_await tpl::delay(std::chrono::nanoseconds(tpl::infinite_timeout), token);
    } catch (const tpl::operation_canceled&) {
      canceled_bodies++;
      throw;
    }
  }, degree(4));
  auto inner = tpl_test::wait_inner_exceptions(loop);
  ASSERT_EQ(inner.size(), 1u);  // the bodies' operation_canceled are the loop's own doing
  EXPECT_EQ(test_error_id(inner[0]), 0);
  EXPECT_TRUE(loop.is_faulted());
  // Bodies that had not started when body 0 failed never start; the others were all canceled.
  EXPECT_EQ(canceled_bodies.load(), started.load() - 1);
}

TEST(parallel_for_async, every_exception_is_reported) {
  tpl::async_countdown_event arrived(4);
  tpl::async_manual_reset_event go;
  auto loop = tpl::parallel::for_async(0, 4, [&](int i, const tpl::cancellation_token&) -> tpl::task<> {
    arrived.signal();
    co_await go.wait_async();
    if (i == 1 || i == 3) throw test_error(i);
  }, degree(4));
  tpl::sync_wait(arrived.wait_async());
  go.set();
  auto inner = tpl_test::wait_inner_exceptions(loop);
  ASSERT_EQ(inner.size(), 2u);
  std::set<int> ids{test_error_id(inner[0]), test_error_id(inner[1])};
  EXPECT_EQ(ids, (std::set<int>{1, 3}));
}

TEST(parallel_for_async, a_body_throwing_synchronously_faults_the_loop) {
  auto loop = tpl::parallel::for_async(0, 100, [](int i, const tpl::cancellation_token&) -> tpl::task<> {
    if (i == 5) throw test_error(5);
    return tpl::completed_task();
  }, degree(1));
  auto inner = tpl_test::wait_inner_exceptions(loop);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(test_error_id(inner[0]), 5);
}

TEST(parallel_for_async, a_canceled_token_gives_a_canceled_task_without_running_bodies) {
  tpl::cancellation_token_source cts;
  cts.cancel();
  tpl::parallel_options o;
  o.token = cts.token();
  std::atomic<int> calls{0};
  auto t = tpl::parallel::for_async(0, 10, [&](int, const tpl::cancellation_token&) -> tpl::task<> {
    calls++;
    co_return;
  }, o);
  EXPECT_TRUE(t.is_canceled());
  EXPECT_EQ(calls.load(), 0);
}

TEST(parallel_for_async, external_cancellation_during_the_loop_gives_a_canceled_task) {
  tpl::cancellation_token_source cts;
  tpl::parallel_options o;
  o.token = cts.token();
  o.max_degree_of_parallelism = 2;
  tpl::async_countdown_event started(2);
  std::atomic<int> calls{0};
  auto t = tpl::parallel::for_async(0, 1000, [&](int, const tpl::cancellation_token& token) -> tpl::task<> {
    calls++;
    started.signal();
    co_await tpl::delay(std::chrono::nanoseconds(tpl::infinite_timeout), token);
  }, o);
  tpl::sync_wait(started.wait_async());
  cts.cancel();
  EXPECT_THROW(t.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(t.is_canceled());
  EXPECT_EQ(calls.load(), 2);
}

TEST(parallel_for_async, workers_start_on_the_given_scheduler) {
  tpl_test::dedicated_thread_scheduler sched;
  tpl::parallel_options o;
  o.scheduler = &sched;
  o.max_degree_of_parallelism = 3;
  std::atomic<int> elsewhere{0};
  tpl::parallel::for_async(0, 50, [&](int, const tpl::cancellation_token&) -> tpl::task<> {
    if (std::this_thread::get_id() != sched.thread_id()) elsewhere++;
    co_return;
  }, o).wait();
  EXPECT_EQ(elsewhere.load(), 0);
}

// ---- for_each_async -----------------------------------------------------------------------------

TEST(parallel_for_each_async, visits_every_item_of_a_vector_by_reference) {
  std::vector<int> v(3000, 2);
  tpl::parallel::for_each_async(v, [](int& x, const tpl::cancellation_token&) -> tpl::task<> {
    x += 1;
    co_return;
  }).wait();
  for (int x : v) ASSERT_EQ(x, 3);
}

TEST(parallel_for_each_async, owns_an_rvalue_range) {
  std::atomic<long long> sum{0};
  auto t = tpl::parallel::for_each_async(std::vector<int>{1, 2, 3, 4}, [&](int x, const tpl::cancellation_token&) -> tpl::task<> {
    co_await tpl::yield();
    sum += x;
  });
  t.wait();
  EXPECT_EQ(sum.load(), 10);
}

TEST(parallel_for_each_async, visits_every_item_of_a_list_exactly_once) {
  std::list<int> l;
  for (int i = 0; i < 500; ++i) l.push_back(i);
  std::vector<std::atomic<int>> hits(500);
  tpl::parallel::for_each_async(l, [&](int& x, const tpl::cancellation_token&) -> tpl::task<> {
    co_await tpl::yield();
    hits[static_cast<std::size_t>(x)]++;
  }, degree(4)).wait();
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(parallel_for_each_async, moves_items_out_of_an_input_range) {
  std::istringstream in("1 2 3 4 5 6 7 8 9 10");
  std::atomic<int> sum{0};
  tpl::parallel::for_each_async(std::views::istream<int>(in), [&](int& x, const tpl::cancellation_token&) -> tpl::task<> {
    co_await tpl::yield();
    sum += x;
  }, degree(3)).wait();
  EXPECT_EQ(sum.load(), 55);
}

TEST(parallel_for_each_async, a_list_respects_the_degree) {
  std::list<int> l(200, 0);
  concurrency_meter meter;
  tpl::parallel::for_each_async(l, [&](int&, const tpl::cancellation_token&) -> tpl::task<> {
    meter.enter();
    co_await tpl::yield();
    meter.leave();
  }, degree(2)).wait();
  EXPECT_LE(meter.peak.load(), 2);
}

}  // namespace

namespace {

TEST(parallel_for_each_async, cancellation_reaches_bodies_in_flight_and_ends_canceled) {
  tpl::cancellation_token_source cts;
  tpl::parallel_options o;
  o.token = cts.token();
  o.max_degree_of_parallelism = 3;
  std::list<int> items(100, 1);
  tpl::async_countdown_event started(3);
  std::atomic<int> canceled_bodies{0};
  auto t = tpl::parallel::for_each_async(items, [&](int&, const tpl::cancellation_token& token) -> tpl::task<> {
    started.signal();
    try {
      co_await tpl::delay(std::chrono::nanoseconds(tpl::infinite_timeout), token);
    } catch (const tpl::operation_canceled&) {
      canceled_bodies++;
      throw;
    }
  }, o);
  tpl::sync_wait(started.wait_async());
  cts.cancel();
  EXPECT_THROW(t.wait(), tpl::aggregate_exception);
  EXPECT_TRUE(t.is_canceled());
  EXPECT_EQ(canceled_bodies.load(), 3);  // the three in flight; no other body started
}

TEST(parallel_for_each_async, an_item_taken_from_the_range_runs_its_body_even_when_the_loop_is_canceled_meanwhile) {
  // .NET's ForEachAsync passes every element it took from the enumerator to the body (with the
  // loop's token, canceled or not): an item read from an input range is consumed, and dropping it
  // would lose it. Here the range's own dereference of item 3 cancels the loop, between the claim
  // and the body: the body of 3 still runs, and nothing after it.
  for (int degree_ : {1, 2, 3}) {
    tpl::cancellation_token_source cts;
    tpl::parallel_options o;
    o.token = cts.token();
    o.max_degree_of_parallelism = degree_;
    std::list<int> numbers;
    for (int i = 0; i < 100; ++i) numbers.push_back(i);
    // A bidirectional range: for_each_async takes its items one at a time through the iterator.
    auto items = numbers | std::views::transform([&](int i) {
                   if (i == 3) cts.cancel();
                   return i;
                 });
    std::vector<int> seen;
    std::mutex m;
    auto t = tpl::parallel::for_each_async(items, [&](int i, const tpl::cancellation_token& token) -> tpl::task<> {
      std::lock_guard g(m);
      seen.push_back(i);
      if (i == 3) {
        EXPECT_TRUE(token.is_cancellation_requested());
      }
      co_return;
    }, o);
    EXPECT_THROW(t.wait(), tpl::aggregate_exception);
    EXPECT_TRUE(t.is_canceled());
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3})) << "degree " << degree_;
  }
}

TEST(parallel_for_each, every_body_exception_is_collected_with_one_worker_stopping_at_the_first) {
  std::vector<int> v(100);
  try {
    tpl::parallel::for_each(v, [](int&) { throw test_error(1); }, degree(1));
    ADD_FAILURE() << "no exception";
  } catch (const tpl::aggregate_exception& a) {
    EXPECT_EQ(a.size(), 1u);
  }
}

TEST(parallel_for, a_body_can_run_a_nested_for_async_and_wait_for_it_outside_the_pool) {
  std::atomic<int> total{0};
  tpl::parallel::for_(0, 4, [&](int) {
    tpl::parallel::for_async(0, 25, [&](int, const tpl::cancellation_token&) -> tpl::task<> {
      total++;
      co_return;
    }).wait();
  }, degree(1));  // degree 1: only the test thread blocks, never a pool thread
  EXPECT_EQ(total.load(), 100);
}

}  // namespace

}  // namespace parallel_test_cpp
