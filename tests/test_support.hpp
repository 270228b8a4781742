// tests/test_support.hpp — small helpers shared by the tpl unit tests.
//
// Tests sequence threads with task_completion_source, std::latch, by waiting on the tasks
// themselves, and, where one thread must have come to wait inside the library before another acts,
// by polling what the library shows of its wait queues (tpl/testing/wait_queues.hpp) with
// wait_until. Nothing here sleeps to let something happen; the clock serves only as a hang bound.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <tpl/tpl.hpp>

namespace tpl_test {

/// Iteration counts for stress loops: `full` in Release, `light` under the sanitizers (where the
/// build defines TPL_TEST_LIGHT) so that each configuration stays within its time budget.
constexpr int scaled([[maybe_unused]] int full, [[maybe_unused]] int light) {
#if defined(TPL_TEST_LIGHT)
  return light;
#else
  return full;
#endif
}

/// Runs `scenario` (a callable returning bool: whether everything it checked was right; it prints
/// what went wrong to stderr) in a child process: gtest's "threadsafe" death-test style re-executes
/// this binary for just the current test. A stack overflow, a sanitizer report or a livelock in the
/// scenario then fails this one test, with the child's output, instead of ending the whole run.
/// The watchdog only ends a child that is still running after `hang_limit`: a safety net against a
/// hang, far above what the scenario needs, not a timing assertion.
template <class Scenario>
void expect_passes_in_a_child_process(Scenario scenario,
                                      std::chrono::seconds hang_limit = std::chrono::seconds(120)) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::thread([hang_limit] {
          std::this_thread::sleep_for(hang_limit);
          std::fprintf(stderr, "still running after %lld s: the scenario hangs\n",
                       static_cast<long long>(hang_limit.count()));
          std::fflush(stderr);
          std::_Exit(3);
        }).detach();
        const bool ok = scenario();
        std::fflush(nullptr);
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

/// How long wait_until polls before it gives up: a hang bound far above what any handshake needs
/// (and below the per-test hang guard's limit, so the failure names what never happened).
inline constexpr std::chrono::seconds kHandshakeLimit{60};

/// Polls `condition` (yielding, then sleeping a millisecond between looks) until it holds, for a
/// handshake with another thread: "the reader is queued", "the writer is waiting". Returns true
/// once it holds; if it still does not after `limit`, fails the current test with `what` and
/// returns false, so that the caller can release whatever still waits and stop. Never a timing
/// assertion: the limit only turns a hang into a failure that says what did not happen.
template <class Condition>
[[nodiscard]] bool wait_until(Condition condition, const char* what, std::chrono::seconds limit = kHandshakeLimit) {
  constexpr int kYieldsBeforeSleeping = 1000;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int look = 0; !condition(); ++look) {
    if (look < kYieldsBeforeSleeping) {
      std::this_thread::yield();
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "still not the case after " << limit.count() << " s: " << what;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

/// For scenarios run by expect_passes_in_a_child_process: reports a failed check on stderr.
inline bool check(bool condition, const char* what) {
  if (!condition) std::fprintf(stderr, "check failed: %s\n", what);
  return condition;
}
inline bool check_eq(long long actual, long long expected, const char* what) {
  if (actual != expected) std::fprintf(stderr, "%s: got %lld, expected %lld\n", what, actual, expected);
  return actual == expected;
}
/// Shown with the child's output if the test fails: tells how far the scenario got.
inline void progress(const char* where) { std::fprintf(stderr, "reached: %s\n", where); }

/// The exception type the tests throw; `id` tells the faults of several tasks apart.
struct test_error : std::runtime_error {
  explicit test_error(int i = 0) : std::runtime_error("test_error " + std::to_string(i)), id(i) {}
  int id;
};

/// The id of a test_error held by e, or -1 if e holds something else.
inline int test_error_id(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const test_error& x) {
    return x.id;
  } catch (...) {
    return -1;
  }
}

/// True if e holds an exception of type E (or derived from it).
template <class E>
bool holds(const std::exception_ptr& e) {
  if (!e) return false;
  try {
    std::rethrow_exception(e);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

/// Calls f and returns what it threw (null if it returned normally).
template <class F>
std::exception_ptr thrown_by(F&& f) {
  try {
    static_cast<F&&>(f)();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

/// Which exception co_await t throws (null if none).
template <class T>
tpl::task<std::exception_ptr> exception_of_await(tpl::task<T> t) {
  try {
    co_await t;
  } catch (...) {
    co_return std::current_exception();
  }
  co_return nullptr;
}

/// What wait() threw, as the inner exceptions of the aggregate_exception it must be. Fails the
/// test (and returns an empty list) if wait() returned or threw something else.
template <class T>
std::vector<std::exception_ptr> wait_inner_exceptions(const tpl::task<T>& t) {
  try {
    t.wait();
  } catch (const tpl::aggregate_exception& e) {
    return e.inner_exceptions();
  } catch (...) {
    ADD_FAILURE() << "wait() threw something other than tpl::aggregate_exception";
    return {};
  }
  ADD_FAILURE() << "wait() did not throw";
  return {};
}

/// The message of the exception f throws (empty if it throws nothing or a non-std exception).
template <class F>
std::string message_of(F&& f) {
  try {
    static_cast<F&&>(f)();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
  }
  return {};
}

/// The number of handles (and internal holders) of a task's shared state. White-box: used to
/// prove indirectly that nothing keeps registrations on a task after they are no longer needed.
template <class T>
std::uint32_t ref_count(const tpl::task<T>& t) {
  return tpl::detail::task_access::state(t)->ref_count_for_tests();
}

/// A value that counts its live instances, one count per Tag: a test that hands such values to
/// the library proves it destroyed every one (a leak shows as a count above zero once all
/// handles are gone).
template <class Tag>
class counted {
 public:
  counted() noexcept { live_.fetch_add(1); }
  counted(const counted&) noexcept { live_.fetch_add(1); }
  counted& operator=(const counted&) noexcept = default;
  ~counted() { live_.fetch_sub(1); }
  static int live() noexcept { return live_.load(); }

 private:
  static inline std::atomic<int> live_{0};
};

/// Records entries from any thread, in the order they were added.
template <class T>
class ordered_log {
 public:
  void add(T entry) {
    std::lock_guard g(mutex_);
    entries_.push_back(std::move(entry));
  }
  std::vector<T> entries() const {
    std::lock_guard g(mutex_);
    return entries_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<T> entries_;
};

/// A user scheduler: a std::thread of its own that resumes the handles queued on it, in order.
/// The destructor runs whatever is still queued, then joins the thread.
class dedicated_thread_scheduler final : public tpl::scheduler {
 public:
  dedicated_thread_scheduler() : thread_([this] { loop(); }) {}
  dedicated_thread_scheduler(const dedicated_thread_scheduler&) = delete;
  dedicated_thread_scheduler& operator=(const dedicated_thread_scheduler&) = delete;
  ~dedicated_thread_scheduler() override {
    {
      std::lock_guard g(mutex_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  void schedule(std::coroutine_handle<> h) override {
    {
      std::lock_guard g(mutex_);
      queue_.push_back(h);
      ++scheduled_;
    }
    cv_.notify_one();
  }

  std::thread::id thread_id() const noexcept { return thread_.get_id(); }
  std::size_t scheduled_count() {
    std::lock_guard g(mutex_);
    return scheduled_;
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      auto h = queue_.front();
      queue_.pop_front();
      lock.unlock();
      tpl::scheduler::run(h);
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::coroutine_handle<>> queue_;
  std::size_t scheduled_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the other members exist
};

/// A reusable barrier for `parties` threads (std::barrier's arrive_and_wait), made of a mutex and
/// a condition variable. libc++ completes a std::barrier phase inside its shared library, which
/// ThreadSanitizer does not instrument, so a TSan build over libc++ (the tsan preset) would not see
/// the phase order and would report the writes before a phase as racing with the reads after it.
/// The mutex orders them in every configuration: each thread's writes before its arrival happen
/// before every thread's return from the same phase.
class barrier {
 public:
  explicit barrier(int parties) : parties_(parties) {
    if (parties <= 0) throw std::invalid_argument("tpl_test::barrier: parties must be positive");
  }
  barrier(const barrier&) = delete;
  barrier& operator=(const barrier&) = delete;

  void arrive_and_wait() {
    std::unique_lock lock(mutex_);
    const std::uint64_t phase = phase_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++phase_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return phase_ != phase; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const int parties_;
  int arrived_ = 0;
  std::uint64_t phase_ = 0;
};

}  // namespace tpl_test
