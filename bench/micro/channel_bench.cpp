// Channel micro-benchmarks: the synchronous path (an item is there / room is there) and the
// waiting path (a reader or writer waits in the channel and is handed over to), with the bytes
// allocated per operation (0 expected after warm-up: the waiting node lives in the awaiter).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <optional>
#include <thread>

#include <tpl/channel.hpp>
#include <tpl/tpl.hpp>

#include "micro_support.hpp"

namespace {

tpl::task<> write_then_read(benchmark::State& state, tpl::channel<std::int64_t> ch) {
  auto r = ch.reader();
  auto w = ch.writer();
  std::int64_t i = 0;
  for (auto _ : state) {
    co_await w.write_async(i);
    ++i;
    std::int64_t v = co_await r.read_async();
    benchmark::DoNotOptimize(v);
  }
}

void channel_sync_bounded(benchmark::State& state) {
  auto ch = tpl::make_bounded_channel<std::int64_t>(1024);
  tpl_bench::alloc_probe probe;
  write_then_read(state, ch).get();
  probe.finish(state);
}
BENCHMARK(channel_sync_bounded)->Name("channel/bounded(1024) co_await write_async + read_async (item there)");

void channel_sync_unbounded(benchmark::State& state) {
  auto ch = tpl::make_unbounded_channel<std::int64_t>();
  tpl_bench::alloc_probe probe;
  write_then_read(state, ch).get();
  probe.finish(state);
}
BENCHMARK(channel_sync_unbounded)->Name("channel/unbounded co_await write_async + read_async (item there)");

void channel_try_bounded(benchmark::State& state) {
  auto ch = tpl::make_bounded_channel<std::int64_t>(1024);
  auto r = ch.reader();
  auto w = ch.writer();
  std::int64_t i = 0;
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    w.try_write(i++);
    std::int64_t v = 0;
    r.try_read(v);
    benchmark::DoNotOptimize(v);
  }
  probe.finish(state);
}
BENCHMARK(channel_try_bounded)->Name("channel/bounded(1024) try_write + try_read");

// A reader that waits in the channel each time; the benchmark thread hands it an item, and the
// reader (synchronous continuations) resumes inline and waits again: the full waiting path.
tpl::task<> waiting_reader(tpl::channel_reader<std::int64_t> r, std::int64_t* sink) {
  for (;;) {
    std::optional<std::int64_t> v = co_await r.next_async();
    if (!v) co_return;
    *sink += *v;
  }
}

void channel_handoff_to_waiting_reader(benchmark::State& state) {
  auto ch = tpl::make_bounded_channel<std::int64_t>(
      {.capacity = static_cast<std::ptrdiff_t>(state.range(0)), .allow_synchronous_continuations = true});
  std::int64_t sink = 0;
  auto reader = waiting_reader(ch.reader(), &sink);
  auto w = ch.writer();
  std::int64_t i = 0;
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    if (!w.try_write(i++)) state.SkipWithError("reader was not waiting");
  }
  probe.finish(state);
  w.complete();
  reader.wait();
  benchmark::DoNotOptimize(sink);
}
BENCHMARK(channel_handoff_to_waiting_reader)
    ->Arg(0)
    ->Arg(1024)
    ->Name("channel/hand over to a waiting reader (capacity 0 = rendezvous, 1024)");

// A writer that waits for room each time; the benchmark thread takes an item, which lets the
// writer's item in and resumes it inline, and it waits again.
tpl::task<> waiting_writer(tpl::channel_writer<std::int64_t> w) {
  for (std::int64_t i = 0;; ++i) {
    try {
      co_await w.write_async(i);
    } catch (const tpl::channel_closed&) {
      co_return;
    }
  }
}

void channel_room_for_waiting_writer(benchmark::State& state) {
  auto ch = tpl::make_bounded_channel<std::int64_t>({.capacity = 1, .allow_synchronous_continuations = true});
  auto writer = waiting_writer(ch.writer());
  auto r = ch.reader();
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    std::int64_t v = 0;
    if (!r.try_read(v)) state.SkipWithError("writer was not waiting");
    benchmark::DoNotOptimize(v);
  }
  probe.finish(state);
  ch.writer().complete();
  writer.wait();
}
BENCHMARK(channel_room_for_waiting_writer)->Name("channel/bounded(1) read makes room for a waiting writer");

// The lock-free ring across two cores: a plain thread writes 1,000,000 items with try_write
// while the benchmark thread reads them with try_read (both retry while full / empty), so each
// item costs one write and one read on different cores plus the cache lines they pass. Time per
// iteration is per item.
void cross_thread_try(benchmark::State& state, tpl::channel<std::int64_t> ch) {
  constexpr std::int64_t kItems = 1'000'000;
  auto r = ch.reader();
  auto w = ch.writer();
  for (auto _ : state) {
    std::thread producer([w]() mutable {
      for (std::int64_t i = 0; i < kItems; ++i) {
        std::int64_t v = i;
        while (!w.try_write(v)) std::this_thread::yield();
      }
    });
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < kItems; ++i) {
      std::int64_t v = 0;
      while (!r.try_read(v)) std::this_thread::yield();
      sum += v;
    }
    producer.join();
    if (sum != kItems * (kItems - 1) / 2) state.SkipWithError("items lost or duplicated");
  }
  state.SetItemsProcessed(state.iterations() * kItems);
}

void channel_cross_thread_bounded(benchmark::State& state) {
  cross_thread_try(state, tpl::make_bounded_channel<std::int64_t>(1024));
}
BENCHMARK(channel_cross_thread_bounded)
    ->Name("channel/bounded(1024) try_write on a thread, try_read on another (1M items)")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void channel_cross_thread_unbounded(benchmark::State& state) {
  cross_thread_try(state, tpl::make_unbounded_channel<std::int64_t>());
}
BENCHMARK(channel_cross_thread_unbounded)
    ->Name("channel/unbounded try_write on a thread, try_read on another (1M items)")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
