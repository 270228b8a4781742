// tpl/detail/channel_core_buffer.hpp — channel_core's buffer (internal; included by
// channel_core.hpp): the items under the lock alone (locked mode), or the lock-free ring with the
// locked ring as its overflow, and the moves between them.
//
// Invariants (under the core's lock):
// - Locked mode (no ring): items_ holds every buffered item, oldest first.
// - On the ring: items_ holds the overflow, items newer than every item in the ring; while it is
//   not empty the gate has kOverflow, which sends writers to the lock, so the order is kept. A
//   bounded channel keeps at most capacity - ring size items there.
// - An unbounded channel that fills its ring links a twice larger one (the old one closed);
//   readers drain the old ring (rring()) before moving on; nothing is copied.
// - The ring is published by clearing kLockedMode (release) after it holds the buffered items.
#pragma once

#include "tpl/detail/channel_core.hpp"

namespace tpl::detail {

template <class T>
void channel_core<T>::enable_ring_locked() {
  std::size_t slots = kChannelFastRingMaxSlots;
  while (slots > capacity_) slots /= 2;  // the largest power of two within capacity
  if (capacity_ == kUnboundedChannelCapacity) {
    slots = kChannelFastRingFirstUnboundedSlots;
    while (slots < items_.size()) slots *= 2;  // room for every buffered item: no overflow
  }
  ring_.store(new fast_ring(slots), std::memory_order_relaxed);  // published with the gate below
  read_ring_.store(ring(), std::memory_order_relaxed);
  // The buffered items, oldest first, go to the ring; what does not fit stays as the overflow.
  // Nobody else touches the ring yet (the gate still has kLockedMode).
  refill_locked();
  // relaxed: published with kLockedMode's removal below.
  if (!items_.empty()) gate_.fetch_or(kOverflow, std::memory_order_relaxed);
  if (completed_) ring()->close();
  // release: a lock-free path that sees kLockedMode gone sees ring_ and its items.
  gate_.fetch_and(~kLockedMode, std::memory_order_release);
}

template <class T>
auto channel_core<T>::grow_ring_locked() -> fast_ring* {
  fast_ring* old = ring();
  auto fresh = std::make_unique<fast_ring>(old->size() * 2);  // may throw: nothing changed yet
  old->close();  // lock-free writers fail on it from now on and come to the lock
  fast_ring::link(old, fresh.get());
  // release: lock-free writers that load the new ring see it constructed.
  ring_.store(fresh.release(), std::memory_order_release);
  return ring();
}

template <class T>
inline bool channel_core<T>::advance_read_ring_locked() noexcept {
  fast_ring* r = rring();
  // count() 0 on a closed ring: every write that claimed a slot was published and taken.
  if (r == ring() || r->count() != 0) return false;
  // release: lock-free readers that load the next ring see it constructed.
  read_ring_.store(r->next(), std::memory_order_release);
  return true;
}

template <class T>
inline void channel_core<T>::refill_locked() {
  while (!items_.empty()) {
    // past_close: these items were written before any completion.
    if (ring()->try_push(items_.front(), true) != fast_ring::push_result::ok) break;
    (void)items_.pop_front();  // the moved-from shell
  }
  // relaxed load: the gate changes only under the lock. release: writers that see kOverflow
  // gone may write to the ring, behind the items just moved (published by try_push itself).
  if (items_.empty() && (gate_.load(std::memory_order_relaxed) & kOverflow) != 0)
    gate_.fetch_and(~kOverflow, std::memory_order_release);
}

template <class T>
inline bool channel_core<T>::push_buffer_locked(T& item) {
  if (!ring()) {
    if (items_.size() >= capacity_) return false;
    items_.push_back(std::move(item));
    return true;
  }
  if (items_.empty()) {
    if (ring()->try_push(item) == fast_ring::push_result::ok) return true;
    if (capacity_ == kUnboundedChannelCapacity) {
      // An unbounded channel outgrew its ring: a twice larger one takes its items (the lock-free
      // paths stay lock-free at any backlog, instead of queuing behind the lock).
      (void)grow_ring_locked()->try_push(item);  // has room
      return true;
    }
  } else if (items_.size() >= overflow_capacity()) {
    // The overflow is full; the ring may have room since (readers move items up only now and
    // then, see needs_service_after_read).
    refill_locked();
    if (items_.empty() && ring()->try_push(item) == fast_ring::push_result::ok) return true;
  }
  if (items_.size() >= overflow_capacity()) return false;
  items_.push_back(std::move(item));
  if ((gate_.load(std::memory_order_relaxed) & kOverflow) == 0) {
    // seq_cst: a writer that reads the gate after this write returned goes to the lock (and
    // so behind this item).
    gate_.fetch_or(kOverflow, std::memory_order_seq_cst);
  }
  return true;
}

template <class T>
inline bool channel_core<T>::pop_buffer_locked(std::optional<T>& out) {
  if (!ring()) {
    if (items_.empty()) return false;
    out.emplace(items_.pop_front());
    return true;
  }
  if (!items_.empty()) refill_locked();
  std::uint64_t pos;
  do {
    if (rring()->try_pop(out, pos)) return true;
  } while (advance_read_ring_locked());
  // Its front still being written, the ring may hold finished writes behind it, older than the
  // overflow's: nothing to take until that writer publishes (it then serves those that were
  // waiting when it claimed; a reader that comes to wait meanwhile tries again, see start()).
  if (items_.empty() || rring()->count() != 0) return false;
  out.emplace(items_.pop_front());
  if (items_.empty()) refill_locked();  // clears kOverflow
  return true;
}

template <class T>
inline bool channel_core<T>::buffer_has_ready_locked() const noexcept {
  if (!items_.empty()) return true;
  for (fast_ring* r = rring(); r != nullptr; r = r->next()) {
    if (r->front_ready()) return true;
    if (r->count() != 0) return false;  // its front is being written
  }
  return false;
}

template <class T>
inline std::size_t channel_core<T>::buffer_size_locked() const noexcept {
  std::size_t n = items_.size();
  for (fast_ring* r = rring(); r != nullptr; r = r->next()) n += r->count();
  return n;
}

template <class T>
inline bool channel_core<T>::has_room_locked() const noexcept {
  if (capacity_ == 0) return !readers_.empty();
  if (full_mode() != bounded_channel_full_mode::wait) return true;
  // Counted, not looked for in the ring: with the overflow full the ring may have room that a
  // write reaches by moving the overflow up first (push_buffer_locked). (Unbounded: the
  // capacity is the largest size_t, always above the count.)
  return buffer_size_locked() < capacity_;
}

template <class T>
inline bool channel_core<T>::needs_service_after_read(std::uint32_t g, std::uint64_t pos) const noexcept {
  if (g >= kWaitUnit) return true;  // a writer waits for room (or a reader queued meanwhile)
  // Refill the ring from the overflow every quarter lap, and at once when it ran dry; finish a
  // completed channel on its last item.
  const std::uint64_t quarter = rring()->size() >= 4 ? rring()->size() / 4 : 1;
  if ((g & kOverflow) != 0 && (pos & (quarter - 1)) == 0) return true;
  return rring()->count() == 0;
}

}  // namespace tpl::detail
