// The thread pool's implementation object, shared by the files that implement one mechanism each
// (internal; see tpl/thread_pool.hpp for the public type):
//
//   worker_loop.cpp       a worker's loop and its queues: local deque, yield queue, next slot,
//                         stealing, the global queues, draining at shutdown; the socket
//                         engines' hooks (io_hooks.hpp)
//   wake_protocol.cpp     the idle list, spinning, parking and waking: the protocol that
//                         tests/model_pool_handshake_test.cpp checks exhaustively
//   thread_lifecycle.cpp  creating, retiring and stopping threads; thread counts and limits
//   gate.cpp              the gate thread: starvation, blocking injection, hill climbing;
//                         blocking_scope
//   pool_stats.cpp        statistics and decision events, the io_summary event
//   io_counters.cpp       the I/O counters of engine threads and workers (io_counters.hpp)
//   fork_join.cpp         fork jobs (tpl::parallel::invoke): queued from the invoker's stack as
//                         tagged items, taken back, stolen, joined
//
// Invariants every file keeps (docs/internals.md states them at length):
//   - `spinning` counts the thread requests in flight: spinning workers, kWoken signals not yet
//     consumed, and a waker between winning the request and handing it on. At most one request
//     is claimed per burst of pushes (a waker moves spinning from 0 to 1).
//   - `processing` = existing - workers on the idle list; it changes only under idle_lock,
//     together with the list, in the one 64-bit counts word (with existing and the goal).
//   - Every queued item (deque, yield queue, global queue) is seen by some worker: a producer
//     queues, fences, then looks at spinning/idle/counts; a parking worker registers as idle,
//     stops spinning, fences, then looks at every queue. A fork job pushed onto a non-empty deque
//     is the exception (no fence): its invoker's join takes it back if no worker saw it. Work
//     left when every allowed worker is busy is found by the processing workers, each of which
//     looks at every queue before it parks (the excess park excepted: it leaves at least the
//     goal's workers processing).
//   - A next-slot item belongs to a running owner: the owner takes it before anything else when
//     its item returns, and moves it to its deque, with the wake protocol, before it blocks in a
//     wait of tpl's or parks as excess. Other workers take one only to rescue it from an owner
//     busy with a long item (after kNextSlotGrace).
//   - A queued item is a coroutine handle's address, or a fork job's address with bit 0 set
//     (tpl/detail/fork_job.hpp); whoever takes one from a queue runs it with run_queued()
//     (through run(), or drain_inline at shutdown), which tells the two apart.
//   - The gate thread starts before any worker and stops after the last one stops looking.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "../call_gate.hpp"
#include "global_queue.hpp"
#include "io_counters.hpp"
#include "tpl/detail/cpu_count.hpp"
#include "tpl/detail/fork_job.hpp"
#include "tpl/detail/pool_policy.hpp"
#include "tpl/thread_pool.hpp"
#include "full_fence.hpp"
#include "work_stealing_deque.hpp"

namespace tpl {

namespace pool_detail {

using clock = std::chrono::steady_clock;

// How long an idle worker keeps looking for work before it parks: about the cost of a park/unpark
// round trip (docs/thread-pool.md has the measurements), so spinning that long pays for itself.
inline constexpr std::chrono::microseconds kSpinBeforeParkUs{50};

// The lost-wake-up alarm (see wait_parked): a parked worker looks at the queues this often. It
// takes an item only when two looks in a row saw queued work that a worker was allowed to take,
// with nobody searching and no wake-up handed out in between, and counts it in
// stats().wakeups_by_park_timeout. The handshake (model-checked) never leaves work so; tests assert
// the counter stays 0. TPL_THREADPOOL_PARK_ALARM=0 turns the looks off.
inline constexpr std::chrono::milliseconds kParkAlarmPeriodMs{100};

// A worker's next slot (see worker::next): how long another worker watches an item sit there,
// unchanged, before it takes it (the owner is then stuck in a long item; Go's runqgrab waits 3 us
// for the same reason), and how many slot items the owner runs in a row before it lets its queued
// work go first (tokio's MAX_LIFO_POLLS_PER_TICK plays this role).
inline constexpr std::chrono::microseconds kNextSlotGrace{5};
inline constexpr unsigned kNextSlotBudget = 32;

// At most one io_summary event per pool this often (the trace prints each one).
inline constexpr std::chrono::milliseconds kIoSummaryPeriod{1000};

inline constexpr std::chrono::milliseconds kStarvationPeriod{500};
inline constexpr std::chrono::milliseconds kEagerStarvationPeriod{10};

inline std::coroutine_handle<> to_handle(void* p) noexcept { return std::coroutine_handle<>::from_address(p); }

/// The CPUs the process may run on (its affinity mask): the pool's default size and `cores`.
inline unsigned hardware_cores() noexcept { return detail::available_cpus(); }

}  // namespace pool_detail

struct thread_pool::impl {
  using clock = pool_detail::clock;

  struct worker {
    explicit worker(impl* p, unsigned i) : pool(p), index(i), rng(0x9E3779B9u * (i + 1)) {}
    impl* pool;
    unsigned index;
    detail::work_stealing_deque local;
    // Work this worker queued behind the work already waiting (yield(), prefer_fairness): a
    // second Chase-Lev deque used as a FIFO: only the owner pushes; everyone, the owner included,
    // takes from the top. The owner takes from it after its deque and the global queues, thieves
    // after the other deques. One per worker, so yielding workers share no lock (tokio puts a
    // yielded task on its worker's own queue too; .NET uses its global queues).
    detail::work_stealing_deque fair;
    // Futex word. kWoken: a waker popped this worker off the idle list and handed it its spinning
    // request (set by the waker, consumed by the worker). kStop: shutdown asks a parked worker to
    // leave. Separate bits, so that neither overwrites the other.
    std::atomic<std::uint32_t> wake_signal{0};
    // Written only by the owner; relaxed atomics so stats() and the gate may read them.
    std::atomic<std::uint64_t> items_executed{0};
    // I/O operations completed on this worker, by detail::io_kind (count_io_completion); written
    // only by the owner, like items_executed.
    std::array<std::atomic<std::uint64_t>, detail::kIoKinds> io_completions{};
    std::minstd_rand rng;
    // The coroutine the running item woke last (a channel reader or writer it unblocked): the
    // owner runs it next, before its deque, so a message's receiver runs on the core whose cache
    // holds the message, and a chain of hand-offs stays on one worker instead of bouncing between
    // the owner and a spinning thief (Go's runnext, tokio's LIFO slot). Only the owner puts items
    // here (release exchange); the owner takes them (exchange), others only after watching one
    // sit unchanged for kNextSlotGrace (CAS). On its own cache line: spinning workers read it.
    alignas(64) std::atomic<void*> next{nullptr};
    // Owner-only: slot items run in a row (kNextSlotBudget), and the slot of another worker this
    // one is watching (watch_item seen there since watch_since).
    alignas(64) unsigned next_streak = 0;
    const std::atomic<void*>* watch_slot = nullptr;
    void* watch_item = nullptr;
    clock::time_point watch_since{};
    // A thread runs on this slot. Set by the creator under threads_lock; cleared by the thread as
    // its last access to the worker (release), read by the creator before reusing the slot
    // (acquire).
    std::atomic<bool> alive{false};
  };

  struct thread_context {
    impl* pool;
    worker* self;
  };
  static inline thread_local thread_context t_context{nullptr, nullptr};

  // The default pool's implementation, once default_pool() has built it (never destroyed): its
  // stats() and io_summary events also report the I/O engine threads, which serve it.
  static inline std::atomic<impl*> default_impl{nullptr};

  enum class park_result { woken, found_work, retired, stopping };
  static constexpr std::uint32_t kWoken = 1, kStop = 2;

  explicit impl(thread_pool* owner, thread_pool_options opts);
  ~impl();

  // ---- thread counts (thread_lifecycle.cpp) ---------------------------------------------------

  detail::thread_counts load_counts(std::memory_order o = std::memory_order_relaxed) const noexcept {
    return detail::thread_counts::unpack(counts.load(o));
  }

  // Applies f to the counts word until the CAS succeeds; returns (old, new).
  template <class F>
  std::pair<detail::thread_counts, detail::thread_counts> update_counts(F f) {
    // seq_cst: the word is read by producers after their queue fence (the wake protocol).
    std::uint64_t cur = counts.load(std::memory_order_seq_cst);
    for (;;) {
      detail::thread_counts old = detail::thread_counts::unpack(cur);
      detail::thread_counts next = old;
      f(next);
      if (counts.compare_exchange_weak(cur, next.pack(), std::memory_order_seq_cst)) return {old, next};
    }
  }

  unsigned compute_goal() const noexcept {
    // relaxed: inputs of a heuristic; every change re-computes through update_goal().
    return detail::goal_for(base_goal.load(std::memory_order_relaxed), blocked_threads.load(std::memory_order_relaxed),
                            min_threads.load(std::memory_order_relaxed), max_threads.load(std::memory_order_relaxed),
                            options.cooperative_blocking || options.injection == injection_policy::eager);
  }

  static bool park_alarm_from_environment();

  void update_goal(thread_pool_reason why);

  /// Starts a worker (it starts spinning if `spinning_token`: the caller hands it its request).
  /// Unless `force`, only while processing < goal. Returns false at max or on failure.
  bool start_worker(thread_pool_reason why, bool spinning_token, bool force = false);

  void thread_exited(worker& self);

  bool set_limits(unsigned min, unsigned max);

  void shutdown();

  // ---- queuing and the worker loop (worker_loop.cpp) ------------------------------------------

  // The owner takes its slot item, if any (null if a thief took it first).
  static void* take_next(worker& self) {
    // relaxed pre-check: only this thread fills its slot, so null here stays null.
    if (self.next.load(std::memory_order_relaxed) == nullptr) return nullptr;
    // acquire: a thief may have emptied the slot; the exchange decides who runs the item (the
    // item itself was put there by this thread).
    return self.next.exchange(nullptr, std::memory_order_acquire);
  }

  void push(void* item);

  // A coroutine the running item of self (the calling worker) woke (see worker::next).
  void push_next(worker& self, void* item);

  // Moves the calling worker's slot item to its deque, where any worker may steal it at once
  // (before it blocks or parks while others may need the item). Returns whether it moved one.
  bool flush_next(worker& self);

  // Before the calling worker blocks (a wait of tpl's, inside or outside a blocking_scope): its
  // slot item goes to its deque with the full wake protocol, so an idle worker takes it while
  // this one waits (the item may be what it waits for).
  void before_blocking_wait(worker& self);

  void push_global(void* item);

  // The queue a thread outside the pool pushes to: the global queue, or with extra global queues
  // one chosen by the thread's identity, so many outside producers spread over several locks.
  detail::global_queue& queue_for_outside();

  // A thread outside the pool may still be inside push/after_push when the item it queued has
  // already run and its owner destroys the pool; shutdown() waits for such calls to leave.
  void push_from_outside(void* item, detail::global_queue& q);

  void* find_work(worker& self);

  // Another worker's slot item, if it has sat there unchanged for kNextSlotGrace (its owner is
  // busy with a long item). Watches one slot at a time; the first call that finds an item there
  // starts the watch.
  void* take_stale_next(worker& self, std::size_t n, std::size_t start);

  void run(worker& self, void* item);
  // Runs a queued item of either kind (a coroutine, or a fork job: see is_fork_job).
  static void run_queued(void* item) noexcept;

  // ---- fork jobs (fork_join.cpp; tpl/detail/fork_job.hpp) --------------------------------------

  // Whether a queued item is a fork job (a tagged pointer) rather than a coroutine.
  static bool is_fork_job(void* item) noexcept;
  // Runs a fork job a worker took from a queue, publishes kDone and wakes a sleeping invoker.
  static void run_fork_job(void* item) noexcept;
  // A join whose job was stolen: helps with fork jobs, then sleeps until the job is done.
  void wait_for_stolen(worker& self, detail::fork_job* j) noexcept;
  void* steal_fork_job(worker& self) noexcept;
  // run(), keeping the calling thread's execution context (for items run inside a join).
  void run_nested(worker& self, void* item) noexcept;

  void worker_main(worker& self, bool is_spinning);

  void drain_inline();

  // ---- the wake protocol (wake_protocol.cpp) --------------------------------------------------

  void after_push() {
    // seq_cst fence (full_fence.hpp): orders our queue write before reading spinning/idle/counts
    // (file comment).
    detail::full_fence();
    after_fork_push_unfenced();
  }

  /// after_push's look without its fence; called alone after a fork job's push onto a deque that
  /// already held items (fork_join.cpp). The look at spinning/idle/counts may then be satisfied
  /// before the push is visible, so a worker parking at that moment may miss both; the job is not
  /// stranded for that, because its invoker takes it back at its join (the fence buys a thief
  /// for it, not its run). tests/model_pool_handshake_test.cpp explores the look in both orders
  /// and finds every job joined. A push onto an empty deque (the first of an invoke's jobs, and
  /// the one an idle worker is most needed for) keeps after_push, fence included.
  void after_fork_push_unfenced() {
    // relaxed suffices: after after_push's fence, that fence orders this load against the parking
    // worker's writes; without it (a fork push), a stale false only leaves the job to its
    // invoker's join.
    if (stopped.load(std::memory_order_relaxed)) {
      drain_inline();
      return;
    }
    wake_one_if_needed();
  }

  void note_demand() { kick_gate(); }

  // The wake check after every push. Its two common exits are here, inline: a worker already
  // spins, or every allowed worker is busy (then the gate is kicked, which is one load while it
  // watches). The rest is wake_one_slow(), which goes on from the values read here and repeats
  // this head (wake_check_head) at the end of each further round: one loop split in two
  // (wake_protocol.cpp), so that the common exits save no registers and make no call.
  void wake_one_if_needed() {
    int idle_now;
    std::uint64_t counts_seen;
    if (wake_check_head(idle_now, counts_seen)) wake_one_slow(idle_now, counts_seen);
  }
  // The head of each round of the wake check: false when it is answered (a worker spins, or every
  // allowed worker is busy and the gate was told); otherwise true, with idle_count and counts as
  // read for the rest of the round.
  bool wake_check_head(int& idle_now, std::uint64_t& counts_seen) {
    // seq_cst loads: the parking protocol's Dekker handshake (wake_protocol.cpp).
    if (spinning.load(std::memory_order_seq_cst) != 0) return false;
    idle_now = idle_count.load(std::memory_order_seq_cst);
    counts_seen = counts.load(std::memory_order_seq_cst);
    const detail::thread_counts c = detail::thread_counts::unpack(counts_seen);
    if (c.processing >= c.goal) {
      // Every allowed worker is busy: the gate watches for starvation.
      note_demand();
      return false;
    }
    return true;
  }
  // seq_cst: pairs with the gate's store of gate_idle and its re-check of the counts and queues
  // (Dekker): either we see it idle and wake it, or it sees our state change and stays awake.
  void kick_gate() {
    if (gate_idle.load(std::memory_order_seq_cst)) kick_idle_gate();
  }

  // wake_one_if_needed() past its inline exits: below the goal, with idle_now and counts_seen
  // as it read them.
  TPL_NOINLINE void wake_one_slow(int idle_now, std::uint64_t counts_seen);

  worker* pop_idle_within_goal();

  void push_idle(worker* w);

  // Parks w as excess if processing > goal (checked under the lock). Returns whether it did.
  bool push_idle_if_excess(worker* w);

  bool remove_idle(worker* w);

  // Takes w off the idle list for good (idle timeout). Returns false if a waker popped it first.
  bool retire_idle(worker* w);

  // The three below run under idle_lock.
  void add_idle_locked(worker* w);

  // Unlinks w from the idle list; false if a waker popped it first.
  bool unlink_idle_locked(worker* w);

  void publish_idle_count_locked();

  // Wakes w, parked on its futex word.
  void signal(worker* w);

  // Whether any queue holds an item; with next_slots, any worker's next slot too (the wake
  // protocol leaves slot items to their owners, who run them as soon as their item returns or
  // move them to their deque before they block; the gate and shutdown count them).
  bool any_work_seq_cst(bool next_slots = true) const;

  void stop_spinning_and_maybe_wake();

  bool may_start_spinning() const;

  void* spin_for_work(worker& self);

  /// Parks until woken, work appears, the idle timeout retires the thread, or shutdown.
  park_result park(worker& self, bool was_spinning);

  /// The waiting half of park (also used by the excess park, which does not re-check the queues).
  /// Ends when a waker signals, at shutdown, or at the idle timeout (retired). With the alarm on,
  /// the worker also looks at the queues every kParkAlarmPeriodMs; see stranded_work_seen().
  park_result wait_parked(worker& self);

  // The alarm's condition: an item in a queue (next slots are their owners' to run), a worker
  // allowed to take it (processing < goal), and nobody searching. A producer between its queue
  // store and its wake-up sees the same picture for a few instructions, so one look proves
  // nothing; two looks a period apart with no hand-off between them mean nobody is coming.
  bool stranded_work_seen() const;

  // ---- the gate and blocking (gate.cpp) -------------------------------------------------------

  // The reason a thread is added on the request path.
  thread_pool_reason reason_for_new_thread() const noexcept;

  // Whether a thread for `why` may be created now, or must wait for the gate's delay.
  bool injection_due_now(thread_pool_reason why) const noexcept;

  void blocking_begin();

  void blocking_end();

  // kick_gate() once it saw the gate idle: wakes it under gate_lock.
  TPL_NOINLINE void kick_idle_gate();

  // Wakes the gate whatever it is doing (it re-plans its next wake-up).
  void wake_gate();

  void gate_main();

  std::uint64_t items_completed() const;

  void inject_for_starvation();

  void climb(double seconds, std::uint64_t completions, double cpu);

  // ---- statistics and events (pool_stats.cpp) -------------------------------------------------

  void emit(thread_pool_event_kind kind, thread_pool_reason why, detail::thread_counts c, unsigned previous_goal = 0);

  // Hands e to the trace and the listener.
  void publish(const thread_pool_event& e) noexcept;

  thread_pool_stats stats() const;

  // The I/O part of stats(): the workers' completions, and for the default pool the engines'.
  thread_pool_io_stats io_stats() const noexcept;

  // Sends an io_summary event if someone listens, the I/O counters moved, and the previous one is
  // at least kIoSummaryPeriod old. Called after I/O is counted (count_io_completion, an engine's
  // wake-up), on that thread.
  void maybe_emit_io_summary() noexcept;

  thread_pool* owner;
  thread_pool_options options;
  const unsigned cores;
  std::unique_ptr<std::atomic<worker*>[]> slots;
  std::atomic<unsigned> slot_count{0};
  detail::global_queue global;
  std::vector<std::unique_ptr<detail::global_queue>> extra_globals;
  alignas(64) std::atomic<int> spinning{0};
  alignas(64) std::atomic<int> idle_count{0};
  alignas(64) std::atomic<std::uint64_t> counts{0};
  std::atomic<unsigned> min_threads{1};
  std::atomic<unsigned> max_threads{detail::kMaxPoolThreads};
  std::atomic<unsigned> base_goal{1};
  std::atomic<unsigned> blocked_threads{0};
  std::mutex idle_lock;
  std::vector<worker*> idle;
  std::mutex threads_lock;
  detail::thread_counts retire_counts{};
  std::mutex live_lock;
  std::condition_variable live_cv;
  int live_threads = 0;
  std::atomic<bool> stopping{false};
  std::atomic<bool> stopped{false};
  std::atomic<std::uint64_t> wakeups{0};
  std::atomic<std::uint64_t> wakeups_by_park_timeout{0};
  // Workers signalled or started (the alarm's "something happened").
  std::atomic<std::uint64_t> handoffs{0};
  bool park_alarm = true;
  std::atomic<std::uint64_t> injected_starvation{0}, injected_blocking{0}, injected_hill_climbing{0},
      injected_eager{0}, injected_demand{0}, retired{0};
  // Outside threads inside push_from_outside, plus kShutdownWaiting once shutdown() waits for
  // them to leave (a futex word).
  std::atomic<std::uint32_t> pushes_in_flight{0};
  static constexpr std::uint32_t kShutdownWaiting = 0x8000'0000u;
  // The gate.
  std::mutex gate_lock;
  std::condition_variable gate_cv;
  bool gate_kicked = false;
  std::atomic<bool> gate_idle{false};
  std::atomic<bool> pending_blocking_injection{false};
  std::thread gate;
  // Hill climbing (the gate drives it; set_limits and starvation adjust it).
  std::mutex hc_lock;
  detail::hill_climbing hc;
  std::atomic<hill_climbing_state> hc_state{hill_climbing_state::warmup};
  std::atomic<double> hc_control{0};
  std::atomic<unsigned> hc_sample_ms{0};
  // Events.
  std::atomic<bool> trace{false};
  std::atomic<bool> has_listener{false};
  // The listener and its calls under way (pool_stats.cpp; src/call_gate.hpp), under listener_lock.
  struct listener_node {
    explicit listener_node(std::function<void(const thread_pool_event&)> f) : call(std::move(f)) {}
    const std::function<void(const thread_pool_event&)> call;
    detail::call_gate gate;
  };
  std::mutex listener_lock;
  std::condition_variable listener_done;  // a call counted out of a gate
  std::shared_ptr<listener_node> listener;
  // io_summary: the earliest time (steady_clock, ns) of the next one; the totals the previous one
  // reported, under io_summary_lock.
  std::atomic<std::int64_t> next_io_summary_ns{0};
  std::mutex io_summary_lock;
  thread_pool_io_stats io_reported{};
  std::mutex shutdown_lock;
  bool joined = false;
};

}  // namespace tpl
