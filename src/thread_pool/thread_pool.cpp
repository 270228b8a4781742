// The thread pool mechanism: workers, their queues, how an idle worker parks and how queued work
// wakes one, and the thread-count policies (goal, blocking, starvation gate, hill climbing).
//
// Waking protocol (the scheme of Go's scheduler, which is the "one outstanding thread request" of
// .NET's PortableThreadPool with the request counted as a spinning worker):
//   - `spinning` counts workers that are searching for work, including one just woken (or just
//     created) for it.
//   - After queuing, a producer wakes a parked worker (or starts a new one) only if none is
//     spinning and fewer workers process work than the goal allows; it claims the request by moving
//     spinning from 0 to 1 (so a burst of items wakes one worker, not one per item).
//   - A spinning worker that finds work stops spinning; if it was the last spinner, it wakes one
//     more worker so that the rest of a burst is picked up in parallel.
//   - A worker parks in this order: register as idle, stop spinning, full fence, look at every
//     queue once more. A producer does: queue, full fence, look at spinning/idle. Whatever the
//     interleaving, either the producer sees the idle worker (and wakes it) or the worker sees
//     the item. A producer that wakes nobody because the goal is reached relies on the
//     `processing` workers (at least the goal, at least one), each of which looks at every queue
//     before it parks.
//
// Thread counts: one 64-bit word (processing, existing, goal), see tpl/detail/pool_policy.hpp.
// processing = existing - parked; it changes under idle_lock together with the idle list. The goal
// is goal_for(base_goal, blocked, min, max): base_goal is moved by the starvation gate and hill
// climbing, blocked by blocking_scope. A worker that finishes an item while processing > goal
// parks (the excess park) without re-checking the queues: the goal's workers remain.
//
// The gate thread: sleeps while the pool is idle; while any worker processes, wakes every
// starvation period (500 ms, eager: 10 ms) to add a thread if queued work made no progress, at
// each hill-climbing sample, and when a blocking injection beyond `cores` extra threads is due.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#endif

#include "global_queue.hpp"
#include "tpl/detail/flow.hpp"
#include "tpl/detail/futex.hpp"
#include "tpl/detail/pool_policy.hpp"
#include "tpl/detail/trampoline.hpp"
#include "tpl/thread_pool.hpp"
#include "work_stealing_deque.hpp"

namespace tpl {

namespace {

using clock = std::chrono::steady_clock;

// How long an idle worker keeps looking for work before it parks. A park/unpark round trip costs
// 18-30 us on the VMs we measure on, so spinning for about that long pays for itself.
constexpr std::chrono::microseconds kSpinBeforeParkUs{50};

// The lost-wake-up alarm (see wait_parked): a parked worker looks at the queues this often. It
// takes an item only when two looks in a row saw queued work that a worker was allowed to take,
// with nobody searching and no wake-up handed out in between, and counts it in
// stats().wakeups_by_park_timeout. The handshake (model-checked) never leaves work so; tests assert
// the counter stays 0. TPL_THREADPOOL_PARK_ALARM=0 turns the looks off.
constexpr std::chrono::milliseconds kParkAlarmPeriodMs{100};

// A worker's next slot (see worker::next): how long another worker watches an item sit there,
// unchanged, before it takes it (the owner is then stuck in a long item; Go's runqgrab waits 3 us
// for the same reason), and how many slot items the owner runs in a row before it lets its queued
// work go first (tokio's MAX_LIFO_POLLS_PER_TICK plays this role).
constexpr std::chrono::microseconds kNextSlotGrace{5};
constexpr unsigned kNextSlotBudget = 32;

constexpr std::chrono::milliseconds kStarvationPeriod{500};
constexpr std::chrono::milliseconds kEagerStarvationPeriod{10};

std::coroutine_handle<> to_handle(void* p) noexcept { return std::coroutine_handle<>::from_address(p); }

unsigned hardware_cores() noexcept { return std::max(1u, std::thread::hardware_concurrency()); }

}  // namespace

struct thread_pool::impl {
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

  enum class park_result { woken, found_work, retired, stopping };
  static constexpr std::uint32_t kWoken = 1, kStop = 2;

  explicit impl(thread_pool* owner, thread_pool_options opts)
      : owner(owner),
        options(std::move(opts)),
        cores(hardware_cores()),
        slots(new std::atomic<worker*>[detail::kMaxPoolThreads]),
        hc(1, 1) {
    unsigned min = options.thread_count == 0 ? cores : options.thread_count;
    unsigned max = options.max_threads == 0 ? detail::kMaxPoolThreads : options.max_threads;
    if (min > detail::kMaxPoolThreads)
      throw std::invalid_argument("thread_pool: thread_count " + std::to_string(min) + " is above 32767");
    if (max > detail::kMaxPoolThreads)
      throw std::invalid_argument("thread_pool: max_threads " + std::to_string(max) + " is above 32767");
    if (min > max)
      throw std::invalid_argument("thread_pool: thread_count " + std::to_string(min) + " is above max_threads " +
                                  std::to_string(max));
    if (options.idle_timeout <= std::chrono::milliseconds(0))
      throw std::invalid_argument("thread_pool: idle_timeout must be positive");
    min_threads.store(min, std::memory_order_relaxed);
    max_threads.store(max, std::memory_order_relaxed);
    base_goal.store(min, std::memory_order_relaxed);
    for (unsigned i = 0; i < detail::kMaxPoolThreads; ++i) slots[i].store(nullptr, std::memory_order_relaxed);
    unsigned extra = options.extra_global_queues.value_or(cores > 32 ? (cores + 15) / 16 : 0);
    if (extra > 4096) throw std::invalid_argument("thread_pool: extra_global_queues above 4096");
    for (unsigned i = 0; i < extra; ++i) extra_globals.push_back(std::make_unique<detail::global_queue>());
    hc = detail::hill_climbing(min, max, 0x5EEDu ^ static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(this)));
    idle.reserve(64);
    hc_sample_ms.store(hc.sample_ms(), std::memory_order_relaxed);
    hc_control.store(hc.control_setting(), std::memory_order_relaxed);
    counts.store(detail::thread_counts{0, 0, static_cast<std::uint16_t>(min)}.pack(), std::memory_order_relaxed);
    if (const char* t = std::getenv("TPL_THREADPOOL_TRACE"); t != nullptr && std::strcmp(t, "1") == 0)
      trace.store(true, std::memory_order_relaxed);
    park_alarm = park_alarm_from_environment();
    // The gate first: if it cannot start, no worker exists yet and the exception leaves nothing
    // running on this object. A worker that cannot start is not an error (start_worker returns
    // false; the gate adds threads later, as after a failed injection).
    gate = std::thread([this] { gate_main(); });
    for (unsigned i = 0; i < min; ++i)
      if (!start_worker(thread_pool_reason::startup, false, /*force=*/true)) break;
  }

  static bool park_alarm_from_environment() {
    const char* v = std::getenv("TPL_THREADPOOL_PARK_ALARM");
    if (v == nullptr) return true;
    if (std::strcmp(v, "1") == 0) return true;
    if (std::strcmp(v, "0") == 0) return false;
    throw std::invalid_argument(std::string("TPL_THREADPOOL_PARK_ALARM: expected 0 or 1, got '") + v + "'");
  }

  // ---- thread counts ------------------------------------------------------------------------

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

  void update_goal(thread_pool_reason why) {
    auto [old, next] = update_counts([&](detail::thread_counts& c) { c.goal = static_cast<std::uint16_t>(compute_goal()); });
    if (old.goal != next.goal) emit(thread_pool_event_kind::goal_changed, why, next, old.goal);
  }

  // ---- events -------------------------------------------------------------------------------

  void emit(thread_pool_event_kind kind, thread_pool_reason why, detail::thread_counts c, unsigned previous_goal = 0) {
    // relaxed: whether anyone listens; a listener set concurrently may miss an event in flight.
    const bool t = trace.load(std::memory_order_relaxed);
    if (!t && !has_listener.load(std::memory_order_relaxed)) return;
    thread_pool_event e{kind, why, clock::now(), c.existing, c.goal, previous_goal,
                        blocked_threads.load(std::memory_order_relaxed)};
    if (t) std::fprintf(stderr, "%s\n", to_string(e).c_str());
    std::shared_ptr<const std::function<void(const thread_pool_event&)>> l;
    {
      std::lock_guard g(listener_lock);
      l = listener;
    }
    if (l) {
      try {
        (*l)(e);
      } catch (...) {
        // A listener's exception must not take a pool decision down with it.
      }
    }
  }

  // ---- creating and retiring threads ---------------------------------------------------------

  /// Starts a worker (it starts spinning if `spinning_token`: the caller hands it its request).
  /// Unless `force`, only while processing < goal. Returns false at max or on failure.
  bool start_worker(thread_pool_reason why, bool spinning_token, bool force = false) {
    std::unique_lock g(threads_lock);
    // relaxed: read under threads_lock, which every start/exit takes.
    if (stopping.load(std::memory_order_relaxed)) return false;
    detail::thread_counts c = load_counts(std::memory_order_seq_cst);
    if (c.existing >= max_threads.load(std::memory_order_relaxed)) return false;
    if (!force && c.processing >= c.goal) return false;
    worker* w = nullptr;
    // acquire: pairs with slot publication below.
    const unsigned n = slot_count.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n && w == nullptr; ++i) {
      worker* s = slots[i].load(std::memory_order_relaxed);
      // acquire: the exited thread's last writes to the slot happen before we reuse it.
      if (!s->alive.load(std::memory_order_acquire)) w = s;
    }
    if (w == nullptr) {
      if (n >= detail::kMaxPoolThreads) return false;
      // Out of memory: no thread, as if at max (callers give their request back; the gate tries
      // again at its next period).
      std::unique_ptr<worker> fresh;
      try {
        fresh = std::make_unique<worker>(this, n);
      } catch (const std::bad_alloc&) {
        return false;
      }
      w = fresh.release();
      slots[n].store(w, std::memory_order_relaxed);
      // release: a stealer that sees the new count sees the slot's worker.
      slot_count.store(n + 1, std::memory_order_release);
    }
    w->alive.store(true, std::memory_order_relaxed);
    w->wake_signal.store(0, std::memory_order_relaxed);
    {
      std::lock_guard lg(live_lock);
      ++live_threads;
    }
    auto [old, next] = update_counts([](detail::thread_counts& k) {
      ++k.existing;
      ++k.processing;
    });
    (void)old;
    try {
      std::thread([this, w, spinning_token] { worker_main(*w, spinning_token); }).detach();
    } catch (const std::exception&) {  // std::system_error (no thread) or std::bad_alloc
      update_counts([](detail::thread_counts& k) {
        --k.existing;
        --k.processing;
      });
      w->alive.store(false, std::memory_order_release);
      std::lock_guard lg(live_lock);
      --live_threads;
      return false;
    }
    switch (why) {
      case thread_pool_reason::starvation: ++injected_starvation; break;
      case thread_pool_reason::blocking: ++injected_blocking; break;
      case thread_pool_reason::hill_climbing: ++injected_hill_climbing; break;
      case thread_pool_reason::eager: ++injected_eager; break;
      case thread_pool_reason::demand: ++injected_demand; break;
      default: break;
    }
    // relaxed: only the alarm reads it, as "did anything happen".
    handoffs.fetch_add(1, std::memory_order_relaxed);
    g.unlock();
    if (why != thread_pool_reason::startup) emit(thread_pool_event_kind::thread_injected, why, next);
    kick_gate();
    return true;
  }

  // The reason a thread is added on the request path.
  thread_pool_reason reason_for_new_thread() const noexcept {
    // relaxed: labels for statistics.
    const unsigned blocked = blocked_threads.load(std::memory_order_relaxed);
    const unsigned min = min_threads.load(std::memory_order_relaxed);
    if (options.injection == injection_policy::eager && blocked > 0) return thread_pool_reason::eager;
    if (blocked > 0 && min + blocked > base_goal.load(std::memory_order_relaxed)) return thread_pool_reason::blocking;
    if (base_goal.load(std::memory_order_relaxed) > min) return thread_pool_reason::hill_climbing;
    return thread_pool_reason::demand;
  }

  // Whether a thread for `why` may be created now, or must wait for the gate's delay.
  bool injection_due_now(thread_pool_reason why) const noexcept {
    if (why != thread_pool_reason::blocking) return true;
    const auto c = load_counts();
    const auto delay = detail::blocking_injection_delay(c.existing, min_threads.load(std::memory_order_relaxed), cores);
    return delay.count() == 0;
  }

  // ---- queuing ----------------------------------------------------------------------------

  void push(void* item) {
    thread_context& ctx = t_context;
    if (ctx.pool == this) {
      ctx.self->local.push(item);
      after_push();
    } else {
      push_from_outside(item, global);
    }
  }

  // A coroutine the running item of self (the calling worker) woke (see worker::next).
  void push_next(worker& self, void* item) {
    // release: whoever takes the item (the owner's exchange, a thief's acquire CAS) sees the
    // coroutine's state as it was when it was queued. The old occupant was put there by this
    // thread, so reading it needs no acquire.
    if (void* old = self.next.exchange(item, std::memory_order_release)) {
      self.local.push(old);
      after_push();  // the deque's item: the full wake protocol
      return;
    }
    // The slot's item is ours to run next (find_work takes it first; the worker does not stop or
    // park while it holds one). Others take it only to rescue it from an owner stuck in a long
    // item, and that rescue is opportunistic even after the fence: a spinner that stops spinning
    // or parks does not look at next slots. So a spinner seen without the fence (relaxed: a
    // hint, like the load after it would be) serves as well, and a chain of hand-offs, which
    // keeps a spinner busy watching, skips the fence that would wait here for the woken node's
    // cache lines (about 10% of a seed 001 chain link).
    if (spinning.load(std::memory_order_relaxed) != 0) return;
    // Otherwise the usual wake protocol: a spinning worker exists afterwards (if any is idle), so
    // an item left here by an owner that then runs long is taken after the grace period.
    after_push();
  }

  // The owner takes its slot item, if any (null if a thief took it first).
  static void* take_next(worker& self) {
    // relaxed pre-check: only this thread fills its slot, so null here stays null.
    if (self.next.load(std::memory_order_relaxed) == nullptr) return nullptr;
    // acquire: a thief may have emptied the slot; the exchange decides who runs the item (the
    // item itself was put there by this thread).
    return self.next.exchange(nullptr, std::memory_order_acquire);
  }

  // Moves the calling worker's slot item to its deque, where any worker may steal it at once
  // (before it blocks or parks while others may need the item). Returns whether it moved one.
  bool flush_next(worker& self) {
    void* item = take_next(self);
    if (item == nullptr) return false;
    self.local.push(item);
    return true;
  }

  // Before the calling worker blocks (a wait of tpl's, inside or outside a blocking_scope): its
  // slot item goes to its deque with the full wake protocol, so an idle worker takes it while
  // this one waits (the item may be what it waits for).
  void before_blocking_wait(worker& self) {
    if (flush_next(self)) after_push();
  }

  void push_global(void* item) {
    thread_context& ctx = t_context;
    if (ctx.pool == this) {
      ctx.self->fair.push(item);
      after_push();
    } else {
      push_from_outside(item, queue_for_outside());
    }
  }

  // The queue a thread outside the pool pushes to: the global queue, or with extra global queues
  // one chosen by the thread's identity, so many outside producers spread over several locks.
  detail::global_queue& queue_for_outside() {
    if (extra_globals.empty()) return global;
    static thread_local const std::size_t t_hash = std::hash<std::thread::id>{}(std::this_thread::get_id());
    const std::size_t k = t_hash % (extra_globals.size() + 1);
    return k == 0 ? global : *extra_globals[k - 1];
  }

  // A thread outside the pool may still be inside push/after_push when the item it queued has
  // already run and its owner destroys the pool; shutdown() waits for such calls to leave.
  void push_from_outside(void* item, detail::global_queue& q) {
    // relaxed increment: shutdown() only needs to see it before the item can have run, which
    // the queue's own synchronisation (the push below) guarantees.
    pushes_in_flight.fetch_add(1, std::memory_order_relaxed);
    q.push(item);
    after_push();
    // release: everything this call read from the pool happens before shutdown() frees it.
    pushes_in_flight.fetch_sub(1, std::memory_order_release);
  }

  void after_push() {
    // seq_cst fence: orders our queue write before reading spinning/idle/counts (file comment).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // relaxed suffices: the fence above orders this load against the parking worker's writes.
    if (stopped.load(std::memory_order_relaxed)) {
      drain_inline();
      return;
    }
    wake_one_if_needed();
  }

  void wake_one_if_needed() {
    for (;;) {
      // seq_cst loads: the parking protocol's Dekker handshake.
      if (spinning.load(std::memory_order_seq_cst) != 0) return;
      const int idle_now = idle_count.load(std::memory_order_seq_cst);
      const std::uint64_t counts_seen = counts.load(std::memory_order_seq_cst);
      const detail::thread_counts c = detail::thread_counts::unpack(counts_seen);
      if (c.processing >= c.goal) {
        // Every allowed worker is busy: the gate watches for starvation.
        note_demand();
        return;
      }
      if (idle_now == 0 && c.existing >= max_threads.load(std::memory_order_relaxed)) return;
      int expected = 0;
      if (!spinning.compare_exchange_strong(expected, 1, std::memory_order_seq_cst)) return;
      if (worker* w = pop_idle_within_goal()) {
        wakeups.fetch_add(1, std::memory_order_relaxed);
        signal(w);
        kick_gate();
        return;
      }
      if (idle_count.load(std::memory_order_seq_cst) == 0) {
        const thread_pool_reason why = reason_for_new_thread();
        if (injection_due_now(why)) {
          if (start_worker(why, /*spinning_token=*/true)) return;
        } else {
          // relaxed: read by the gate after it takes gate_lock, which wake_gate() takes too.
          if (!pending_blocking_injection.exchange(true, std::memory_order_relaxed)) wake_gate();
        }
      }
      // Nobody was woken: give the request back, then look again if anything we decided on
      // changed meanwhile. While we held the request, other wakers saw `spinning` != 0 and left
      // their work to us: a worker that registered as idle (it re-checked the queues, maybe before
      // an item landed), or a goal raised by blocking_begin or the gate, is theirs to use. The
      // seq_cst give-back and loads order us after their counts change, so we see it. With
      // nothing changed (start_worker failed at max, out of memory, or a blocking injection is
      // delayed to the gate), the request stays given back.
      spinning.fetch_sub(1, std::memory_order_seq_cst);
      if (idle_count.load(std::memory_order_seq_cst) == 0 && counts.load(std::memory_order_seq_cst) == counts_seen) return;
    }
  }

  void note_demand() { kick_gate(); }

  // ---- idle list ----------------------------------------------------------------------------

  worker* pop_idle_within_goal() {
    std::lock_guard g(idle_lock);
    if (idle.empty()) return nullptr;
    const detail::thread_counts c = load_counts(std::memory_order_seq_cst);
    if (c.processing >= c.goal) return nullptr;
    worker* w = idle.back();
    idle.pop_back();
    update_counts([](detail::thread_counts& k) { ++k.processing; });
    publish_idle_count_locked();
    return w;
  }

  void push_idle(worker* w) {
    std::lock_guard g(idle_lock);
    add_idle_locked(w);
  }

  // Parks w as excess if processing > goal (checked under the lock). Returns whether it did.
  bool push_idle_if_excess(worker* w) {
    std::lock_guard g(idle_lock);
    const detail::thread_counts c = load_counts(std::memory_order_seq_cst);
    if (c.processing <= c.goal) return false;
    add_idle_locked(w);
    return true;
  }

  bool remove_idle(worker* w) {
    std::lock_guard g(idle_lock);
    if (!unlink_idle_locked(w)) return false;
    update_counts([](detail::thread_counts& k) { ++k.processing; });
    publish_idle_count_locked();
    return true;
  }

  // Takes w off the idle list for good (idle timeout). Returns false if a waker popped it first.
  bool retire_idle(worker* w) {
    std::lock_guard g(idle_lock);
    if (!unlink_idle_locked(w)) return false;
    publish_idle_count_locked();
    auto [old, next] = update_counts([](detail::thread_counts& k) { --k.existing; });
    (void)old;
    ++retired;
    retire_counts = next;
    return true;
  }

  // The three below run under idle_lock.
  void add_idle_locked(worker* w) {
    idle.push_back(w);
    update_counts([](detail::thread_counts& k) { --k.processing; });
    publish_idle_count_locked();
  }

  // Unlinks w from the idle list; false if a waker popped it first.
  bool unlink_idle_locked(worker* w) {
    auto it = std::find(idle.begin(), idle.end(), w);
    if (it == idle.end()) return false;
    idle.erase(it);
    return true;
  }

  void publish_idle_count_locked() {
    // seq_cst: read by producers after their queue fence (the wake protocol).
    idle_count.store(static_cast<int>(idle.size()), std::memory_order_seq_cst);
  }

  // Wakes w, parked on its futex word.
  void signal(worker* w) {
    // relaxed: only the alarm reads it, as "did anything happen".
    handoffs.fetch_add(1, std::memory_order_relaxed);
    // release: the woken worker's acquire load sees everything queued before the wake. An RMW,
    // not a store, so that shutdown's kStop and this bit never overwrite each other.
    w->wake_signal.fetch_or(kWoken, std::memory_order_release);
    detail::futex_wake_one(&w->wake_signal);
  }

  // ---- finding work -------------------------------------------------------------------------

  void* find_work(worker& self) {
    if (void* item = take_next(self)) {
      if (++self.next_streak <= kNextSlotBudget) return item;
      self.next_streak = 0;
      // A chain of hand-offs has had its turn: queue it behind the waiting work, if any waits
      // (relaxed sizes: a hint; an item queued just now gets its turn at the next budget).
      if (self.local.size_approx() == 0 && global.size_approx() == 0 && self.fair.size_approx() == 0)
        return item;
      self.fair.push(item);
    }
    self.next_streak = 0;
    if (void* item = self.local.pop()) return item;
    if (void* item = global.pop()) return item;
    const std::size_t ng = extra_globals.size();
    if (ng != 0) {
      const std::size_t start = self.rng() % ng;
      for (std::size_t k = 0; k < ng; ++k)
        if (void* item = extra_globals[(start + k) % ng]->pop()) return item;
    }
    if (void* item = self.fair.steal()) return item;
    // acquire: pairs with start_worker's release publication of new slots.
    const std::size_t n = slot_count.load(std::memory_order_acquire);
    if (n <= 1) return nullptr;
    const std::size_t start = self.rng() % n;
    // One round over the other workers (from a random one), stealing from one queue of theirs.
    auto steal_round = [&](detail::work_stealing_deque worker::*queue) -> void* {
      for (std::size_t k = 0; k < n; ++k) {
        worker& victim = *slots[(start + k) % n].load(std::memory_order_relaxed);
        if (&victim == &self) continue;
        if (void* item = (victim.*queue).steal()) return item;
      }
      return nullptr;
    };
    if (void* item = steal_round(&worker::local)) return item;
    if (void* item = steal_round(&worker::fair)) return item;
    return take_stale_next(self, n, start);
  }

  // Another worker's slot item, if it has sat there unchanged for kNextSlotGrace (its owner is
  // busy with a long item). Watches one slot at a time; the first call that finds an item there
  // starts the watch.
  void* take_stale_next(worker& self, std::size_t n, std::size_t start) {
    if (self.watch_slot != nullptr) {
      // relaxed: a hint; the CAS below decides.
      void* item = self.watch_slot->load(std::memory_order_relaxed);
      if (item != nullptr && item == self.watch_item) {
        if (clock::now() - self.watch_since < kNextSlotGrace) return nullptr;
        auto* slot = const_cast<std::atomic<void*>*>(self.watch_slot);
        self.watch_slot = nullptr;
        // acquire: pairs with push_next's release exchange (the coroutine's state).
        if (slot->compare_exchange_strong(item, nullptr, std::memory_order_acquire, std::memory_order_relaxed))
          return item;
        return nullptr;
      }
      self.watch_slot = nullptr;
    }
    for (std::size_t k = 0; k < n; ++k) {
      worker& victim = *slots[(start + k) % n].load(std::memory_order_relaxed);
      if (&victim == &self) continue;
      // relaxed: a hint (see above).
      if (void* item = victim.next.load(std::memory_order_relaxed)) {
        self.watch_slot = &victim.next;
        self.watch_item = item;
        self.watch_since = clock::now();
        return nullptr;
      }
    }
    return nullptr;
  }

  // Whether any queue holds an item; with next_slots, any worker's next slot too (a parking
  // worker leaves slot items to their owners, who run them as soon as their item returns; the
  // periodic re-check of a parked worker, the gate and shutdown count them).
  bool any_work_seq_cst(bool next_slots = true) const {
    if (!global.empty_seq_cst()) return true;
    for (const auto& q : extra_globals)
      if (!q->empty_seq_cst()) return true;
    const unsigned n = slot_count.load(std::memory_order_seq_cst);
    for (unsigned i = 0; i < n; ++i) {
      const worker& w = *slots[i].load(std::memory_order_relaxed);
      if (!w.local.empty_seq_cst() || !w.fair.empty_seq_cst()) return true;
      if (next_slots && w.next.load(std::memory_order_seq_cst) != nullptr) return true;
    }
    return false;
  }

  // ---- the worker -------------------------------------------------------------------------

  void run(worker& self, void* item) {
    detail::run_item(to_handle(item));
    detail::reset_context();  // each item starts in the default execution context
    // relaxed: a statistic, written only by this thread.
    self.items_executed.store(self.items_executed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  void stop_spinning_and_maybe_wake() {
    // seq_cst: part of the wake protocol. The last spinner to find work wakes another worker
    // so the rest of a burst does not wait for this item to finish.
    if (spinning.fetch_sub(1, std::memory_order_seq_cst) == 1 && any_work_seq_cst(/*next_slots=*/false))
      wake_one_if_needed();
  }

  void worker_main(worker& self, bool is_spinning) {
#if defined(__linux__)
    std::string name = options.thread_name.substr(0, 10) + "-" + std::to_string(self.index);
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
#endif
    t_context = thread_context{this, &self};
    detail::current_scheduler_tls() = owner;
    for (;;) {
      void* item = find_work(self);
      if (item == nullptr && !is_spinning && may_start_spinning()) {
        spinning.fetch_add(1, std::memory_order_seq_cst);
        is_spinning = true;
      }
      if (item == nullptr && is_spinning) item = spin_for_work(self);
      if (item != nullptr) {
        if (is_spinning) {
          is_spinning = false;
          stop_spinning_and_maybe_wake();
        }
        run(self, item);
        // relaxed pre-check; push_idle_if_excess re-checks under the lock.
        const detail::thread_counts c = load_counts();
        if (TPL_UNLIKELY(c.processing > c.goal)) {
          // The excess park does not look at the queues again: the goal's workers stay processing
          // and each looks at every queue before it parks. So the slot item goes to the deque
          // first, while this worker still counts as processing: a worker that parks after our
          // registration (idle_lock orders it after us) sees it.
          flush_next(self);
          if (push_idle_if_excess(&self)) {
            const park_result r = wait_parked(self);
            if (r == park_result::retired || r == park_result::stopping) break;
            is_spinning = r == park_result::woken;
          }
        }
        continue;
      }
      // acquire: see everything queued before shutdown() set the flag.
      if (stopping.load(std::memory_order_acquire)) {
        if (is_spinning) spinning.fetch_sub(1, std::memory_order_seq_cst);
        break;
      }
      const park_result r = park(self, is_spinning);
      if (r == park_result::retired || r == park_result::stopping) break;
      is_spinning = r == park_result::woken;
    }
    t_context = thread_context{nullptr, nullptr};
    detail::current_scheduler_tls() = nullptr;
    thread_exited(self);
  }

  void thread_exited(worker& self) {
    // release: the next thread on this slot sees everything this one wrote to it.
    self.alive.store(false, std::memory_order_release);
    std::lock_guard g(live_lock);
    if (--live_threads == 0) live_cv.notify_all();
    // No access to *this after the lock is released: shutdown() may free it.
  }

  bool may_start_spinning() const {
    // Like Go: at most half of the busy workers search at once, so spinning never eats the CPU
    // that running work needs. relaxed: a heuristic.
    const int busy = static_cast<int>(load_counts().processing);
    return 2 * spinning.load(std::memory_order_relaxed) < std::max(busy, 1);
  }

  void* spin_for_work(worker& self) {
    auto deadline = clock::now() + kSpinBeforeParkUs;
    bool extended = false;
    for (unsigned i = 0;; ++i) {
      for (int k = 0; k < 16; ++k) TPL_CPU_RELAX();
      if (void* item = find_work(self)) return item;
      // acquire: pairs with shutdown()'s release store.
      if (stopping.load(std::memory_order_acquire)) return nullptr;
      if ((i & 7) != 7) continue;
      const auto now = clock::now();
      if (now < deadline) continue;
      // Watching another worker's slot item: stay, once, until it is due, so that an item whose
      // owner went on with a long item is taken now rather than at a parked worker's re-check
      // (parking does not count slot items: their owners run them).
      if (!extended && self.watch_slot != nullptr) {
        extended = true;
        deadline = self.watch_since + 2 * kNextSlotGrace;
        if (now < deadline) continue;
      }
      return nullptr;
    }
  }

  /// Parks until woken, work appears, the idle timeout retires the thread, or shutdown.
  park_result park(worker& self, bool was_spinning) {
    push_idle(&self);
    if (was_spinning) spinning.fetch_sub(1, std::memory_order_seq_cst);
    // seq_cst fence: the worker's side of the Dekker handshake with after_push().
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (any_work_seq_cst(/*next_slots=*/false) || stopping.load(std::memory_order_seq_cst)) {
      if (remove_idle(&self)) return park_result::found_work;
      // A producer already popped us and counted us as spinning: take its signal.
    }
    return wait_parked(self);
  }

  /// The waiting half of park (also used by the excess park, which does not re-check the queues).
  /// Ends when a waker signals, at shutdown, or at the idle timeout (retired). With the alarm on,
  /// the worker also looks at the queues every kParkAlarmPeriodMs; see stranded_work_seen().
  park_result wait_parked(worker& self) {
    const auto retire_at = clock::now() + options.idle_timeout;
    bool stranded_before = false;
    std::uint64_t handoffs_before = 0;
    for (;;) {
      // acquire: pairs with the waker's release RMW (and shutdown's).
      const std::uint32_t sig = self.wake_signal.load(std::memory_order_acquire);
      if (sig & kWoken) break;
      if (sig & kStop) {
        if (remove_idle(&self)) return park_result::stopping;
        // A waker popped us first: its kWoken is on the way; take it (and its request) as usual.
        detail::futex_wait(&self.wake_signal, sig);
        continue;
      }
      const auto now = clock::now();
      const auto until = park_alarm ? std::min(now + kParkAlarmPeriodMs, retire_at) : retire_at;
      if (detail::futex_wait_until(&self.wake_signal, 0, until)) continue;
      if (self.wake_signal.load(std::memory_order_acquire) != 0) continue;
      if (park_alarm) {
        // relaxed: compared with the value one period earlier; any hand-off in between means the
        // protocol is moving, and the next look decides again.
        const std::uint64_t handoffs_now = handoffs.load(std::memory_order_relaxed);
        const bool stranded = stranded_work_seen();
        if (stranded && stranded_before && handoffs_now == handoffs_before && remove_idle(&self)) {
          // relaxed: a statistic.
          wakeups_by_park_timeout.fetch_add(1, std::memory_order_relaxed);
          std::fprintf(stderr, "tpl: thread_pool: a parked worker found work nobody was woken for (lost wake-up)\n");
          return park_result::found_work;
        }
        stranded_before = stranded;
        handoffs_before = handoffs_now;
      }
      if (clock::now() >= retire_at) {
        std::unique_lock g(threads_lock);  // retire_counts is written under it
        if (retire_idle(&self)) {
          const detail::thread_counts rc = retire_counts;
          g.unlock();
          emit(thread_pool_event_kind::thread_retired, thread_pool_reason::idle_timeout, rc);
          return park_result::retired;
        }
      }
      // No work, or a waker popped us meanwhile (its signal is on the way): keep waiting.
    }
    // relaxed: only this thread consumes kWoken; a kStop set meanwhile stays (the worker sees
    // `stopping` before it parks again).
    self.wake_signal.fetch_and(~kWoken, std::memory_order_relaxed);
    return park_result::woken;
  }

  // The alarm's condition: an item in a queue (next slots are their owners' to run), a worker
  // allowed to take it (processing < goal), and nobody searching. A producer between its queue
  // store and its wake-up sees the same picture for a few instructions, so one look proves
  // nothing; two looks a period apart with no hand-off between them mean nobody is coming.
  bool stranded_work_seen() const {
    const detail::thread_counts c = load_counts(std::memory_order_seq_cst);
    return c.processing < c.goal && spinning.load(std::memory_order_seq_cst) == 0 &&
           any_work_seq_cst(/*next_slots=*/false);
  }

  // ---- blocking ------------------------------------------------------------------------------

  void blocking_begin() {
    // The item woken last must not wait for this thread to unblock (it may be what it waits for):
    // it goes to the deque, and the wake-up below covers it like any queued work.
    if (t_context.pool == this) flush_next(*t_context.self);
    // relaxed: the goal update below is the synchronising step (a CAS on counts).
    blocked_threads.fetch_add(1, std::memory_order_relaxed);
    const bool eager = options.injection == injection_policy::eager;
    if (options.cooperative_blocking || eager) update_goal(eager ? thread_pool_reason::eager : thread_pool_reason::blocking);
    // Work that was waiting for this thread (or that it just flushed) needs another one now: the
    // queue-then-fence-then-look half of the wake protocol, whatever the policy. Without
    // cooperative blocking the goal did not move, so this wakes an idle worker only below the
    // goal; above it, the starvation gate is the policy.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!any_work_seq_cst(/*next_slots=*/false)) return;
    if (eager && idle_count.load(std::memory_order_seq_cst) == 0 && spinning.load(std::memory_order_seq_cst) == 0) {
      // Eager: a replacement at once if nobody is free to take it.
      if (start_worker(thread_pool_reason::eager, false)) return;
    }
    wake_one_if_needed();
  }

  void blocking_end() {
    blocked_threads.fetch_sub(1, std::memory_order_relaxed);
    if (options.cooperative_blocking || options.injection == injection_policy::eager)
      update_goal(thread_pool_reason::unblocked);
  }

  // ---- the gate thread --------------------------------------------------------------------------

  void kick_gate() {
    // seq_cst: pairs with the gate's store of gate_idle and its re-check of the counts and queues
    // (Dekker): either we see it idle and wake it, or it sees our state change and stays awake.
    if (!gate_idle.load(std::memory_order_seq_cst)) return;
    std::lock_guard g(gate_lock);
    gate_kicked = true;
    gate_cv.notify_one();
  }

  // Wakes the gate whatever it is doing (it re-plans its next wake-up).
  void wake_gate() {
    std::lock_guard g(gate_lock);
    gate_kicked = true;
    gate_cv.notify_one();
  }

  void gate_main() {
#if defined(__linux__)
    pthread_setname_np(pthread_self(), "tpl-pool-gate");
#endif
    const auto period = options.injection == injection_policy::eager ? kEagerStarvationPeriod : kStarvationPeriod;
    detail::starvation_detector starvation(period, options.injection == injection_policy::eager ? 2.0 : 0.8);
    detail::cpu_meter cpu;
    double cpu_now = cpu.sample();
    auto now = clock::now();
    auto next_starvation = now + period;
    auto next_hc = now + std::chrono::milliseconds(hc_sample_ms.load(std::memory_order_relaxed));
    auto next_blocking = now;
    auto hc_last = now;
    std::uint64_t hc_completions = items_completed();
    std::unique_lock lk(gate_lock);
    for (;;) {
      // relaxed: re-read every loop.
      if (stopping.load(std::memory_order_relaxed)) break;
      const detail::thread_counts c = load_counts(std::memory_order_seq_cst);
      const bool active = c.processing > 0 || blocked_threads.load(std::memory_order_relaxed) > 0 ||
                          pending_blocking_injection.load(std::memory_order_relaxed) || any_work_seq_cst();
      if (!active) {
        gate_idle.store(true, std::memory_order_seq_cst);
        // seq_cst: re-check after announcing idleness (a kicker that read gate_idle == false
        // before our store made its state visible before that read).
        if (load_counts(std::memory_order_seq_cst).processing == 0 && !any_work_seq_cst()) {
          gate_cv.wait(lk, [&] { return gate_kicked || stopping.load(std::memory_order_relaxed); });
        }
        gate_kicked = false;
        gate_idle.store(false, std::memory_order_relaxed);
        now = clock::now();
        next_starvation = now + period;
        next_hc = now + std::chrono::milliseconds(hc_sample_ms.load(std::memory_order_relaxed));
        hc_last = now;
        hc_completions = items_completed();
        continue;
      }
      auto wake = next_starvation;
      if (options.hill_climbing && options.injection == injection_policy::adaptive) wake = std::min(wake, next_hc);
      if (pending_blocking_injection.load(std::memory_order_relaxed)) wake = std::min(wake, next_blocking);
      gate_cv.wait_until(lk, wake, [&] { return gate_kicked || stopping.load(std::memory_order_relaxed); });
      gate_kicked = false;
      if (stopping.load(std::memory_order_relaxed)) break;
      lk.unlock();
      now = clock::now();

      if (pending_blocking_injection.load(std::memory_order_relaxed) && now >= next_blocking) {
        pending_blocking_injection.store(false, std::memory_order_relaxed);
        const detail::thread_counts k = load_counts(std::memory_order_seq_cst);
        if (k.processing < k.goal && any_work_seq_cst() && idle_count.load(std::memory_order_seq_cst) == 0) {
          start_worker(thread_pool_reason::blocking, false);
          const detail::thread_counts after = load_counts();
          next_blocking = now + detail::blocking_injection_delay(after.existing, min_threads.load(std::memory_order_relaxed), cores);
          // More blocked threads than threads: keep injecting at the delay.
          if (after.processing < after.goal && any_work_seq_cst())
            pending_blocking_injection.store(true, std::memory_order_relaxed);
        }
      }

      if (now >= next_starvation) {
        cpu_now = cpu.sample();
        next_starvation = now + period;
        if (starvation.tick(now, items_completed(), any_work_seq_cst(), cpu_now, load_counts().goal))
          inject_for_starvation();
      }

      if (options.hill_climbing && options.injection == injection_policy::adaptive && now >= next_hc) {
        const std::uint64_t done = items_completed();
        const double seconds = std::chrono::duration<double>(now - hc_last).count();
        if (done != hc_completions && seconds > 0) {
          cpu_now = cpu.sample();
          climb(seconds, done - hc_completions, cpu_now);
        }
        hc_completions = done;
        hc_last = now;
        next_hc = now + std::chrono::milliseconds(std::max(1u, hc_sample_ms.load(std::memory_order_relaxed)));
      }
      lk.lock();
    }
  }

  std::uint64_t items_completed() const {
    std::uint64_t sum = 0;
    // acquire: see every published slot.
    const unsigned n = slot_count.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; ++i) sum += slots[i].load(std::memory_order_relaxed)->items_executed.load(std::memory_order_relaxed);
    return sum;
  }

  void inject_for_starvation() {
    const unsigned max = max_threads.load(std::memory_order_relaxed);
    const detail::thread_counts c = load_counts(std::memory_order_seq_cst);
    if (c.existing >= max) return;
    {
      std::lock_guard g(hc_lock);
      // The new base: one above what is processing now (at least one above the old base).
      const unsigned b = std::min(max, std::max(base_goal.load(std::memory_order_relaxed), static_cast<unsigned>(c.processing)) + 1);
      base_goal.store(b, std::memory_order_relaxed);
      hc.force_change(b, hill_climbing_state::starvation);
      hc_state.store(hc.state(), std::memory_order_relaxed);
    }
    update_goal(thread_pool_reason::starvation);
    // An idle thread (above the old goal) counts; otherwise a new one.
    if (worker* w = pop_idle_within_goal()) {
      spinning.fetch_add(1, std::memory_order_seq_cst);
      signal(w);
      ++injected_starvation;
      return;
    }
    start_worker(thread_pool_reason::starvation, false);
  }

  void climb(double seconds, std::uint64_t completions, double cpu) {
    unsigned target;
    {
      std::lock_guard g(hc_lock);
      const unsigned current = base_goal.load(std::memory_order_relaxed);
      const auto r = hc.update(current, seconds, completions, cpu);
      target = r.new_thread_count;
      hc_sample_ms.store(r.new_sample_ms, std::memory_order_relaxed);
      hc_state.store(hc.state(), std::memory_order_relaxed);
      hc_control.store(hc.control_setting(), std::memory_order_relaxed);
      if (target == current) return;
      base_goal.store(target, std::memory_order_relaxed);
    }
    update_goal(thread_pool_reason::hill_climbing);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const detail::thread_counts c = load_counts(std::memory_order_seq_cst);
    if (c.processing < c.goal && any_work_seq_cst() && idle_count.load(std::memory_order_seq_cst) == 0 &&
        spinning.load(std::memory_order_seq_cst) == 0)
      start_worker(thread_pool_reason::hill_climbing, false);
    else if (c.processing < c.goal && any_work_seq_cst())
      wake_one_if_needed();
  }

  // ---- configuration ----------------------------------------------------------------------------

  bool set_limits(unsigned min, unsigned max) {
    if (min == 0 || max == 0 || min > detail::kMaxPoolThreads || max > detail::kMaxPoolThreads || min > max) return false;
    {
      std::lock_guard g(hc_lock);
      min_threads.store(min, std::memory_order_relaxed);
      max_threads.store(max, std::memory_order_relaxed);
      const unsigned b = std::clamp(base_goal.load(std::memory_order_relaxed), min, max);
      base_goal.store(b, std::memory_order_relaxed);
      hc.set_limits(min, max);
    }
    update_goal(thread_pool_reason::configuration);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (any_work_seq_cst()) wake_one_if_needed();
    return true;
  }

  // ---- shutdown -----------------------------------------------------------------------------

  void shutdown() {
    std::lock_guard g(shutdown_lock);
    if (joined) return;
    if (t_context.pool == this)
      throw std::logic_error("thread_pool::shutdown() called from one of the pool's own threads");
    {
      std::lock_guard tl(threads_lock);  // no thread starts after this
      // release: workers that see `stopping` see everything queued before it.
      stopping.store(true, std::memory_order_seq_cst);
    }
    {
      std::lock_guard gl(gate_lock);
      gate_cv.notify_all();
    }
    gate.join();
    const unsigned n = slot_count.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; ++i) {
      worker* w = slots[i].load(std::memory_order_relaxed);
      // release: a parked worker that sees kStop sees `stopping` (set above) too.
      w->wake_signal.fetch_or(kStop, std::memory_order_release);
      detail::futex_wake_one(&w->wake_signal);
    }
    {
      std::unique_lock lk(live_lock);
      live_cv.wait(lk, [&] { return live_threads == 0; });
    }
    joined = true;
    // From here on, anything queued (by a straggling external thread) runs on the queuing thread.
    stopped.store(true, std::memory_order_seq_cst);
    drain_inline();
    // Let schedule calls from other threads that are still inside the pool leave it; one that
    // pushed before seeing `stopped` may have left an item, so drain once more afterwards.
    // acquire: pairs with push_from_outside's release decrement.
    while (pushes_in_flight.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    drain_inline();
  }

  void drain_inline() {
    for (;;) {
      void* item = global.pop();
      for (std::size_t i = 0; item == nullptr && i < extra_globals.size(); ++i) item = extra_globals[i]->pop();
      if (item == nullptr) {
        const unsigned n = slot_count.load(std::memory_order_acquire);
        for (unsigned i = 0; i < n; ++i) {
          // The workers are gone: their deques are only stolen from now.
          worker& w = *slots[i].load(std::memory_order_relaxed);
          if ((item = w.next.exchange(nullptr, std::memory_order_acquire)) != nullptr ||
              (item = w.local.steal()) != nullptr || (item = w.fair.steal()) != nullptr)
            break;
        }
      }
      if (item == nullptr) {
        if (any_work_seq_cst()) continue;  // lost a steal race
        return;
      }
      detail::run_item(to_handle(item));
    }
  }

  ~impl() {
    const unsigned n = slot_count.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; ++i) delete slots[i].load(std::memory_order_relaxed);
  }

  thread_pool_stats stats() const {
    thread_pool_stats s;
    // relaxed throughout: a snapshot for display, not a consistent cut.
    const detail::thread_counts c = load_counts();
    s.thread_count = c.existing;
    s.processing_threads = c.processing;
    s.goal = c.goal;
    s.min_threads = min_threads.load(std::memory_order_relaxed);
    s.max_threads = max_threads.load(std::memory_order_relaxed);
    s.idle_threads = static_cast<unsigned>(idle_count.load(std::memory_order_relaxed));
    s.spinning_threads = static_cast<unsigned>(spinning.load(std::memory_order_relaxed));
    s.global_queue_length = global.size_approx();
    for (const auto& q : extra_globals) s.global_queue_length += q->size_approx();
    const unsigned n = slot_count.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; ++i) {
      const worker* w = slots[i].load(std::memory_order_relaxed);
      s.local_queue_length += static_cast<std::size_t>(w->local.size_approx() + w->fair.size_approx());
      if (w->next.load(std::memory_order_relaxed) != nullptr) ++s.local_queue_length;
      s.items_executed += w->items_executed.load(std::memory_order_relaxed);
    }
    s.wakeups = wakeups.load(std::memory_order_relaxed);
    s.wakeups_by_park_timeout = wakeups_by_park_timeout.load(std::memory_order_relaxed);
    s.blocked_threads = blocked_threads.load(std::memory_order_relaxed);
    s.threads_injected_by_starvation = injected_starvation.load(std::memory_order_relaxed);
    s.threads_injected_by_blocking = injected_blocking.load(std::memory_order_relaxed);
    s.threads_injected_by_hill_climbing = injected_hill_climbing.load(std::memory_order_relaxed);
    s.threads_injected_by_eager = injected_eager.load(std::memory_order_relaxed);
    s.threads_injected_by_demand = injected_demand.load(std::memory_order_relaxed);
    s.threads_retired = retired.load(std::memory_order_relaxed);
    s.hill_climbing = hc_state.load(std::memory_order_relaxed);
    s.hill_climbing_control_setting = hc_control.load(std::memory_order_relaxed);
    s.hill_climbing_sample_ms = hc_sample_ms.load(std::memory_order_relaxed);
    s.extra_global_queues = static_cast<unsigned>(extra_globals.size());
    return s;
  }

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
  std::atomic<int> pushes_in_flight{0};
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
  std::mutex listener_lock;
  std::shared_ptr<const std::function<void(const thread_pool_event&)>> listener;
  std::mutex shutdown_lock;
  bool joined = false;
};

thread_pool::thread_pool(thread_pool_options options) : impl_(std::make_unique<impl>(this, std::move(options))) {}

thread_pool::~thread_pool() {
  try {
    impl_->shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tpl: thread_pool destroyed from its own thread: %s\n", e.what());
    std::abort();
  }
}

thread_pool& thread_pool::default_pool() {
  // Never destroyed: work may still be running when static destructors run.
  static thread_pool* pool = new thread_pool(thread_pool_options::from_environment());
  return *pool;
}

thread_pool* thread_pool::current() noexcept {
  impl* p = impl::t_context.pool;
  return p != nullptr ? p->owner : nullptr;
}

void thread_pool::schedule(std::coroutine_handle<> h) { impl_->push(h.address()); }
void thread_pool::schedule_after_others(std::coroutine_handle<> h) { impl_->push_global(h.address()); }
unsigned thread_pool::thread_count() const noexcept { return impl_->load_counts().existing; }
thread_pool_stats thread_pool::stats() const noexcept { return impl_->stats(); }
void thread_pool::shutdown() { impl_->shutdown(); }

bool thread_pool::set_min_threads(unsigned n) { return impl_->set_limits(n, max_threads()); }
bool thread_pool::set_max_threads(unsigned n) { return impl_->set_limits(min_threads(), n); }
unsigned thread_pool::min_threads() const noexcept { return impl_->min_threads.load(std::memory_order_relaxed); }
unsigned thread_pool::max_threads() const noexcept { return impl_->max_threads.load(std::memory_order_relaxed); }

void thread_pool::set_event_listener(std::function<void(const thread_pool_event&)> l) {
  std::shared_ptr<const std::function<void(const thread_pool_event&)>> p;
  if (l) p = std::make_shared<const std::function<void(const thread_pool_event&)>>(std::move(l));
  std::lock_guard g(impl_->listener_lock);
  // relaxed: emit() re-reads the pointer under the lock.
  impl_->has_listener.store(p != nullptr, std::memory_order_relaxed);
  impl_->listener = std::move(p);
}

void thread_pool::set_trace(bool on) {
  // relaxed: a switch, read on each event.
  impl_->trace.store(on, std::memory_order_relaxed);
}

bool thread_pool::try_run_inline(std::coroutine_handle<> h) {
  impl::thread_context& ctx = impl::t_context;
  if (ctx.pool != impl_.get() || !h) return false;
  if (ctx.self->next.load(std::memory_order_relaxed) == h.address()) {
    // acquire: a thief may have taken it meanwhile; the exchange decides.
    void* item = ctx.self->next.exchange(nullptr, std::memory_order_acquire);
    if (item == h.address()) {
      detail::resume_inline(h);
      return true;
    }
    if (item != nullptr) ctx.self->local.push(item);  // cannot happen (only we fill it); keep it anyway
    return false;
  }
  void* top = ctx.self->local.pop();
  if (top == nullptr) return false;
  if (top != h.address()) {
    ctx.self->local.push(top);  // not ours: put it back where it was (the owner's end)
    return false;
  }
  detail::resume_inline(h);
  return true;
}

blocking_scope::blocking_scope(const char* what) : pool_(nullptr) {
  thread_pool::impl* p = thread_pool::impl::t_context.pool;
  if (p == nullptr) {
    if (scheduler* s = scheduler::current()) s->on_blocking_call(what);
    return;
  }
  pool_ = p;
  p->blocking_begin();
}

blocking_scope::~blocking_scope() {
  if (pool_ != nullptr) static_cast<thread_pool::impl*>(pool_)->blocking_end();
}

namespace detail {

void dispatch(std::coroutine_handle<> h) {
  scheduler* s = current_scheduler_tls();
  if (s != nullptr)
    s->schedule(h);
  else
    thread_pool::default_pool().schedule(h);
}

void dispatch_wakeup(std::coroutine_handle<> h) {
  scheduler* s = current_scheduler_tls();
  thread_pool::impl::thread_context& ctx = thread_pool::impl::t_context;
  if (ctx.pool != nullptr && s == ctx.pool->owner) {
    ctx.pool->push_next(*ctx.self, h.address());
    return;
  }
  dispatch(h);
}

void before_blocking_wait() noexcept {
  thread_pool::impl::thread_context& ctx = thread_pool::impl::t_context;
  if (ctx.pool != nullptr) ctx.pool->before_blocking_wait(*ctx.self);
}

void dispatch_after_others(std::coroutine_handle<> h) {
  scheduler* s = current_scheduler_tls();
  if (s != nullptr)
    s->schedule_after_others(h);
  else
    thread_pool::default_pool().schedule_after_others(h);
}

}  // namespace detail

inline_scheduler& inline_scheduler::instance() noexcept {
  static inline_scheduler s;
  return s;
}

}  // namespace tpl
