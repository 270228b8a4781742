// The wake protocol: the idle list, spinning, parking and waking (see pool_impl.hpp for the file
// map; tests/model_pool_handshake_test.cpp checks every interleaving of it, docs/internals.md
// states it at length). The scheme is Go's scheduler's, which is the "one outstanding thread
// request" of .NET's PortableThreadPool with the request counted as a spinning worker:
//   - `spinning` counts workers that are searching for work, including one just woken (or just
//     created) for it.
//   - After queuing, a producer wakes a parked worker (or starts a new one) only if none is
//     spinning and fewer workers process work than the goal allows; it claims the request by
//     moving spinning from 0 to 1 (so a burst of items wakes one worker, not one per item). A
//     waker that could not hand its request on gives it back and looks again if idle_count or the
//     counts word changed meanwhile: other wakers left their work to it while it held the request.
//   - A spinning worker that finds work stops spinning; if it was the last spinner, it wakes one
//     more worker so that the rest of a burst is picked up in parallel.
//   - A worker parks in this order: register as idle, stop spinning, full fence, look at every
//     queue once more. A producer does: queue, full fence, look at spinning/idle/counts. Whatever
//     the interleaving, either the producer sees the idle worker (and wakes it) or the worker sees
//     the item. A producer that wakes nobody because the goal is reached relies on the processing
//     workers, each of which looks at every queue before it parks.
//   - The excess park (processing > goal, checked under idle_lock) does not look again: it leaves
//     at least the goal's workers processing, and its own slot item was queued before it
//     registered.
//   - A parked worker moves only when a waker sets kWoken (it then holds the request), when
//     shutdown sets kStop (it takes itself off the idle list), or when its idle timeout retires it.
//     The alarm look (kParkAlarmPeriodMs) is not part of the protocol: see stranded_work_seen().
#include <algorithm>
#include <cstdio>

#include "pool_impl.hpp"
#include "tpl/detail/config.hpp"
#include "tpl/detail/futex.hpp"

namespace tpl {

using namespace pool_detail;

void thread_pool::impl::wake_one_slow(int idle_now, std::uint64_t counts_seen) {
  // Entered below the goal with what wake_one_if_needed() (pool_impl.hpp) read; each further
  // round reads the same words in the same order at its end (wake_check_head).
  for (;;) {
    const detail::thread_counts c = detail::thread_counts::unpack(counts_seen);
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
    // Look again, from the head of the check.
    if (!wake_check_head(idle_now, counts_seen)) return;
  }
}

auto thread_pool::impl::pop_idle_within_goal() -> worker* {
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

void thread_pool::impl::push_idle(worker* w) {
  std::lock_guard g(idle_lock);
  add_idle_locked(w);
}

// Parks w as excess if processing > goal (checked under the lock). Returns whether it did.
bool thread_pool::impl::push_idle_if_excess(worker* w) {
  std::lock_guard g(idle_lock);
  const detail::thread_counts c = load_counts(std::memory_order_seq_cst);
  if (c.processing <= c.goal) return false;
  add_idle_locked(w);
  return true;
}

bool thread_pool::impl::remove_idle(worker* w) {
  std::lock_guard g(idle_lock);
  if (!unlink_idle_locked(w)) return false;
  update_counts([](detail::thread_counts& k) { ++k.processing; });
  publish_idle_count_locked();
  return true;
}

// Takes w off the idle list for good (idle timeout). Returns false if a waker popped it first.
bool thread_pool::impl::retire_idle(worker* w) {
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
void thread_pool::impl::add_idle_locked(worker* w) {
  idle.push_back(w);
  update_counts([](detail::thread_counts& k) { --k.processing; });
  publish_idle_count_locked();
}

// Unlinks w from the idle list; false if a waker popped it first.
bool thread_pool::impl::unlink_idle_locked(worker* w) {
  auto it = std::find(idle.begin(), idle.end(), w);
  if (it == idle.end()) return false;
  idle.erase(it);
  return true;
}

void thread_pool::impl::publish_idle_count_locked() {
  // seq_cst: read by producers after their queue fence (the wake protocol).
  idle_count.store(static_cast<int>(idle.size()), std::memory_order_seq_cst);
}

// Wakes w, parked on its futex word.
void thread_pool::impl::signal(worker* w) {
  // relaxed: only the alarm reads it, as "did anything happen".
  handoffs.fetch_add(1, std::memory_order_relaxed);
  // release: the woken worker's acquire load sees everything queued before the wake. An RMW,
  // not a store, so that shutdown's kStop and this bit never overwrite each other.
  w->wake_signal.fetch_or(kWoken, std::memory_order_release);
  detail::futex_wake_one(&w->wake_signal);
}

// Whether any queue holds an item; with next_slots, any worker's next slot too (a parking
// worker leaves slot items to their owners, who run them as soon as their item returns; the
// periodic re-check of a parked worker, the gate and shutdown count them).
bool thread_pool::impl::any_work_seq_cst(bool next_slots) const {
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

void thread_pool::impl::stop_spinning_and_maybe_wake() {
  // seq_cst: part of the wake protocol. The last spinner to find work wakes another worker
  // so the rest of a burst does not wait for this item to finish.
  if (spinning.fetch_sub(1, std::memory_order_seq_cst) == 1 && any_work_seq_cst(/*next_slots=*/false))
    wake_one_if_needed();
}

bool thread_pool::impl::may_start_spinning() const {
  // Like Go: at most half of the busy workers search at once, so spinning never eats the CPU
  // that running work needs. relaxed: a heuristic.
  const int busy = static_cast<int>(load_counts().processing);
  return 2 * spinning.load(std::memory_order_relaxed) < std::max(busy, 1);
}

void* thread_pool::impl::spin_for_work(worker& self) {
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
auto thread_pool::impl::park(worker& self, bool was_spinning) -> park_result {
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
auto thread_pool::impl::wait_parked(worker& self) -> park_result {
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
bool thread_pool::impl::stranded_work_seen() const {
  const detail::thread_counts c = load_counts(std::memory_order_seq_cst);
  return c.processing < c.goal && spinning.load(std::memory_order_seq_cst) == 0 &&
         any_work_seq_cst(/*next_slots=*/false);
}

}  // namespace tpl
