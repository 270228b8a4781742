// The pool's statistics snapshot and events (see pool_impl.hpp for the file map). Every decision
// (a thread injected or retired, a goal change) is an event with its reason; so is the periodic
// io_summary of the I/O delivered to the pool. Listeners and TPL_THREADPOOL_TRACE see them.
// Nothing here takes part in a decision: a listener's exception is swallowed, and the snapshot is
// a set of relaxed reads, not a consistent cut.
//
// The listener is replaced through its call_gate (src/call_gate.hpp), under listener_lock:
// publish() counts its call in and out around it, and set_event_listener() swaps the node (later
// events see the new one) and waits out the old one's calls under way on other threads.
#include <cstdio>
#include <new>

#include "pool_impl.hpp"

namespace tpl {

using namespace pool_detail;

void thread_pool::impl::emit(thread_pool_event_kind kind, thread_pool_reason why, detail::thread_counts c,
                             unsigned previous_goal) {
  // relaxed: whether anyone listens; a listener set concurrently may miss an event in flight.
  if (!trace.load(std::memory_order_relaxed) && !has_listener.load(std::memory_order_relaxed)) return;
  thread_pool_event e{};
  e.kind = kind;
  e.reason = why;
  e.time = clock::now();
  e.existing_threads = c.existing;
  e.goal = c.goal;
  e.previous_goal = previous_goal;
  // relaxed: a figure for display.
  e.blocked_threads = blocked_threads.load(std::memory_order_relaxed);
  publish(e);
}

void thread_pool::impl::publish(const thread_pool_event& e) noexcept {
  // relaxed: a switch, read on each event.
  if (trace.load(std::memory_order_relaxed)) {
    try {
      std::fprintf(stderr, "%s\n", to_string(e).c_str());
    } catch (const std::bad_alloc&) {
      // Out of memory for the trace line: the decision stands, the line is lost.
    }
  }
  // relaxed: whether anyone listens; a listener set concurrently may miss an event in flight.
  if (!has_listener.load(std::memory_order_relaxed)) return;
  std::shared_ptr<listener_node> l;
  {
    std::lock_guard g(listener_lock);
    l = listener;
    if (l == nullptr || !l->gate.try_enter()) return;
  }
  try {
    const detail::call_scope here(l->gate);
    l->call(e);
  } catch (...) {
    // A listener's exception must not take a pool decision (or an I/O completion) down with it.
  }
  std::lock_guard g(listener_lock);
  l->gate.leave();
  listener_done.notify_all();
}

namespace {

void subtract(io_engine_stats& now, const io_engine_stats& before) noexcept {
  now.completions -= before.completions;
  now.wakeups -= before.wakeups;
  now.events -= before.events;
  for (std::size_t i = 0; i < io_batch_buckets; ++i) now.batch_sizes[i] -= before.batch_sizes[i];
  // largest_batch stays the largest so far (the public header says so).
}

bool same_counts(const thread_pool_io_stats& a, const thread_pool_io_stats& b) noexcept {
  return a.completions() == b.completions() && a.sockets.wakeups == b.sockets.wakeups &&
         a.uring.wakeups == b.uring.wakeups;
}

}  // namespace

thread_pool_io_stats thread_pool::impl::io_stats() const noexcept {
  thread_pool_io_stats io;
  // acquire: pairs with start_worker's release of the count, which follows the slot's store, so
  // every slot below the count is seen filled (LDAR/STLR on ARMv8; plain moves on x86).
  const unsigned n = slot_count.load(std::memory_order_acquire);
  for (unsigned i = 0; i < n; ++i) {
    // relaxed: ordered by the acquire above; a filled slot never changes.
    const worker* w = slots[i].load(std::memory_order_relaxed);
    // relaxed: written by their worker alone; untorn and unordered reads suffice on ARMv8 as on
    // x86 (detail::bump_owned explains why).
    io.sockets.completions += w->io_completions[static_cast<std::size_t>(detail::io_kind::socket)].load(std::memory_order_relaxed);
    io.pool_engine_completions +=
        w->io_completions[static_cast<std::size_t>(detail::io_kind::pool_engine)].load(std::memory_order_relaxed);
    io.uring.completions += w->io_completions[static_cast<std::size_t>(detail::io_kind::uring)].load(std::memory_order_relaxed);
  }
  // relaxed: only compared with this, never dereferenced, so no ordering is needed (ARMv8 or x86).
  if (default_impl.load(std::memory_order_relaxed) == this) {
    const io_engine_stats sockets = detail::engine_io_totals(detail::io_kind::socket);
    const io_engine_stats uring = detail::engine_io_totals(detail::io_kind::uring);
    const std::uint64_t socket_completions = io.sockets.completions, uring_completions = io.uring.completions;
    io.sockets = sockets;
    io.sockets.completions += socket_completions;
    io.uring = uring;
    io.uring.completions += uring_completions;
    io.pool_engine_completions += detail::engine_io_totals(detail::io_kind::pool_engine).completions;
  }
  return io;
}

void thread_pool::impl::maybe_emit_io_summary() noexcept {
  // relaxed: whether anyone listens, as in emit().
  if (!trace.load(std::memory_order_relaxed) && !has_listener.load(std::memory_order_relaxed)) return;
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
  // relaxed: a hint that spares the lock below, which decides; a stale value on ARMv8 or x86 only
  // sends this thread to the try_lock (too early) or skips a summary that the next caller sends.
  if (now < next_io_summary_ns.load(std::memory_order_relaxed)) return;
  thread_pool_event e{};
  {
    // try_to_lock: a thread that finds another one sending the summary does not wait for it.
    // The lock is released before the listener runs, so a listener that does I/O on this thread
    // (and comes back here) never meets a lock it holds.
    std::unique_lock g(io_summary_lock, std::try_to_lock);
    if (!g.owns_lock()) return;
    // relaxed: written only under io_summary_lock, which we hold (the lock orders it, on any
    // architecture).
    if (now < next_io_summary_ns.load(std::memory_order_relaxed)) return;
    // relaxed: as the load above (under the lock); the hint outside it may read it late.
    next_io_summary_ns.store(now + std::chrono::duration_cast<std::chrono::nanoseconds>(kIoSummaryPeriod).count(),
                             std::memory_order_relaxed);
    const thread_pool_io_stats current = io_stats();
    if (same_counts(current, io_reported)) return;
    e.io = current;
    subtract(e.io.sockets, io_reported.sockets);
    subtract(e.io.uring, io_reported.uring);
    e.io.pool_engine_completions -= io_reported.pool_engine_completions;
    io_reported = current;
  }
  e.kind = thread_pool_event_kind::io_summary;
  e.reason = thread_pool_reason::io;
  e.time = clock::now();
  const detail::thread_counts c = load_counts();
  e.existing_threads = c.existing;
  e.goal = c.goal;
  e.previous_goal = 0;
  // relaxed: a figure for display.
  e.blocked_threads = blocked_threads.load(std::memory_order_relaxed);
  publish(e);
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
  s.io = io_stats();
  return s;
}

thread_pool_stats thread_pool::stats() const noexcept { return impl_->stats(); }

void thread_pool::set_event_listener(std::function<void(const thread_pool_event&)> l) {
  std::shared_ptr<impl::listener_node> p;
  if (l) p = std::make_shared<impl::listener_node>(std::move(l));
  std::unique_lock g(impl_->listener_lock);
  // relaxed: emit() re-reads the pointer under the lock.
  impl_->has_listener.store(p != nullptr, std::memory_order_relaxed);
  const std::shared_ptr<impl::listener_node> old = std::exchange(impl_->listener, std::move(p));
  if (old != nullptr) old->gate.close_and_wait(g, impl_->listener_done);
}

void thread_pool::set_trace(bool on) {
  // relaxed: a switch, read on each event.
  impl_->trace.store(on, std::memory_order_relaxed);
}

}  // namespace tpl
