// Waiting with limits: seed 000's SemaphoreSlim benchmark (100 WaitAsync, Release(100), WhenAll:
// 69 us / 36 KB in .NET 8), wait_async on a completed task, delay with fake time.
#include <benchmark/benchmark.h>

#include <vector>

#include <tpl/tpl.hpp>

#include "micro_support.hpp"

namespace {

using namespace std::chrono_literals;

void semaphore_100_waiters(benchmark::State& state) {
  tpl::async_semaphore sem(0);
  std::vector<tpl::task<>> waits;
  waits.reserve(100);
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    waits.clear();
    for (int i = 0; i < 100; ++i) waits.push_back(sem.wait_async());
    sem.release(100);
    tpl::when_all(waits).wait();
  }
  probe.finish(state);
}
BENCHMARK(semaphore_100_waiters)->Name("semaphore/100 wait_async + release(100) + when_all");

void semaphore_uncontended(benchmark::State& state) {
  tpl::async_semaphore sem(1);
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    auto t = sem.wait_async();
    benchmark::DoNotOptimize(t);
    sem.release();
  }
  probe.finish(state);
}
BENCHMARK(semaphore_uncontended)->Name("semaphore/wait_async (free) + release");

void wait_async_completed(benchmark::State& state) {
  auto done = tpl::task_from_result(1000);
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    auto t = done.wait_async(1s);
    benchmark::DoNotOptimize(t);
  }
  probe.finish(state);
}
BENCHMARK(wait_async_completed)->Name("wait_async/on a completed task");

void wait_async_pending_completes(benchmark::State& state) {
  tpl::testing::fake_time_provider clock;
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    tpl::task_completion_source<int> tcs;
    auto t = tcs.get_task().wait_async(1s, tpl::cancellation_token{}, clock);
    tcs.set_result(1);
    benchmark::DoNotOptimize(t.get());
  }
  probe.finish(state);
}
BENCHMARK(wait_async_pending_completes)->Name("wait_async/pending task completes first (fake clock)");

void delay_fake_30s(benchmark::State& state) {
  tpl::testing::fake_time_provider clock;
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    auto d = tpl::delay(30s, clock);
    clock.advance(30s);
    benchmark::DoNotOptimize(d.is_completed());
  }
  probe.finish(state);
}
BENCHMARK(delay_fake_30s)->Name("delay/30 s delay verified with fake time");

}  // namespace

namespace {

// Issue 4: 100,000 live system timers cost O(log n) or better per operation. Measures arming and
// disposing one more timer while 100,000 others are armed (far in the future).
void system_timer_with_100k_live(benchmark::State& state) {
  auto& clock = tpl::system_time_provider();
  std::vector<tpl::timer> live;
  live.reserve(100'000);
  for (int i = 0; i < 100'000; ++i) live.push_back(clock.create_timer([] {}, std::chrono::hours(1 + i % 24), tpl::infinite_timeout));
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    auto t = clock.create_timer([] {}, std::chrono::hours(2), tpl::infinite_timeout);
    t.dispose();
  }
  probe.finish(state);
}
BENCHMARK(system_timer_with_100k_live)->Name("timers/create + dispose with 100,000 live system timers");

void system_timer_change_with_100k_live(benchmark::State& state) {
  auto& clock = tpl::system_time_provider();
  std::vector<tpl::timer> live;
  live.reserve(100'000);
  for (int i = 0; i < 100'000; ++i) live.push_back(clock.create_timer([] {}, std::chrono::hours(1 + i % 24), tpl::infinite_timeout));
  std::size_t i = 0;
  tpl_bench::alloc_probe probe;
  for (auto _ : state) live[i++ % live.size()].change(std::chrono::hours(3), tpl::infinite_timeout);
  probe.finish(state);
}
BENCHMARK(system_timer_change_with_100k_live)->Name("timers/change with 100,000 live system timers");

}  // namespace
