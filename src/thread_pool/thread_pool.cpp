// The thread pool mechanism: workers, their queues, how an idle worker parks and how queued work
// wakes one.
//
// Waking protocol (the scheme of Go's scheduler, which is the "one outstanding thread request" of
// .NET's PortableThreadPool with the request counted as a spinning worker):
//   - `spinning_` counts workers that are searching for work, including one just woken for it.
//   - After queuing, a producer wakes a parked worker only if some worker is parked and none is
//     spinning; it claims the request by moving spinning_ from 0 to 1 (so a burst of items wakes
//     one worker, not one per item).
//   - A spinning worker that finds work stops spinning; if it was the last spinner, it wakes one
//     more worker so that the rest of a burst is picked up in parallel.
//   - A worker parks in this order: register as idle, stop spinning, full fence, look at every
//     queue once more. A producer does: queue, full fence, look at idle/spinning. Whatever the
//     interleaving, either the producer sees the idle worker (and wakes it) or the worker sees
//     the item. No queued item is ever left with no worker coming.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#endif

#include "global_queue.hpp"
#include "tpl/detail/futex.hpp"
#include "tpl/detail/trampoline.hpp"
#include "tpl/thread_pool.hpp"
#include "work_stealing_deque.hpp"

namespace tpl {

namespace {

// How long an idle worker keeps looking for work before it parks. A park/unpark round trip costs
// 18-30 us on the VMs we measure on, so spinning for about that long pays for itself.
constexpr std::chrono::microseconds kSpinBeforeParkUs{50};

// A parked worker looks at the queues again after this long even if nobody woke it: a safety net
// (the role .NET's gate thread plays) so that a missed wake-up costs at most this much latency
// instead of a hang. Every rescue is counted in stats().wakeups_by_park_timeout: the handshake
// above should make it stay 0, and a non-zero count is a bug report.
constexpr std::chrono::milliseconds kParkRecheckMs{100};

std::coroutine_handle<> to_handle(void* p) noexcept { return std::coroutine_handle<>::from_address(p); }

}  // namespace

struct thread_pool::impl {
  struct worker {
    explicit worker(impl* p, unsigned i) : pool(p), index(i), rng(0x9E3779B9u * (i + 1)) {}
    impl* pool;
    unsigned index;
    detail::work_stealing_deque local;
    // 0: parked or running; 1: woken (set by the waker, consumed by the worker). Futex word.
    std::atomic<std::uint32_t> wake_signal{0};
    // Written only by the owner; relaxed atomics so stats() may read them.
    std::atomic<std::uint64_t> items_executed{0};
    std::minstd_rand rng;
    std::thread thread;
  };

  struct thread_context {
    impl* pool;
    worker* self;
  };
  static inline thread_local thread_context t_context{nullptr, nullptr};

  explicit impl(thread_pool* owner, thread_pool_options opts) : owner(owner), options(std::move(opts)) {
    unsigned n = options.thread_count;
    if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
    if (n > 32767) throw std::invalid_argument("thread_pool: thread_count above 32767");
    workers.reserve(n);
    idle.reserve(n);  // parking never allocates
    for (unsigned i = 0; i < n; ++i) workers.push_back(std::make_unique<worker>(this, i));
    for (auto& w : workers) w->thread = std::thread([this, wp = w.get()] { worker_main(*wp); });
  }

  // ---- queuing ----------------------------------------------------------------------------

  void push(void* item) {
    thread_context& ctx = t_context;
    if (ctx.pool == this) {
      ctx.self->local.push(item);
      after_push();
    } else {
      push_from_outside(item);
    }
  }

  void push_global(void* item) {
    if (t_context.pool == this) {
      global.push(item);
      after_push();
    } else {
      push_from_outside(item);
    }
  }

  // A thread outside the pool may still be inside push/after_push when the item it queued has
  // already run and its owner destroys the pool; shutdown() waits for such calls to leave.
  // (The pool's own workers need no count: shutdown() joins them.)
  void push_from_outside(void* item) {
    // relaxed increment: shutdown() only needs to see it before the item can have run, which
    // the queue's own synchronisation (the push below) guarantees.
    pushes_in_flight.fetch_add(1, std::memory_order_relaxed);
    global.push(item);
    after_push();
    // release: everything this call read from the pool happens before shutdown() frees it.
    pushes_in_flight.fetch_sub(1, std::memory_order_release);
  }

  void after_push() {
    // seq_cst fence: orders our queue write before reading idle_/spinning_ (see file comment).
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
      // seq_cst: the parking protocol's Dekker handshake.
      if (idle_count.load(std::memory_order_seq_cst) == 0) return;
      int expected = 0;
      if (!spinning.compare_exchange_strong(expected, 1, std::memory_order_seq_cst)) return;
      worker* w = pop_idle();
      if (w != nullptr) {
        wakeups.fetch_add(1, std::memory_order_relaxed);
        // release: the woken worker's acquire load sees everything queued before the wake.
        w->wake_signal.store(1, std::memory_order_release);
        detail::futex_wake_one(&w->wake_signal);
        return;
      }
      // Nobody was parked after all: give the request back, then look again, in case a worker
      // registered as idle after we looked (it will have re-checked the queues, but may have
      // done so before our item landed).
      spinning.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  // ---- idle list ----------------------------------------------------------------------------

  worker* pop_idle() {
    std::lock_guard g(idle_lock);
    if (idle.empty()) return nullptr;
    worker* w = idle.back();
    idle.pop_back();
    idle_count.store(static_cast<int>(idle.size()), std::memory_order_seq_cst);
    return w;
  }

  void push_idle(worker* w) {
    std::lock_guard g(idle_lock);
    idle.push_back(w);
    idle_count.store(static_cast<int>(idle.size()), std::memory_order_seq_cst);
  }

  bool remove_idle(worker* w) {
    std::lock_guard g(idle_lock);
    auto it = std::find(idle.begin(), idle.end(), w);
    if (it == idle.end()) return false;
    idle.erase(it);
    idle_count.store(static_cast<int>(idle.size()), std::memory_order_seq_cst);
    return true;
  }

  // ---- finding work -------------------------------------------------------------------------

  void* find_work(worker& self) {
    if (void* item = self.local.pop()) return item;
    if (void* item = global.pop()) return item;
    const std::size_t n = workers.size();
    if (n > 1) {
      const std::size_t start = self.rng() % n;
      for (std::size_t k = 0; k < n; ++k) {
        worker& victim = *workers[(start + k) % n];
        if (&victim == &self) continue;
        if (void* item = victim.local.steal()) return item;
      }
    }
    return nullptr;
  }

  bool any_work_seq_cst() const {
    if (!global.empty_seq_cst()) return true;
    for (const auto& w : workers)
      if (!w->local.empty_seq_cst()) return true;
    return false;
  }

  // ---- the worker -------------------------------------------------------------------------

  void run(worker& self, void* item) {
    detail::run_item(to_handle(item));
    // relaxed: a statistic, written only by this thread.
    self.items_executed.store(self.items_executed.load(std::memory_order_relaxed) + 1,
                              std::memory_order_relaxed);
  }

  void stop_spinning_and_maybe_wake() {
    // seq_cst: part of the wake protocol. The last spinner to find work wakes another worker
    // so the rest of a burst does not wait for this item to finish.
    if (spinning.fetch_sub(1, std::memory_order_seq_cst) == 1 && any_work_seq_cst()) wake_one_if_needed();
  }

  void worker_main(worker& self) {
#if defined(__linux__)
    std::string name = options.thread_name.substr(0, 10) + "-" + std::to_string(self.index);
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
#endif
    t_context = thread_context{this, &self};
    detail::t_current_scheduler = owner;
    bool is_spinning = false;
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
        continue;
      }
      // acquire: see everything queued before shutdown() set the flag.
      if (stopping.load(std::memory_order_acquire)) {
        if (is_spinning) spinning.fetch_sub(1, std::memory_order_seq_cst);
        break;
      }
      is_spinning = park(self, is_spinning);
    }
    t_context = thread_context{nullptr, nullptr};
    detail::t_current_scheduler = nullptr;
  }

  bool may_start_spinning() const {
    // Like Go: at most half of the busy workers search at once, so spinning never eats the CPU
    // that running work needs. relaxed: a heuristic.
    const int busy = static_cast<int>(workers.size()) - idle_count.load(std::memory_order_relaxed);
    return 2 * spinning.load(std::memory_order_relaxed) < std::max(busy, 1);
  }

  void* spin_for_work(worker& self) {
    const auto deadline = std::chrono::steady_clock::now() + kSpinBeforeParkUs;
    for (unsigned i = 0;; ++i) {
      for (int k = 0; k < 16; ++k) TPL_CPU_RELAX();
      if (void* item = find_work(self)) return item;
      // acquire: pairs with shutdown()'s release store.
      if (stopping.load(std::memory_order_acquire)) return nullptr;
      if ((i & 7) == 7 && std::chrono::steady_clock::now() >= deadline) return nullptr;
    }
  }

  /// Parks until woken. Returns whether the worker is now counted as spinning.
  bool park(worker& self, bool was_spinning) {
    push_idle(&self);
    if (was_spinning) spinning.fetch_sub(1, std::memory_order_seq_cst);
    // seq_cst fence: the worker's side of the Dekker handshake with after_push().
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (any_work_seq_cst() || stopping.load(std::memory_order_seq_cst)) {
      if (remove_idle(&self)) return false;
      // A producer already popped us and counted us as spinning: take its signal.
    }
    // acquire: pairs with the waker's release store.
    while (self.wake_signal.load(std::memory_order_acquire) == 0) {
      if (detail::futex_wait_until(&self.wake_signal, 0,
                                   std::chrono::steady_clock::now() + kParkRecheckMs))
        continue;
      if (self.wake_signal.load(std::memory_order_acquire) != 0) break;
      if ((any_work_seq_cst() || stopping.load(std::memory_order_seq_cst)) && remove_idle(&self)) {
        // relaxed: a statistic.
        if (!stopping.load(std::memory_order_relaxed))
          wakeups_by_park_timeout.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      // No work, or a waker popped us meanwhile (its signal is on the way): keep waiting.
    }
    self.wake_signal.store(0, std::memory_order_relaxed);
    return true;
  }

  // ---- shutdown -----------------------------------------------------------------------------

  void shutdown() {
    std::lock_guard g(shutdown_lock);
    if (joined) return;
    if (t_context.pool == this)
      throw std::logic_error("thread_pool::shutdown() called from one of the pool's own threads");
    // release: workers that see `stopping` see everything queued before it.
    stopping.store(true, std::memory_order_seq_cst);
    for (auto& w : workers) {
      w->wake_signal.store(1, std::memory_order_release);
      detail::futex_wake_one(&w->wake_signal);
    }
    for (auto& w : workers) w->thread.join();
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
      if (item == nullptr) {
        for (auto& w : workers) {
          // The workers are gone: their deques are only stolen from now.
          if ((item = w->local.steal()) != nullptr) break;
        }
      }
      if (item == nullptr) {
        if (any_work_seq_cst()) continue;  // lost a steal race
        return;
      }
      detail::run_item(to_handle(item));
    }
  }

  thread_pool_stats stats() const {
    thread_pool_stats s;
    s.thread_count = static_cast<unsigned>(workers.size());
    // relaxed throughout: a snapshot for display, not a consistent cut.
    s.idle_threads = static_cast<unsigned>(idle_count.load(std::memory_order_relaxed));
    s.spinning_threads = static_cast<unsigned>(spinning.load(std::memory_order_relaxed));
    s.global_queue_length = global.size_approx();
    for (const auto& w : workers) {
      s.local_queue_length += static_cast<std::size_t>(w->local.size_approx());
      s.items_executed += w->items_executed.load(std::memory_order_relaxed);
    }
    s.wakeups = wakeups.load(std::memory_order_relaxed);
    s.wakeups_by_park_timeout = wakeups_by_park_timeout.load(std::memory_order_relaxed);
    s.blocked_threads = blocked_threads.load(std::memory_order_relaxed);
    return s;
  }

  thread_pool* owner;
  thread_pool_options options;
  std::vector<std::unique_ptr<worker>> workers;
  detail::global_queue global;
  alignas(64) std::atomic<int> spinning{0};
  alignas(64) std::atomic<int> idle_count{0};
  std::mutex idle_lock;
  std::vector<worker*> idle;
  std::atomic<bool> stopping{false};
  std::atomic<bool> stopped{false};
  std::atomic<std::uint64_t> wakeups{0};
  std::atomic<std::uint64_t> wakeups_by_park_timeout{0};
  std::atomic<int> pushes_in_flight{0};
  std::atomic<unsigned> blocked_threads{0};
  std::mutex shutdown_lock;
  bool joined = false;
};

thread_pool::thread_pool(thread_pool_options options)
    : impl_(std::make_unique<impl>(this, std::move(options))) {}

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
  static thread_pool* pool = new thread_pool();
  return *pool;
}

thread_pool* thread_pool::current() noexcept {
  impl* p = impl::t_context.pool;
  return p != nullptr ? p->owner : nullptr;
}

void thread_pool::schedule(std::coroutine_handle<> h) { impl_->push(h.address()); }
void thread_pool::schedule_after_others(std::coroutine_handle<> h) { impl_->push_global(h.address()); }
unsigned thread_pool::thread_count() const noexcept { return static_cast<unsigned>(impl_->workers.size()); }
thread_pool_stats thread_pool::stats() const noexcept { return impl_->stats(); }
void thread_pool::shutdown() { impl_->shutdown(); }

namespace detail {

blocking_region::blocking_region() noexcept : pool_(thread_pool::impl::t_context.pool) {
  // relaxed: a statistic today; the injection policy will synchronise through its own state.
  if (pool_ != nullptr)
    static_cast<thread_pool::impl*>(pool_)->blocked_threads.fetch_add(1, std::memory_order_relaxed);
}

blocking_region::~blocking_region() {
  if (pool_ != nullptr)
    static_cast<thread_pool::impl*>(pool_)->blocked_threads.fetch_sub(1, std::memory_order_relaxed);
}

void dispatch(std::coroutine_handle<> h) {
  scheduler* s = t_current_scheduler;
  if (s != nullptr)
    s->schedule(h);
  else
    thread_pool::default_pool().schedule(h);
}

void dispatch_after_others(std::coroutine_handle<> h) {
  scheduler* s = t_current_scheduler;
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
