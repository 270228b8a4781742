// tpl/detail/channel_core_fast.hpp — channel_core's lock-free fast paths: a write that finds
// room and a read that finds an item with nobody waiting, the plain "empty" / "full" / "ready"
// answers that need no lock, and the short watch before an operation waits (internal; included
// by channel_core.hpp, whose file comment states the gate protocol these paths follow).
//
//   ch.writer().try_write(1);  // try_write_fast: one seq_cst CAS on the ring, no lock
//   ch.reader().try_read(v);   // try_read_fast: the same on the read side
//
// Invariants: a fast path goes ahead only when the gate reads 0 (on the ring, nobody waiting, not
// completed, no overflow; a read also accepts kCompleted); it touches nothing and returns false
// otherwise, and the caller takes the general path. After its claim it looks at the gate again
// (seq_cst, Dekker with start()'s announce), and after its publication it looks for kStraggler
// (the light half of the asymmetric fence); either look that finds a waiter serves the channel
// under the lock (service()). Functions are defined inline, as they would be in the class, so
// that they fold into their callers.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

#include "tpl/detail/channel_core.hpp"

namespace tpl::detail {

template <class T>
inline bool channel_core<T>::try_write_fast(T& item) {
  // acquire: a gate without kLockedMode publishes ring_ (see enable_ring_locked).
  const std::uint32_t g = gate_.load(std::memory_order_acquire);
  if (g == 0) {  // on the ring, nobody waiting, not completed, no overflow
    std::uint32_t seen = 0;
    // seq_cst, after the claim's seq_cst CAS: a reader that queued itself since our first look
    // is seen here, or its look at the ring (a seq_cst load of the write position after its
    // seq_cst announce, see start()) sees our claim and does not wait for it (Dekker).
    const auto look = [this, &seen] { seen = gate_.load(std::memory_order_seq_cst); };
    if (ring()->try_push(item, false, look) != fast_ring::push_result::ok) return false;
    // The second look, after the publication: a reader that found our claim unpublished for
    // too long queued itself anyway, set kStraggler and then ran a heavy fence (start()'s
    // queue_anyway). Either our publication was visible to it after that fence, or this look
    // sees kStraggler. (Any other waiter is the first look's: it announced before our claim,
    // or its look at the ring saw the claim and it did not queue.) Only the straggler bit, not
    // the count: a reader announcing itself right now will see our item, and serving it here
    // would take the lock on every write that races a reader about to wait.
    // relaxed: ordered after the publication by the asymmetric fence pair (the light half is a
    // compiler barrier; see asymmetric_fence.hpp for why that suffices on x86 and ARMv8).
    asymmetric_fence_light();
    if (seen >= kWaitUnit || (gate_.load(std::memory_order_relaxed) & kStraggler) != 0) service();
    return true;
  }
  // A rendezvous channel buffers nothing: only the general path can hand an item over.
  if ((g != kLockedMode && g != kOverflow) || capacity_ == 0) return false;
  std::lock_guard l(lock_);
  // relaxed: the gate changes only under the lock, which we hold.
  const std::uint32_t now = gate_.load(std::memory_order_relaxed);
  if (now == kLockedMode) {
    if (items_.size() >= capacity_) return false;
    items_.push_back(std::move(item));
    count_write_locked();
    return true;
  }
  // Items wait behind a full ring: this one joins them (readers move them up, see
  // needs_service_after_read), without touching the ring's lines.
  if (now != kOverflow || items_.size() >= overflow_capacity()) return false;
  items_.push_back(std::move(item));
  return true;
}

template <class T>
inline bool channel_core<T>::try_read_fast(std::optional<T>& out) {
  // acquire: as in try_write_fast.
  std::uint32_t g = gate_.load(std::memory_order_acquire);
  if (g < kWaitUnit && (g & kLockedMode) == 0) {  // on the ring, nobody waiting
    std::uint64_t pos;
    // seq_cst, after the claim's seq_cst CAS (as in try_write_fast): a writer that queued
    // itself for room since our first look is seen here, or its look at the ring sees our
    // claim and does not wait for the slot (Dekker); likewise the completion check (see
    // try_complete).
    const auto look = [this, &g] { g = gate_.load(std::memory_order_seq_cst); };
    if (!rring()->try_pop(out, pos, look)) return false;
    // The second look, after freeing the slot: as in try_write_fast, for a writer that found
    // our claim unfreed for too long and queued for room anyway (relaxed: see there).
    asymmetric_fence_light();
    if ((g != 0 && needs_service_after_read(g, pos)) || (gate_.load(std::memory_order_relaxed) & kStraggler) != 0)
      service();  // the slot is free now
    return true;
  }
  // A rendezvous channel buffers nothing: only the general path can take a waiting writer's item.
  if ((g & ~kCompleted) != kLockedMode || capacity_ == 0) return false;
  std::lock_guard l(lock_);
  g = gate_.load(std::memory_order_relaxed);  // relaxed: changes only under the lock we hold
  // Nobody waits; the last item of a completed channel finishes it: the general path.
  if ((g & ~kCompleted) != kLockedMode || items_.size() <= static_cast<std::size_t>(completed_)) return false;
  out.emplace(items_.pop_front());
  return true;
}

template <class T>
inline bool channel_core<T>::plainly_empty_fast() const noexcept {
  // acquire: as in try_write_fast (a gate without kLockedMode publishes the rings).
  if (gate_.load(std::memory_order_acquire) != 0) return false;
  return rring()->plainly_empty();
}

template <class T>
inline bool channel_core<T>::plainly_full_fast() const noexcept {
  // acquire: as in try_write_fast (a gate without kLockedMode publishes the rings).
  if (gate_.load(std::memory_order_acquire) != 0) return false;
  const fast_ring* r = ring();
  return capacity_ == r->size() && r->plainly_full();
}

template <class T>
inline bool channel_core<T>::wait_ready_fast(channel_op op) const noexcept {
  // acquire: as in try_write_fast.
  const std::uint32_t g = gate_.load(std::memory_order_acquire);
  if (op == channel_op::wait_to_read) return g < kWaitUnit && (g & kLockedMode) == 0 && rring()->front_ready();
  return g == 0 && ring()->has_room();
}

template <class T>
inline bool channel_core<T>::spin_for(channel_op op) const noexcept {
  // On one CPU the other side cannot run while we watch.
  static const bool worthwhile = available_cpus() != 1;
  if (!worthwhile) return false;
  for (int i = 0; i < kChannelSpinChecks; ++i) {
    // acquire: as in try_write_fast.
    const std::uint32_t g = gate_.load(std::memory_order_acquire);
    if ((g & kLockedMode) != 0 || g >= kWaitUnit) return false;
    if (is_read_side(op) ? rring()->front_ready() || (g & kCompleted) != 0 : ring()->has_room() || g != 0) return true;
    for (int p = 0; p < 4; ++p) TPL_CPU_RELAX();
  }
  return false;
}
}  // namespace tpl::detail
