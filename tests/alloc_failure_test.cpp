// The allocation-failure sweep (issue 18): for each main scenario (task chains, when_all /
// when_any, channels, cancellation, timers, waits with a token, tpl::run / schedule, creating a
// pool, pool growth),
// the N-th allocation of the calling thread fails, for N = 1, 2, ... until a run makes fewer than
// N allocations (it then ran with no failure and must have completed normally).
//
// What each run must show: the failure surfaces as std::bad_alloc, out of the API call that could
// not allocate or out of the awaited task (a task faulted with it), or it is absorbed where the
// API says so (a pool worker that cannot start is retried by the gate); never another exception,
// never a wrong result, never a hang (every wait is bounded: a wait that runs out fails the test
// and ends the process), never std::terminate, and nothing leaks (the debug-asan preset runs
// LeakSanitizer over the whole binary at exit). Each sweep must have seen at least one run end in
// std::bad_alloc (so the hook really injected) and must end with a run that completed.
//
// Invariants of the harness: only the calling thread's allocations fail (tests/alloc_hook.hpp):
// pool workers, the gate and the timer thread allocate normally, so a failure never lands in a
// noexcept completion path on a worker, where terminating is tpl's documented policy
// (docs/thread-pool.md, "Out of memory"). Before each run the calling thread's frame cache and the
// frame pool's transfer lists are given back to the system, so the run's coroutine frames and
// task states come from operator new and can fail too. The harness's own waits and checks run in
// tpl_alloc::paused scopes (neither counted nor failed). A scenario that had an operation fail
// still finishes everything it started (completing a source, a channel, cancelling a token with
// the hook paused) before it waits, so that a failure cannot leave a waiter behind.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <tpl/testing/fake_time_provider.hpp>
#include <tpl/tpl.hpp>

#include "alloc_hook.hpp"
#include "tpl/detail/frame_pool.hpp"

namespace {

using namespace std::chrono_literals;

// Far above what any wait here needs: only a hang reaches it (then the test fails and the process
// ends, since the hung work cannot be cleaned up).
constexpr auto kHangLimit = std::chrono::seconds(60);
// A sweep that has not ended by then has stopped converging (a scenario that allocates without
// bound): the test fails.
constexpr long kMaxRuns = 5000;

[[noreturn]] void hang(const char* scenario, long n, const char* what) {
  std::fprintf(stderr, "alloc sweep %s, N = %ld: %s did not finish within %lld s: hang\n", scenario, n,
               what, static_cast<long long>(kHangLimit.count()));
  std::fflush(stderr);
  std::abort();
}

struct test_error : std::runtime_error {
  test_error() : std::runtime_error("test_error") {}
};

// not_started: the task was never created (the API call that creates it threw, counted there).
enum class outcome { ran, bad_alloc, canceled, other, not_started };

// One run of a scenario, with the N-th allocation of this thread failing.
class attempt {
 public:
  attempt(const char* scenario, long n, bool persistent) : scenario_(scenario), n_(n) {
    tpl_alloc::arm_failure(n, persistent);
  }
  ~attempt() { tpl_alloc::disarm_failure(); }
  attempt(const attempt&) = delete;
  attempt& operator=(const attempt&) = delete;

  long n() const noexcept { return n_; }
  int bad_allocs() const noexcept { return bad_allocs_; }
  const std::vector<std::string>& errors() const noexcept { return errors_; }

  // Runs an API call (with the hook armed). True if it returned; false if it threw std::bad_alloc
  // (counted) or anything else (an error).
  template <class F>
  bool call(F&& f) {
    try {
      f();
      return true;
    } catch (const std::bad_alloc&) {
      ++bad_allocs_;
      return false;
    } catch (const std::exception& e) {
      tpl_alloc::paused p;
      error(std::string("an API call threw ") + e.what());
      return false;
    } catch (...) {
      error("an API call threw a non-std exception");
      return false;
    }
  }

  // Waits (bounded, hook paused) for t and tells how it ended; a fault with std::bad_alloc is
  // counted. `other` is recorded in *error_out when given, else it is an error.
  template <class T>
  outcome settle(const tpl::task<T>& t, const char* what, std::exception_ptr* error_out = nullptr) {
    if (!t.valid()) return outcome::not_started;
    tpl_alloc::paused p;
    bool done = false;
    try {
      done = t.wait_for(kHangLimit);
    } catch (...) {
      done = true;  // faulted or canceled: told apart below
    }
    if (!done) hang(scenario_, n_, what);
    if (t.is_completed_successfully()) return outcome::ran;
    if (t.is_canceled()) return outcome::canceled;
    try {
      static_cast<void>(tpl::sync_wait(t));
    } catch (const std::bad_alloc&) {
      ++bad_allocs_;
      return outcome::bad_alloc;
    } catch (...) {
      if (error_out != nullptr) {
        *error_out = std::current_exception();
      } else {
        error(std::string(what) + " faulted with something other than std::bad_alloc");
      }
    }
    return outcome::other;
  }

  // A check of the scenario's result (hook paused).
  bool check(bool ok, const char* what) {
    if (!ok) {
      tpl_alloc::paused p;
      error(std::string("check failed: ") + what);
    }
    return ok;
  }

  void error(std::string what) {
    tpl_alloc::paused p;
    errors_.push_back(std::move(what));
  }

 private:
  const char* scenario_;
  long n_;
  int bad_allocs_ = 0;
  std::vector<std::string> errors_;
};

struct sweep_result {
  long runs = 0;            // N = 1 .. runs
  long bad_alloc_runs = 0;  // runs in which std::bad_alloc surfaced
  long absorbed_runs = 0;   // runs whose failure the library absorbed (the scenario completed)
  bool ended_clean = false; // the last run made fewer than N allocations and completed
};

// Runs `scenario(attempt&) -> bool` (true: it completed with the results of a run without
// failures) for N = 1, 2, ... as described at the top of this file. With `persistent`, every
// allocation of the thread from the N-th on fails (an exhausted heap: the clean-up paths after the
// first failure cannot allocate either); else only the N-th.
template <class Scenario>
sweep_result sweep(const char* name, Scenario scenario, bool persistent) {
  sweep_result r;
  for (long n = 1; n <= kMaxRuns; ++n) {
    tpl::detail::frame_pool_release_caches_for_testing();
    bool completed = false;
    bool injected = false;
    int bad_allocs = 0;
    std::vector<std::string> errors;
    {
      attempt a(name, n, persistent);
      try {
        completed = scenario(a);
      } catch (const std::exception& e) {
        // The scenarios catch what the API throws: this is an exception from the harness itself.
        tpl_alloc::paused p;
        a.error(std::string("an exception escaped the scenario: ") + e.what());
      }
      tpl_alloc::paused p;
      injected = tpl_alloc::failure_injected();
      bad_allocs = a.bad_allocs();
      errors = a.errors();
    }
    r.runs = n;
    for (const auto& e : errors) ADD_FAILURE() << name << ", N = " << n << ": " << e;
    if (!injected) {
      EXPECT_TRUE(completed) << name << ", N = " << n << ": no allocation failed, yet it did not complete";
      EXPECT_EQ(bad_allocs, 0) << name << ", N = " << n << ": std::bad_alloc with no injected failure";
      r.ended_clean = completed && bad_allocs == 0;
      break;
    }
    if (bad_allocs > 0) {
      ++r.bad_alloc_runs;
    } else {
      // The failure was absorbed: the scenario must then have completed as if nothing failed.
      EXPECT_TRUE(completed) << name << ", N = " << n
                             << ": an allocation failed, nothing reported std::bad_alloc, and the "
                                "scenario did not complete";
      ++r.absorbed_runs;
    }
    if (::testing::Test::HasFailure()) break;  // one failing N is enough to look at
  }
  std::printf("[alloc sweep] %-22s %-10s N = 1..%ld: %ld runs failed with std::bad_alloc, %ld absorbed, %s\n",
              name, persistent ? "from N on" : "N-th only", r.runs, r.bad_alloc_runs, r.absorbed_runs,
              r.ended_clean ? "last run completed" : "did not end with a completed run");
  EXPECT_GT(r.bad_alloc_runs, 0) << name << ": no run saw std::bad_alloc (is the hook injecting?)";
  EXPECT_TRUE(r.ended_clean) << name << ": the sweep did not end with a completed run";
  return r;
}

// --- task chains ---------------------------------------------------------------------------------

tpl::task<int> leaf(int x) { co_return x + 1; }

// Awaits a synchronously completing task, a pending one (resumed inside set_result on the calling
// thread) and a synchronously completing one again.
tpl::task<int> middle(tpl::task<int> gate, int x) {
  const int a = co_await leaf(x);
  const int g = co_await gate;
  co_return co_await leaf(a + g);
}

tpl::task<int> outer(tpl::task<int> gate) {
  int sum = 0;
  for (int i = 0; i < 3; ++i) sum += co_await middle(gate, i);
  co_return sum;  // (0+1+1)+1 + (1+1+1)+1 + (2+1+1)+1 = 12 with gate = 1
}

bool task_chain(attempt& a) {
  std::optional<tpl::task_completion_source<int>> gate;
  if (!a.call([&] { gate.emplace(); })) return false;
  tpl::task<int> chain, next, hop;
  a.call([&] { chain = outer(gate->get_task()); });
  if (chain.valid()) a.call([&] { next = chain.continue_with([](const tpl::task<int>& t) { return tpl::sync_wait(t) * 2; }); });
  a.call([&] { hop = tpl::run([] { return leaf(41); }); });
  if (!a.call([&] { gate->set_result(1); })) {
    tpl_alloc::paused p;  // set_result failed: it must have left the source unchanged
    a.check(gate->try_set_result(1), "set_result threw and yet completed the source");
  }
  bool ok = true;
  ok &= a.settle(chain, "the chain") == outcome::ran && a.check(chain.get() == 12, "chain value");
  ok &= a.settle(next, "continue_with") == outcome::ran && a.check(next.get() == 24, "continuation value");
  ok &= a.settle(hop, "tpl::run") == outcome::ran && a.check(hop.get() == 42, "tpl::run value");
  return ok;
}

// --- when_all / when_any ---------------------------------------------------------------------------

bool when_all_any(attempt& a) {
  std::optional<tpl::task_completion_source<int>> x, y, bad;
  if (!a.call([&] {
        x.emplace();
        y.emplace();
        bad.emplace();
      }))
    return false;
  tpl::task<int> pooled;
  tpl::task<std::tuple<int, int, int>> all;
  tpl::task<std::vector<int>> all_range;
  tpl::task<tpl::task<int>> any;
  tpl::task<std::tuple<int, int>> all_faulted;
  a.call([&] { pooled = tpl::run([] { return 3; }); });
  if (pooled.valid()) a.call([&] { all = tpl::when_all(x->get_task(), y->get_task(), pooled); });
  a.call([&] {
    std::vector<tpl::task<int>> v{x->get_task(), y->get_task()};
    all_range = tpl::when_all(v);
  });
  a.call([&] { any = tpl::when_any(x->get_task(), y->get_task()); });
  a.call([&] { all_faulted = tpl::when_all(x->get_task(), bad->get_task()); });
  // Complete the sources; a completion that threw must have left its source unchanged.
  if (!a.call([&] { x->set_result(1); })) {
    tpl_alloc::paused p;
    a.check(x->try_set_result(1), "set_result threw and yet completed the source");
  }
  if (!a.call([&] { y->set_result(2); })) {
    tpl_alloc::paused p;
    a.check(y->try_set_result(2), "set_result threw and yet completed the source");
  }
  {
    tpl_alloc::paused p;  // the exception object of the faulted input (not what is tested here)
    bad->set_exception(std::make_exception_ptr(test_error()));
  }
  tpl_alloc::paused p;  // the checks below allocate (not what is tested here)
  bool ok = pooled.valid() && a.settle(pooled, "tpl::run") == outcome::ran;
  ok &= a.settle(all, "when_all(a, b, c)") == outcome::ran &&
        a.check(all.get() == std::tuple<int, int, int>(1, 2, 3), "when_all value");
  ok &= a.settle(all_range, "when_all(range)") == outcome::ran &&
        a.check(all_range.get() == std::vector<int>{1, 2}, "when_all(range) value");
  ok &= a.settle(any, "when_any") == outcome::ran && a.check(any.get().get() == 1, "when_any winner");
  std::exception_ptr e;
  const outcome f = a.settle(all_faulted, "when_all with a faulted input", &e);
  if (f == outcome::other) {
    try {
      std::rethrow_exception(e);
    } catch (const test_error&) {
    } catch (...) {
      a.error("when_all with a faulted input faulted with neither its input's error nor std::bad_alloc");
    }
  } else if (f != outcome::bad_alloc && f != outcome::not_started) {
    a.error("when_all with a faulted input did not fault: outcome " + std::to_string(static_cast<int>(f)));
  }
  ok &= f == outcome::other;
  return ok;
}

// --- channels --------------------------------------------------------------------------------------

// Reads until the channel is completed; the sum of what it read goes to *sum as it goes (so it is
// known even if a read fails). Rethrows the completion error, if any.
tpl::task<> drain(tpl::channel_reader<int> r, long* sum) {
  for (;;) {
    try {
      *sum += co_await r.read_async();
    } catch (const tpl::channel_closed& c) {
      if (std::exception_ptr inner = c.inner_exception()) std::rethrow_exception(inner);
      co_return;
    }
  }
}

// Writes 1..count with write_async (waiting while a bounded channel is full); the sum of what was
// written goes to *sum as it goes.
tpl::task<> produce(tpl::channel_writer<int> w, int count, long* sum) {
  for (int i = 1; i <= count; ++i) {
    co_await w.write_async(i);
    *sum += i;
  }
}

// What is still buffered (hook paused): the items a failed reader left behind.
long leftover(const tpl::channel_reader<int>& r) {
  tpl_alloc::paused p;
  long s = 0;
  while (auto v = r.try_read()) s += *v;
  return s;
}

bool channels(attempt& a) {
  std::optional<tpl::channel<int>> unbounded, bounded;
  // The unbounded channel resumes its reader inline, inside try_write on this thread.
  tpl::unbounded_channel_options inline_reader;
  inline_reader.allow_synchronous_continuations = true;
  if (!a.call([&] { unbounded.emplace(tpl::make_unbounded_channel<int>(inline_reader)); })) return false;
  if (!a.call([&] { bounded.emplace(tpl::make_bounded_channel<int>(2)); })) return false;
  long read_u = 0, read_b = 0, written_u = 0, written_b = 0;
  std::exception_ptr completion_error;
  {
    tpl_alloc::paused p;
    completion_error = std::make_exception_ptr(test_error());
  }
  tpl::task<> reader_u, reader_b, producer_b;
  a.call([&] { reader_u = drain(unbounded->reader(), &read_u); });
  a.call([&] { reader_b = drain(bounded->reader(), &read_b); });
  // Unbounded: try_write from this thread (it resumes the waiting reader inline).
  for (int i = 1; i <= 6; ++i) {
    bool written = false;
    if (a.call([&] { written = unbounded->writer().try_write(i); }) && a.check(written, "try_write on an open unbounded channel"))
      written_u += i;
  }
  // Bounded, capacity 2: a producer that must wait for the reader.
  a.call([&] { producer_b = produce(bounded->writer(), 8, &written_b); });
  // Complete both (the unbounded one with an error); a completion that threw must have left the
  // channel open, so completing it again (paused) must succeed.
  if (!a.call([&] { a.check(unbounded->writer().try_complete(completion_error), "try_complete(error)"); })) {
    tpl_alloc::paused p;
    a.check(unbounded->writer().try_complete(completion_error), "try_complete(error) threw and yet completed the channel");
  }
  bool ok = true;
  // The bounded reader runs on the pool once it first waits, where nothing fails: if it did not
  // fail on this thread, it reads until completion and the producer finishes before the channel
  // is completed. If it failed, the producer may wait on a full channel: complete the channel
  // first, and the producer's pending write fails with channel_closed.
  const bool reader_b_failed = !reader_b.valid() || reader_b.is_completed();
  if (reader_b_failed) {
    ok = false;
    tpl_alloc::paused p;
    a.check(bounded->writer().try_complete(), "try_complete() on the bounded channel");
  }
  if (producer_b.valid()) {
    std::exception_ptr pe;
    const outcome o = a.settle(producer_b, "the bounded producer", reader_b_failed ? &pe : nullptr);
    ok &= o == outcome::ran;
    if (o == outcome::other) {
      try {
        std::rethrow_exception(pe);
      } catch (const tpl::channel_closed&) {
      } catch (...) {
        a.error("the bounded producer failed with neither channel_closed nor std::bad_alloc");
      }
    }
  } else {
    ok = false;
  }
  if (!reader_b_failed && !a.call([&] { a.check(bounded->writer().try_complete(), "try_complete()"); })) {
    tpl_alloc::paused p;
    a.check(bounded->writer().try_complete(), "try_complete() threw and yet completed the channel");
  }
  std::exception_ptr e;
  if (reader_u.valid()) {
    const outcome o = a.settle(reader_u, "the unbounded reader", &e);
    if (o == outcome::other) {
      try {
        std::rethrow_exception(e);
      } catch (const test_error&) {
      } catch (...) {
        a.error("the unbounded reader ended with neither the completion error nor std::bad_alloc");
      }
    } else {
      a.check(o == outcome::bad_alloc, "the unbounded reader saw the completion error");
      ok = false;
    }
  } else {
    ok = false;
  }
  if (reader_b.valid()) ok &= a.settle(reader_b, "the bounded reader") == outcome::ran;
  else ok = false;
  // Every item written was read or is still buffered; no item appeared from nowhere.
  a.check(read_u + leftover(unbounded->reader()) == written_u, "unbounded: items written == read + buffered");
  a.check(read_b + leftover(bounded->reader()) == written_b, "bounded: items written == read + buffered");
  ok &= written_u == 21 && written_b == 36 && read_u == 21 && read_b == 36;
  return ok;
}

// --- cancellation (fake clock) ---------------------------------------------------------------------

bool cancellation(attempt& a) {
  std::optional<tpl::testing::fake_time_provider> clock;
  std::optional<tpl::cancellation_token_source> source, other, linked;
  if (!a.call([&] {
        clock.emplace();
        source.emplace();
        other.emplace();
      }))
    return false;
  int fired = 0;
  std::optional<tpl::cancellation_registration> reg;
  a.call([&] { reg.emplace(source->token().register_callback([&fired] { ++fired; })); });
  a.call([&] { linked.emplace(tpl::cancellation_token_source::create_linked(source->token(), other->token())); });
  tpl::task<> delayed;
  if (linked) a.call([&] { delayed = tpl::delay(10ms, linked->token(), *clock); });
  const bool armed = a.call([&] { source->cancel_after(5ms, *clock); });
  a.call([&] { clock->advance(5ms); });
  bool ok = armed;
  {
    tpl_alloc::paused p;
    // Whatever failed above, cancel now (idempotent) so that nothing waits for it.
    if (!source->is_cancellation_requested()) {
      ok = false;
      source->cancel();
    }
    a.check(!linked || linked->is_cancellation_requested(), "the linked source follows its parent");
    a.check(fired <= 1, "a registration ran more than once");
    ok &= fired == 1 || !reg.has_value();
    ok &= reg.has_value() && linked.has_value();
  }
  if (delayed.valid()) {
    const outcome o = a.settle(delayed, "the delay on the linked token");
    a.check(o == outcome::canceled, "the delay on the linked token was canceled (its time never came)");
  } else {
    ok = false;
  }
  {
    tpl_alloc::paused p;
    a.check(clock->armed_timers() == 0, "no timer left armed");
    reg.reset();
  }
  return ok;
}

// --- timers and delays -----------------------------------------------------------------------------

bool timers(attempt& a) {
  std::optional<tpl::testing::fake_time_provider> clock;
  if (!a.call([&] { clock.emplace(); })) return false;
  int ticks = 0;
  tpl::timer periodic;
  tpl::task<> d1, d2, system_delay;
  a.call([&] { periodic = clock->create_timer([&ticks] { ++ticks; }, 1ms, 1ms); });
  a.call([&] { d1 = tpl::delay(2ms, *clock); });
  a.call([&] { d2 = tpl::delay(3ms, *clock); });
  a.call([&] { system_delay = tpl::delay(1ms); });  // the system clock's timer thread
  a.call([&] { clock->advance(2ms); });
  a.call([&] { clock->advance(1ms); });
  bool ok = true;
  {
    tpl_alloc::paused p;
    // Failed advances leave the clock behind: bring it to 3 ms so that every delay comes due.
    const auto behind = tpl::testing::fake_time_provider::default_start() + 3ms - clock->utc_now();
    if (behind > 0ms) clock->advance(std::chrono::duration_cast<std::chrono::nanoseconds>(behind));
    ok &= periodic.valid() && a.check(ticks == 3 || !periodic.valid(), "the periodic timer ticked at 1, 2, 3 ms");
    periodic.dispose();
  }
  ok &= d1.valid() && a.settle(d1, "delay(2 ms)") == outcome::ran;
  ok &= d2.valid() && a.settle(d2, "delay(3 ms)") == outcome::ran;
  ok &= system_delay.valid() && a.settle(system_delay, "delay(1 ms) on the system clock") == outcome::ran;
  tpl_alloc::paused p;
  a.check(clock->armed_timers() == 0, "no timer left armed");
  return ok;
}

// --- tpl::run and schedule -------------------------------------------------------------------------

tpl::task<int> yield_then(int x) {
  co_await tpl::yield();
  co_return x;
}

bool run_and_schedule(attempt& a) {
  tpl::task<int> r1, r2, r3;
  a.call([&] { r1 = tpl::run([] { return 1; }); });
  a.call([&] { r2 = tpl::run([] { return yield_then(2); }); });
  a.call([&] { r3 = yield_then(3); });  // its first item is queued from this thread by yield()
  bool ok = r1.valid() && r2.valid() && r3.valid();
  if (r1.valid()) ok &= a.settle(r1, "run(value)") == outcome::ran && a.check(r1.get() == 1, "run value");
  if (r2.valid()) ok &= a.settle(r2, "run(task)") == outcome::ran && a.check(r2.get() == 2, "run(task) value");
  if (r3.valid()) ok &= a.settle(r3, "yield") == outcome::ran && a.check(r3.get() == 3, "yield value");
  return ok;
}

// --- pools: creation and growth --------------------------------------------------------------------

// Items that each wait until `count` of them run at once: proves the pool has that many threads.
struct rendezvous {
  explicit rendezvous(int n) : count(n) {}
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  int count;
  bool arrive_and_wait() {
    std::unique_lock g(m);
    if (++arrived == count) cv.notify_all();
    return cv.wait_for(g, kHangLimit, [&] { return arrived >= count; });
  }
};

tpl::thread_pool_options pool_options(unsigned threads, unsigned max) {
  tpl::thread_pool_options o;
  o.thread_count = threads;
  o.max_threads = max;
  // The gate checks every 10 ms (not 500 ms), so a thread that could not start is retried soon.
  o.injection = tpl::injection_policy::eager;
  o.hill_climbing = false;
  return o;
}

// Queues `count` items on `pool` that must all run at once; waits for them.
bool run_concurrently(attempt& a, tpl::thread_pool& pool, int count) {
  rendezvous r(count);
  std::vector<tpl::task<bool>> items;
  {
    tpl_alloc::paused p;
    items.reserve(static_cast<std::size_t>(count));
  }
  bool ok = true;
  for (int i = 0; i < count; ++i) {
    tpl::task<bool> t;
    if (a.call([&] { t = tpl::run(pool, [&r] { return r.arrive_and_wait(); }); })) {
      items.push_back(std::move(t));
    } else {
      ok = false;
      tpl_alloc::paused p;  // this item is missing: count it as arrived so the others finish
      std::lock_guard g(r.m);
      --r.count;
      r.cv.notify_all();
    }
  }
  for (auto& t : items) {
    if (a.settle(t, "an item waiting for the others") == outcome::ran) {
      a.check(t.get(), "all the items ran at once (the pool has the threads)");
    } else {
      ok = false;
    }
  }
  return ok;
}

bool create_pool(attempt& a) {
  std::optional<tpl::thread_pool> pool;
  tpl::thread_pool_options o;
  {
    tpl_alloc::paused p;
    o = pool_options(3, 3);
  }
  if (!a.call([&] { pool.emplace(o); })) return false;
  const bool ok = run_concurrently(a, *pool, 3);
  tpl_alloc::paused p;
  pool.reset();
  return ok;
}

bool grow_pool(attempt& a) {
  std::optional<tpl::thread_pool> pool;
  {
    tpl_alloc::paused p;  // the pool starts with one thread; its growth is what is tested
    pool.emplace(pool_options(1, 4));
  }
  bool ok = a.call([&] { a.check(pool->set_min_threads(4), "set_min_threads(4)"); });
  // The goal is 4: queuing starts threads from this thread (start_worker on the calling thread).
  ok &= run_concurrently(a, *pool, 4);
  tpl_alloc::paused p;
  pool.reset();
  return ok;
}

// schedule() from user code when the pool's global queue is full: the queue grows (doubling) on
// this thread, and if that fails tpl::run throws std::bad_alloc with nothing queued (and the
// task's frame freed). A fresh one-thread pool per run: its worker is held by the first item while
// this thread fills the queue to just below its 1,024 slots with the hook paused, then queues 8
// more, armed, so that the queue grows during them.
bool queue_growth(attempt& a) {
  std::optional<tpl::thread_pool> pool;
  std::optional<tpl::task_completion_source<>> release;
  std::vector<tpl::task<int>> items;
  tpl::task<> holder;
  constexpr int kFill = 1020;  // with the 8 queued armed, the queue passes 1,024 during them
  {
    tpl_alloc::paused p;
    pool.emplace(pool_options(1, 1));
    release.emplace();
    tpl::task<> released = release->get_task();
    holder = tpl::run(*pool, [released]() {
      tpl::sync_wait(released);  // holds the pool's one worker until the queue is filled
    });
    items.reserve(kFill + 8);
    for (int i = 0; i < kFill; ++i) items.push_back(tpl::run(*pool, [i] { return i; }));
  }
  bool ok = true;
  for (int i = kFill; i < kFill + 8; ++i) {
    tpl::task<int> t;
    if (a.call([&] { t = tpl::run(*pool, [i] { return i; }); })) {
      tpl_alloc::paused p;
      items.push_back(std::move(t));
    } else {
      ok = false;
    }
  }
  tpl_alloc::paused p;
  release->set_result();
  ok &= a.settle(holder, "the item holding the worker") == outcome::ran;
  for (auto& t : items) {
    const bool ran = a.settle(t, "a queued item") == outcome::ran;
    ok &= ran && a.check(t.get() >= 0, "a queued item's value");
  }
  items.clear();
  pool.reset();
  return ok;
}

// Waits that queue with a token (a registration and, for the semaphore, a timer are armed after
// the wait is queued): a wait whose arming fails throws with the wait taken off the primitive, so
// that nothing is granted to a wait nobody awaits (the semaphore's count and the mutex stay
// usable); a task's wait_async leaves its source untouched.
bool waits_with_a_token(attempt& a) {
  std::optional<tpl::async_semaphore> sem;
  std::optional<tpl::async_mutex> mutex;
  std::optional<tpl::cancellation_token_source> cts;
  std::optional<tpl::task_completion_source<int>> source;
  tpl::task<int> source_task;
  {
    tpl_alloc::paused p;
    sem.emplace(0, 1);
    mutex.emplace();
    (void)mutex->try_lock();
    cts.emplace();
    source.emplace();
    source_task = source->get_task();
  }
  bool ok = true;
  tpl::task<bool> sem_wait;
  ok &= a.call([&] { sem_wait = sem->wait_async(std::chrono::hours(1), cts->token()); });
  tpl::task<> mutex_wait;
  ok &= a.call([&] { mutex_wait = mutex->lock_async_unguarded(cts->token()); });
  tpl::task<int> task_wait;
  ok &= a.call([&] { task_wait = source_task.wait_async(std::chrono::hours(1), cts->token()); });
  tpl_alloc::paused p;
  // Grant the semaphore and the mutex, complete the source: each queued wait gets its grant; a
  // wait that threw left nothing queued, so the count and the lock are still there for a try.
  sem->release();
  mutex->unlock();
  source->set_result(7);
  if (a.settle(sem_wait, "the semaphore wait") == outcome::ran) {
    ok &= a.check(sem_wait.get(), "the semaphore wait got the count");
    sem->release();
  }
  if (a.settle(mutex_wait, "the mutex wait") == outcome::ran) mutex->unlock();
  if (a.settle(task_wait, "the task's wait_async") == outcome::ran) ok &= a.check(task_wait.get() == 7, "the waited value");
  ok &= a.check(sem->current_count() == 1, "the semaphore's count is back (no grant lost to a failed wait)");
  ok &= a.check(mutex->try_lock(), "the mutex is free (no grant lost to a failed wait)");
  mutex->unlock();
  return ok;
}

// Work on the default pool and the system timer thread before the sweeps, so that their one-time
// allocations (threads, queues) are not what the first runs measure.
void warm_up() {
  tpl_alloc::paused p;
  tpl::sync_wait(tpl::run([] { return yield_then(0); }));
  tpl::sync_wait(tpl::delay(1ms));
}

}  // namespace

TEST(allocation_failure, task_chains) {
  warm_up();
  sweep("task chains", task_chain, /*persistent=*/false);
  sweep("task chains", task_chain, /*persistent=*/true);
}

TEST(allocation_failure, when_all_and_when_any) {
  warm_up();
  sweep("when_all / when_any", when_all_any, /*persistent=*/false);
  sweep("when_all / when_any", when_all_any, /*persistent=*/true);
}

TEST(allocation_failure, channels) {
  warm_up();
  sweep("channels", channels, /*persistent=*/false);
  sweep("channels", channels, /*persistent=*/true);
}

TEST(allocation_failure, cancellation) {
  warm_up();
  sweep("cancellation", cancellation, /*persistent=*/false);
  sweep("cancellation", cancellation, /*persistent=*/true);
}

TEST(allocation_failure, timers_and_delays) {
  warm_up();
  sweep("timers / delay", timers, /*persistent=*/false);
  sweep("timers / delay", timers, /*persistent=*/true);
}

TEST(allocation_failure, run_and_schedule) {
  warm_up();
  sweep("run / schedule", run_and_schedule, /*persistent=*/false);
  sweep("run / schedule", run_and_schedule, /*persistent=*/true);
}

TEST(allocation_failure, creating_a_pool) {
  warm_up();
  sweep("thread_pool(3 threads)", create_pool, /*persistent=*/false);
  sweep("thread_pool(3 threads)", create_pool, /*persistent=*/true);
}

TEST(allocation_failure, pool_growth) {
  warm_up();
  sweep("pool growth 1 -> 4", grow_pool, /*persistent=*/false);
  sweep("pool growth 1 -> 4", grow_pool, /*persistent=*/true);
}

TEST(allocation_failure, queue_growth) {
  warm_up();
  sweep("global queue growth", queue_growth, /*persistent=*/false);
  sweep("global queue growth", queue_growth, /*persistent=*/true);
}

TEST(allocation_failure, waits_with_a_token) {
  warm_up();
  sweep("waits with a token", waits_with_a_token, /*persistent=*/false);
  sweep("waits with a token", waits_with_a_token, /*persistent=*/true);
}
