// async_generator micro-benchmarks: the cost of one item when the body yields synchronously (the
// consumer never suspends), and for comparison a plain loop and a synchronously completing
// task<int> per item. Each benchmark iteration is one item; bytes_per_op should be 0 (the frame is
// made once, before the timed loop, and nothing is allocated per item).
#include <benchmark/benchmark.h>

#include <cstdint>

#include <tpl/tpl.hpp>

#include "micro_support.hpp"

namespace {

tpl::async_generator<std::int64_t> endless_ints() {
  for (std::int64_t i = 0;; ++i) co_yield i;
}

tpl::async_generator<std::int64_t> ints_with_a_ready_await() {
  for (std::int64_t i = 0;; ++i) {
    co_await tpl::completed_task();  // does not suspend
    co_yield i;
  }
}

template <class Make>
tpl::task<> drain_per_iteration(benchmark::State& state, Make make) {
  auto gen = make();
  (void)co_await gen.next();  // frame and first step outside the measurement
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    std::int64_t* item = co_await gen.next();
    benchmark::DoNotOptimize(*item);
  }
  probe.finish(state);
}

void async_generator_next(benchmark::State& state) {
  drain_per_iteration(state, [] { return endless_ints(); }).get();
}
BENCHMARK(async_generator_next)->Name("async_generator/co_await next(), body yields synchronously");

void async_generator_next_with_ready_await(benchmark::State& state) {
  drain_per_iteration(state, [] { return ints_with_a_ready_await(); }).get();
}
BENCHMARK(async_generator_next_with_ready_await)
    ->Name("async_generator/co_await next(), body awaits a completed task then yields");

tpl::task<> iterate_million(benchmark::State& state) {
  for (auto _ : state) {
    auto gen = []() -> tpl::async_generator<int> {
      for (int i = 0; i < 1'000'000; ++i) co_yield i;
    }();
    std::int64_t sum = 0;
    for (auto it = co_await gen.begin(); it != gen.end(); co_await ++it) sum += *it;
    benchmark::DoNotOptimize(sum);
  }
}

void async_generator_million(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  iterate_million(state).get();
  probe.finish(state);
  state.counters["time_per_item"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 1e6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(async_generator_million)
    ->Name("async_generator/1,000,000 ints through begin() / ++it (per generator)")
    ->Unit(benchmark::kMillisecond);

}  // namespace
