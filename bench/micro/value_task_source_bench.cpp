// Ping-pong between two tasks through two reusable value_task sources (tpl/value_task_source.hpp):
// the pinger completes the ponger's source and awaits its own, the ponger does the reverse. One
// benchmark iteration is one round trip (two operations). bytes_per_op should be 0: the sources'
// cores are reset and reused, and the awaiting frames wait inside them.
//   - inline: continuations run inside set_result (the default), on the benchmark thread;
//   - pool: run_continuations_asynchronously, so each hand-off is queued to the pool (on a worker
//     it lands in that worker's next slot); 100,000 round trips per iteration, timed per round trip.
#include <benchmark/benchmark.h>

#include <coroutine>
#include <cstdint>

#include <tpl/tpl.hpp>

#include "micro_support.hpp"

namespace {

class pooled_source final : public tpl::value_task_source<std::int64_t> {
 public:
  explicit pooled_source(bool asynchronously) { core_.set_run_continuations_asynchronously(asynchronously); }
  tpl::value_task<std::int64_t> start() { return tpl::value_task<std::int64_t>(*this, core_.version()); }
  void complete(std::int64_t v) { core_.set_result(v); }

  tpl::task_status get_status(std::uint32_t token) const override { return core_.get_status(token); }
  bool on_completed(std::coroutine_handle<> h, std::uint32_t token) override { return core_.on_completed(h, token); }
  std::int64_t get_result(std::uint32_t token) override {
    const std::int64_t v = core_.get_result(token);
    core_.reset();
    return v;
  }

 private:
  tpl::manual_reset_value_task_source_core<std::int64_t> core_;
};

// Answers each ping with ping + 1 until it gets a negative one.
tpl::task<> ponger(pooled_source& mine, pooled_source& theirs) {
  for (;;) {
    const std::int64_t v = co_await mine.start();
    if (v < 0) co_return;
    theirs.complete(v + 1);
  }
}

tpl::task<> ping_per_iteration(benchmark::State& state, pooled_source& mine, pooled_source& theirs) {
  std::int64_t v = 0;
  theirs.complete(v);  // one round trip outside the measurement
  v = co_await mine.start();
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    theirs.complete(v);
    v = co_await mine.start();
    benchmark::DoNotOptimize(v);
  }
  probe.finish(state);
  if (v != static_cast<std::int64_t>(state.iterations()) + 1) state.SkipWithError("a round trip was lost");
  theirs.complete(-1);
}

void value_task_source_ping_pong_inline(benchmark::State& state) {
  pooled_source ping(false), pong(false);
  auto p = ponger(pong, ping);
  ping_per_iteration(state, ping, pong).get();
  p.get();
}
BENCHMARK(value_task_source_ping_pong_inline)->Name("value_task_source/ping-pong, inline continuations (round trip)");

tpl::task<std::int64_t> ping_rounds(pooled_source& mine, pooled_source& theirs, std::int64_t rounds) {
  std::int64_t v = 0;
  for (std::int64_t i = 0; i < rounds; ++i) {
    theirs.complete(v);
    v = co_await mine.start();
  }
  theirs.complete(-1);
  co_return v;
}

void value_task_source_ping_pong_pool(benchmark::State& state) {
  constexpr std::int64_t kRounds = 100'000;
  pooled_source ping(true), pong(true);
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    auto p = tpl::run([&] { return ponger(pong, ping); });
    auto a = tpl::run([&] { return ping_rounds(ping, pong, kRounds); });
    if (a.get() != kRounds) state.SkipWithError("a round trip was lost");
    p.get();
  }
  // Per round trip: the two tasks per iteration are spread over kRounds round trips.
  state.SetItemsProcessed(state.iterations() * kRounds);
  probe.finish(state);
  state.counters["bytes_per_op"] = state.counters["bytes_per_op"] / static_cast<double>(kRounds);
}
BENCHMARK(value_task_source_ping_pong_pool)
    ->Name("value_task_source/ping-pong through the pool, 100,000 round trips")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
