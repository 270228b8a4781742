// The per-test hang guard: see hang_guard.hpp.
//
// The watchdog is one thread that sleeps on a condition variable until the armed test's deadline
// (or for good while nothing is armed). Every field it reads is guarded by one mutex, and every
// change is followed by a notify, so it re-reads them after each wake-up, spurious or not: a
// change made while it was about to wait is seen when it takes the lock to wait (it checks before
// waiting), never lost. Nothing here allocates once the guard is installed (arming copies two
// pointers to strings gtest keeps for the whole run), so tpl_alloc_tests' counts of allocations
// made during a test stay exact.
//
// The watchdog outlives everything: a test may end the process with std::exit (a death test's
// child does), which runs static destructors while the watchdog still waits, so it is allocated
// once and never destroyed; stop_hang_guard() joins its thread on the ordinary way out.
#include "hang_guard.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace tpl_test {
namespace {

class hang_watchdog {
 public:
  explicit hang_watchdog(std::chrono::seconds limit) : limit_(limit), thread_([this] { watch(); }) {}

  void arm(const char* suite, const char* name) {
    {
      std::lock_guard g(mutex_);
      suite_ = suite;
      name_ = name;
      deadline_ = std::chrono::steady_clock::now() + limit_;
      armed_ = true;
    }
    cv_.notify_one();
  }

  void disarm() {
    {
      std::lock_guard g(mutex_);
      armed_ = false;
    }
    cv_.notify_one();
  }

  void stop_and_join() {
    {
      std::lock_guard g(mutex_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (stopping_) return;
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (std::chrono::steady_clock::now() >= deadline_) report_and_exit();
      cv_.wait_until(lock, deadline_);
    }
  }

  [[noreturn]] void report_and_exit() const {
    // stderr is unbuffered; stdout is left alone (a hung test may hold its lock).
    std::fprintf(stderr,
                 "tpl test hang guard: %s.%s still running after %lld s (TPL_TEST_HANG_SECONDS sets the "
                 "limit); ending the process with status %d\n",
                 suite_, name_, static_cast<long long>(limit_.count()), kHangExitCode);
    std::_Exit(kHangExitCode);
  }

  const std::chrono::seconds limit_;
  std::mutex mutex_;
  std::condition_variable cv_;
  // Guarded by mutex_.
  const char* suite_ = "";
  const char* name_ = "";
  std::chrono::steady_clock::time_point deadline_{};
  bool armed_ = false;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the other members exist
};

/// A day: far beyond any test, and small enough that now() + limit cannot overflow.
constexpr long long kLongestHangLimitSeconds = 24 * 60 * 60;

hang_watchdog* g_watchdog = nullptr;  // set once by install_hang_guard, before any test runs

class hang_guard_listener final : public ::testing::EmptyTestEventListener {
 public:
  explicit hang_guard_listener(hang_watchdog& w) : watchdog_(w) {}
  void OnTestStart(const ::testing::TestInfo& test) override { watchdog_.arm(test.test_suite_name(), test.name()); }
  void OnTestEnd(const ::testing::TestInfo&) override { watchdog_.disarm(); }

 private:
  hang_watchdog& watchdog_;
};

}  // namespace

std::optional<std::chrono::seconds> hang_limit_from_environment(std::chrono::seconds default_limit) {
  const char* text = std::getenv("TPL_TEST_HANG_SECONDS");
  if (text == nullptr || *text == '\0') return default_limit;
  char* end = nullptr;
  errno = 0;
  const long long seconds = std::strtoll(text, &end, 10);
  if (*end != '\0' || errno != 0 || seconds < 0 || seconds > kLongestHangLimitSeconds) {
    std::fprintf(stderr, "TPL_TEST_HANG_SECONDS=%s: expected a whole number of seconds up to %lld (0: no guard)\n",
                 text, kLongestHangLimitSeconds);
    return std::nullopt;
  }
  return std::chrono::seconds(seconds);
}

void install_hang_guard(std::chrono::seconds limit) {
  if (limit.count() == 0 || g_watchdog != nullptr) return;
  g_watchdog = new hang_watchdog(limit);  // never deleted: see the top of this file
  ::testing::UnitTest::GetInstance()->listeners().Append(new hang_guard_listener(*g_watchdog));
}

void stop_hang_guard() {
  if (g_watchdog != nullptr) g_watchdog->stop_and_join();
}

}  // namespace tpl_test
