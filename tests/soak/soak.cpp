// tpl_soak — a bounded mixed workload on the default pool, repeated for N iterations, that accounts
// for every item and fails loudly on a lost, duplicated or hung one (docs/testing.md, "Soak").
//
//   tpl_soak [--iterations N] [--seed S] [--watchdog SECONDS] [--verbose] [--simulate-hang]
//            [--simulate-lost-item]
//            [--only pipeline|drop|cancellation|blocking|exceptions]
//
// Each iteration runs, concurrently (all on the default pool):
//  - channel pipelines: a bounded (capacity 1..16, full mode wait) or unbounded channel, 1-4
//    producers (write_async; one producer's writes carry a token that a timer cancels mid-flight),
//    1-4 consumers (read_async loops, read_all, wait_to_read + try_read); every item is read
//    exactly once or its write was canceled (the item came back to the producer);
//  - a drop_oldest channel with an item_dropped callback: written == read + dropped;
//  - cancellation: delays on tokens that real timers cancel mid-flight; each ends exactly once,
//    completed or canceled;
//  - blocking waits inside pool threads (task::wait(), sync_wait) on work that needs other pool
//    threads, so the pool's blocking injection is exercised;
//  - yields, short real delays (0-2 ms), exceptions thrown and caught through when_all.
// A watchdog thread ends the process (exit status 3) if an iteration makes no progress for
// --watchdog seconds (default 60): it prints the default pool's stats (every field) and the
// sub-workloads still in flight. Any accounting error prints what differed and exits 1.
// --simulate-hang adds a sub-workload that never finishes (to see the watchdog fire).
// --simulate-lost-item makes read_async consumers drop item 7 unaccounted (to see the report of a
// lost item: the pipeline's configuration, each producer's and consumer's last item, the items
// around the lost one and how each was accounted for).
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tpl/tpl.hpp>

namespace {

using namespace std::chrono_literals;

// ---- progress, registry of in-flight sub-workloads, watchdog ---------------------------------------

std::atomic<std::uint64_t> g_progress{0};
std::atomic<std::uint64_t> g_items{0};  // items accounted for, over the whole run
std::atomic<int> g_iteration{-1};       // the iteration running (-1: none)
// What the summary reports, so a run shows the interesting paths were taken.
std::atomic<std::uint64_t> g_canceled_writes{0}, g_dropped{0}, g_canceled_delays{0}, g_exceptions{0},
    g_blocking_waits{0};

class registry {
 public:
  int add(std::string name) {
    std::lock_guard g(mutex_);
    const int id = next_++;
    live_.emplace(id, std::move(name));
    return id;
  }
  void remove(int id) {
    std::lock_guard g(mutex_);
    live_.erase(id);
  }
  std::vector<std::string> snapshot() const {
    std::lock_guard g(mutex_);
    std::vector<std::string> out;
    for (const auto& [id, name] : live_) out.push_back(name);
    return out;
  }
  std::size_t size() const {
    std::lock_guard g(mutex_);
    return live_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::map<int, std::string> live_;
  int next_ = 0;
};

registry g_registry;

/// Names a sub-workload while it is in flight (RAII).
class in_flight {
 public:
  explicit in_flight(std::string name) : id_(g_registry.add(std::move(name))) {}
  in_flight(const in_flight&) = delete;
  in_flight& operator=(const in_flight&) = delete;
  ~in_flight() { g_registry.remove(id_); }

 private:
  int id_;
};

void progress() { g_progress.fetch_add(1, std::memory_order_relaxed); }

void print_pool_stats(std::FILE* out) {
  const tpl::thread_pool_stats s = tpl::thread_pool::default_pool().stats();
  std::fprintf(out,
               "default pool stats:\n"
               "  thread_count                      %u\n"
               "  processing_threads                %u\n"
               "  goal                              %u\n"
               "  min_threads                       %u\n"
               "  max_threads                       %u\n"
               "  idle_threads                      %u\n"
               "  spinning_threads                  %u\n"
               "  blocked_threads                   %u\n"
               "  global_queue_length               %zu\n"
               "  local_queue_length                %zu\n"
               "  items_executed                    %" PRIu64 "\n"
               "  threads_injected_by_starvation    %" PRIu64 "\n"
               "  threads_injected_by_blocking      %" PRIu64 "\n"
               "  threads_injected_by_hill_climbing %" PRIu64 "\n"
               "  threads_injected_by_eager         %" PRIu64 "\n"
               "  threads_injected_by_demand        %" PRIu64 "\n"
               "  threads_retired                   %" PRIu64 "\n"
               "  wakeups                           %" PRIu64 "\n"
               "  wakeups_by_park_timeout           %" PRIu64 "\n"
               "  hill_climbing                     %s\n"
               "  hill_climbing_control_setting     %.2f\n"
               "  hill_climbing_sample_ms           %u\n"
               "  extra_global_queues               %u\n",
               s.thread_count, s.processing_threads, s.goal, s.min_threads, s.max_threads, s.idle_threads,
               s.spinning_threads, s.blocked_threads, s.global_queue_length, s.local_queue_length,
               s.items_executed, s.threads_injected_by_starvation, s.threads_injected_by_blocking,
               s.threads_injected_by_hill_climbing, s.threads_injected_by_eager, s.threads_injected_by_demand,
               s.threads_retired, s.wakeups, s.wakeups_by_park_timeout, tpl::to_string(s.hill_climbing),
               s.hill_climbing_control_setting, s.hill_climbing_sample_ms, s.extra_global_queues);
}

/// Ends the process if the running iteration makes no progress for `limit`.
void watchdog(std::chrono::seconds limit, const std::atomic<bool>& stop) {
  std::uint64_t last = g_progress.load();
  auto last_change = std::chrono::steady_clock::now();
  while (!stop.load()) {
    std::this_thread::sleep_for(100ms);
    const std::uint64_t now_progress = g_progress.load();
    const auto now = std::chrono::steady_clock::now();
    if (now_progress != last || g_iteration.load() < 0) {
      last = now_progress;
      last_change = now;
      continue;
    }
    if (now - last_change < limit) continue;
    std::fprintf(stderr, "\ntpl_soak: WATCHDOG: iteration %d made no progress for %lld s\n", g_iteration.load(),
                 static_cast<long long>(limit.count()));
    print_pool_stats(stderr);
    const auto live = g_registry.snapshot();
    std::fprintf(stderr, "unfinished sub-workloads of the iteration (%zu):\n", live.size());
    for (const auto& n : live) std::fprintf(stderr, "  %s\n", n.c_str());
    std::fflush(stderr);
    std::_Exit(3);
  }
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "\ntpl_soak: FAILED in iteration %d: %s\n", g_iteration.load(), what.c_str());
  print_pool_stats(stderr);
  std::fflush(stderr);
  std::_Exit(1);
}

void expect_eq(long long got, long long want, const std::string& what) {
  if (got != want) die(what + ": got " + std::to_string(got) + ", expected " + std::to_string(want));
}

struct soak_error : std::runtime_error {
  explicit soak_error(int i) : std::runtime_error("soak_error " + std::to_string(i)), id(i) {}
  int id;
};

// ---- sub-workloads ------------------------------------------------------------------------------------

/// Per-item ledger: every item must be accounted for exactly once. It also keeps how each item was
/// accounted for, so that a failure can say what happened around the item that went wrong.
class ledger {
 public:
  explicit ledger(std::size_t n)
      : seen_(new std::atomic<std::uint8_t>[n]), how_(new std::atomic<const char*>[n]), n_(n) {
    for (std::size_t i = 0; i < n; ++i) {
      seen_[i].store(0, std::memory_order_relaxed);
      how_[i].store(nullptr, std::memory_order_relaxed);
    }
  }
  void account(std::size_t item, const char* how) {
    if (item >= n_) die(std::string("item out of range (") + how + ")");
    // relaxed, and no more locked instructions than the count's: the record must not change the
    // timing of the paths it watches (the failure report reads it after the tasks are joined).
    if (seen_[item].fetch_add(1, std::memory_order_relaxed) == 0) {
      how_[item].store(how, std::memory_order_relaxed);
    } else {
      const char* first = how_[item].load(std::memory_order_relaxed);
      die("item " + std::to_string(item) + " accounted for twice (first time: " + (first ? first : "?") +
          ", second time: " + how + ")");
    }
    progress();
  }
  /// explain(item) describes the sub-workload's view of an item that was not accounted for once.
  template <class Explain>
  void verify(const std::string& what, Explain&& explain) const {
    for (std::size_t i = 0; i < n_; ++i) {
      if (seen_[i].load() == 1) continue;
      std::string detail;
      for (std::size_t j = i >= 3 ? i - 3 : 0; j < n_ && j <= i + 3; ++j)
        detail += "\n    item " + std::to_string(j) + ": " + std::to_string(seen_[j].load()) + " time(s)" +
                  (how_[j].load() ? std::string(", ") + how_[j].load() : std::string());
      die(what + ": item " + std::to_string(i) + " accounted for " + std::to_string(seen_[i].load()) + " times" +
          explain(i) + "\n  neighbours:" + detail);
    }
    g_items.fetch_add(n_, std::memory_order_relaxed);
  }
  void verify(const std::string& what) const {
    verify(what, [](std::size_t) { return std::string(); });
  }

 private:
  std::unique_ptr<std::atomic<std::uint8_t>[]> seen_;
  std::unique_ptr<std::atomic<const char*>[]> how_;  // the first way each item was accounted for
  std::size_t n_;
};

struct pipeline_config {
  int id = 0;
  bool unbounded = false;
  int capacity = 1;
  int producers = 1;
  int consumers = 1;
  int items_per_producer = 100;
  int cancel_after_ms = 1;  // the canceled producer's token
};

/// What each producer and consumer of a pipeline did, for the failure report (at most 4 of each).
/// Each side is written by its own task only, with relaxed loads and stores (no locked
/// instruction, no fence: the record must not change the timing of what it watches); the report
/// reads it after the tasks are joined.
struct pipeline_trace {
  struct side {
    std::atomic<int> last{-1};         // producer: last item written; consumer: last item read
    std::atomic<long long> count{0};   // items written / read
    std::atomic<int> canceled_at{-1};  // producer: the item whose write was canceled
    std::atomic<bool> ended{false};
    void took(int v) noexcept {
      last.store(v, std::memory_order_relaxed);
      count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  };
  /// Marks a side ended when its coroutine ends, however it ends (RAII).
  struct end_mark {
    side* s;
    ~end_mark() { s->ended.store(true, std::memory_order_relaxed); }
  };
  side producers[4];
  side consumers[4];
};

tpl::task<> produce(tpl::channel_writer<int> w, int first, int count, tpl::cancellation_token token,
                    ledger* book, std::atomic<long long>* canceled, std::string name,
                    pipeline_trace::side* trace) {
  in_flight f(std::move(name));
  pipeline_trace::end_mark end{trace};
  for (int i = 0; i < count; ++i) {
    const int v = first + i;
    bool was_canceled = false;
    try {
      co_await w.write_async(v, token);
    } catch (const tpl::operation_canceled&) {
      was_canceled = true;
    }
    if (was_canceled) {
      trace->canceled_at.store(v, std::memory_order_relaxed);
      book->account(static_cast<std::size_t>(v), "write canceled, item returned");
      canceled->fetch_add(1, std::memory_order_relaxed);
      g_canceled_writes.fetch_add(1, std::memory_order_relaxed);
      // The producer stops: the items it did not write are accounted as never written.
      for (int j = i + 1; j < count; ++j) {
        book->account(static_cast<std::size_t>(first + j), "not written (producer canceled)");
        canceled->fetch_add(1, std::memory_order_relaxed);
      }
      co_return;
    } else {
      trace->took(v);
      progress();
    }
    if ((i & 15) == 0) co_await tpl::yield();
  }
}

bool simulate_lost_item = false;

tpl::task<> consume(tpl::channel_reader<int> r, int style, ledger* book, std::atomic<long long>* consumed,
                    std::string name, pipeline_trace::side* trace = nullptr) {
  in_flight f(std::move(name));
  pipeline_trace::side unused;
  if (trace == nullptr) trace = &unused;
  pipeline_trace::end_mark end{trace};
  switch (style % 3) {
    case 0:  // read_async until channel_closed
      for (;;) {
        std::optional<int> v;
        try {
          v = co_await r.read_async();
        } catch (const tpl::channel_closed&) {
        }
        if (!v) break;
        if (simulate_lost_item && *v == 7) continue;
        trace->took(*v);
        book->account(static_cast<std::size_t>(*v), "read_async");
        consumed->fetch_add(1, std::memory_order_relaxed);
      }
      break;
    case 1:  // read_all
      co_await r.read_all([&](int v) {
        trace->took(v);
        book->account(static_cast<std::size_t>(v), "read_all");
        consumed->fetch_add(1, std::memory_order_relaxed);
      });
      break;
    default:  // wait_to_read + try_read
      for (;;) {
        const bool more = co_await r.wait_to_read_async();
        if (!more) break;
        int v = 0;
        while (r.try_read(v)) {
          trace->took(v);
          book->account(static_cast<std::size_t>(v), "try_read");
          consumed->fetch_add(1, std::memory_order_relaxed);
        }
      }
      break;
  }
}

tpl::task<> channel_pipeline(pipeline_config c) {
  in_flight f("pipeline#" + std::to_string(c.id) + (c.unbounded ? " unbounded" : " bounded(" + std::to_string(c.capacity) + ")") +
              " producers=" + std::to_string(c.producers) + " consumers=" + std::to_string(c.consumers));
  auto ch = c.unbounded ? tpl::make_unbounded_channel<int>() : tpl::make_bounded_channel<int>(c.capacity);
  const int total = c.producers * c.items_per_producer;
  ledger book(static_cast<std::size_t>(total));
  std::atomic<long long> canceled{0}, consumed{0};
  pipeline_trace trace;
  // The last producer writes with a token that a real timer cancels mid-flight.
  tpl::cancellation_token_source cts;
  cts.cancel_after(std::chrono::milliseconds(c.cancel_after_ms));
  std::vector<tpl::task<>> consumers;
  for (int i = 0; i < c.consumers; ++i)
    consumers.push_back(tpl::run([=, &book, &consumed, &trace]() {
      return consume(ch.reader(), i, &book, &consumed,
                     "pipeline#" + std::to_string(c.id) + " consumer " + std::to_string(i), &trace.consumers[i]);
    }));
  std::vector<tpl::task<>> producers;
  for (int p = 0; p < c.producers; ++p) {
    tpl::cancellation_token token = p == c.producers - 1 ? cts.token() : tpl::cancellation_token{};
    producers.push_back(tpl::run([=, &book, &canceled, &trace]() {
      return produce(ch.writer(), p * c.items_per_producer, c.items_per_producer, token, &book, &canceled,
                     "pipeline#" + std::to_string(c.id) + " producer " + std::to_string(p), &trace.producers[p]);
    }));
  }
  co_await tpl::when_all(std::move(producers));
  ch.writer().complete();
  co_await tpl::when_all(std::move(consumers));
  co_await ch.reader().completion();
  book.verify("pipeline#" + std::to_string(c.id), [&](std::size_t item) {
    // The configuration, each side's last item, and what the channel still holds.
    const int p = static_cast<int>(item) / c.items_per_producer;
    std::string e = "\n  " + std::string(c.unbounded ? "unbounded" : "bounded(" + std::to_string(c.capacity) + ")") +
                    ", " + std::to_string(c.producers) + " producer(s) x " + std::to_string(c.items_per_producer) +
                    " items, " + std::to_string(c.consumers) + " consumer(s) (styles 0..n-1: read_async, read_all, " +
                    "wait_to_read + try_read), producer " + std::to_string(c.producers - 1) + " canceled after " +
                    std::to_string(c.cancel_after_ms) + " ms; the item is producer " + std::to_string(p) +
                    "'s index " + std::to_string(static_cast<int>(item) - p * c.items_per_producer) +
                    "\n  channel count now " + std::to_string(ch.reader().count());
    for (int k = 0; k < c.producers; ++k)
      e += "\n  producer " + std::to_string(k) + ": wrote " + std::to_string(trace.producers[k].count.load()) +
           ", last written " + std::to_string(trace.producers[k].last.load()) + ", canceled at " +
           std::to_string(trace.producers[k].canceled_at.load()) + (trace.producers[k].ended ? ", ended" : "");
    for (int k = 0; k < c.consumers; ++k)
      e += "\n  consumer " + std::to_string(k) + ": read " + std::to_string(trace.consumers[k].count.load()) +
           ", last read " + std::to_string(trace.consumers[k].last.load()) + (trace.consumers[k].ended ? ", ended" : "");
    return e;
  });
  expect_eq(consumed.load() + canceled.load(), total, "pipeline: consumed + canceled or not written");
}

tpl::task<> drop_channel(int id, int items) {
  in_flight f("drop_oldest channel#" + std::to_string(id));
  ledger book(static_cast<std::size_t>(items));
  std::atomic<long long> dropped{0}, consumed{0};
  tpl::bounded_channel_options o;
  o.capacity = 4;
  o.full_mode = tpl::bounded_channel_full_mode::drop_oldest;
  auto ch = tpl::make_bounded_channel<int>(o, [&](int v) {
    book.account(static_cast<std::size_t>(v), "dropped");
    dropped.fetch_add(1, std::memory_order_relaxed);
  });
  auto consumer = tpl::run([&]() { return consume(ch.reader(), id, &book, &consumed, "drop_oldest consumer"); });
  for (int i = 0; i < items; ++i) {
    if ((i & 1) == 0) {
      co_await ch.writer().write_async(i);  // never waits in a drop mode
    } else if (!ch.writer().try_write(i)) {
      die("try_write into a drop_oldest channel returned false");
    }
    if ((i & 7) == 0) co_await tpl::yield();
  }
  ch.writer().complete();
  co_await consumer;
  book.verify("drop_oldest channel");
  expect_eq(consumed.load() + dropped.load(), items, "drop channel: consumed + dropped");
  g_dropped.fetch_add(static_cast<std::uint64_t>(dropped.load()), std::memory_order_relaxed);
}

tpl::task<> cancellation_storm(int id, int waiters, std::uint64_t seed) {
  in_flight f("cancellation storm#" + std::to_string(id));
  std::mt19937_64 rng(seed);
  std::vector<tpl::cancellation_token_source> sources;
  std::vector<tpl::task<>> tasks;
  sources.reserve(static_cast<std::size_t>(waiters));
  std::atomic<int> completed{0}, canceled{0};
  for (int i = 0; i < waiters; ++i) {
    sources.emplace_back();
    // Some tokens fire during the delay, some after it, some never.
    const auto cancel_ms = std::chrono::milliseconds(rng() % 4);
    const auto delay_ms = std::chrono::milliseconds(rng() % 3);
    if (rng() % 4 != 0) sources.back().cancel_after(cancel_ms);
    tpl::cancellation_token token = sources.back().token();
    tasks.push_back([](tpl::cancellation_token t, std::chrono::milliseconds d, std::atomic<int>* ok,
                       std::atomic<int>* cn) -> tpl::task<> {
      bool was_canceled = false;
      try {
        co_await tpl::delay(d, t);
      } catch (const tpl::operation_canceled&) {
        was_canceled = true;
      }
      (was_canceled ? cn : ok)->fetch_add(1, std::memory_order_relaxed);
      progress();
    }(token, delay_ms, &completed, &canceled));
  }
  // A few are canceled by hand, mid-flight, from here.
  for (int i = 0; i < waiters; i += 7) sources[static_cast<std::size_t>(i)].cancel();
  co_await tpl::when_all(std::move(tasks));
  expect_eq(completed.load() + canceled.load(), waiters, "cancellation storm: completed + canceled");
  g_canceled_delays.fetch_add(static_cast<std::uint64_t>(canceled.load()), std::memory_order_relaxed);
  g_items.fetch_add(static_cast<std::uint64_t>(waiters), std::memory_order_relaxed);
}

/// Blocking waits on pool threads: each blocker waits (task::wait / sync_wait) for work that
/// needs another pool thread, so the pool must inject threads for blocked ones.
tpl::task<> blocking_waits(int id, int blockers) {
  in_flight f("blocking waits#" + std::to_string(id));
  std::atomic<int> done{0};
  std::vector<tpl::task<>> tasks;
  for (int i = 0; i < blockers; ++i) {
    tasks.push_back(tpl::run([i, &done] {
      tpl::task<int> inner = tpl::run([]() -> tpl::task<int> {
        co_await tpl::delay(1ms);
        co_return 7;
      });
      int v = 0;
      if (i % 2 == 0) {
        inner.wait();
        v = inner.get();
      } else {
        v = tpl::sync_wait(inner);
      }
      if (v != 7) die("blocking wait returned a wrong value");
      done.fetch_add(1, std::memory_order_relaxed);
      progress();
    }));
  }
  co_await tpl::when_all(std::move(tasks));
  expect_eq(done.load(), blockers, "blocking waits");
  g_blocking_waits.fetch_add(static_cast<std::uint64_t>(blockers), std::memory_order_relaxed);
  g_items.fetch_add(static_cast<std::uint64_t>(blockers), std::memory_order_relaxed);
}

tpl::task<> exceptions_and_yields(int id, int tasks_n) {
  in_flight f("exceptions and yields#" + std::to_string(id));
  std::atomic<int> yields{0};
  std::vector<tpl::task<int>> tasks;
  int expected_throws = 0;
  for (int i = 0; i < tasks_n; ++i) {
    const bool throws = i % 3 == 0;
    expected_throws += throws ? 1 : 0;
    tasks.push_back(tpl::run([i, throws, &yields]() -> tpl::task<int> {
      for (int k = 0; k < 5; ++k) {
        co_await tpl::yield();
        yields.fetch_add(1, std::memory_order_relaxed);
        progress();
      }
      if (i % 5 == 0) co_await tpl::delay(std::chrono::milliseconds(i % 3));
      if (throws) throw soak_error(i);
      co_return i;
    }));
  }
  int caught = 0;
  long long sum = 0;
  long long expected_sum = 0;
  for (int i = 0; i < tasks_n; ++i) {
    if (i % 3 != 0) expected_sum += i;
    bool threw = false;
    int v = 0;
    try {
      v = co_await tasks[static_cast<std::size_t>(i)];
    } catch (const soak_error& e) {
      threw = true;
      if (e.id != i) die("an exception came out of the wrong task");
    }
    if (threw)
      ++caught;
    else
      sum += v;
  }
  expect_eq(caught, expected_throws, "exceptions caught");
  g_exceptions.fetch_add(static_cast<std::uint64_t>(caught), std::memory_order_relaxed);
  expect_eq(sum, expected_sum, "sum of the results");
  expect_eq(yields.load(), tasks_n * 5, "yields");
  g_items.fetch_add(static_cast<std::uint64_t>(tasks_n), std::memory_order_relaxed);
}

/// --simulate-hang: a sub-workload that never finishes, to see the watchdog work.
tpl::task<> hang_forever() {
  in_flight f("simulated hang (--simulate-hang): waits for a task_completion_source nobody completes");
  static tpl::task_completion_source<> never;
  co_await never.get_task();
}

bool simulate_hang = false;
std::string only;  // --only: run just the sub-workloads whose name contains this

bool wanted(const char* name) { return only.empty() || std::string(name).find(only) != std::string::npos; }

void run_iteration(int iteration, std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ (0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(iteration + 1)));
  std::vector<tpl::task<>> work;
  const int pipelines = 2 + static_cast<int>(rng() % 3);
  for (int i = 0; i < pipelines && wanted("pipeline"); ++i) {
    pipeline_config c;
    c.id = i;
    c.unbounded = rng() % 3 == 0;
    c.capacity = 1 + static_cast<int>(rng() % 16);
    c.producers = 1 + static_cast<int>(rng() % 4);
    c.consumers = 1 + static_cast<int>(rng() % 4);
    c.items_per_producer = 1000 + static_cast<int>(rng() % 4000);
    c.cancel_after_ms = static_cast<int>(rng() % 3);
    work.push_back(channel_pipeline(c));
  }
  // The sizes are drawn whether or not a sub-workload runs, so --only keeps the others' sizes.
  const int drop_items = 2000 + static_cast<int>(rng() % 8000);
  const int storm_waiters = 200 + static_cast<int>(rng() % 300);
  const std::uint64_t storm_seed = rng();
  const int blockers = 4 + static_cast<int>(rng() % 12);
  const int yielders = 100 + static_cast<int>(rng() % 200);
  if (wanted("drop")) work.push_back(drop_channel(0, drop_items));
  if (wanted("cancellation")) work.push_back(cancellation_storm(0, storm_waiters, storm_seed));
  if (wanted("blocking")) work.push_back(blocking_waits(0, blockers));
  if (wanted("exceptions")) work.push_back(exceptions_and_yields(0, yielders));
  if (simulate_hang) work.push_back(hang_forever());
  tpl::sync_wait(tpl::when_all(std::move(work)));
  if (g_registry.size() != 0) die("sub-workloads still registered after the iteration finished");
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 20;
  std::uint64_t seed = 1;
  int watchdog_s = 60;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tpl_soak: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--iterations") {
      iterations = std::atoi(value());
    } else if (a == "--seed") {
      seed = std::strtoull(value(), nullptr, 10);
    } else if (a == "--watchdog") {
      watchdog_s = std::atoi(value());
    } else if (a == "--only") {
      only = value();
    } else if (a == "--simulate-hang") {
      simulate_hang = true;
    } else if (a == "--simulate-lost-item") {
      simulate_lost_item = true;
    } else if (a == "--verbose") {
      verbose = true;
    } else {
      std::fprintf(stderr, "usage: tpl_soak [--iterations N] [--seed S] [--watchdog SECONDS] [--verbose] [--simulate-hang]\n"
                           "                [--simulate-lost-item]\n"
                           "                [--only pipeline|drop|cancellation|blocking|exceptions]\n");
      return 2;
    }
  }
  if (iterations < 0 || watchdog_s <= 0) {
    std::fprintf(stderr, "tpl_soak: bad --iterations or --watchdog\n");
    return 2;
  }

  std::atomic<bool> stop{false};
  std::thread dog(watchdog, std::chrono::seconds(watchdog_s), std::cref(stop));
  const auto start = std::chrono::steady_clock::now();
  std::printf("tpl_soak: %d iterations, seed %" PRIu64 ", watchdog %d s\n", iterations, seed, watchdog_s);
  std::fflush(stdout);
  for (int it = 0; it < iterations; ++it) {
    g_iteration.store(it);
    try {
      run_iteration(it, seed);
    } catch (const std::exception& e) {
      die(std::string("unexpected exception: ") + e.what());
    }
    g_iteration.store(-1);
    if (verbose || (it + 1) % 50 == 0) {
      const tpl::thread_pool_stats st = tpl::thread_pool::default_pool().stats();
      std::printf("  iteration %d done, %" PRIu64 " items so far; pool: %u threads, %" PRIu64
                  " wakeups by park timeout\n",
                  it + 1, g_items.load(), st.thread_count, st.wakeups_by_park_timeout);
      std::fflush(stdout);
    }
  }
  stop.store(true);
  dog.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The lost-wake-up alarm (docs/internals.md): it fires only when queued work was left with
  // nobody coming for it, which the wake protocol never does.
  const std::uint64_t alarms = tpl::thread_pool::default_pool().stats().wakeups_by_park_timeout;
  if (alarms != 0) {
    std::printf("tpl_soak: FAILED: wakeups_by_park_timeout = %" PRIu64 ": parked workers found work that nobody "
                "was woken for (a lost wake-up)\n",
                alarms);
    print_pool_stats(stdout);
    return 1;
  }
  std::printf("tpl_soak: PASSED: %d iterations, %" PRIu64 " items accounted for, %.1f s (seed %" PRIu64 ")\n",
              iterations, g_items.load(), secs, seed);
  std::printf("  writes canceled by their token (item returned) %" PRIu64 ", items dropped (drop_oldest) %" PRIu64
              ",\n  delays canceled %" PRIu64 ", exceptions thrown and caught %" PRIu64
              ", blocking waits on pool threads %" PRIu64 "\n",
              g_canceled_writes.load(), g_dropped.load(), g_canceled_delays.load(), g_exceptions.load(),
              g_blocking_waits.load());
  print_pool_stats(stdout);
  return 0;
}
