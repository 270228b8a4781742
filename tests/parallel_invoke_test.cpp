// tpl::parallel::invoke (tpl/parallel_invoke.hpp) and the pool's fork jobs
// (src/thread_pool/fork_join.cpp): every function runs once, on the caller, a thief or the pool;
// exceptions are all reported; a stolen function's invoker helps and then sleeps; coroutines the
// functions queued are not lost; async_local values flow into stolen functions.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tpl/tpl.hpp>

namespace parallel_invoke_test_cpp {

namespace {

long fib(int n) {
  if (n < 2) return n;
  long a = 0, b = 0;
  tpl::parallel::invoke([&] { a = fib(n - 1); }, [&] { b = fib(n - 2); });
  return a + b;
}

std::int64_t skynet(std::int64_t num, std::int64_t size) {
  if (size == 1) return num;
  const std::int64_t sub = size / 10;
  std::int64_t r[10];
  auto child = [&r, num, sub](int i) { return [&r, num, sub, i] { r[i] = skynet(num + i * sub, sub); }; };
  tpl::parallel::invoke(child(0), child(1), child(2), child(3), child(4), child(5), child(6), child(7), child(8),
                        child(9));
  std::int64_t sum = 0;
  for (std::int64_t v : r) sum += v;
  return sum;
}

// Polls until done() holds, for at most about 10 s (a guard against a bug, not a timing).
template <class Done>
bool poll_until(Done done) {
  for (int i = 0; i < 10'000'000; ++i) {
    if (done()) return true;
    if (i % 64 == 63) std::this_thread::sleep_for(std::chrono::microseconds(1));
  }
  return done();
}

bool spin_until(const std::atomic<bool>& flag) {
  return poll_until([&] { return flag.load(); });
}

tpl::task<> count_one(std::atomic<int>& ran) {
  ++ran;
  co_return;
}

}  // namespace

TEST(parallel_invoke, runs_every_function_once_from_a_thread_outside_the_pool) {
  std::atomic<int> counts[5] = {};
  tpl::parallel::invoke([&] { ++counts[0]; }, [&] { ++counts[1]; }, [&] { ++counts[2]; }, [&] { ++counts[3]; },
                        [&] { ++counts[4]; });
  for (auto& c : counts) EXPECT_EQ(c.load(), 1);
  int one = 0;
  tpl::parallel::invoke([&] { ++one; });
  EXPECT_EQ(one, 1);
  tpl::parallel::invoke();  // nothing to run
}

TEST(parallel_invoke, a_recursion_of_invokes_on_the_pool_computes_the_right_result) {
  EXPECT_EQ(tpl::run([] { return fib(20); }).get(), 6765);
  EXPECT_EQ(tpl::run([] { return skynet(0, 10'000); }).get(), 49'995'000);
  EXPECT_EQ(fib(15), 610);  // from outside the pool: the queued halves run on the pool
}

TEST(parallel_invoke, a_custom_pool_worker_queues_on_its_own_pool) {
  tpl::thread_pool pool(tpl::thread_pool_options{.thread_count = 2});
  std::set<std::thread::id> threads;
  std::mutex m;
  const long r = tpl::run(pool, [&] {
                   const long v = fib(18);
                   std::lock_guard g(m);
                   threads.insert(std::this_thread::get_id());
                   return v;
                 }).get();
  EXPECT_EQ(r, 2584);
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_NE(*threads.begin(), std::this_thread::get_id());
}

TEST(parallel_invoke, a_function_that_the_caller_cannot_run_is_stolen_and_the_caller_waits_for_it) {
  // The first function waits until the second has run: only another worker can have run it.
  tpl::thread_pool pool(tpl::thread_pool_options{.thread_count = 2});
  std::atomic<bool> second_ran{false};
  std::thread::id first_thread, second_thread;
  bool saw = false;
  tpl::run(pool, [&] {
    tpl::parallel::invoke(
        [&] {
          first_thread = std::this_thread::get_id();
          saw = spin_until(second_ran);
        },
        [&] {
          second_thread = std::this_thread::get_id();
          second_ran = true;
        });
  }).get();
  EXPECT_TRUE(saw);
  EXPECT_NE(first_thread, second_thread);
}

TEST(parallel_invoke, the_caller_of_a_stolen_function_sleeps_until_its_thief_finishes) {
  // The second function is stolen while the first waits for it to start; it then does not
  // return until the caller, with nothing to help with, has gone to sleep on the job (which it
  // does inside a blocking_region: the pool counts it as blocked).
  tpl::thread_pool pool(tpl::thread_pool_options{.thread_count = 2});
  for (int round = 0; round < 3; ++round) {
    std::atomic<bool> started{false};
    std::atomic<bool> finished{false};
    bool saw_caller_asleep = false;
    tpl::run(pool, [&] {
      tpl::parallel::invoke([&] { EXPECT_TRUE(spin_until(started)); },
                            [&] {
                              started = true;
                              saw_caller_asleep = poll_until([&] { return pool.stats().blocked_threads == 1; });
                              finished = true;
                            });
      EXPECT_TRUE(finished.load());  // invoke returned only after the thief was done
    }).get();
    EXPECT_TRUE(saw_caller_asleep);
  }
}

TEST(parallel_invoke, every_function_runs_and_every_exception_is_reported_in_order) {
  std::atomic<int> ran{0};
  auto check = [&] {
    try {
      tpl::parallel::invoke([&] { ++ran; throw std::runtime_error("first"); }, [&] { ++ran; },
                            [&] { ++ran; throw std::logic_error("third"); });
      ADD_FAILURE() << "no exception";
    } catch (const tpl::aggregate_exception& e) {
      ASSERT_EQ(e.size(), 2u);
      try {
        std::rethrow_exception(e.inner_exceptions()[0]);
      } catch (const std::runtime_error& r) {
        EXPECT_STREQ(r.what(), "first");
      }
      try {
        std::rethrow_exception(e.inner_exceptions()[1]);
      } catch (const std::logic_error& l) {
        EXPECT_STREQ(l.what(), "third");
      }
    }
  };
  check();                                   // outside the pool
  tpl::run([&] { check(); }).get();          // on a worker
  EXPECT_EQ(ran.load(), 6);
  EXPECT_THROW(tpl::parallel::invoke([] { throw std::runtime_error("only"); }), tpl::aggregate_exception);
}

TEST(parallel_invoke, a_coroutine_queued_by_a_function_and_not_awaited_still_runs) {
  // The first function queues coroutines on the worker's deque, above the invoke's own job;
  // the join moves them aside (to the fair queue) instead of running them on its stack.
  std::atomic<int> ran{0};
  std::vector<tpl::task<>> pending;
  tpl::run([&] {
    tpl::parallel::invoke(
        [&] {
          for (int i = 0; i < 4; ++i)
            pending.push_back(tpl::spawn([&ran] { return count_one(ran); }));
        },
        [] {});
  }).get();
  for (auto& t : pending) t.get();
  EXPECT_EQ(ran.load(), 4);
}

TEST(parallel_invoke, async_local_values_flow_into_every_function) {
  static tpl::async_local<int> value;
  tpl::thread_pool pool(tpl::thread_pool_options{.thread_count = 2});
  std::atomic<bool> second_ran{false};
  int seen_first = 0, seen_second = 0;
  tpl::run(pool, [&] {
    value.set(42);
    tpl::parallel::invoke(
        [&] {
          seen_first = value.value();
          spin_until(second_ran);
        },
        [&] {
          seen_second = value.value();  // on the thief: the invoker's context
          second_ran = true;
        });
    EXPECT_EQ(value.value(), 42);  // the join left the caller's context in place
  }).get();
  EXPECT_EQ(seen_first, 42);
  EXPECT_EQ(seen_second, 42);
}

TEST(parallel_invoke, nested_invokes_under_load_run_each_leaf_once) {
  // Bounded stress: many small invokes from several pool items at once, on a 3-thread pool.
  tpl::thread_pool pool(tpl::thread_pool_options{.thread_count = 3});
  std::vector<tpl::task<std::int64_t>> items;
  for (int i = 0; i < 8; ++i) items.push_back(tpl::run(pool, [] { return skynet(0, 1000); }));
  for (auto& t : items) EXPECT_EQ(t.get(), 499'500);
}

TEST(parallel_invoke_options, a_token_canceled_before_the_call_runs_nothing) {
  tpl::cancellation_token_source cts;
  cts.cancel();
  std::atomic<int> ran{0};
  EXPECT_THROW(tpl::parallel::invoke({.token = cts.token()}, [&] { ++ran; }, [&] { ++ran; }), tpl::operation_canceled);
  EXPECT_EQ(ran.load(), 0);
}

TEST(parallel_invoke_options, a_token_canceled_during_the_call_starts_no_other_function) {
  // Degree 1: the functions run one after another on the caller, so the cancellation made by the
  // second stops the third and fourth from starting.
  tpl::cancellation_token_source cts;
  std::vector<int> ran;
  EXPECT_THROW(tpl::parallel::invoke({.max_degree_of_parallelism = 1, .token = cts.token()}, [&] { ran.push_back(0); },
                                     [&] {
                                       ran.push_back(1);
                                       cts.cancel();
                                     },
                                     [&] { ran.push_back(2); }, [&] { ran.push_back(3); }),
               tpl::operation_canceled);
  EXPECT_EQ(ran, (std::vector<int>{0, 1}));
}

TEST(parallel_invoke_options, the_degree_caps_how_many_functions_run_at_once) {
  for (int degree : {1, 2}) {
    std::atomic<int> running{0}, most{0}, ran{0};
    auto f = [&] {
      const int now = ++running;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      --running;
      ++ran;
    };
    tpl::run([&] { tpl::parallel::invoke({.max_degree_of_parallelism = degree}, f, f, f, f, f, f); }).get();
    EXPECT_EQ(ran.load(), 6);
    EXPECT_LE(most.load(), degree);
  }
  EXPECT_THROW(tpl::parallel::invoke({.max_degree_of_parallelism = -2}, [] {}), std::invalid_argument);
}

TEST(parallel_invoke_options, exceptions_win_over_cancellation_and_unlimited_degree_runs_all) {
  std::atomic<int> ran{0};
  EXPECT_THROW(tpl::parallel::invoke({.max_degree_of_parallelism = -1}, [&] { ++ran; }, [&] { ++ran; throw std::runtime_error("x"); },
                                     [&] { ++ran; }),
               tpl::aggregate_exception);
  EXPECT_EQ(ran.load(), 3);
}

TEST(parallel_invoke_options, a_scheduler_runs_the_whole_invoke) {
  tpl::thread_pool pool(tpl::thread_pool_options{.thread_count = 2});
  std::atomic<bool> on_other{true};
  const auto caller = std::this_thread::get_id();
  tpl::parallel::invoke({.scheduler = &pool}, [&] { if (std::this_thread::get_id() == caller) on_other = false; },
                        [&] { if (std::this_thread::get_id() == caller) on_other = false; });
  EXPECT_TRUE(on_other.load());
}

TEST(parallel_invoke, a_value_a_function_sets_stays_in_its_own_copy_of_the_context) {
  // .NET runs each action in the captured ExecutionContext: what one sets is seen neither by the
  // caller afterwards nor by the other actions, whether it ran inline or was stolen.
  static tpl::async_local<int> value;
  tpl::thread_pool pool(tpl::thread_pool_options{.thread_count = 2});
  for (int degree : {0, 1}) {
    tpl::run(pool, [&] {
      value.set(1);
      std::atomic<int> seen_by_others{0};
      auto setter = [&] { value.set(2); };
      auto reader = [&] { if (value.value() != 1) ++seen_by_others; };
      if (degree == 0)
        tpl::parallel::invoke(setter, reader, setter, reader, reader);
      else
        tpl::parallel::invoke({.max_degree_of_parallelism = 1}, setter, reader, setter, reader, reader);
      EXPECT_EQ(seen_by_others.load(), 0);
      EXPECT_EQ(value.value(), 1);
    }).get();
  }
}

TEST(parallel_invoke, a_thief_takes_the_last_function_first_and_the_caller_takes_back_the_rest_in_order) {
  // From a worker, the functions after the first are queued together: the oldest slot, the one a
  // thief takes, holds the last function; the caller takes back the others from the second on.
  tpl::thread_pool pool(tpl::thread_pool_options{.thread_count = 2});
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> first_stolen{-1};
    std::vector<int> taken_back;
    std::thread::id caller;
    bool saw = false;
    tpl::run(pool, [&] {
      caller = std::this_thread::get_id();
      auto job = [&](int i) {
        return [&, i] {
          if (std::this_thread::get_id() == caller) {
            taken_back.push_back(i);
          } else {
            int none = -1;
            first_stolen.compare_exchange_strong(none, i);
          }
        };
      };
      tpl::parallel::invoke([&] { saw = poll_until([&] { return first_stolen.load() != -1; }); }, job(1), job(2),
                            job(3));
    }).get();
    ASSERT_TRUE(saw);
    EXPECT_EQ(first_stolen.load(), 3);
    // The caller's take-backs (if the thief did not take them too) come newest first: 1, then 2.
    for (std::size_t k = 1; k < taken_back.size(); ++k) EXPECT_LT(taken_back[k - 1], taken_back[k]);
    for (int i : taken_back) EXPECT_NE(i, 3);
  }
}

}  // namespace parallel_invoke_test_cpp
