// oneTBB peer of tpl's benchmark workloads, where TBB has an idiom: task_group fork-join
// (skynet), parallel_reduce (the parallel loop), concurrent_bounded_queue between threads
// (channels), parallel_for over sleeping bodies (seed 004's Parallel.For).
// Not here: chains, yields and ping-pong (TBB tasks do not suspend), recursive_count (a
// task_group per level waits on the stack: 1,000,000 levels overflow it) and the injection
// programs (TBB never adds threads: blocked items deadlock).
#define PEER_NO_ALLOC_COUNT 1
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/concurrent_queue.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/task_group.h>

#include <thread>

#include "peer_main.hpp"

namespace {

long long skynet(long long num, long long size) {
  if (size == 1) return num;
  const long long sub = size / 10;
  long long r[10];
  tbb::task_group g;
  for (int i = 0; i < 10; ++i) g.run([&r, i, num, sub] { r[i] = skynet(num + i * sub, sub); });
  g.wait();
  long long sum = 0;
  for (long long v : r) sum += v;
  return sum;
}

long long fib(int n) {
  if (n < 2) return n;
  long long a = 0;
  tbb::task_group g;
  g.run([&a, n] { a = fib(n - 1); });
  const long long b = fib(n - 2);
  g.wait();
  return a + b;
}

__attribute__((noinline)) void body(int i) { asm volatile("" ::"r"(i)); }

long long parallel_loop(int n) {
  return tbb::parallel_reduce(
      tbb::blocked_range<int>(0, n), 0LL,
      [](const tbb::blocked_range<int>& r, long long ran) {
        for (int i = r.begin(); i != r.end(); ++i) body(i);
        return ran + (r.end() - r.begin());
      },
      [](long long a, long long b) { return a + b; });
}

long long jobs_sleeping(int n) {
  std::atomic<long long> sum{0};
  tbb::parallel_for(0, n, [&](int i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10 + (i * 37) % 41));  // blocks a worker
    sum += i;
  });
  return sum;
}

long long queue_run(long long n, int producers, int consumers, std::ptrdiff_t capacity) {
  tbb::concurrent_bounded_queue<long long> q;
  if (capacity > 0) q.set_capacity(capacity);
  constexpr long long done = -1;
  std::vector<std::thread> ps, cs;
  std::vector<long long> sums(static_cast<std::size_t>(consumers));
  for (int p = 0; p < producers; ++p)
    ps.emplace_back([&q, lo = n * p / producers, hi = n * (p + 1) / producers] {
      for (long long i = lo; i < hi; ++i) q.push(i);
    });
  for (int c = 0; c < consumers; ++c)
    cs.emplace_back([&q, &sums, c] {
      long long sum = 0;
      for (long long v; q.pop(v), v != done;) sum += v;
      sums[static_cast<std::size_t>(c)] = sum;
    });
  for (auto& t : ps) t.join();
  for (int c = 0; c < consumers; ++c) q.push(done);
  for (auto& t : cs) t.join();
  long long total = 0;
  for (long long s : sums) total += s;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  using peer::pick;
  std::vector<peer::method> methods = {
      {"skynet", "task_group", [](bool q, peer::recorder&) { return skynet(0, pick(q, 1'000'000, 100'000)); }},
      {"fib30", "task_group, one child run + one inline", [](bool q, peer::recorder&) { return fib(pick(q, 30, 25)); }},
      {"fib35", "task_group, one child run + one inline", [](bool q, peer::recorder&) { return fib(pick(q, 35, 30)); }},
      {"for_async_1m", "parallel_reduce over blocked_range", [](bool q, peer::recorder&) { return parallel_loop(pick(q, 1'000'000, 100'000)); }},
      {"jobs_100", "parallel_for, sleeping bodies", [](bool q, peer::recorder&) { return jobs_sleeping(pick(q, 100, 20)); }},
      {"channel_spsc_bounded", "concurrent_bounded_queue(1024), 2 threads",
       [](bool q, peer::recorder&) { return queue_run(pick(q, 10'000'000, 1'000'000), 1, 1, 1024); }},
      {"channel_spsc_unbounded", "concurrent_bounded_queue, 2 threads",
       [](bool q, peer::recorder&) { return queue_run(pick(q, 10'000'000, 1'000'000), 1, 1, 0); }},
      // MPMC (2 producer + 2 consumer threads) is left out of `make bench`: on a 2-core machine the
      // queue's spin-then-block waits make it 12 s per run (12.5 s bounded, 11.9 s unbounded,
      // 2026-11-21), which alone would push the full run past its 20-minute budget.
  };
  return peer::main(argc, argv, methods);
}
