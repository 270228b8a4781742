// 10,000 CPU-bound items of about 1 ms each on a pool with one thread per core: nothing blocks, so
// the pool should not add threads (hill climbing may probe one above the minimum, and refuses to
// climb while the CPU is saturated). Prints the most threads seen while they ran, and the stats.
//
//   example_cpu_bound [items]
#include <atomic>
#include <cstdlib>
#include <thread>

#include "pool_demo_support.hpp"

namespace {
// About 1 ms of arithmetic, calibrated once.
long spin(long iterations) {
  volatile long x = 0;
  for (long i = 0; i < iterations; ++i) x = x + (i ^ (x >> 3));
  return x;
}
}  // namespace

int main(int argc, char** argv) {
  const int items = argc > 1 ? std::atoi(argv[1]) : 10'000;
  if (items <= 0) {
    std::fprintf(stderr, "usage: %s [items > 0]\n", argv[0]);
    return 2;
  }
  long per_ms = 100'000;
  {
    const auto t0 = demo::clock::now();
    spin(per_ms);
    const double ms = demo::ms_since(t0);
    if (ms > 0) per_ms = static_cast<long>(static_cast<double>(per_ms) / ms);
  }
  tpl::thread_pool pool;
  const unsigned min = pool.min_threads();
  std::atomic<bool> done{false};
  std::atomic<unsigned> most{pool.thread_count()};
  std::thread sampler([&] {
    while (!done.load()) {
      const unsigned n = pool.thread_count();
      if (n > most.load()) most.store(n);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const auto t0 = demo::clock::now();
  std::vector<tpl::task<long>> tasks;
  tasks.reserve(static_cast<std::size_t>(items));
  for (int i = 0; i < items; ++i) tasks.push_back(tpl::run(pool, [per_ms] { return spin(per_ms); }));
  tpl::sync_wait(tpl::when_all(tasks));
  const double total = demo::ms_since(t0);
  done.store(true);
  sampler.join();
  std::printf("%d items of ~1 ms on %u cores: %.1f ms; threads: min %u, most seen %u\n", items,
              std::max(1u, std::thread::hardware_concurrency()), total, min, most.load());
  demo::print_stats(pool);
  return most.load() <= min + 1 ? 0 : 1;
}
