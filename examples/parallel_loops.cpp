// Parallel loops and async synchronization in one small program: a blocking parallel::for_ with
// early exit, an asynchronous for_each_async with a degree limit and a shared async_mutex, and an
// async_barrier that keeps three coroutines in step.
#include <cstdio>
#include <string>
#include <vector>

#include <tpl/tpl.hpp>

using namespace std::chrono_literals;

int main() {
  // 1. CPU-bound: find the first index whose square exceeds a bound (break_ keeps lower indices).
  auto r = tpl::parallel::for_(0, 1'000'000, [](int i, tpl::parallel_loop_state& s) {
    if (static_cast<long long>(i) * i > 10'000'000'000LL) s.break_();
  });
  std::printf("for_: completed=%d, lowest break at %lld\n", r.is_completed ? 1 : 0,
              static_cast<long long>(r.lowest_break_iteration.value_or(-1)));

  // 2. I/O-bound: 20 "downloads" of 5 ms, at most 4 in flight, appending to a shared log.
  std::vector<std::string> urls;
  for (int i = 0; i < 20; ++i) urls.push_back("https://example.com/" + std::to_string(i));
  tpl::async_mutex log_lock;
  std::vector<std::string> log;
  tpl::parallel_options options;
  options.max_degree_of_parallelism = 4;
  tpl::sync_wait(tpl::parallel::for_each_async(urls, [&](const std::string& url, const tpl::cancellation_token& token) -> tpl::task<> {
    co_await tpl::delay(5ms, token);  // the download
    auto guard = co_await log_lock.lock_async();
    log.push_back(url);
  }, options));
  std::printf("for_each_async: %zu downloads logged\n", log.size());

  // 3. Three coroutines advance in lock-step through 5 phases.
  tpl::async_barrier step(3, [](std::int64_t phase) { std::printf("  phase %lld done\n", static_cast<long long>(phase)); });
  std::vector<tpl::task<>> workers;
  for (int w = 0; w < 3; ++w) {
    workers.push_back(tpl::run([&step]() -> tpl::task<> {
      for (int phase = 0; phase < 5; ++phase) co_await step.arrive_and_wait_async();
    }));
  }
  tpl::when_all(workers).wait();
  std::printf("async_barrier: %lld phases\n", static_cast<long long>(step.current_phase_number()));
  return log.size() == urls.size() && step.current_phase_number() == 5 ? 0 : 1;
}
