// Parallel loops and synchronization, whole-program workloads from seeds 000 and 004:
//   for_async_1m         parallel::for_async vs for_each_async over 1,000,000 no-op bodies (seed 000:
//                        ForEachAsync 590 ms vs ForAsync 148 ms); parallel::for_ for reference
//   for_async_delay_100  100 bodies of delay(1 ms) (seed 000: 89 ms)
//   jobs_100             seed 004: 100 jobs of 10-50 ms simulated I/O; the delay of job i is
//                        10 + (37 i mod 41) ms, the formula the peer programs use; checksum = sum of ids
//   rw_lock_stress       seed 000: 100 tasks enter and leave a read lock, in rounds, for 2 s (quick
//                        0.3 s); acquisitions and the longest one go to stderr (none may take 10 ms)
//   multiple_serial      seed 000's MultipleSerial: 8 x rent + clear a 4 KiB buffer, yield, 8 x read
//                        and return (9.3 us per iteration on .NET 7)
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <tpl/tpl.hpp>

#include "alloc_counter_impl.hpp"
#include "workload.hpp"

namespace {

using namespace std::chrono_literals;

int pick(bool quick, int full, int light) { return quick ? light : full; }

// ---- counting bodies without a shared hot counter --------------------------------------------------
// Each thread counts in its own cache line; the total is summed after the loop.
struct alignas(64) padded_count {
  std::atomic<long long> n{0};
};
std::array<padded_count, 256> g_counts;
std::atomic<unsigned> g_next_slot{0};
thread_local padded_count* t_count = nullptr;

inline void count_body() {
  if (t_count == nullptr) t_count = &g_counts[g_next_slot.fetch_add(1) % g_counts.size()];
  // relaxed: only this thread writes its slot; the total is read after the loop's completion.
  t_count->n.store(t_count->n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

long long take_count() {
  long long total = 0;
  for (auto& c : g_counts) total += c.n.exchange(0);
  return total;
}

// ---- for_async_1m -----------------------------------------------------------------------------------
long long for_async_1m(bool quick) {
  const int n = pick(quick, 1'000'000, 100'000);
  tpl::sync_wait(tpl::parallel::for_async(0, n, [](int, const tpl::cancellation_token&) -> tpl::task<> {
    count_body();
    co_return;
  }));
  return take_count();
}

long long for_async_1m_value_task(bool quick) {
  const int n = pick(quick, 1'000'000, 100'000);
  tpl::sync_wait(tpl::parallel::for_async(0, n, [](int, const tpl::cancellation_token&) -> tpl::value_task<> {
    count_body();
    return tpl::value_task<>::completed();
  }));
  return take_count();
}

const std::vector<int>& items(int n) {
  static std::vector<int> v;
  if (static_cast<int>(v.size()) != n) {
    v.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  }
  return v;
}

long long for_each_async_1m(bool quick) {
  const auto& v = items(pick(quick, 1'000'000, 100'000));
  tpl::sync_wait(tpl::parallel::for_each_async(v, [](const int&, const tpl::cancellation_token&) -> tpl::task<> {
    count_body();
    co_return;
  }));
  return take_count();
}

long long for_1m(bool quick) {
  const int n = pick(quick, 1'000'000, 100'000);
  tpl::parallel::for_(0, n, [](int) { count_body(); });
  return take_count();
}

// ---- for_async_delay_100 -------------------------------------------------------------------------
long long for_async_delay(bool quick, int degree) {
  const int n = pick(quick, 100, 100);
  tpl::parallel_options o;
  o.max_degree_of_parallelism = degree;
  std::atomic<long long> ran{0};
  tpl::sync_wait(tpl::parallel::for_async(0, n, [&](int, const tpl::cancellation_token& token) -> tpl::task<> {
    co_await tpl::delay(1ms, token);
    ran.fetch_add(1);
  }, o));
  return ran.load();
}

// ---- jobs_100 (seed 004) ------------------------------------------------------------------------
struct job {
  int id;
  std::chrono::milliseconds delay;
};

std::vector<job> make_jobs(bool quick) {
  const int n = pick(quick, 100, 20);
  std::vector<job> jobs;
  for (int i = 0; i < n; ++i) jobs.push_back({i, std::chrono::milliseconds(10 + (i * 37) % 41)});
  return jobs;
}

void print_threads(const char* when, const char* method) {
  std::fprintf(stderr, "  jobs_100 / %s: pool threads at %s: %u\n", method, when,
               tpl::thread_pool::default_pool().stats().thread_count);
}

long long jobs_parallel_for(bool quick, int degree) {
  const auto jobs = make_jobs(quick);
  print_threads("start", "tpl parallel::for_ @4");
  std::atomic<long long> sum{0};
  tpl::parallel_options o;
  o.max_degree_of_parallelism = degree;
  // Parallel.For + Thread.Sleep, as in the seed: a blocking body the pool does not know about.
  tpl::parallel::for_(std::size_t{0}, jobs.size(), [&](std::size_t i) {
    std::this_thread::sleep_for(jobs[i].delay);
    sum.fetch_add(jobs[i].id);
  }, o);
  print_threads("end", "tpl parallel::for_ @4");
  return sum.load();
}

long long jobs_for_each_async(bool quick, int degree, const char* name) {
  const auto jobs = make_jobs(quick);
  print_threads("start", name);
  std::atomic<long long> sum{0};
  tpl::parallel_options o;
  o.max_degree_of_parallelism = degree;
  tpl::sync_wait(tpl::parallel::for_each_async(jobs, [&](const job& j, const tpl::cancellation_token& token) -> tpl::task<> {
    co_await tpl::delay(j.delay, token);
    sum.fetch_add(j.id);
  }, o));
  print_threads("end", name);
  return sum.load();
}

// ---- rw_lock_stress (seed 000) --------------------------------------------------------------------
long long rw_lock_stress(bool quick) {
  tpl::reader_writer_lock rwl;
  // The seed runs 10 s; the bench group runs 2 s. TPL_BENCH_RW_MS=10000 reproduces the seed's length.
  auto duration = quick ? 300ms : 2000ms;
  if (const char* v = std::getenv("TPL_BENCH_RW_MS"); v != nullptr && std::atoi(v) > 0)
    duration = std::chrono::milliseconds(std::atoi(v));
  std::atomic<long long> acquisitions{0};
  std::atomic<long long> slow{0};
  std::atomic<long long> max_ns{0};
  const auto end = std::chrono::steady_clock::now() + duration;
  std::vector<tpl::task<>> tasks(100);
  while (std::chrono::steady_clock::now() < end) {
    for (auto& t : tasks) {
      t = tpl::run([&] {
        const auto t0 = std::chrono::steady_clock::now();
        rwl.enter_read_lock();
        rwl.exit_read_lock();
        const long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
        acquisitions.fetch_add(1, std::memory_order_relaxed);
        if (ns >= 10'000'000) slow.fetch_add(1, std::memory_order_relaxed);
        long long seen = max_ns.load(std::memory_order_relaxed);
        while (ns > seen && !max_ns.compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
        }
      });
    }
    tpl::when_all(tasks).wait();
  }
  std::fprintf(stderr, "  rw_lock_stress: %lld acquisitions, longest %.1f us, %lld took >= 10 ms\n",
               acquisitions.load(), static_cast<double>(max_ns.load()) / 1000.0, slow.load());
  return slow.load();  // the checksum: acquisitions of 10 ms or more (expected: none)
}

// ---- multiple_serial (seed 000) -------------------------------------------------------------------
// A small per-thread buffer pool standing in for ArrayPool<byte>.Shared (thread-local buckets).
// Out of line: the coroutine below loops around a yield that may move it to another thread, and
// an inlined thread-local access could be hoisted out of the loop (see tpl/parallel.hpp).
class buffer_pool {
 public:
  static constexpr std::size_t kSize = 4096;
  TPL_NOINLINE static std::byte* rent() {
    auto& b = bucket();
    if (!b.empty()) {
      std::byte* p = b.back();
      b.pop_back();
      return p;
    }
    return new std::byte[kSize];
  }
  TPL_NOINLINE static void give_back(std::byte* p) {
    auto& b = bucket();
    if (b.size() < 32)
      b.push_back(p);
    else
      delete[] p;
  }

 private:
  struct cache {
    std::vector<std::byte*> v;
    cache() { v.reserve(32); }
    ~cache() {
      for (auto* p : v) delete[] p;
    }
  };
  static std::vector<std::byte*>& bucket() {
    thread_local cache c;
    return c.v;
  }
};

// The seed's IterateAll (`foreach (byte item in arr) ret = item;`) reads every byte: the JIT keeps
// the loop. g++ folds the same loop into one load of the last byte, so each read is volatile: the
// work stays the seed's (and the peers'), 8 x 4 KiB read byte by byte per iteration.
std::byte iterate_all(const std::byte* a) {
  const volatile std::byte* bytes = a;
  std::byte ret{};
  for (std::size_t i = 0; i < buffer_pool::kSize; ++i) ret = bytes[i];
  return ret;
}

tpl::task<long long> multiple_serial_task(int iterations) {
  std::array<std::byte*, 8> nested{};
  long long checksum = 0;
  for (int i = 0; i < iterations; ++i) {
    for (auto& a : nested) {
      a = buffer_pool::rent();
      std::memset(a, 0, buffer_pool::kSize);
    }
    co_await tpl::yield();
    for (std::size_t j = nested.size(); j-- > 0;) {
      checksum += static_cast<long long>(iterate_all(nested[j]));
      buffer_pool::give_back(nested[j]);
    }
    ++checksum;
  }
  co_return checksum;
}

long long multiple_serial(bool quick) {
  const int iterations = pick(quick, 100'000, 10'000);
  return tpl::sync_wait(multiple_serial_task(iterations));
}

}  // namespace

int main(int argc, char** argv) {
  const long long sum100 = 99 * 100 / 2, sum20 = 19 * 20 / 2;
  std::vector<tpl_bench::method> methods = {
      {"for_async_1m", "tpl parallel::for_async (task<> bodies)", for_async_1m, 1'000'000, 100'000},
      {"for_async_1m", "tpl parallel::for_async (value_task<> bodies)", for_async_1m_value_task, 1'000'000, 100'000},
      {"for_async_1m", "tpl parallel::for_each_async over a vector", for_each_async_1m, 1'000'000, 100'000},
      {"for_async_1m", "tpl parallel::for_ (blocking, for reference)", for_1m, 1'000'000, 100'000},
      {"for_async_delay_100", "tpl parallel::for_async @default, delay(1 ms)",
       [](bool q) { return for_async_delay(q, 0); }, 100, 100},
      {"for_async_delay_100", "tpl parallel::for_async @100, delay(1 ms)",
       [](bool q) { return for_async_delay(q, 100); }, 100, 100},
      {"jobs_100", "tpl parallel::for_ @4", [](bool q) { return jobs_parallel_for(q, 4); }, sum100, sum20},
      {"jobs_100", "tpl parallel::for_each_async @4",
       [](bool q) { return jobs_for_each_async(q, 4, "tpl parallel::for_each_async @4"); }, sum100, sum20},
      {"jobs_100", "tpl parallel::for_each_async @40",
       [](bool q) { return jobs_for_each_async(q, 40, "tpl parallel::for_each_async @40"); }, sum100, sum20},
      {"jobs_100", "tpl parallel::for_each_async (default)",
       [](bool q) { return jobs_for_each_async(q, 0, "tpl parallel::for_each_async (default)"); }, sum100, sum20},
      {"rw_lock_stress", "tpl reader_writer_lock, 100 tasks (checksum: acquisitions >= 10 ms)", rw_lock_stress, 0, 0},
      {"multiple_serial", "tpl 8 x rent/clear 4 KiB, yield, 8 x return", multiple_serial, 100'000, 10'000},
  };
  return tpl_bench::workload_main(argc, argv, methods);
}
