// The gate thread (starvation, blocking injection, the hill-climbing driver) and blocking_scope
// (see pool_impl.hpp for the file map).
//
// The gate sleeps while the pool is idle; while any worker processes, it wakes every starvation
// period (500 ms, eager: 10 ms) to add a thread if queued work made no progress, at each
// hill-climbing sample, and when a blocking injection beyond `cores` extra threads is due.
// Invariants kept here:
//   - kick_gate / the gate's idle check are a Dekker pair (seq_cst): either the kicker sees the
//     gate idle and wakes it, or the gate sees the new state and stays awake.
//   - blocking_begin moves the worker's slot item to its deque, raises the goal (cooperative or
//     eager), then runs the producer's half of the wake protocol for whatever is queued.
//   - Every change of the goal goes through update_goal (a CAS on the counts word), so wakers
//     that gave their request back see it.
#include <algorithm>
#include <chrono>

#if defined(__linux__)
#include <pthread.h>
#endif

#include "io_hooks.hpp"
#include "pool_impl.hpp"

namespace tpl {

using namespace pool_detail;

// The reason a thread is added on the request path.
thread_pool_reason thread_pool::impl::reason_for_new_thread() const noexcept {
  // relaxed: labels for statistics.
  const unsigned blocked = blocked_threads.load(std::memory_order_relaxed);
  const unsigned min = min_threads.load(std::memory_order_relaxed);
  if (options.injection == injection_policy::eager && blocked > 0) return thread_pool_reason::eager;
  if (blocked > 0 && min + blocked > base_goal.load(std::memory_order_relaxed)) return thread_pool_reason::blocking;
  if (base_goal.load(std::memory_order_relaxed) > min) return thread_pool_reason::hill_climbing;
  return thread_pool_reason::demand;
}

// Whether a thread for `why` may be created now, or must wait for the gate's delay.
bool thread_pool::impl::injection_due_now(thread_pool_reason why) const noexcept {
  if (why != thread_pool_reason::blocking) return true;
  const auto c = load_counts();
  const auto delay = detail::blocking_injection_delay(c.existing, min_threads.load(std::memory_order_relaxed), cores);
  return delay.count() == 0;
}

void thread_pool::impl::blocking_begin() {
  // The item woken last must not wait for this thread to unblock (it may be what it waits for):
  // it goes to the deque, and the wake-up below covers it like any queued work.
  if (t_context.pool == this) {
    flush_next(*t_context.self);
    detail::run_worker_blocking_hook();  // a socket engine's lent poll duty goes back to it
  }
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

void thread_pool::impl::blocking_end() {
  blocked_threads.fetch_sub(1, std::memory_order_relaxed);
  if (options.cooperative_blocking || options.injection == injection_policy::eager)
    update_goal(thread_pool_reason::unblocked);
}

void thread_pool::impl::kick_idle_gate() {
  std::lock_guard g(gate_lock);
  gate_kicked = true;
  gate_cv.notify_one();
}

// Wakes the gate whatever it is doing (it re-plans its next wake-up).
void thread_pool::impl::wake_gate() {
  std::lock_guard g(gate_lock);
  gate_kicked = true;
  gate_cv.notify_one();
}

void thread_pool::impl::gate_main() {
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

std::uint64_t thread_pool::impl::items_completed() const {
  std::uint64_t sum = 0;
  // acquire: see every published slot.
  const unsigned n = slot_count.load(std::memory_order_acquire);
  for (unsigned i = 0; i < n; ++i) sum += slots[i].load(std::memory_order_relaxed)->items_executed.load(std::memory_order_relaxed);
  return sum;
}

void thread_pool::impl::inject_for_starvation() {
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
    ++injected_starvation;  // before the wake-up: see start_worker
    spinning.fetch_add(1, std::memory_order_seq_cst);
    signal(w);
    return;
  }
  start_worker(thread_pool_reason::starvation, false);
}

void thread_pool::impl::climb(double seconds, std::uint64_t completions, double cpu) {
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

}  // namespace tpl
