// Thread-pool policies: the decision functions driven with made-up times (no clock, no threads),
// then the real pool's behaviour (blocking raises and lowers the goal, starvation and eager
// injection, retirement, configuration, events, stats, dedicated threads, start_new / unwrap).
// Real-pool tests wait for a behaviour with a generous bound; none asserts on elapsed time.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <latch>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <tpl/detail/pool_policy.hpp>
#include <tpl/tpl.hpp>

#include "test_support.hpp"

namespace thread_pool_policy_test_cpp {

namespace {

using namespace std::chrono_literals;
using tpl::detail::thread_counts;

// Polls pred until it holds or `limit` passes (a hang guard, far above what the behaviour needs).
template <class Pred>
bool eventually(Pred pred, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// ---- decisions ------------------------------------------------------------------------------

TEST(pool_policy, thread_counts_pack_and_unpack_every_field_independently) {
  const thread_counts c{32767, 1234, 7};
  EXPECT_EQ(thread_counts::unpack(c.pack()), c);
  EXPECT_EQ(thread_counts::unpack(thread_counts{0, 0, 32767}.pack()).goal, 32767);
  EXPECT_EQ(thread_counts::unpack(thread_counts{1, 0, 0}.pack()).processing, 1);
  EXPECT_EQ(thread_counts::unpack(thread_counts{0, 1, 0}.pack()).existing, 1);
}

TEST(pool_policy, blocking_raises_the_goal_to_min_plus_blocked_and_lowers_it_back) {
  using tpl::detail::goal_for;
  EXPECT_EQ(goal_for(4, 0, 4, 100, true), 4u);
  EXPECT_EQ(goal_for(4, 1, 4, 100, true), 5u);
  EXPECT_EQ(goal_for(4, 10, 4, 100, true), 14u);
  EXPECT_EQ(goal_for(4, 0, 4, 100, true), 4u);  // unblocked: back to the base
  // Hill climbing above min + blocked wins; blocking never lowers a goal.
  EXPECT_EQ(goal_for(9, 2, 4, 100, true), 9u);
  // Capped at max; cooperative blocking off ignores blocked threads.
  EXPECT_EQ(goal_for(4, 1000, 4, 100, true), 100u);
  EXPECT_EQ(goal_for(4, 10, 4, 100, false), 4u);
}

TEST(pool_policy, blocking_injection_needs_no_delay_for_cores_extra_threads_then_a_growing_one) {
  using tpl::detail::blocking_injection_delay;
  // min 4, 4 cores: up to 8 threads come at once.
  for (unsigned existing = 0; existing < 8; ++existing) EXPECT_EQ(blocking_injection_delay(existing, 4, 4), 0ms);
  EXPECT_EQ(blocking_injection_delay(8, 4, 4), 25ms);
  EXPECT_EQ(blocking_injection_delay(11, 4, 4), 25ms);
  EXPECT_EQ(blocking_injection_delay(12, 4, 4), 50ms);
  EXPECT_EQ(blocking_injection_delay(16, 4, 4), 75ms);
  EXPECT_EQ(blocking_injection_delay(1000, 4, 4), 250ms);  // capped
}

TEST(pool_policy, starvation_adds_exactly_one_thread_per_period_while_nothing_progresses) {
  tpl::detail::starvation_detector gate(500ms);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  int adds = 0;
  // Ticks every 100 ms for 2.05 s with work waiting and no item completing.
  for (int ms = 0; ms <= 2050; ms += 50)
    if (gate.tick(t0 + std::chrono::milliseconds(ms), 42, true, 0.1)) ++adds;
  EXPECT_EQ(adds, 4);
}

TEST(pool_policy, starvation_never_fires_while_items_complete_or_nothing_waits_and_slows_when_the_cpu_is_busy) {
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  {
    tpl::detail::starvation_detector gate(500ms);
    std::uint64_t done = 0;
    for (int ms = 0; ms <= 5000; ms += 100) EXPECT_FALSE(gate.tick(t0 + std::chrono::milliseconds(ms), ++done, true, 0.1));
  }
  {
    tpl::detail::starvation_detector gate(500ms);
    for (int ms = 0; ms <= 5000; ms += 100) EXPECT_FALSE(gate.tick(t0 + std::chrono::milliseconds(ms), 7, false, 0.1));
  }
  {
    // .NET: at or above 80% CPU the period stretches to goal x 1 s: with a goal of 3, 3 s.
    tpl::detail::starvation_detector gate(500ms);
    int adds = 0;
    for (int ms = 0; ms <= 6050; ms += 50) adds += gate.tick(t0 + std::chrono::milliseconds(ms), 7, true, 0.9, 3) ? 1 : 0;
    EXPECT_EQ(adds, 2);
  }
  {
    // Progress in the middle of a period starts a new one.
    tpl::detail::starvation_detector gate(500ms);
    EXPECT_FALSE(gate.tick(t0, 1, true, 0));
    EXPECT_FALSE(gate.tick(t0 + 400ms, 1, true, 0));
    EXPECT_FALSE(gate.tick(t0 + 450ms, 2, true, 0));
    EXPECT_FALSE(gate.tick(t0 + 900ms, 2, true, 0));
    EXPECT_TRUE(gate.tick(t0 + 950ms, 2, true, 0));
  }
}

// A made-up machine: throughput as a function of the thread count.
template <class Throughput>
unsigned climb(tpl::detail::hill_climbing& hc, unsigned start, int samples, Throughput f, double cpu,
               unsigned* max_seen = nullptr) {
  unsigned threads = start;
  for (int i = 0; i < samples; ++i) {
    const double seconds = 0.1;
    const auto completions = static_cast<std::uint64_t>(f(threads) * seconds);
    threads = hc.update(threads, seconds, completions, cpu).new_thread_count;
    if (max_seen != nullptr && threads > *max_seen) *max_seen = threads;
  }
  return threads;
}

TEST(pool_policy, hill_climbing_adds_threads_while_throughput_follows_them) {
  tpl::detail::hill_climbing hc(2, 100, 1234);
  // Throughput grows linearly with threads up to 20 (blocking-bound work).
  const unsigned end = climb(hc, 2, 600, [](unsigned n) { return 1000.0 * std::min(n, 20u); }, 0.3);
  EXPECT_GT(end, 6u);
  EXPECT_GT(hc.control_setting(), 6.0);
}

TEST(pool_policy, hill_climbing_stays_near_min_when_threads_do_not_help) {
  tpl::detail::hill_climbing hc(2, 100, 99);
  unsigned max_seen = 0;
  climb(hc, 2, 600, [](unsigned) { return 5000.0; }, 0.3, &max_seen);
  EXPECT_LT(hc.control_setting(), 4.0);
}

TEST(pool_policy, hill_climbing_makes_no_positive_move_above_95_percent_cpu) {
  tpl::detail::hill_climbing hc(2, 100, 7);
  climb(hc, 2, 600, [](unsigned n) { return 1000.0 * n; }, 0.99);
  // The wave still probes (control + magnitude), but the control setting never rises.
  EXPECT_DOUBLE_EQ(hc.control_setting(), 2.0);
}

TEST(pool_policy, hill_climbing_respects_min_and_max) {
  tpl::detail::hill_climbing hc(3, 5, 5);
  unsigned max_seen = 0;
  unsigned threads = 3;
  for (int i = 0; i < 400; ++i) {
    threads = hc.update(threads, 0.1, static_cast<std::uint64_t>(100.0 * threads), 0.2).new_thread_count;
    EXPECT_GE(threads, 3u);
    EXPECT_LE(threads, 5u);
    max_seen = std::max(max_seen, threads);
  }
  EXPECT_EQ(max_seen, 5u);
}

TEST(pool_policy, hill_climbing_is_reproducible_from_its_seed) {
  tpl::detail::hill_climbing a(2, 50, 42), b(2, 50, 42);
  auto f = [](unsigned n) { return 700.0 * std::min(n, 9u); };
  EXPECT_EQ(climb(a, 2, 300, f, 0.4), climb(b, 2, 300, f, 0.4));
  EXPECT_EQ(a.sample_ms(), b.sample_ms());
}

TEST(pool_policy, hill_climbing_asks_for_more_data_when_a_sample_is_too_small) {
  tpl::detail::hill_climbing hc(2, 50, 1);
  hc.update(4, 0.1, 1000, 0.1);                // first sample is always taken
  const auto r = hc.update(4, 0.01, 2, 0.1);   // 3 threads in flight vs 2 completions: too noisy
  EXPECT_EQ(r.new_sample_ms, 10u);
  EXPECT_EQ(r.new_thread_count, 4u);
}

// ---- environment ----------------------------------------------------------------------------------

struct env_var {
  env_var(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~env_var() { ::unsetenv(name_); }
  const char* name_;
};

std::string from_environment_error() {
  try {
    (void)tpl::thread_pool_options::from_environment();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(pool_options, environment_variables_override_the_options) {
  env_var a("TPL_THREADPOOL_MIN_THREADS", "3");
  env_var b("TPL_THREADPOOL_MAX_THREADS", "77");
  env_var c("TPL_THREADPOOL_HILL_CLIMBING", "0");
  env_var d("TPL_THREADPOOL_COOPERATIVE_BLOCKING", "false");
  env_var e("TPL_THREADPOOL_INJECTION", "eager");
  env_var f("TPL_THREADPOOL_IDLE_TIMEOUT_MS", "1500");
  env_var g("TPL_THREADPOOL_GLOBAL_QUEUES", "2");
  const auto o = tpl::thread_pool_options::from_environment();
  EXPECT_EQ(o.thread_count, 3u);
  EXPECT_EQ(o.max_threads, 77u);
  EXPECT_FALSE(o.hill_climbing);
  EXPECT_FALSE(o.cooperative_blocking);
  EXPECT_EQ(o.injection, tpl::injection_policy::eager);
  EXPECT_EQ(o.idle_timeout, 1500ms);
  ASSERT_TRUE(o.extra_global_queues.has_value());
  EXPECT_EQ(*o.extra_global_queues, 2u);
}

TEST(pool_options, unset_variables_keep_the_given_options) {
  tpl::thread_pool_options base;
  base.thread_count = 5;
  base.hill_climbing = false;
  const auto o = tpl::thread_pool_options::from_environment(base);
  EXPECT_EQ(o.thread_count, 5u);
  EXPECT_FALSE(o.hill_climbing);
  EXPECT_EQ(o.injection, tpl::injection_policy::adaptive);
}

TEST(pool_options, bad_values_throw_naming_the_variable) {
  const char* cases[][2] = {
      {"TPL_THREADPOOL_MIN_THREADS", "abc"},   {"TPL_THREADPOOL_MIN_THREADS", "-1"},
      {"TPL_THREADPOOL_MIN_THREADS", "0"},     {"TPL_THREADPOOL_MIN_THREADS", "4x"},
      {"TPL_THREADPOOL_MIN_THREADS", ""},      {"TPL_THREADPOOL_MAX_THREADS", "40000"},
      {"TPL_THREADPOOL_MAX_THREADS", "99999999999999999999999"},
      {"TPL_THREADPOOL_HILL_CLIMBING", "yes"}, {"TPL_THREADPOOL_COOPERATIVE_BLOCKING", "2"},
      {"TPL_THREADPOOL_INJECTION", "fast"},    {"TPL_THREADPOOL_IDLE_TIMEOUT_MS", "0"},
      {"TPL_THREADPOOL_IDLE_TIMEOUT_MS", "1.5"}, {"TPL_THREADPOOL_GLOBAL_QUEUES", "many"},
  };
  for (auto& c : cases) {
    env_var v(c[0], c[1]);
    const std::string msg = from_environment_error();
    EXPECT_NE(msg.find(c[0]), std::string::npos) << c[0] << "=" << c[1] << " gave: '" << msg << "'";
  }
  env_var lo("TPL_THREADPOOL_MIN_THREADS", "10");
  env_var hi("TPL_THREADPOOL_MAX_THREADS", "4");
  EXPECT_NE(from_environment_error().find("above"), std::string::npos);
}

TEST(pool_options, a_bad_word_names_the_variable_and_every_accepted_value) {
  env_var v("TPL_THREADPOOL_INJECTION", "Eager");
  EXPECT_EQ(from_environment_error(),
            "tpl: environment variable TPL_THREADPOOL_INJECTION=\"Eager\" is invalid: expected adaptive or eager");
}

TEST(pool_options, bad_constructor_options_throw_invalid_argument) {
  EXPECT_THROW(tpl::thread_pool({.thread_count = 4, .max_threads = 2}), std::invalid_argument);
  EXPECT_THROW(tpl::thread_pool({.thread_count = 1, .max_threads = 40000}), std::invalid_argument);
  EXPECT_THROW(tpl::thread_pool({.thread_count = 1, .idle_timeout = 0ms}), std::invalid_argument);
  EXPECT_THROW(tpl::thread_pool({.thread_count = 1, .extra_global_queues = 5000}), std::invalid_argument);
}

// ---- the real pool ----------------------------------------------------------------------------

TEST(pool_policy_live, min_and_max_are_settable_and_checked) {
  tpl::thread_pool pool({.thread_count = 2, .max_threads = 8});
  EXPECT_EQ(pool.min_threads(), 2u);
  EXPECT_EQ(pool.max_threads(), 8u);
  EXPECT_FALSE(pool.set_min_threads(0));
  EXPECT_FALSE(pool.set_min_threads(9));  // above max
  EXPECT_FALSE(pool.set_max_threads(1));  // below min
  EXPECT_FALSE(pool.set_max_threads(40000));
  EXPECT_TRUE(pool.set_max_threads(16));
  EXPECT_TRUE(pool.set_min_threads(3));
  EXPECT_EQ(pool.min_threads(), 3u);
  EXPECT_EQ(pool.max_threads(), 16u);
  EXPECT_GE(pool.stats().goal, 3u);
}

TEST(pool_policy_live, blocked_workers_raise_the_goal_and_queued_work_still_runs) {
  // Two workers, both blocked in task::wait() on a task only a third item completes: without
  // cooperative blocking this would hang (hill climbing and starvation are off, so only
  // blocking can add the thread).
  tpl::thread_pool pool({.thread_count = 2, .hill_climbing = false});
  tpl::task_completion_source<int> gate;
  std::atomic<int> blocked_seen{0};
  auto blocker = [&] {
    blocked_seen.fetch_add(1);
    return gate.get_task().get();
  };
  auto a = tpl::run(pool, blocker);
  auto b = tpl::run(pool, blocker);
  // min 2 + 2 blocked (the goal follows the blocked count a moment later: wait for both).
  ASSERT_TRUE(eventually([&] { return pool.stats().blocked_threads == 2 && pool.stats().goal == 4; }));
  auto c = tpl::run(pool, [&] { gate.set_result(7); });
  EXPECT_EQ(tpl::sync_wait(a), 7);
  EXPECT_EQ(tpl::sync_wait(b), 7);
  c.wait();
  ASSERT_TRUE(eventually([&] { return pool.stats().blocked_threads == 0 && pool.stats().goal == 2; }));  // back down
  const auto s = pool.stats();
  EXPECT_GE(s.threads_injected_by_blocking, 1u);
  EXPECT_EQ(s.threads_injected_by_starvation, 0u);
}

TEST(pool_policy_live, blocking_scope_cooperates_like_tpl_waits) {
  tpl::thread_pool pool({.thread_count = 1, .hill_climbing = false});
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto a = tpl::run(pool, [&] {
    tpl::blocking_scope blocking;  // a user's own blocking call, announced
    released.wait();
  });
  ASSERT_TRUE(eventually([&] { return pool.stats().blocked_threads == 1 && pool.stats().goal == 2; }));
  auto b = tpl::run(pool, [&] { release.set_value(); });
  b.wait();
  a.wait();
  EXPECT_GE(pool.stats().threads_injected_by_blocking, 1u);
}

TEST(pool_policy_live, blocking_scope_outside_a_pool_is_harmless) {
  tpl::blocking_scope outside;
  EXPECT_EQ(tpl::thread_pool::current(), nullptr);
}

TEST(pool_policy_live, starvation_injects_a_thread_when_invisible_blocking_stalls_the_queue) {
  // The worker blocks on a std::future (the pool cannot see it); only the starvation gate can add
  // the thread that runs the item completing it.
  // Declared before the pool, so they outlive it: the gate may still emit an event until the
  // pool's destructor has stopped it.
  std::vector<tpl::thread_pool_event> events;
  std::mutex m;
  tpl::thread_pool pool({.thread_count = 1, .hill_climbing = false, .cooperative_blocking = false});
  pool.set_event_listener([&](const tpl::thread_pool_event& e) {
    std::lock_guard g(m);
    events.push_back(e);
  });
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::latch started(1);
  auto a = tpl::run(pool, [&] {
    started.count_down();
    released.wait();
  });
  started.wait();
  auto b = tpl::run(pool, [&] { release.set_value(); });
  b.wait();
  a.wait();
  const auto s = pool.stats();
  EXPECT_GE(s.threads_injected_by_starvation, 1u);
  EXPECT_EQ(s.threads_injected_by_blocking, 0u);
  // The counter is raised before the new thread starts, but the event is emitted after it has
  // started (outside the pool's locks): the thread may run b, and this thread get here, first.
  EXPECT_TRUE(eventually([&] {
    std::lock_guard g(m);
    return std::any_of(events.begin(), events.end(), [](const tpl::thread_pool_event& e) {
      return e.kind == tpl::thread_pool_event_kind::thread_injected && e.reason == tpl::thread_pool_reason::starvation;
    });
  }));
}

TEST(pool_policy_live, eager_policy_injects_at_once_when_a_worker_blocks_with_work_waiting) {
  tpl::thread_pool pool({.thread_count = 1, .injection = tpl::injection_policy::eager});
  tpl::task_completion_source<int> gate;
  std::latch queued(1);
  auto a = tpl::run(pool, [&] {
    queued.wait();             // make sure b is queued behind us
    return gate.get_task().get();  // blocks: eager adds a thread at once
  });
  auto b = tpl::run(pool, [&] { gate.set_result(1); });
  queued.count_down();
  EXPECT_EQ(tpl::sync_wait(a), 1);
  b.wait();
  const auto s = pool.stats();
  EXPECT_GE(s.threads_injected_by_eager + s.threads_injected_by_blocking, 1u);
}

TEST(pool_policy_live, idle_workers_retire_after_the_timeout_and_come_back_on_demand) {
  tpl::thread_pool pool({.thread_count = 2, .idle_timeout = 20ms});
  ASSERT_TRUE(eventually([&] { return pool.thread_count() == 0; }));
  EXPECT_EQ(pool.stats().threads_retired, 2u);
  // Work still runs: threads are created again.
  EXPECT_EQ(tpl::sync_wait(tpl::run(pool, [] { return 5; })), 5);
  EXPECT_GE(pool.stats().threads_injected_by_demand, 1u);
  std::atomic<int> n{0};
  std::vector<tpl::task<>> ts;
  for (int i = 0; i < 1000; ++i) ts.push_back(tpl::run(pool, [&] { n.fetch_add(1); }));
  tpl::sync_wait(tpl::when_all(ts));
  EXPECT_EQ(n.load(), 1000);
}

TEST(pool_policy_live, retirement_and_injection_emit_events_with_reasons) {
  std::vector<tpl::thread_pool_event> events;
  std::mutex m;
  {
    tpl::thread_pool pool({.thread_count = 1, .idle_timeout = 10ms});
    pool.set_event_listener([&](const tpl::thread_pool_event& e) {
      std::lock_guard g(m);
      events.push_back(e);
    });
    ASSERT_TRUE(eventually([&] { return pool.thread_count() == 0; }));
  }
  std::lock_guard g(m);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().kind, tpl::thread_pool_event_kind::thread_retired);
  EXPECT_EQ(events.front().reason, tpl::thread_pool_reason::idle_timeout);
  EXPECT_EQ(events.front().existing_threads, 0u);
  const std::string line = tpl::to_string(events.front());
  EXPECT_NE(line.find("thread_retired"), std::string::npos) << line;
  EXPECT_NE(line.find("reason=idle_timeout"), std::string::npos) << line;
}

TEST(pool_events, io_batch_bucket_maps_batch_sizes_to_power_of_two_buckets) {
  EXPECT_EQ(tpl::io_batch_bucket(1), 0u);
  EXPECT_EQ(tpl::io_batch_bucket(2), 1u);
  EXPECT_EQ(tpl::io_batch_bucket(3), 1u);
  EXPECT_EQ(tpl::io_batch_bucket(4), 2u);
  EXPECT_EQ(tpl::io_batch_bucket(1023), 9u);
  EXPECT_EQ(tpl::io_batch_bucket(1024), 10u);
  EXPECT_EQ(tpl::io_batch_bucket(1u << 20), tpl::io_batch_buckets - 1);
}

TEST(pool_events, an_io_summary_prints_as_one_line_with_its_non_empty_batch_buckets) {
  tpl::thread_pool_event e{};
  e.kind = tpl::thread_pool_event_kind::io_summary;
  e.reason = tpl::thread_pool_reason::io;
  e.existing_threads = 2;
  e.goal = 3;
  e.io.sockets.completions = 7;
  e.io.sockets.wakeups = 5;
  e.io.sockets.events = 9;
  e.io.sockets.largest_batch = 4;
  e.io.sockets.batch_sizes[0] = 3;
  e.io.sockets.batch_sizes[1] = 1;
  e.io.sockets.batch_sizes[2] = 1;
  e.io.uring.completions = 1;
  e.io.uring.wakeups = 1;
  e.io.uring.events = 1500;
  e.io.uring.largest_batch = 1500;
  e.io.uring.batch_sizes[tpl::io_batch_buckets - 1] = 1;
  e.io.pool_engine_completions = 2;
  const std::string line = tpl::to_string(e);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find("io_summary threads=2 goal=3 blocked=0 completions=10"), std::string::npos) << line;
  EXPECT_NE(line.find(" sockets=[completions=7 wakeups=5 events=9 largest_batch=4 batches=1:3,2-3:1,4-7:1]"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(" io_uring=[completions=1 wakeups=1 events=1500 largest_batch=1500 batches=1024+:1]"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(" pool_engine=[completions=2]"), std::string::npos) << line;
  e.io = {};
  EXPECT_NE(tpl::to_string(e).find(" sockets=[completions=0 wakeups=0 events=0 largest_batch=0 batches=-]"),
            std::string::npos);
  EXPECT_STREQ(tpl::to_string(tpl::thread_pool_event_kind::io_summary), "io_summary");
  EXPECT_STREQ(tpl::to_string(tpl::thread_pool_reason::io), "io");
}

TEST(pool_events, a_pool_without_io_reports_zero_io_and_sends_no_io_summary) {
  std::atomic<int> summaries{0};
  {
    tpl::thread_pool pool({.thread_count = 1});
    pool.set_event_listener([&](const tpl::thread_pool_event& e) {
      if (e.kind == tpl::thread_pool_event_kind::io_summary) summaries.fetch_add(1);
    });
    std::vector<tpl::task<>> ts;
    for (int i = 0; i < 100; ++i) ts.push_back(tpl::run(pool, [] {}));
    tpl::sync_wait(tpl::when_all(ts));
    const tpl::thread_pool_io_stats io = pool.stats().io;
    EXPECT_EQ(io.completions(), 0u);
    EXPECT_EQ(io.sockets.wakeups + io.uring.wakeups, 0u);
  }  // the pool is gone: no listener call can be in flight
  EXPECT_EQ(summaries.load(), 0);
}

TEST(pool_policy_live, a_throwing_listener_does_not_disturb_the_pool) {
  tpl::thread_pool pool({.thread_count = 1, .hill_climbing = false});
  pool.set_event_listener([](const tpl::thread_pool_event&) { throw std::runtime_error("listener"); });
  tpl::task_completion_source<int> gate;
  auto a = tpl::run(pool, [&] { return gate.get_task().get(); });  // goal_changed events
  auto b = tpl::run(pool, [&] { gate.set_result(3); });
  EXPECT_EQ(tpl::sync_wait(a), 3);
  b.wait();
  pool.set_event_listener({});
}

// Removing (or replacing) a listener waits for a call of it under way on another thread, and a
// listener may remove itself from inside. The event is the goal change of set_min_threads, which
// the setting thread emits; the listener holds that thread inside its call until the removing
// thread has started, and must never see the removal returned. Each raise of the minimum lifts
// the goal (it is clamped into [min, max]), so each emits one goal change.
TEST(pool_events, removing_the_listener_waits_for_a_call_under_way_and_a_listener_may_remove_itself) {
  tpl::thread_pool pool({.thread_count = 1, .max_threads = 16, .hill_climbing = false});
  for (int round = 0; round < 10; ++round) {
    std::atomic<bool> entered{false}, release{false}, removing{false}, removed{false}, saw_removed{false};
    pool.set_event_listener([&](const tpl::thread_pool_event& e) {
      if (e.kind != tpl::thread_pool_event_kind::goal_changed || e.reason != tpl::thread_pool_reason::configuration)
        return;
      if (entered.exchange(true)) return;  // one call holds the setter
      while (!release) std::this_thread::yield();
      saw_removed = removed.load();
    });
    std::thread setter([&] { EXPECT_TRUE(pool.set_min_threads(static_cast<unsigned>(round) + 2)); });
    while (!entered) std::this_thread::yield();
    std::thread remover([&] {
      removing = true;
      pool.set_event_listener({});
      removed = true;
    });
    while (!removing) std::this_thread::yield();
    for (int i = 0; i < 1000 && !removed; ++i) std::this_thread::yield();  // room for a wrong return
    EXPECT_FALSE(removed.load()) << "round " << round << ": the removal returned during the call";
    release = true;
    remover.join();
    setter.join();
    EXPECT_FALSE(saw_removed.load()) << "round " << round;
  }
  std::atomic<int> calls{0};
  pool.set_event_listener([&](const tpl::thread_pool_event& e) {
    if (e.kind != tpl::thread_pool_event_kind::goal_changed || e.reason != tpl::thread_pool_reason::configuration)
      return;
    ++calls;
    pool.set_event_listener({});  // from inside: does not wait for this very call
  });
  EXPECT_TRUE(pool.set_min_threads(13));
  EXPECT_TRUE(pool.set_min_threads(14));
  EXPECT_EQ(calls.load(), 1);
}

TEST(pool_policy_live, stats_add_up_once_the_pool_is_quiet) {
  tpl::thread_pool pool({.thread_count = 3});
  std::vector<tpl::task<>> ts;
  for (int i = 0; i < 5000; ++i) ts.push_back(tpl::run(pool, [] {}));
  tpl::sync_wait(tpl::when_all(ts));
  ASSERT_TRUE(eventually([&] {
    const auto s = pool.stats();
    return s.idle_threads == s.thread_count && s.processing_threads == 0;
  }));
  const auto s = pool.stats();
  EXPECT_EQ(s.items_executed, 5000u);
  EXPECT_EQ(s.global_queue_length + s.local_queue_length, 0u);
  EXPECT_EQ(s.blocked_threads, 0u);
  EXPECT_EQ(s.min_threads, 3u);
  EXPECT_EQ(s.max_threads, 32767u);
  EXPECT_GE(s.goal, 3u);
  EXPECT_EQ(s.thread_count, 3u + s.threads_injected_by_blocking + s.threads_injected_by_starvation +
                                s.threads_injected_by_hill_climbing + s.threads_injected_by_eager +
                                s.threads_injected_by_demand - s.threads_retired);
}

TEST(pool_policy_live, forced_extra_global_queues_take_outside_work_and_lose_nothing) {
  tpl::thread_pool pool({.thread_count = 4, .extra_global_queues = 2});
  EXPECT_EQ(pool.stats().extra_global_queues, 2u);
  std::atomic<long> sum{0};
  auto body = [&](int i) -> tpl::task<> {
    for (int k = 0; k < 20; ++k) co_await tpl::yield();  // onto the worker's own yield queue
    sum.fetch_add(i);
  };
  // Several outside threads queue at once: they spread over the global and the extra queues.
  const int per_thread = tpl_test::scaled(500, 100);
  constexpr int kThreads = 4;
  std::vector<std::vector<tpl::task<>>> ts(kThreads);
  std::vector<std::thread> producers;
  for (int p = 0; p < kThreads; ++p)
    producers.emplace_back([&, p] {
      for (int i = 0; i < per_thread; ++i) ts[p].push_back(tpl::run(pool, [&, i, p] { return body(p * per_thread + i); }));
    });
  for (auto& t : producers) t.join();
  for (auto& v : ts) tpl::sync_wait(tpl::when_all(v));
  const long n = static_cast<long>(kThreads) * per_thread;
  EXPECT_EQ(sum.load(), n * (n - 1) / 2);
  EXPECT_EQ(pool.stats().local_queue_length + pool.stats().global_queue_length, 0u);
}

TEST(pool_policy_live, a_yielded_item_runs_after_work_already_queued_on_the_same_worker) {
  tpl::thread_pool pool({.thread_count = 1, .max_threads = 1, .hill_climbing = false, .cooperative_blocking = false});
  std::vector<int> order;
  auto t = tpl::run(pool, [&]() -> tpl::task<> {
    // Queued on this worker's deque before the yield: they run before the yielder resumes.
    auto a = tpl::run(pool, [&] { order.push_back(1); });
    auto b = tpl::run(pool, [&] { order.push_back(2); });
    co_await tpl::yield();
    order.push_back(3);
    co_await a;
    co_await b;
  });
  tpl::sync_wait(t);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[2], 3);
}

TEST(pool_policy_live, wait_runs_the_awaited_item_inline_when_it_is_still_queued_here) {
  // One worker, no injection of any kind: the item waits on a task it just queued to its own
  // deque. Without wait-inlining this would deadlock.
  tpl::thread_pool pool({.thread_count = 1, .max_threads = 1, .hill_climbing = false, .cooperative_blocking = false});
  auto outer = tpl::run(pool, [&] {
    const auto me = std::this_thread::get_id();
    auto inner = tpl::run(pool, [] { return std::this_thread::get_id(); });
    return inner.get() == me;
  });
  EXPECT_TRUE(tpl::sync_wait(outer));
}

// ---- dedicated threads, long_running, start_new, unwrap -----------------------------------------

TEST(dedicated_thread_scheduler, runs_everything_on_its_own_threads) {
  tpl::dedicated_thread_scheduler sched(2);
  EXPECT_EQ(sched.thread_count(), 2u);
  std::mutex m;
  std::set<std::thread::id> ids;
  std::atomic<int> wrong{0};
  auto body = [&]() -> tpl::task<> {
    co_await tpl::resume_on(sched);
    for (int k = 0; k < 5; ++k) {
      if (!sched.owns_current_thread()) wrong.fetch_add(1);
      {
        std::lock_guard g(m);
        ids.insert(std::this_thread::get_id());
      }
      co_await tpl::yield();  // back to sched, not the pool
    }
  };
  std::vector<tpl::task<>> ts;
  for (int i = 0; i < 50; ++i) ts.push_back(body());
  tpl::sync_wait(tpl::when_all(ts));
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(ids.size(), 2u);
  EXPECT_FALSE(ids.contains(std::this_thread::get_id()));
}

TEST(dedicated_thread_scheduler, one_thread_runs_items_in_order) {
  std::vector<int> order;
  {
    tpl::dedicated_thread_scheduler sched(1);
    std::vector<tpl::task<>> ts;
    for (int i = 0; i < 100; ++i) ts.push_back(tpl::run(sched, [&order, i] { order.push_back(i); }));
    tpl::sync_wait(tpl::when_all(ts));
  }
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
}

TEST(dedicated_thread_scheduler, zero_threads_is_an_error) {
  EXPECT_THROW(tpl::dedicated_thread_scheduler(0), std::invalid_argument);
}

TEST(task_factory, long_running_gets_a_thread_of_its_own) {
  auto& pool = tpl::thread_pool::default_pool();
  auto t = tpl::task_factory::start_new(
      [] { return std::make_pair(tpl::thread_pool::current(), std::this_thread::get_id()); },
      tpl::task_creation_options::long_running);
  const auto [p, id] = tpl::sync_wait(t);
  EXPECT_EQ(p, nullptr);  // not a pool thread
  EXPECT_NE(id, std::this_thread::get_id());
  (void)pool;
}

TEST(task_factory, start_new_with_state_options_and_scheduler) {
  tpl::dedicated_thread_scheduler sched(1);
  auto t = tpl::task_factory::start_new([&](int n) { return sched.owns_current_thread() ? n * 2 : -1; }, 21,
                                        tpl::task_creation_options::none, sched);
  EXPECT_EQ(tpl::sync_wait(t), 42);
  auto u = tpl::task_factory::start_new([] { return tpl::thread_pool::current() != nullptr; },
                                        tpl::task_creation_options::prefer_fairness);
  EXPECT_TRUE(tpl::sync_wait(u));
}

TEST(task_factory, a_canceled_token_means_the_function_never_runs) {
  tpl::cancellation_token_source cts;
  cts.cancel();
  bool ran = false;
  auto t = tpl::task_factory::start_new([&] { ran = true; }, tpl::task_creation_options::none, cts.token());
  EXPECT_THROW(t.wait(), tpl::aggregate_exception);
  EXPECT_EQ(t.status(), tpl::task_status::canceled);
  EXPECT_FALSE(ran);
}

TEST(task_factory, start_new_does_not_unwrap_and_unwrap_flattens) {
  tpl::task_completion_source<int> inner_done;
  tpl::task<tpl::task<int>> nested = tpl::task_factory::start_new([&] { return inner_done.get_task(); });
  tpl::task<int> flat = tpl::unwrap(nested);
  tpl::task<int> inner = tpl::sync_wait(nested);
  EXPECT_FALSE(inner.is_completed());
  EXPECT_FALSE(flat.is_completed());
  inner_done.set_result(9);
  EXPECT_EQ(tpl::sync_wait(flat), 9);
}

TEST(task_factory, unwrap_carries_the_inner_fault_and_cancellation) {
  auto faulted = tpl::unwrap(tpl::task_factory::start_new([]() -> tpl::task<int> {
    throw tpl_test::test_error(3);
    co_return 0;
  }));
  EXPECT_THROW(tpl::sync_wait(faulted), tpl_test::test_error);
  auto canceled = tpl::unwrap(tpl::task_factory::start_new([] { return tpl::task_from_canceled<int>(); }));
  EXPECT_THROW(tpl::sync_wait(canceled), tpl::operation_canceled);
  EXPECT_EQ(canceled.status(), tpl::task_status::canceled);
  EXPECT_THROW((void)tpl::unwrap(tpl::task<tpl::task<int>>{}), std::exception);
}

}  // namespace

}  // namespace thread_pool_policy_test_cpp
