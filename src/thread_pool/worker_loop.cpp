// A pool worker's loop and its queues (see pool_impl.hpp for the file map).
//
// Where a worker looks for work, in order: its next slot (the coroutine its last item woke; at
// most kNextSlotBudget in a row while other work waits), its deque (LIFO), the global queue(s),
// its yield queue, other workers' deques and yield queues (one round from a random victim), and
// another worker's next slot that has sat unchanged for kNextSlotGrace. Invariants kept here:
//   - Only the owner fills its next slot and pushes to its deque and yield queue.
//   - A push to a deque, a yield queue or a global queue is followed by after_push(): the
//     producer's half of the wake protocol (wake_protocol.cpp).
//   - The owner moves its slot item to its deque before it blocks (before_blocking_wait,
//     blocking_begin) and before it parks as excess, so a slot item never waits for a thread
//     that is not running.
//   - After shutdown, drain_inline runs whatever is left, next slots included, on the caller.
#include <coroutine>
#include <cstddef>

#include "io_hooks.hpp"
#include "pool_impl.hpp"
#include "tpl/detail/futex.hpp"
#include "tpl/detail/trampoline.hpp"

namespace tpl {

using namespace pool_detail;

void thread_pool::impl::push(void* item) {
  thread_context& ctx = t_context;
  if (ctx.pool == this) {
    ctx.self->local.push(item);
    after_push();
  } else {
    push_from_outside(item, global);
  }
}

// A coroutine the running item of self (the calling worker) woke (see worker::next).
void thread_pool::impl::push_next(worker& self, void* item) {
  // release: whoever takes the item (the owner's exchange, a thief's acquire CAS) sees the
  // coroutine's state as it was when it was queued. The old occupant was put there by this
  // thread, so reading it needs no acquire.
  if (void* old = self.next.exchange(item, std::memory_order_release)) {
    self.local.push(old);
    after_push();  // the deque's item: the full wake protocol
    return;
  }
  // The slot's item is ours to run next (find_work takes it first, and before this worker blocks
  // or parks as excess it moves the item to its deque with the wake protocol): no other worker
  // needs waking for it. A spinner may still rescue it from an owner that runs a long item, so
  // when none is spinning the usual wake protocol makes one; when one is (relaxed: a hint), a
  // chain of hand-offs, which keeps a spinner busy watching, skips the fence.
  if (spinning.load(std::memory_order_relaxed) != 0) return;
  // Otherwise the usual wake protocol: a spinning worker exists afterwards (if any is idle), so
  // an item left here by an owner that then runs long is taken after the grace period.
  after_push();
}

// Moves the calling worker's slot item to its deque, where any worker may steal it at once
// (before it blocks or parks while others may need the item). Returns whether it moved one.
bool thread_pool::impl::flush_next(worker& self) {
  void* item = take_next(self);
  if (item == nullptr) return false;
  self.local.push(item);
  return true;
}

// Before the calling worker blocks (a wait of tpl's, inside or outside a blocking_scope): its
// slot item goes to its deque with the full wake protocol, so an idle worker takes it while
// this one waits (the item may be what it waits for).
void thread_pool::impl::before_blocking_wait(worker& self) {
  if (flush_next(self)) after_push();
  detail::run_worker_blocking_hook();
}

void thread_pool::impl::push_global(void* item) {
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
detail::global_queue& thread_pool::impl::queue_for_outside() {
  if (extra_globals.empty()) return global;
  static thread_local const std::size_t t_hash = std::hash<std::thread::id>{}(std::this_thread::get_id());
  const std::size_t k = t_hash % (extra_globals.size() + 1);
  return k == 0 ? global : *extra_globals[k - 1];
}

// A thread outside the pool may still be inside push/after_push when the item it queued has
// already run and its owner destroys the pool; shutdown() waits for such calls to leave.
void thread_pool::impl::push_from_outside(void* item, detail::global_queue& q) {
  // relaxed increment: shutdown() only needs to see it before the item can have run, which
  // the queue's own synchronisation (the push below) guarantees.
  pushes_in_flight.fetch_add(1, std::memory_order_relaxed);
  // The call leaves the count on every path, also when q.push throws std::bad_alloc (a full queue
  // that cannot grow: nothing was queued). A count left behind made shutdown(), and so the pool's
  // destructor, wait forever (found by tests/alloc_failure_test.cpp, queue_growth).
  struct leave_guard {
    std::atomic<std::uint32_t>& in_flight;
    ~leave_guard() {
      // release: everything this call read from the pool happens before shutdown() frees it.
      // Nothing here touches the pool after the decrement but the futex wake, a system call on
      // the address (harmless if the memory is already gone: it can only wake a waiter
      // spuriously).
      if (in_flight.fetch_sub(1, std::memory_order_release) == (kShutdownWaiting | 1))
        detail::futex_wake_all(&in_flight);
    }
  } leave{pushes_in_flight};
  q.push(item);
  after_push();
}

void* thread_pool::impl::find_work(worker& self) {
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
void* thread_pool::impl::take_stale_next(worker& self, std::size_t n, std::size_t start) {
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

void thread_pool::impl::run_queued(void* item) noexcept {
  if (TPL_UNLIKELY(is_fork_job(item)))
    run_fork_job(item);
  else
    detail::run_item(to_handle(item));
}

void thread_pool::impl::run(worker& self, void* item) {
  run_queued(item);
  detail::reset_context();  // each item starts in the default execution context
  // relaxed: a statistic, written only by this thread.
  self.items_executed.store(self.items_executed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void thread_pool::impl::worker_main(worker& self, bool is_spinning) {
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

void thread_pool::impl::drain_inline() {
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
    run_queued(item);
  }
}

void thread_pool::schedule(std::coroutine_handle<> h) { impl_->push(h.address()); }
void thread_pool::schedule_after_others(std::coroutine_handle<> h) { impl_->push_global(h.address()); }

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

namespace {
std::atomic<worker_blocking_hook> g_worker_blocking_hook{nullptr};
}  // namespace

void set_worker_blocking_hook(worker_blocking_hook hook) noexcept {
  // release: the hook's own state (the engines it reaches) is published with it.
  g_worker_blocking_hook.store(hook, std::memory_order_release);
}

void run_worker_blocking_hook() noexcept {
  // acquire: pairs with the release store above.
  if (worker_blocking_hook hook = g_worker_blocking_hook.load(std::memory_order_acquire)) hook();
}

bool current_worker_has_queued_work() noexcept {
  thread_pool::impl::thread_context& ctx = thread_pool::impl::t_context;
  if (ctx.pool == nullptr) return false;
  // relaxed: hints (the file header of io_hooks.hpp); the worker's loop looks again properly.
  return ctx.self->next.load(std::memory_order_relaxed) != nullptr || ctx.self->local.size_approx() > 0 ||
         ctx.pool->global.size_approx() != 0;
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

namespace {
// Constant-initialized: instance() is an address, with no guard to test on every call (the start
// guard's deferral asks for it on every spawn).
constinit inline_scheduler g_inline_scheduler;
}  // namespace

inline_scheduler& inline_scheduler::instance() noexcept { return g_inline_scheduler; }

}  // namespace tpl
