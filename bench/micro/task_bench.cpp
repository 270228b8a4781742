// Micro-benchmarks of the task core: the seeds' microbenchmarks (000, 002, 003).
#include <benchmark/benchmark.h>

#include <coroutine>
#include <cstddef>
#include <exception>
#include <utility>

#include <tpl/detail/frame_pool.hpp>
#include <tpl/tpl.hpp>

#include "micro_support.hpp"

namespace {

// ---- task_sync: a synchronously completing task<int>, call + await (seed 000/003) ---------------

int __attribute__((noinline)) plain_function(int x) { return x + 1; }

__attribute__((noinline)) tpl::task<int> sync_task(int x) { co_return x + 1; }
__attribute__((noinline)) tpl::value_task<int> sync_value_task_coroutine(int x) { co_return x + 1; }
__attribute__((noinline)) tpl::value_task<int> sync_value_task_plain(int x) { return tpl::value_task<int>(x + 1); }

// The floor for a coroutine call + await: the least a hot coroutine can cost. Its frame comes
// from tpl's frame pool (the same thread-local free list as task<int>'s), and it has nothing
// else: no shared state, no reference count, no execution context, no stack check; its only
// handle destroys it. What task<int> costs above this is tpl's protocol (copyable handles,
// cross-thread completion, async_local flow, the start guard).
namespace minimal {
template <class T>
struct hot_task {
  struct promise_type {
    T value{};
    bool done = false;
    hot_task get_return_object() { return hot_task{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_value(T v) {
      value = v;
      done = true;
    }
    void unhandled_exception() { std::terminate(); }
    static void* operator new(std::size_t n) { return tpl::detail::frame_alloc(n); }
    static void operator delete(void* p, std::size_t n) noexcept { tpl::detail::frame_free(p, n); }
  };
  std::coroutine_handle<promise_type> h;
  explicit hot_task(std::coroutine_handle<promise_type> x) noexcept : h(x) {}
  hot_task(hot_task&& o) noexcept : h(std::exchange(o.h, {})) {}
  ~hot_task() {
    if (h) h.destroy();
  }
  bool await_ready() const noexcept { return h.promise().done; }
  void await_suspend(std::coroutine_handle<>) const noexcept { std::terminate(); }  // completes synchronously
  T await_resume() const noexcept { return h.promise().value; }
};
}  // namespace minimal

__attribute__((noinline)) minimal::hot_task<int> minimal_sync_task(int x) { co_return x + 1; }

void task_sync_plain_function(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  int acc = 0;
  for (auto _ : state) {
    acc = plain_function(acc);
    benchmark::DoNotOptimize(acc);
  }
  probe.finish(state);
}
BENCHMARK(task_sync_plain_function)->Name("task_sync/plain function call (floor)");

template <class Body>
tpl::task<> drive(benchmark::State& state, Body body) {
  int acc = 0;
  for (auto _ : state) {
    acc = co_await body(acc);
    benchmark::DoNotOptimize(acc);
  }
}

void task_sync_task(benchmark::State& state) {
  // Warm the frame pool outside the measurement.
  for (int i = 0; i < 64; ++i) (void)sync_task(i).get();
  tpl_bench::alloc_probe probe;
  drive(state, [](int a) { return sync_task(a); }).get();
  probe.finish(state);
}
BENCHMARK(task_sync_task)->Name("task_sync/task<int> call + co_await");

void task_sync_value_task(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  drive(state, [](int a) { return sync_value_task_coroutine(a); }).get();
  probe.finish(state);
}
BENCHMARK(task_sync_value_task)->Name("task_sync/value_task<int> coroutine call + co_await");

void task_sync_value_task_plain(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  drive(state, [](int a) { return sync_value_task_plain(a); }).get();
  probe.finish(state);
}
BENCHMARK(task_sync_value_task_plain)->Name("task_sync/value_task<int> from a value + co_await");

void task_sync_minimal_coroutine(benchmark::State& state) {
  for (int i = 0; i < 4; ++i) (void)minimal_sync_task(i);  // warm the frame pool
  tpl_bench::alloc_probe probe;
  drive(state, [](int a) { return minimal_sync_task(a); }).get();
  probe.finish(state);
}
BENCHMARK(task_sync_minimal_coroutine)->Name("task_sync/minimal hot coroutine call + co_await (coroutine floor)");

// ---- cached tasks (seed 000/003) ---------------------------------------------------------------

void cached_from_result_int(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  int i = 0;
  for (auto _ : state) {
    auto t = tpl::task_from_result(i++ & 7);
    benchmark::DoNotOptimize(t);
  }
  probe.finish(state);
}
BENCHMARK(cached_from_result_int)->Name("cached_tasks/task_from_result(0..7) (cached)");

void cached_from_result_uncached(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  int i = 1000;
  for (auto _ : state) {
    auto t = tpl::task_from_result(i++);
    benchmark::DoNotOptimize(t);
  }
  probe.finish(state);
}
BENCHMARK(cached_from_result_uncached)->Name("cached_tasks/task_from_result(1000+) (pooled)");

void cached_completed_task(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    auto t = tpl::completed_task();
    benchmark::DoNotOptimize(t);
  }
  probe.finish(state);
}
BENCHMARK(cached_completed_task)->Name("cached_tasks/completed_task()");

// ---- yield through the pool (seed 000: 866-919 ns, 96-112 B in .NET) ---------------------------

void yield_on_pool(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  tpl::sync_wait(tpl::run([&state]() -> tpl::task<> {
    for (auto _ : state) co_await tpl::yield();
  }));
  probe.finish(state);
}
BENCHMARK(yield_on_pool)->Name("yield/co_await tpl::yield() on the default pool")->UseRealTime();

// ---- awaiting a pending task: tcs create + await + set (seed 003) -------------------------------

void pending_await(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    tpl::task_completion_source<int> tcs;
    auto waiter = [](tpl::task<int> t) -> tpl::task<int> { co_return co_await t; }(tcs.get_task());
    tcs.set_result(1);
    benchmark::DoNotOptimize(waiter.get());
  }
  probe.finish(state);
}
BENCHMARK(pending_await)->Name("await/await a pending task, then set_result");

// ---- when_all / when_any (seed 000: 161 ns / 264 B; 260 ns / 504 B; seed 002: 8.4 / 150 ns) ------

void when_all_two_pending(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    tpl::task_completion_source<int> a, b;
    auto all = tpl::when_all(a.get_task(), b.get_task());
    a.set_result(1);
    b.set_result(2);
    benchmark::DoNotOptimize(std::get<1>(all.get()));
  }
  probe.finish(state);
}
BENCHMARK(when_all_two_pending)->Name("when_all/when_all(2 pending) + complete both");

void when_any_completed_pending(benchmark::State& state) {
  tpl::task_completion_source<int> pending;
  auto done = tpl::task_from_result(5);
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    auto any = tpl::when_any(done, pending.get_task());
    benchmark::DoNotOptimize(any);
  }
  probe.finish(state);
}
BENCHMARK(when_any_completed_pending)->Name("when_any/when_any(completed, pending)");

void when_any_pending_pending(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    tpl::task_completion_source<int> a, b;
    auto any = tpl::when_any(a.get_task(), b.get_task());
    a.set_result(1);
    benchmark::DoNotOptimize(any.get());
  }
  probe.finish(state);
}
BENCHMARK(when_any_pending_pending)->Name("when_any/when_any(pending, pending) + complete one");

void when_any_three_pending(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    tpl::task_completion_source<int> a, b, c;
    auto any = tpl::when_any(a.get_task(), b.get_task(), c.get_task());
    b.set_result(1);
    benchmark::DoNotOptimize(any.get());
  }
  probe.finish(state);
}
BENCHMARK(when_any_three_pending)->Name("when_any/when_any(3 pending) + complete one");

// ---- continue_with (seed 002: ContinueWith(OnlyOnFaulted, ExecuteSynchronously) 106 ns, 112 B) ---

void continue_with_only_on_faulted(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    tpl::task_completion_source<> tcs;
    auto c = tcs.get_task().continue_with([](tpl::task<>&) {},
                                          tpl::task_continuation_options::only_on_faulted |
                                              tpl::task_continuation_options::execute_synchronously);
    tcs.set_result();
    benchmark::DoNotOptimize(c.is_canceled());
  }
  probe.finish(state);
}
BENCHMARK(continue_with_only_on_faulted)->Name("continue_with/OnlyOnFaulted|ExecuteSynchronously then set_result");

// ---- spawning: tpl::run + await from a pool coroutine ---------------------------------------------

void run_and_await(benchmark::State& state) {
  tpl_bench::alloc_probe probe;
  tpl::sync_wait(tpl::run([&state]() -> tpl::task<> {
    for (auto _ : state) benchmark::DoNotOptimize(co_await tpl::run([] { return 1; }));
  }));
  probe.finish(state);
}
BENCHMARK(run_and_await)->Name("spawn/co_await tpl::run(fn) from the pool")->UseRealTime();

// ---- fork-join: tpl::parallel::invoke of two trivial functions on a pool worker ------------------
// On a 1-worker pool the second function is always taken back: the push and pop alone. On the
// default pool an idle worker is woken by each push and may steal the function first (then the
// invoker helps or waits): what a fork costs when the pool has nothing else to do.
void invoke_two(benchmark::State& state, tpl::thread_pool& pool) {
  tpl_bench::alloc_probe probe;
  tpl::run(pool, [&state] {
    int a = 0, b = 0;
    for (auto _ : state) {
      tpl::parallel::invoke([&] { ++a; }, [&] { ++b; });
      benchmark::DoNotOptimize(a + b);
    }
  }).get();
  probe.finish(state);
}
void invoke_two_one_worker(benchmark::State& state) {
  static tpl::thread_pool pool(tpl::thread_pool_options{.thread_count = 1, .max_threads = 1});
  invoke_two(state, pool);
}
void invoke_two_default_pool(benchmark::State& state) { invoke_two(state, tpl::thread_pool::default_pool()); }
BENCHMARK(invoke_two_one_worker)->Name("fork_join/parallel::invoke(f, g) on a 1-worker pool (taken back)")->UseRealTime();
BENCHMARK(invoke_two_default_pool)->Name("fork_join/parallel::invoke(f, g) on the default pool, others idle")->UseRealTime();

}  // namespace
