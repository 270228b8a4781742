// async_local<T>, execution_context and suppress_flow: values flow into started work and across
// awaits on any thread, never back out to the caller; pool threads start each item clean.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace async_local_test_cpp {

namespace {

tpl::async_local<int> number;
tpl::async_local<std::string> name;

tpl::task<int> read_number_after_yield() {
  co_await tpl::yield();
  co_return number.value();
}

tpl::task<> set_number(int v) {
  number.set(v);
  co_await tpl::yield();
  EXPECT_EQ(number.value(), v);
}

struct reset_on_exit {
  ~reset_on_exit() {
    number.reset();
    name.reset();
  }
};

TEST(async_local, unset_reads_the_default_value) {
  EXPECT_EQ(number.value(), 0);
  EXPECT_EQ(name.value(), "");
  EXPECT_FALSE(number.has_value());
}

TEST(async_local, set_and_reset_on_the_same_thread) {
  reset_on_exit r;
  number.set(5);
  name.set("five");
  EXPECT_TRUE(number.has_value());
  EXPECT_EQ(number.value(), 5);
  EXPECT_EQ(name.value(), "five");
  number.set(6);
  EXPECT_EQ(number.value(), 6);
  number.reset();
  EXPECT_FALSE(number.has_value());
  EXPECT_EQ(name.value(), "five");  // the other local is untouched
}

TEST(async_local, flows_into_run_and_across_awaits_on_other_threads) {
  reset_on_exit r;
  number.set(42);
  name.set("request-1");
  auto t = tpl::run([]() -> tpl::task<std::string> {
    co_await tpl::yield();
    const int n = co_await read_number_after_yield();
    co_return name.value() + ":" + std::to_string(n);
  });
  EXPECT_EQ(tpl::sync_wait(t), "request-1:42");
}

// A start that is queued instead of run inline (tpl::spawn, the stack guard) takes its context
// back when a pool thread first resumes it (the initial awaiter finds the coroutine's context slot
// through the distance it recorded when it suspended).
TEST(async_local, flows_into_a_spawned_coroutine_and_its_changes_stay_there) {
  reset_on_exit r;
  number.set(7);
  auto child = []() -> tpl::task<int> {
    const int seen = number.value();  // a queued start: resumed by a worker (perhaps taken back)
    number.set(99);
    co_await tpl::yield();
    co_return seen * 1000 + number.value();
  };
  tpl::task<int> t = tpl::run([&]() -> tpl::task<int> {
    tpl::task<int> spawned = tpl::spawn(child);
    const int before = number.value();  // the spawned body's change never reaches its parent
    const int result = co_await spawned;
    co_return result * 10 + (before == 7 && number.value() == 7 ? 1 : 0);
  });
  EXPECT_EQ(tpl::sync_wait(t), 70991);
  EXPECT_EQ(number.value(), 7);
}

tpl::task<std::int64_t> count_reading_number(std::int64_t n, std::atomic<std::int64_t>& wrong,
                                             std::atomic<std::int64_t>& elsewhere, std::thread::id caller) {
  if (number.value() != 5) wrong.fetch_add(1, std::memory_order_relaxed);
  if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) co_return 0;
  co_return 1 + co_await count_reading_number(n - 1, wrong, elsewhere, caller);
}

TEST(async_local, flows_into_every_level_of_a_recursion_the_stack_guard_moves_to_the_pool) {
  reset_on_exit r;
  number.set(5);
  std::atomic<std::int64_t> wrong{0};
  std::atomic<std::int64_t> elsewhere{0};
  const std::int64_t n = 400'000;  // deeper than an 8 MiB stack holds
  EXPECT_EQ(tpl::sync_wait(count_reading_number(n, wrong, elsewhere, std::this_thread::get_id())), n);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(elsewhere.load(), 0);  // some levels were deferred to the pool
  EXPECT_EQ(number.value(), 5);
}

TEST(async_local, changes_inside_a_task_do_not_flow_back_to_the_caller) {
  reset_on_exit r;
  number.set(1);
  tpl::sync_wait(set_number(2));  // suspends, completes on a pool thread
  EXPECT_EQ(number.value(), 1);
  auto sync_child = []() -> tpl::task<> {
    number.set(3);  // completes without suspending
    co_return;
  };
  tpl::sync_wait(sync_child());
  EXPECT_EQ(number.value(), 1);
}

TEST(async_local, a_parent_keeps_its_value_after_awaiting_a_child_that_changed_it) {
  reset_on_exit r;
  auto parent = []() -> tpl::task<std::pair<int, int>> {
    number.set(10);
    co_await set_number(20);
    const int after_child = number.value();
    co_await tpl::yield();
    co_return std::make_pair(after_child, number.value());
  };
  const auto [a, b] = tpl::sync_wait(parent());
  EXPECT_EQ(a, 10);
  EXPECT_EQ(b, 10);
  EXPECT_EQ(number.value(), 0);  // and the test's thread never saw either
}

TEST(async_local, concurrent_flows_keep_their_own_values) {
  auto flow = [](int id) -> tpl::task<int> {
    number.set(id);
    int bad = 0;
    for (int k = 0; k < 20; ++k) {
      co_await tpl::yield();
      if (number.value() != id) ++bad;
    }
    co_return bad;
  };
  std::vector<tpl::task<int>> ts;
  const int n = tpl_test::scaled(200, 40);
  for (int i = 1; i <= n; ++i) ts.push_back(tpl::run([&flow, i] { return flow(i); }));
  int bad = 0;
  for (int b : tpl::sync_wait(tpl::when_all(ts))) bad += b;
  EXPECT_EQ(bad, 0);
}

TEST(async_local, pool_items_start_in_the_default_context) {
  // Items run after flows that set values still see nothing.
  std::vector<tpl::task<>> ts;
  for (int i = 1; i <= 50; ++i) ts.push_back(tpl::run([i]() -> tpl::task<> {
    number.set(i);
    co_await tpl::yield();
  }));
  tpl::sync_wait(tpl::when_all(ts));
  std::vector<tpl::task<int>> reads;
  for (int i = 0; i < 50; ++i) reads.push_back(tpl::run([] { return number.value(); }));
  for (int v : tpl::sync_wait(tpl::when_all(reads))) EXPECT_EQ(v, 0);
}

TEST(async_local, suppress_flow_starts_new_work_in_the_default_context) {
  reset_on_exit r;
  number.set(7);
  tpl::task<int> suppressed;
  {
    auto s = tpl::suppress_flow();
    suppressed = tpl::run([] { return number.value(); });
    EXPECT_EQ(number.value(), 7);  // the current code keeps its value
    EXPECT_TRUE(tpl::execution_context::capture().is_default());
  }
  auto flowing = tpl::run([] { return number.value(); });
  EXPECT_EQ(tpl::sync_wait(suppressed), 0);
  EXPECT_EQ(tpl::sync_wait(flowing), 7);
  EXPECT_EQ(number.value(), 7);
  auto s = tpl::suppress_flow();
  s.undo();
  EXPECT_FALSE(tpl::execution_context::capture().is_default());
}

TEST(async_local, execution_context_capture_and_run) {
  reset_on_exit r;
  number.set(1);
  const tpl::execution_context captured = tpl::execution_context::capture();
  number.set(2);
  const int inside = tpl::execution_context::run(captured, [] {
    const int v = number.value();
    number.set(99);  // does not leak out of run()
    return v;
  });
  EXPECT_EQ(inside, 1);
  EXPECT_EQ(number.value(), 2);
  tpl::execution_context empty;
  EXPECT_TRUE(empty.is_default());
  EXPECT_EQ(tpl::execution_context::run(empty, [] { return number.value(); }), 0);
  EXPECT_EQ(number.value(), 2);
}

TEST(async_local, flows_into_continuations_and_timer_callbacks) {
  reset_on_exit r;
  tpl::testing::fake_time_provider clock;
  number.set(11);
  int seen_by_timer = -1;
  tpl::timer t = clock.create_timer([&] { seen_by_timer = number.value(); }, std::chrono::seconds(1),
                                    tpl::infinite_timeout);
  tpl::task_completion_source<> tcs;
  auto cont = tcs.get_task().continue_with([](const tpl::task<>&) { return number.value(); });
  number.set(12);  // after creation: neither sees it
  clock.advance(std::chrono::seconds(1));
  EXPECT_EQ(seen_by_timer, 11);
  EXPECT_EQ(number.value(), 12);
  tcs.set_result();
  EXPECT_EQ(tpl::sync_wait(cont), 11);
}

TEST(async_local, a_thread_that_exits_with_a_value_set_leaks_nothing) {
  // A value that is not trivially copyable is boxed on the heap and held by the thread's context;
  // the thread's exit must free both (LeakSanitizer in debug-asan checks the context block too).
  struct value_tag {};
  using counted_value = tpl_test::counted<value_tag>;
  static tpl::async_local<counted_value> counted_local;
  int live_inside = -1;
  std::thread([&] {
    number.set(3);
    name.set(std::string(100, 'x'));
    counted_local.set(counted_value{});
    live_inside = counted_value::live();
  }).join();
  EXPECT_EQ(live_inside, 1);  // the boxed copy, held by the exiting thread's context
  EXPECT_EQ(counted_value::live(), 0);
}

// A task awaited from a tpl coroutine hands the context over in its own awaiter
// (flowing_task_awaiter); every form of that await must give the thread back the context it had,
// whether the await suspends, finds the task done, or takes a spawned child back and runs it.
TEST(async_local, every_form_of_awaiting_a_task_keeps_the_coroutine_context) {
  reset_on_exit r;
  number.set(7);
  auto body = []() -> tpl::task<std::vector<int>> {
    std::vector<int> seen;
    number.set(100);
    // Suspends: the child completes on a pool thread.
    co_await set_number(1);
    seen.push_back(number.value());
    // Already completed: no suspension at all.
    tpl::task<int> done = tpl::task_from_result(5);
    (void)co_await done;
    seen.push_back(number.value());
    // An rvalue (owning) await of a pending task.
    (void)co_await read_number_after_yield();
    seen.push_back(number.value());
    // Spawned on this worker and taken back by the await (await_suspend returns false).
    tpl::task<int> child = tpl::spawn([]() -> tpl::task<int> {
      number.set(3);
      co_return number.value();
    });
    seen.push_back(co_await child);
    seen.push_back(number.value());
    // The configured forms: force_yielding always continues on the pool; suppress_throwing.
    co_await set_number(2).configure<tpl::await_options::force_yielding>();
    seen.push_back(number.value());
    co_await tpl::task_from_exception<int>(std::runtime_error("x"))
        .configure<tpl::await_options::suppress_throwing>();
    seen.push_back(number.value());
    // An awaiter object awaited as an lvalue goes through the generic marking_awaiter instead.
    tpl::task<int> pending = read_number_after_yield();
    auto aw = pending.when_ready();
    co_await aw;
    seen.push_back(number.value());
    // The runtime-configured await, and a throwing await.
    co_await set_number(4).configure(tpl::await_options::force_yielding);
    seen.push_back(number.value());
    try {
      co_await tpl::task_from_exception<int>(std::runtime_error("y"));
    } catch (const std::runtime_error&) {
      seen.push_back(number.value());
    }
    co_return seen;
  };
  const std::vector<int> seen = tpl::sync_wait(tpl::run(body));
  EXPECT_EQ(seen, (std::vector<int>{100, 100, 100, 3, 100, 100, 100, 100, 100, 100}));
  EXPECT_EQ(number.value(), 7);  // the caller's own, untouched
}

TEST(async_local, many_locals_and_updates_keep_every_value) {
  reset_on_exit r;
  tpl::async_local<int> a, b, c, d;
  for (int i = 0; i < 1000; ++i) {
    a.set(i);
    b.set(i + 1);
    c.set(i + 2);
    d.set(i + 3);
  }
  EXPECT_EQ(a.value() + b.value() + c.value() + d.value(), 999 * 4 + 6);
  auto t = tpl::run([&] { return a.value() + d.value(); });
  EXPECT_EQ(tpl::sync_wait(t), 999 + 1002);
  a.reset();
  b.reset();
  c.reset();
  d.reset();
}

}  // namespace

}  // namespace async_local_test_cpp
