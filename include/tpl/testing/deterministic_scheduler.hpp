// tpl/testing/deterministic_scheduler.hpp — runs async code on the calling thread, one queued item
// at a time, in an order drawn from a seeded random generator, with fake time; so a race in the
// code under test shows up for some seed, and that seed replays it exactly.
//
//   TEST(my_code, counter_is_race_free) {
//     auto report = tpl::testing::for_each_seed(1000, [](tpl::testing::deterministic_scheduler& s) {
//       int counter = 0;
//       auto bump = [&]() -> tpl::task<> {
//         co_await tpl::delay(std::chrono::hours(1), s.clock());   // fake time: no real wait
//         int v = counter;
//         co_await tpl::yield();                                    // another coroutine may run here
//         counter = v + 1;                                          // a lost update, for some seeds
//       };
//       auto a = s.start(bump);
//       auto b = s.start(bump);
//       s.run_until_idle();       // runs every item; advances fake time when only timers are left
//       return counter == 2;      // false (or an exception) fails this seed
//     });
//     EXPECT_TRUE(report.ok) << report.message;   // "failed for seed N ... TPL_TEST_SEED=N"
//   }
//
// Code under test reaches the scheduler through the ordinary tpl::scheduler interface: start()
// runs a coroutine on it (or co_await tpl::resume_on(s)); while an item runs, the scheduler is
// scheduler::current(), so yield(), queued continuations and the depth guard come back to it. Work
// sent explicitly elsewhere (tpl::run, the default pool) leaves it. Timers of s.clock() fire inside
// run_until_idle() with the scheduler current, so what they complete runs on it too.
//
// yield() (schedule_after_others) is not privileged: a yielded item is one more ready item, picked
// at random like the others, which explores the orders a thread pool allows.
//
// A blocking wait (task::wait(), sync_wait, async_semaphore::wait(), blocking_scope) inside an item
// would deadlock a single-threaded scheduler: on_blocking_call() records it and throws
// blocking_call_error, which faults the calling task; for_each_seed() fails the seed.
#pragma once

#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tpl/scheduler.hpp"
#include "tpl/task.hpp"
#include "tpl/testing/fake_time_provider.hpp"

namespace tpl::testing {

/// Thrown by deterministic_scheduler::on_blocking_call: a blocking wait inside the scheduler.
class blocking_call_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

class deterministic_scheduler final : public scheduler {
 public:
  /// Uses its own fake_time_provider (starting at fake_time_provider::default_start()).
  explicit deterministic_scheduler(std::uint64_t seed);
  /// Uses `clock` (which must outlive the scheduler).
  deterministic_scheduler(std::uint64_t seed, fake_time_provider& clock);
  /// Runs the items still queued (without advancing time), so that no coroutine frame is leaked.
  ~deterministic_scheduler() override;
  deterministic_scheduler(const deterministic_scheduler&) = delete;
  deterministic_scheduler& operator=(const deterministic_scheduler&) = delete;

  void schedule(std::coroutine_handle<> h) override;
  void schedule_after_others(std::coroutine_handle<> h) override;
  /// Records the call and throws blocking_call_error naming it.
  void on_blocking_call(const char* what) override;

  /// Runs f() (a callable returning a task) as a coroutine on this scheduler: nothing of it runs
  /// before run_one() / run_until_idle() picks it.
  template <class F>
  auto start(F f) -> std::invoke_result_t<F&> {
    return started_on(*this, std::move(f));
  }

  /// Runs one ready item, chosen with the seeded generator. False if none was ready.
  bool run_one();
  /// Runs ready items until none is left; then, if a timer of clock() is armed, moves fake time to
  /// the earliest due time (firing what is due) and goes on. Returns the number of items run.
  /// Throws std::runtime_error after max_items (a livelock: e.g. a loop of yields that never ends).
  std::size_t run_until_idle(std::size_t max_items = 10'000'000);
  /// Moves fake time to the earliest armed timer's due time, firing it (and whatever else is due
  /// then) with this scheduler current. False if no timer is armed.
  bool advance_to_next_timer();

  /// Items queued and not run yet.
  std::size_t ready_count() const;
  /// Items run so far.
  std::size_t items_run() const noexcept { return items_run_; }
  std::uint64_t seed() const noexcept { return seed_; }
  fake_time_provider& clock() noexcept { return *clock_; }
  /// The blocking calls attempted inside this scheduler (what on_blocking_call was told).
  std::vector<std::string> blocking_calls() const;
  /// A number in [0, bound) from the scheduler's generator (bound > 0): scenarios that draw their
  /// own choices from it replay with the seed too.
  std::uint64_t random(std::uint64_t bound);

 private:
  template <class F>
  static auto started_on(deterministic_scheduler& s, F f) -> std::invoke_result_t<F&> {
    co_await resume_on(s);
    co_return co_await f();
  }

  std::uint64_t next();

  std::uint64_t seed_;
  std::uint64_t state_;
  std::unique_ptr<fake_time_provider> own_clock_;
  fake_time_provider* clock_;
  mutable std::mutex mutex_;  // schedule() may be called from another thread; runs stay on ours
  std::vector<std::coroutine_handle<>> ready_;
  std::vector<std::string> blocking_calls_;
  std::size_t items_run_ = 0;
  bool running_ = false;
};

/// What for_each_seed found.
struct seed_report {
  bool ok = true;               ///< every seed passed
  std::uint64_t seed = 0;       ///< the first failing seed (when !ok)
  std::size_t runs = 0;         ///< seeds run
  std::string message;          ///< what failed, and how to replay it
};

/// Runs `scenario` once per seed 1..n, each time with a fresh deterministic_scheduler (and its
/// own fake clock); stops at the first failure: the scenario returned false, threw, or made a
/// blocking call. With the environment variable TPL_TEST_SEED set, runs only that seed (replay).
seed_report for_each_seed_impl(std::size_t n, const std::function<bool(deterministic_scheduler&)>& scenario);

template <class F>
seed_report for_each_seed(std::size_t n, F&& scenario) {
  return for_each_seed_impl(n, [&scenario](deterministic_scheduler& s) -> bool {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, deterministic_scheduler&>>) {
      scenario(s);
      return true;
    } else {
      return static_cast<bool>(scenario(s));
    }
  });
}

}  // namespace tpl::testing
