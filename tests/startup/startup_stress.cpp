// tpl_startup_stress: starts many fresh processes, each of which creates the default pool and
// queues work at once, while the pool's workers and gate thread are still starting, then checks
// that the work completes. A start that does not finish within --timeout-ms is a hang (a lost
// wake-up in the pool's start-up or wake protocol); the process is killed and the run fails.
//
// The children run with TPL_THREADPOOL_PARK_ALARM=0 by default: no parked worker ever looks at
// the queues unless woken, so only the wake protocol can complete the work. With --alarm the
// alarm stays on and each child fails if it fired (stats().wakeups_by_park_timeout != 0).
//
//   tpl_startup_stress --starts 20000            # the full stress (a few minutes)
//   tpl_startup_stress --starts 300 --alarm
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tpl/tpl.hpp"

namespace {

tpl::task<int> leaf(int v) { co_return v; }

tpl::task<int> fan_out(int n) {
  std::vector<tpl::task<int>> children;
  children.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) children.push_back(tpl::run([i] { return i; }));
  int sum = 0;
  for (auto& c : children) sum += co_await c;
  co_return sum + co_await leaf(0);
}

tpl::task<int> ping_pong(int rounds) {
  auto ping = tpl::make_bounded_channel<int>(1);
  auto pong = tpl::make_bounded_channel<int>(1);
  auto echo = tpl::run([&]() -> tpl::task<void> {
    for (int i = 0; i < rounds; ++i) co_await pong.writer().write_async(co_await ping.reader().read_async());
  });
  int sum = 0;
  for (int i = 0; i < rounds; ++i) {
    co_await ping.writer().write_async(i);
    sum += co_await pong.reader().read_async();
  }
  co_await echo;
  co_return sum;
}

// One fresh start: everything here runs while the pool is being created.
int child(bool alarm) {
  if (!alarm) setenv("TPL_THREADPOOL_PARK_ALARM", "0", 1);
  const int a = tpl::sync_wait(fan_out(64));
  const int b = tpl::sync_wait(ping_pong(200));
  if (a != 64 * 63 / 2 || b != 200 * 199 / 2) return 2;
  if (alarm && tpl::thread_pool::default_pool().stats().wakeups_by_park_timeout != 0) return 3;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int starts = 300;
  int timeout_ms = 20000;
  bool alarm = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--starts") == 0 && i + 1 < argc)
      starts = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc)
      timeout_ms = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--alarm") == 0)
      alarm = true;
    else {
      std::fprintf(stderr, "usage: tpl_startup_stress [--starts N] [--timeout-ms MS] [--alarm]\n");
      return 64;
    }
  }
  // This process never starts a pool: fork() copies a single-threaded process.
  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < starts; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      std::fflush(stdout);
      _exit(child(alarm));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int status = 0;
    for (;;) {
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) break;
      if (r < 0 && errno != EINTR) {
        std::perror("waitpid");
        return 1;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        std::printf("tpl_startup_stress: FAILED: start %d of %d did not finish in %d ms (hang)\n", i + 1, starts,
                    timeout_ms);
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::printf("tpl_startup_stress: FAILED: start %d of %d ended with %s %d\n", i + 1, starts,
                  WIFEXITED(status) ? "exit code" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      return 1;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::printf("tpl_startup_stress: PASSED: %d fresh starts (park alarm %s), %.1f s\n", starts, alarm ? "on" : "off",
              secs);
  return 0;
}
