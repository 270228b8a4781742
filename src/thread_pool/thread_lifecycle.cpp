// Creating, retiring and stopping the pool's threads; thread counts and limits (see pool_impl.hpp
// for the file map).
//
// Thread counts: one 64-bit word (processing, existing, goal), tpl/detail/pool_policy.hpp.
// processing = existing - parked; it changes under idle_lock together with the idle list. The goal
// is goal_for(base_goal, blocked, min, max): base_goal is moved by the starvation gate and hill
// climbing, blocked by blocking_scope. Invariants kept here:
//   - A thread is started only under threads_lock, never once `stopping` is set, and never above
//     max_threads; a failed start (no thread, no memory) leaves the counts as they were.
//   - The gate thread starts before the first worker: if it cannot start, no worker exists.
//   - shutdown() sets `stopping`, joins the gate, asks every parked worker to leave (kStop), waits
//     for every thread to exit, then runs what is left on the calling thread.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <system_error>

#if defined(__linux__)
#include <pthread.h>
#endif

#include "../env_parse.hpp"
#include "pool_impl.hpp"
#include "tpl/detail/futex.hpp"

namespace tpl {

using namespace pool_detail;

thread_pool::impl::impl(thread_pool* owner, thread_pool_options opts)
    : owner(owner),
      options(std::move(opts)),
      cores(hardware_cores()),
      slots(new std::atomic<worker*>[detail::kMaxPoolThreads]),
      hc(1, 1) {
  unsigned max = options.max_threads == 0 ? detail::kMaxPoolThreads : options.max_threads;
  // The default thread count (one per core) yields to an explicit max_threads below it; an
  // explicit thread_count above max_threads is an error.
  unsigned min = options.thread_count == 0 ? std::min(cores, max) : options.thread_count;
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
  if (const char* t = std::getenv("TPL_THREADPOOL_TRACE"); t != nullptr && detail::parse_environment_bool("TPL_THREADPOOL_TRACE", t))
    trace.store(true, std::memory_order_relaxed);
  park_alarm = park_alarm_from_environment();
  // The gate first: if it cannot start, no worker exists yet and the exception leaves nothing
  // running on this object. A worker that cannot start is not an error (start_worker returns
  // false; the gate adds threads later, as after a failed injection).
  gate = std::thread([this] { gate_main(); });
  for (unsigned i = 0; i < min; ++i)
    if (!start_worker(thread_pool_reason::startup, false, /*force=*/true)) break;
}

thread_pool::impl::~impl() {
  const unsigned n = slot_count.load(std::memory_order_acquire);
  for (unsigned i = 0; i < n; ++i) delete slots[i].load(std::memory_order_relaxed);
}

bool thread_pool::impl::park_alarm_from_environment() {
  const char* v = std::getenv("TPL_THREADPOOL_PARK_ALARM");
  return v == nullptr || detail::parse_environment_bool("TPL_THREADPOOL_PARK_ALARM", v);
}

void thread_pool::impl::update_goal(thread_pool_reason why) {
  auto [old, next] = update_counts([&](detail::thread_counts& c) { c.goal = static_cast<std::uint16_t>(compute_goal()); });
  if (old.goal != next.goal) emit(thread_pool_event_kind::goal_changed, why, next, old.goal);
}

/// Starts a worker (it starts spinning if `spinning_token`: the caller hands it its request).
/// Unless `force`, only while processing < goal. Returns false at max or on failure.
bool thread_pool::impl::start_worker(thread_pool_reason why, bool spinning_token, bool force) {
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
  // Counted before the thread starts: whatever it runs may end a caller's wait, and stats() read
  // then must include the injection that ran it (taken back if the thread cannot start). The
  // counters are statistics: the RMWs only need to be atomic, and stats() reads them relaxed.
  std::atomic<std::uint64_t>* injected = nullptr;
  switch (why) {
    case thread_pool_reason::starvation: injected = &injected_starvation; break;
    case thread_pool_reason::blocking: injected = &injected_blocking; break;
    case thread_pool_reason::hill_climbing: injected = &injected_hill_climbing; break;
    case thread_pool_reason::eager: injected = &injected_eager; break;
    case thread_pool_reason::demand: injected = &injected_demand; break;
    default: break;
  }
  if (injected != nullptr) ++*injected;
  try {
    std::thread([this, w, spinning_token] { worker_main(*w, spinning_token); }).detach();
  } catch (const std::exception&) {  // std::system_error (no thread) or std::bad_alloc
    if (injected != nullptr) --*injected;
    update_counts([](detail::thread_counts& k) {
      --k.existing;
      --k.processing;
    });
    w->alive.store(false, std::memory_order_release);
    std::lock_guard lg(live_lock);
    --live_threads;
    return false;
  }
  // relaxed: only the alarm reads it, as "did anything happen".
  handoffs.fetch_add(1, std::memory_order_relaxed);
  g.unlock();
  if (why != thread_pool_reason::startup) emit(thread_pool_event_kind::thread_injected, why, next);
  kick_gate();
  return true;
}

void thread_pool::impl::thread_exited(worker& self) {
  // release: the next thread on this slot sees everything this one wrote to it.
  self.alive.store(false, std::memory_order_release);
  std::lock_guard g(live_lock);
  if (--live_threads == 0) live_cv.notify_all();
  // No access to *this after the lock is released: shutdown() may free it.
}

bool thread_pool::impl::set_limits(unsigned min, unsigned max) {
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

void thread_pool::impl::shutdown() {
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
  // acquire: pairs with push_from_outside's release decrement. The waiting bit and the count
  // share one word, so the last caller to leave sees the bit (its decrement comes after ours in
  // the word's modification order) or we see its decrement: no wake-up can be lost.
  pushes_in_flight.fetch_or(kShutdownWaiting, std::memory_order_acquire);
  for (std::uint32_t n; ((n = pushes_in_flight.load(std::memory_order_acquire)) & ~kShutdownWaiting) != 0;)
    detail::futex_wait(&pushes_in_flight, n);
  drain_inline();
}

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
  static thread_pool* pool = [] {
    auto* p = new thread_pool(thread_pool_options::from_environment());
    // release: an engine thread that loads the pointer (acquire, io_summary_tick) sees the pool
    // built: an STLR on ARMv8, which orders the constructor's stores before it; on x86 a plain
    // store, which already does.
    impl::default_impl.store(p->impl_.get(), std::memory_order_release);
    return p;
  }();
  return *pool;
}

thread_pool* thread_pool::current() noexcept {
  impl* p = impl::t_context.pool;
  return p != nullptr ? p->owner : nullptr;
}

unsigned thread_pool::thread_count() const noexcept { return impl_->load_counts().existing; }
void thread_pool::shutdown() { impl_->shutdown(); }

bool thread_pool::set_min_threads(unsigned n) { return impl_->set_limits(n, max_threads()); }
bool thread_pool::set_max_threads(unsigned n) { return impl_->set_limits(min_threads(), n); }
unsigned thread_pool::min_threads() const noexcept { return impl_->min_threads.load(std::memory_order_relaxed); }
unsigned thread_pool::max_threads() const noexcept { return impl_->max_threads.load(std::memory_order_relaxed); }

}  // namespace tpl
