// tpl/thread_pool.hpp — tpl::thread_pool: the work-stealing thread pool every task runs on, with
// .NET's thread-injection policies (starvation gate, cooperative blocking, hill climbing), its
// options, statistics (including the I/O delivered to it: completions, engine wake-ups, batch
// sizes) and events; tpl::blocking_scope.
//
// Each worker owns a lock-free work-stealing deque (owner pushes and pops LIFO, thieves steal
// FIFO) and a FIFO of the work it yielded; a global FIFO queue takes work queued from outside the
// pool. Workers look for work in the order: own deque, global queue(s), own yielded work, other
// workers' deques (random start), other workers' yielded work. An idle worker spins briefly, then parks; a parked worker
// is woken only when no other worker is already searching.
//
// How many threads run is decided like .NET's PortableThreadPool: the pool starts with
// `thread_count` workers (the minimum, default one per core) and keeps a goal for how many may
// process work at once. The goal rises while pool threads are blocked in tpl waits (or inside a
// tpl::blocking_scope), when queued work makes no progress for 500 ms (starvation), and when hill
// climbing finds that more threads give more throughput; threads above the goal stop taking work,
// and idle threads exit after `idle_timeout`. docs/thread-pool.md explains every decision.
//
//   tpl::thread_pool pool({.thread_count = 4});
//   auto t = tpl::run(pool, [] { return 6 * 7; });
//   int v = tpl::sync_wait(t);
//
//   tpl::thread_pool::default_pool();     // the process-wide pool (configured by TPL_THREADPOOL_*)
//
//   void read_config() {                  // on a pool thread: announce a blocking call
//     tpl::blocking_scope blocking;       // the pool may add a thread while this lives
//     std::ifstream f("config.ini"); ...
//   }
//
//   pool.set_event_listener([](const tpl::thread_pool_event& e) { log(to_string(e)); });
//
//   auto io = tpl::thread_pool::default_pool().stats().io;   // sockets, files and pipes
//   std::printf("%llu completions, %.1f socket events per epoll wake-up\n",
//               (unsigned long long)io.completions(), io.sockets.mean_batch());
//
// Destroying a pool (or calling shutdown()) runs everything already queued, including work queued by
// that work, then stops the threads: no queued item is dropped. Work scheduled on a pool after
// shutdown() has drained it runs inline on the scheduling thread (while the object still exists;
// scheduling on a destroyed pool is a use after free like any other). A pool must not be shut
// down from one of its own threads.
#pragma once

#include <array>
#include <bit>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tpl/scheduler.hpp"

namespace tpl {

/// Announces a blocking call on the calling thread (.NET's cooperative blocking, which tpl extends
/// to user code). While it lives, if the thread is a pool worker, the pool counts it as blocked and
/// raises its thread goal by one, so queued work keeps running; the goal drops back when the scope
/// ends. On other threads it costs a thread-local read. Every blocking wait in tpl holds one
/// (task::wait/get/wait_for, sync_wait, async_semaphore::wait, the blocking primitives).
///
/// If the current scheduler refuses blocking (a single-threaded test scheduler would deadlock),
/// the constructor throws the scheduler's error; `what` names the call in that message.
class blocking_scope {
 public:
  explicit blocking_scope(const char* what = "a blocking call");
  ~blocking_scope();
  blocking_scope(const blocking_scope&) = delete;
  blocking_scope& operator=(const blocking_scope&) = delete;

 private:
  void* pool_;
};

namespace detail {
/// The name tpl's own blocking waits use.
using blocking_region = blocking_scope;
}  // namespace detail

/// How the pool adds threads when work waits and every thread is busy.
enum class injection_policy : std::uint8_t {
  /// .NET's portable pool: starvation gate, cooperative blocking, hill climbing (the default).
  adaptive,
  /// Adds a thread at once whenever a worker blocks in a tpl wait while work waits, and checks for
  /// starvation every 10 ms instead of 500 ms, with no CPU condition (the seeds' Windows-pool
  /// flavour: fast injection under blocking, at the price of more threads).
  eager,
};

struct thread_pool_options {
  /// Minimum (and starting) number of workers: the pool's size when nothing blocks. 0 means one
  /// per CPU of the creating thread's affinity mask, or max_threads if that is fewer. .NET's
  /// SetMinThreads.
  unsigned thread_count = 0;
  /// Prefix of the workers' thread names (visible in debuggers and top).
  std::string thread_name = "tpl-worker";
  /// Most workers the pool may ever have (.NET's SetMaxThreads); 0 means 32767.
  unsigned max_threads = 0;
  /// An idle worker exits after this long without work (.NET: 20 s). The pool re-creates threads
  /// on demand.
  std::chrono::milliseconds idle_timeout{20'000};
  injection_policy injection = injection_policy::adaptive;
  /// Hill climbing (throughput-driven changes of the goal). .NET's HillClimbing.Disable.
  bool hill_climbing = true;
  /// Raise the goal while workers block in tpl waits / blocking_scope.
  bool cooperative_blocking = true;
  /// Number of extra global queues: threads outside the pool spread the work they queue over the
  /// global queue and these (by thread identity), so many outside producers do not share one
  /// lock. Unset: ceil(cores / 16) on machines with more than 32 cores, else none. Set to force
  /// a count (tests on small machines).
  std::optional<unsigned> extra_global_queues = std::nullopt;

  /// These options overridden by the environment variables TPL_THREADPOOL_MIN_THREADS,
  /// _MAX_THREADS, _HILL_CLIMBING (0/1), _COOPERATIVE_BLOCKING (0/1), _INJECTION
  /// (adaptive/eager), _IDLE_TIMEOUT_MS and _GLOBAL_QUEUES. A malformed or out-of-range value
  /// throws std::invalid_argument naming the variable. default_pool() is built from this.
  static thread_pool_options from_environment();
  static thread_pool_options from_environment(thread_pool_options base);
};

/// Why the pool changed its thread count or goal.
enum class thread_pool_reason : std::uint8_t {
  startup,        ///< the initial `thread_count` workers
  demand,         ///< work waited, the goal allowed another thread (e.g. after idle threads exited)
  starvation,     ///< queued work made no progress for a gate period
  blocking,       ///< workers blocked in tpl waits / blocking_scope
  hill_climbing,  ///< a throughput-driven move
  eager,          ///< the eager injection policy
  idle_timeout,   ///< an idle worker exited
  unblocked,      ///< blocked workers resumed (the goal drops back)
  configuration,  ///< set_min_threads / set_max_threads
  io,             ///< io_summary events: I/O was delivered to the pool (no decision)
};

/// Batch-size buckets of io_engine_stats::batch_sizes: bucket i counts the wake-ups that returned
/// 2^i to 2^(i+1)-1 events (1, 2-3, 4-7, ... 512-1023), the last one 1024 events or more (epoll
/// returns at most 1024 at a time).
inline constexpr std::size_t io_batch_buckets = 11;

/// The bucket of a wake-up that returned `events` events (at least 1).
constexpr std::size_t io_batch_bucket(std::uint64_t events) noexcept {
  const std::size_t b = events == 0 ? 0 : static_cast<std::size_t>(std::bit_width(events)) - 1;
  return b < io_batch_buckets ? b : io_batch_buckets - 1;
}

/// The counters of one kind of I/O engine thread: the socket engines' epoll threads, or the
/// io_uring completion thread (docs/io.md, "Statistics, events and tracing").
struct io_engine_stats {
  /// Operations the engine completed: a socket operation that had waited for readiness, resumed
  /// after an event (an operation that completes at once never involves the engine); an io_uring
  /// operation resumed after its completion, or a file read that the io_uring engine served from
  /// the page cache on the thread that started it (counted in that thread's pool, or in the
  /// default pool's from a thread outside every pool, with no wake-up).
  std::uint64_t completions = 0;
  /// Times the engine thread's wait (epoll_wait, io_uring_wait_cqe) returned with at least one
  /// event (wake-ups of the socket engine's own eventfd alone are not counted).
  std::uint64_t wakeups = 0;
  /// Events those wake-ups returned, in total: socket readiness events, io_uring completion queue
  /// entries (an operation's and its cancel's). events / wakeups is the mean batch.
  std::uint64_t events = 0;
  /// The most events one wake-up returned.
  std::uint64_t largest_batch = 0;
  /// Wake-ups by batch size, in io_batch_buckets power-of-two buckets (see io_batch_bucket).
  std::array<std::uint64_t, io_batch_buckets> batch_sizes{};

  double mean_batch() const noexcept { return wakeups == 0 ? 0.0 : static_cast<double>(events) / static_cast<double>(wakeups); }
};

/// The I/O delivered to a pool. The engine threads serve the default pool (they queue every
/// continuation there), so their wake-ups and batches, and the completions they make on their
/// own threads, appear in default_pool().stats(); a completion made on a pool's worker (a socket
/// event handled by the pool's batch item, a file or pipe system call run by the pool engine)
/// appears in the stats of that worker's pool.
struct thread_pool_io_stats {
  io_engine_stats sockets;  ///< tpl::net's socket engines (and the default engine's pipes)
  io_engine_stats uring;    ///< tpl::io's io_uring engines (TPL_IO_ENGINE=io_uring)
  /// File system calls that tpl::io's pool engine ran, and pipe calls where the kernel has no
  /// RWF_NOWAIT for pipes (no engine thread: no wake-ups).
  std::uint64_t pool_engine_completions = 0;

  std::uint64_t completions() const noexcept {
    return sockets.completions + uring.completions + pool_engine_completions;
  }
};

enum class thread_pool_event_kind : std::uint8_t {
  thread_injected,
  thread_retired,
  goal_changed,
  /// The I/O delivered since the previous io_summary (in `io`), at most one a second while it
  /// changes; reason `io`. Sent only while a listener or the trace is on.
  io_summary,
};

struct thread_pool_event {
  thread_pool_event_kind kind;
  thread_pool_reason reason;
  std::chrono::steady_clock::time_point time;
  unsigned existing_threads;  ///< after the decision
  unsigned goal;              ///< after the decision
  unsigned previous_goal;     ///< goal_changed: the goal before
  unsigned blocked_threads;
  /// io_summary: each counter's change since the previous io_summary of this pool (the first one:
  /// since the pool started), except largest_batch, the largest so far. Zero in other events.
  thread_pool_io_stats io{};
};

const char* to_string(thread_pool_reason r) noexcept;
const char* to_string(thread_pool_event_kind k) noexcept;
/// One line, as TPL_THREADPOOL_TRACE=1 prints it.
std::string to_string(const thread_pool_event& e);

/// Hill climbing's state, as .NET's HillClimbing logs it.
enum class hill_climbing_state : std::uint8_t {
  warmup, initializing, random_move, climbing_move, change_point, stabilizing, starvation,
  thread_timed_out
};
const char* to_string(hill_climbing_state s) noexcept;

struct thread_pool_stats {
  unsigned thread_count = 0;       ///< existing worker threads
  unsigned processing_threads = 0; ///< workers not parked (running, searching or blocked)
  unsigned goal = 0;               ///< how many may process work at once
  unsigned min_threads = 0;
  unsigned max_threads = 0;
  unsigned idle_threads = 0;       ///< parked
  unsigned spinning_threads = 0;   ///< searching for work
  /// Workers currently blocked in a tpl blocking wait or a blocking_scope.
  unsigned blocked_threads = 0;
  std::size_t global_queue_length = 0;  ///< the global queue plus the extra global queues
  /// Summed over all workers: their deques and their queues of yielded (after-others) work.
  std::size_t local_queue_length = 0;
  std::uint64_t items_executed = 0;     ///< work items completed
  std::uint64_t threads_injected_by_starvation = 0;
  std::uint64_t threads_injected_by_blocking = 0;
  std::uint64_t threads_injected_by_hill_climbing = 0;
  std::uint64_t threads_injected_by_eager = 0;
  std::uint64_t threads_injected_by_demand = 0;  ///< re-created after idle threads exited
  std::uint64_t threads_retired = 0;
  std::uint64_t wakeups = 0;                     ///< parked workers woken to take work
  /// Parked workers that found work on their periodic 100 ms re-check instead of being woken. 0 in
  /// an idle or steady pool; under a constant stream of new work the re-check sometimes finds an
  /// item queued that instant (its wake-up went to another worker). See docs/thread-pool.md.
  std::uint64_t wakeups_by_park_timeout = 0;
  hill_climbing_state hill_climbing = hill_climbing_state::warmup;  ///< last transition
  double hill_climbing_control_setting = 0;  ///< the goal hill climbing aims at (before the wave)
  unsigned hill_climbing_sample_ms = 0;      ///< current sampling interval
  unsigned extra_global_queues = 0;
  /// I/O completions, engine wake-ups and batch sizes (see thread_pool_io_stats for which pool
  /// reports what).
  thread_pool_io_stats io;
};

class thread_pool final : public scheduler {
 public:
  explicit thread_pool(thread_pool_options options = {});
  ~thread_pool() override;
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// The process-wide pool used by tpl::run, yield() and asynchronous continuations. Created on
  /// first use from thread_pool_options::from_environment() (a bad TPL_THREADPOOL_* value throws
  /// std::invalid_argument from this call), never destroyed (its threads end with the process).
  /// TPL_THREADPOOL_TRACE=1 prints its events to stderr.
  static thread_pool& default_pool();

  /// The pool whose worker is the calling thread, or nullptr.
  static thread_pool* current() noexcept;

  /// Queues h: on this worker's own deque when called from one of this pool's threads, else on
  /// the global queue. (A coroutine the running item wakes, such as a channel's reader or an
  /// asynchronous task continuation, goes to the worker's next slot instead; see
  /// docs/thread-pool.md, "Queues".)
  void schedule(std::coroutine_handle<> h) override;
  /// Queues h behind the work already waiting (yield(), prefer_fairness): from one of this pool's
  /// threads on that worker's own FIFO of yielded work, which it takes from only after its deque
  /// and the global queues (other workers steal from it after their deques); from outside, on the
  /// global queue.
  void schedule_after_others(std::coroutine_handle<> h) override;

  /// Existing worker threads.
  unsigned thread_count() const noexcept;
  thread_pool_stats stats() const noexcept;

  /// .NET SetMinThreads / SetMaxThreads: false (and no change) if n is 0, above 32767, or
  /// min > max would result.
  bool set_min_threads(unsigned n);
  bool set_max_threads(unsigned n);
  unsigned min_threads() const noexcept;
  unsigned max_threads() const noexcept;

  /// Receives every decision (thread injected, retired, goal changed) with its reason, on the
  /// thread that made it, and the io_summary events (on an engine thread or a worker that
  /// completed I/O); must be thread-safe and must not block. An empty function removes it.
  /// Replacing or removing a listener waits until no other thread is inside the old one, which is
  /// never called again after this returns (so it may capture locals that die right after); from
  /// inside a listener it does not wait for its own thread's call.
  void set_event_listener(std::function<void(const thread_pool_event&)> listener);
  /// Prints every event to stderr, one line each (what TPL_THREADPOOL_TRACE=1 turns on); I/O
  /// shows as one io_summary line a second at most.
  void set_trace(bool on);

  /// If h is the item most recently queued on the calling worker's own deque, or the coroutine in
  /// its next slot (one it woke, see docs/thread-pool.md), takes it back and runs it here
  /// (task::wait() uses this before blocking). Returns whether it ran.
  bool try_run_inline(std::coroutine_handle<> h);

  /// Runs all queued work (and the work it queues) to the end and stops the threads. Idempotent;
  /// the destructor calls it. Must not be called from one of this pool's threads.
  void shutdown();

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace tpl
