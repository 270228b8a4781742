// The pool's statistics snapshot and decision events (see pool_impl.hpp for the file map). Every
// decision (a thread injected or retired, a goal change) is an event with its reason; listeners
// and TPL_THREADPOOL_TRACE see them. Nothing here takes part in a decision: a listener's
// exception is swallowed, and the snapshot is a set of relaxed reads, not a consistent cut.
#include <cstdio>
#include <new>

#include "pool_impl.hpp"

namespace tpl {

using namespace pool_detail;

void thread_pool::impl::emit(thread_pool_event_kind kind, thread_pool_reason why, detail::thread_counts c,
                             unsigned previous_goal) {
  // relaxed: whether anyone listens; a listener set concurrently may miss an event in flight.
  const bool t = trace.load(std::memory_order_relaxed);
  if (!t && !has_listener.load(std::memory_order_relaxed)) return;
  thread_pool_event e{kind, why, clock::now(), c.existing, c.goal, previous_goal,
                      blocked_threads.load(std::memory_order_relaxed)};
  if (t) {
    try {
      std::fprintf(stderr, "%s\n", to_string(e).c_str());
    } catch (const std::bad_alloc&) {
      // Out of memory for the trace line: the decision stands, the line is lost.
    }
  }
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

thread_pool_stats thread_pool::impl::stats() const {
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

thread_pool_stats thread_pool::stats() const noexcept { return impl_->stats(); }

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

}  // namespace tpl
