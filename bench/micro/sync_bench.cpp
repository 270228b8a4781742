// Synchronization primitives, uncontended costs: async_mutex lock/unlock (guard and try_lock), the
// async events, countdown signal, spin_lock, reader_writer_lock, spin_wait's first step.
#include <benchmark/benchmark.h>

#include <mutex>

#include <tpl/tpl.hpp>

#include "micro_support.hpp"

namespace {

void mutex_lock_async_guard(benchmark::State& state) {
  tpl::async_mutex m;
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    auto guard = m.lock_async().get();  // free: completes at once, guard held inline
    benchmark::DoNotOptimize(guard);
  }
  probe.finish(state);
}
BENCHMARK(mutex_lock_async_guard)->Name("async_mutex/lock_async + guard unlock (uncontended)");

tpl::task<> lock_in_coroutine(tpl::async_mutex& m, int& counter) {
  auto guard = co_await m.lock_async();
  ++counter;
}

void mutex_lock_in_coroutine(benchmark::State& state) {
  tpl::async_mutex m;
  int counter = 0;
  tpl_bench::alloc_probe probe;
  for (auto _ : state) lock_in_coroutine(m, counter).wait();
  benchmark::DoNotOptimize(counter);
  probe.finish(state);
}
BENCHMARK(mutex_lock_in_coroutine)->Name("async_mutex/co_await lock_async in a task (uncontended)");

void mutex_try_lock(benchmark::State& state) {
  tpl::async_mutex m;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.try_lock());
    m.unlock();
  }
}
BENCHMARK(mutex_try_lock)->Name("async_mutex/try_lock + unlock");

void mutex_handoff(benchmark::State& state) {
  tpl::async_mutex m;
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    (void)m.try_lock();
    auto waiter = m.lock_async_unguarded();  // queued
    m.unlock();                              // handed over: completes the waiter
    m.unlock();                              // the waiter's turn ends
  }
  probe.finish(state);
}
BENCHMARK(mutex_handoff)->Name("async_mutex/queued waiter + hand-over");

void manual_event_wait_set(benchmark::State& state) {
  tpl::async_manual_reset_event e(true);
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    auto t = e.wait_async();
    benchmark::DoNotOptimize(t);
  }
  probe.finish(state);
}
BENCHMARK(manual_event_wait_set)->Name("async_manual_reset_event/wait_async on a set event");

void manual_event_wait_then_set(benchmark::State& state) {
  tpl::async_manual_reset_event e;
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    auto t = e.wait_async();
    e.set();
    e.reset();
    benchmark::DoNotOptimize(t);
  }
  probe.finish(state);
}
BENCHMARK(manual_event_wait_then_set)->Name("async_manual_reset_event/pending wait + set + reset");

void auto_event_set_wait(benchmark::State& state) {
  tpl::async_auto_reset_event e;
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    e.set();
    auto t = e.wait_async();
    benchmark::DoNotOptimize(t);
  }
  probe.finish(state);
}
BENCHMARK(auto_event_set_wait)->Name("async_auto_reset_event/set + wait_async");

void countdown_signal(benchmark::State& state) {
  tpl::async_countdown_event c(1);
  for (auto _ : state) {
    c.signal();
    c.reset(1);
  }
}
BENCHMARK(countdown_signal)->Name("async_countdown_event/signal to zero + reset");

void spin_lock_uncontended(benchmark::State& state) {
  tpl::spin_lock l;
  for (auto _ : state) {
    l.lock();
    l.unlock();
  }
}
BENCHMARK(spin_lock_uncontended)->Name("spin_lock/lock + unlock");

void spin_lock_tracked(benchmark::State& state) {
  tpl::spin_lock l(true);
  for (auto _ : state) {
    l.lock();
    l.unlock();
  }
}
BENCHMARK(spin_lock_tracked)->Name("spin_lock/lock + unlock (owner tracking)");

void spin_lock_contended(benchmark::State& state) {
  static tpl::spin_lock l;
  static long long counter = 0;
  for (auto _ : state) {
    std::lock_guard g(l);
    ++counter;
  }
  benchmark::DoNotOptimize(counter);
}
BENCHMARK(spin_lock_contended)->Name("spin_lock/lock + unlock, 2 threads")->Threads(2);

void rw_read_uncontended(benchmark::State& state) {
  tpl::reader_writer_lock rw;
  for (auto _ : state) {
    rw.enter_read_lock();
    rw.exit_read_lock();
  }
}
BENCHMARK(rw_read_uncontended)->Name("reader_writer_lock/enter + exit read");

void rw_write_uncontended(benchmark::State& state) {
  tpl::reader_writer_lock rw;
  for (auto _ : state) {
    rw.enter_write_lock();
    rw.exit_write_lock();
  }
}
BENCHMARK(rw_write_uncontended)->Name("reader_writer_lock/enter + exit write");

void spin_wait_first_step(benchmark::State& state) {
  for (auto _ : state) {
    tpl::spin_wait sw;
    sw.spin_once();
    benchmark::DoNotOptimize(sw);
  }
  state.counters["pause_ps"] = static_cast<double>(tpl::detail::measured_pause_picoseconds());
  state.counters["pauses_per_unit"] = tpl::detail::pauses_per_spin_unit();
}
BENCHMARK(spin_wait_first_step)->Name("spin_wait/first spin_once (1 spin unit)");

}  // namespace
