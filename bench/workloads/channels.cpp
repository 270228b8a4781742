// Channel workloads: seed 001's chain over channels (Go's goroutine + chan program, ported one to
// one with unbuffered rendezvous channels), SPSC and MPMC throughput (bounded 1024 and unbounded),
// and seed 004's 100 jobs of simulated I/O fanned in through a channel.
//
// Group names match the Go and tokio peer programs: chain_channels, channel_spsc_bounded,
// channel_spsc_unbounded, channel_mpmc_bounded, channel_mpmc_unbounded, jobs_100.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include <tpl/channel.hpp>
#include <tpl/tpl.hpp>

#include "alloc_counter_impl.hpp"
#include "workload.hpp"

namespace {

// ---- seed 001: the chain over channels ----------------------------------------------------------
//   func f(left, right chan int) { left <- 1 + <-right }
//   leftmost := make(chan int); right := leftmost; left := leftmost
//   for i := 0; i < n; i++ { right = make(chan int); go f(left, right); left = right }
//   go func(c chan int) { c <- 1 }(right); fmt.Println(<-leftmost)
tpl::task<> add_one(tpl::channel_writer<int> left, tpl::channel_reader<int> right) {
  const int v = co_await right.read_async();
  co_await left.write_async(v + 1);
}

tpl::task<> send_one(tpl::channel_writer<int> c) { co_await c.write_async(1); }

long long chain_channels(int n, bool rendezvous) {
  auto make = [rendezvous] {
    return rendezvous ? tpl::make_bounded_channel<int>(0) : tpl::make_unbounded_channel<int>();
  };
  tpl::channel<int> leftmost = make();
  tpl::channel<int> left = leftmost;
  tpl::channel<int> right;
  for (int i = 0; i < n; ++i) {
    right = make();
    (void)add_one(left.writer(), right.reader());
    left = right;
  }
  (void)send_one(right.writer());
  return tpl::sync_wait(leftmost.reader().read_async()) - 1;  // n links on 1 give n + 1
}

// ---- throughput: producers and consumers on the pool --------------------------------------------
tpl::task<> produce_async(tpl::channel_writer<std::int64_t> w, std::int64_t from, std::int64_t to) {
  for (std::int64_t i = from; i < to; ++i) co_await w.write_async(i);
}

// The .NET fast path: try_write while it succeeds, wait_to_write when full.
tpl::task<> produce_try(tpl::channel_writer<std::int64_t> w, std::int64_t from, std::int64_t to) {
  for (std::int64_t i = from; i < to; ++i) {
    while (!w.try_write(i)) {
      const bool more = co_await w.wait_to_write_async();
      if (!more) co_return;
    }
  }
}

tpl::task<std::int64_t> consume_async(tpl::channel_reader<std::int64_t> r) {
  std::int64_t sum = 0;
  for (;;) {
    std::optional<std::int64_t> v = co_await r.next_async();
    if (!v) break;
    sum += *v;
  }
  co_return sum;
}

// The .NET fast path: wait_to_read, then try_read until empty.
tpl::task<std::int64_t> consume_try(tpl::channel_reader<std::int64_t> r) {
  std::int64_t sum = 0;
  for (;;) {
    const bool more = co_await r.wait_to_read_async();
    if (!more) break;
    std::int64_t v;
    while (r.try_read(v)) sum += v;
  }
  co_return sum;
}

enum class style { async_ops, try_ops };

long long throughput(tpl::channel<std::int64_t> ch, int producers, int consumers, std::int64_t items, style s) {
  std::vector<tpl::task<std::int64_t>> readers;
  for (int c = 0; c < consumers; ++c)
    readers.push_back(tpl::run([r = ch.reader(), s] { return s == style::async_ops ? consume_async(r) : consume_try(r); }));
  std::vector<tpl::task<>> writers;
  const std::int64_t per = items / producers;
  for (int p = 0; p < producers; ++p) {
    const std::int64_t from = p * per;
    const std::int64_t to = p + 1 == producers ? items : from + per;
    writers.push_back(tpl::run([w = ch.writer(), from, to, s] {
      return s == style::async_ops ? produce_async(w, from, to) : produce_try(w, from, to);
    }));
  }
  tpl::sync_wait(tpl::when_all(std::move(writers)));
  ch.writer().complete();
  long long sum = 0;
  for (auto v : tpl::sync_wait(tpl::when_all(std::move(readers)))) sum += v;
  return sum;
}

// ---- seed 004: 100 jobs of 10-50 ms simulated I/O, fanned in through a channel ------------------
constexpr int kJobs = 100;
constexpr int kQuickJobs = 20;

// The delay of job i: 10 + (37 i mod 41) ms, 10-50 ms, the same formula in every peer's program.
int job_delay_ms(int i) { return 10 + (37 * i) % 41; }

tpl::task<> run_job(tpl::channel_writer<int> w, int id, int delay_ms) {
  co_await tpl::delay(std::chrono::milliseconds(delay_ms));  // simulated I/O
  co_await w.write_async(id);
}

// Sums the ids received (the peers' checksum).
tpl::task<long long> receive_all(tpl::channel_reader<int> r) {
  long long sum = 0;
  for (;;) {
    const bool more = co_await r.wait_to_read_async();
    if (!more) break;
    int id;
    while (r.try_read(id)) sum += id;
  }
  co_return sum;
}

long long jobs_100(bool quick) {
  const int n = quick ? kQuickJobs : kJobs;
  auto ch = tpl::make_unbounded_channel<int>();
  auto receiver = receive_all(ch.reader());
  std::vector<tpl::task<>> jobs;
  jobs.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) jobs.push_back(run_job(ch.writer(), i, job_delay_ms(i)));
  tpl::sync_wait(tpl::when_all(std::move(jobs)));
  ch.writer().complete();
  return tpl::sync_wait(std::move(receiver));
}

constexpr int kLinks = 1'000'000;
constexpr int kQuickLinks = 100'000;
constexpr std::int64_t kItems = 10'000'000;
constexpr std::int64_t kQuickItems = 1'000'000;

long long sum_below(std::int64_t n) { return static_cast<long long>(n * (n - 1) / 2); }

}  // namespace

int main(int argc, char** argv) {
  auto links = [](bool q) { return q ? kQuickLinks : kLinks; };
  auto items = [](bool q) { return q ? kQuickItems : kItems; };
  auto bounded = [] { return tpl::make_bounded_channel<std::int64_t>(1024); };
  auto unbounded = [] { return tpl::make_unbounded_channel<std::int64_t>(); };
  std::vector<tpl_bench::method> methods = {
      {"chain_channels", "tpl rendezvous channels (Go port)", [&](bool q) { return chain_channels(links(q), true); },
       kLinks, kQuickLinks},
      {"chain_channels", "tpl unbounded channels", [&](bool q) { return chain_channels(links(q), false); }, kLinks,
       kQuickLinks},
      {"channel_spsc_bounded", "tpl write_async / next_async",
       [&](bool q) { return throughput(bounded(), 1, 1, items(q), style::async_ops); }, sum_below(kItems),
       sum_below(kQuickItems)},
      {"channel_spsc_bounded", "tpl try_write / wait_to_read + try_read",
       [&](bool q) { return throughput(bounded(), 1, 1, items(q), style::try_ops); }, sum_below(kItems),
       sum_below(kQuickItems)},
      {"channel_spsc_unbounded", "tpl write_async / next_async",
       [&](bool q) { return throughput(unbounded(), 1, 1, items(q), style::async_ops); }, sum_below(kItems),
       sum_below(kQuickItems)},
      {"channel_spsc_unbounded", "tpl try_write / wait_to_read + try_read",
       [&](bool q) { return throughput(unbounded(), 1, 1, items(q), style::try_ops); }, sum_below(kItems),
       sum_below(kQuickItems)},
      {"channel_mpmc_bounded", "tpl write_async / next_async (2x2)",
       [&](bool q) { return throughput(bounded(), 2, 2, items(q), style::async_ops); }, sum_below(kItems),
       sum_below(kQuickItems)},
      {"channel_mpmc_bounded", "tpl try_write / wait_to_read + try_read (2x2)",
       [&](bool q) { return throughput(bounded(), 2, 2, items(q), style::try_ops); }, sum_below(kItems),
       sum_below(kQuickItems)},
      {"channel_mpmc_unbounded", "tpl write_async / next_async (2x2)",
       [&](bool q) { return throughput(unbounded(), 2, 2, items(q), style::async_ops); }, sum_below(kItems),
       sum_below(kQuickItems)},
      {"channel_mpmc_unbounded", "tpl try_write / wait_to_read + try_read (2x2)",
       [&](bool q) { return throughput(unbounded(), 2, 2, items(q), style::try_ops); }, sum_below(kItems),
       sum_below(kQuickItems)},
      {"jobs_100", "tpl channel fan-in", [](bool q) { return jobs_100(q); }, kJobs * (kJobs - 1) / 2,
       kQuickJobs * (kQuickJobs - 1) / 2},
  };
  return tpl_bench::workload_main(argc, argv, methods);
}
