// async_local micro-benchmarks: seed 000's AsyncLocal benchmark (4 locals x 1,000 updates, read
// back), and what capturing the context costs a task (seed 000: flowing ExecutionContext).
#include <benchmark/benchmark.h>

#include <tpl/tpl.hpp>

#include "micro_support.hpp"

namespace {

tpl::async_local<int> l1, l2, l3, l4;

// Per iteration: 4 x 1,000 updates; the reported time is divided by 4,000 (items processed).
void async_local_updates(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    for (int i = 0; i < 1000; ++i) {
      l1.set(i);
      l2.set(i);
      l3.set(i);
      l4.set(i);
    }
    benchmark::DoNotOptimize(l1.value() + l2.value() + l3.value() + l4.value());
  }
  l1.reset();
  l2.reset();
  l3.reset();
  l4.reset();
  state.SetItemsProcessed(state.iterations() * 4000);
  probe.finish(state);
  state.counters["ns_per_update"] = benchmark::Counter(static_cast<double>(state.iterations()) * 4000,
                                                       benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(async_local_updates)->Name("async_local/4 locals x 1,000 updates (seed 000)");

__attribute__((noinline)) tpl::task<int> sync_read() { co_return l1.value(); }

tpl::task<> drive(benchmark::State& state) {
  int acc = 0;
  for (auto _ : state) {
    acc += co_await sync_read();
    benchmark::DoNotOptimize(acc);
  }
}

void async_local_sync_task_with_context(benchmark::State& state) {
  l1.set(1);
  for (int i = 0; i < 64; ++i) (void)sync_read().get();
  tpl_bench::alloc_probe probe;
  tpl::sync_wait(drive(state));
  probe.finish(state);
  l1.reset();
}
BENCHMARK(async_local_sync_task_with_context)->Name("async_local/task<int> call + co_await with a value set");

}  // namespace
