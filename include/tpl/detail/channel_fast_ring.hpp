// tpl/detail/channel_fast_ring.hpp — the lock-free buffer of a busy channel (internal): a bounded
// multi-producer multi-consumer ring after Dmitry Vyukov's, with a "closed" bit on the write
// position (a completed channel takes no more items) and a "frozen" bit on the read position (a
// peek under the channel's lock holds lock-free readers off the front slot).
//
// Each slot carries a sequence number: pos means free for the write at position pos, pos + 1
// holds the item written at pos, pos + size is free again for the next lap. A writer claims a
// position with a CAS on tail_, a reader with a CAS on head_; the two indices live on their own
// cache lines, so a producer and a consumer on different cores share only the slots they pass
// each other (one line per few items) instead of a lock per item.
//
// A claimed slot whose item is not yet published reads as empty. A lock-free writer looks for
// waiting readers right after its claim (the claim's CAS is the Dekker store, see channel_core's
// gate), and a reader about to wait that sees a claim still unpublished tries again instead of
// waiting, for a bounded time; then it queues, and the writer's second look after publishing
// finds it (channel_core::start), so nobody sleeps on an item that is there.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "tpl/detail/config.hpp"

namespace tpl::detail {

template <class T>
class channel_fast_ring {
  static_assert(std::is_nothrow_move_constructible_v<T>, "a claimed slot must always be published");

 public:
  static constexpr std::uint64_t kClosed = std::uint64_t{1} << 63;  ///< on tail_: no more writes
  static constexpr std::uint64_t kFrozen = std::uint64_t{1} << 63;  ///< on head_: no lock-free reads

  enum class push_result : std::uint8_t { ok, full, closed };

  /// size: a power of two, at least 2 (with one slot, "holds pos" and "free for pos + 1" would be
  /// the same sequence number).
  explicit channel_fast_ring(std::size_t size) : mask_(size - 1) {
    slots_ = std::allocator<slot>().allocate(size);
    for (std::size_t i = 0; i < size; ++i) ::new (static_cast<void*>(slots_ + i)) slot(i);
  }
  channel_fast_ring(const channel_fast_ring&) = delete;
  channel_fast_ring& operator=(const channel_fast_ring&) = delete;

  /// Destroys the items still there. Nobody else may use the ring any more.
  ~channel_fast_ring() {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed) & ~kClosed;
    for (std::uint64_t pos = head_.load(std::memory_order_relaxed) & ~kFrozen; pos != tail; ++pos) {
      slot& s = slots_[pos & mask_];
      if (s.seq.load(std::memory_order_relaxed) == pos + 1) s.item()->~T();
    }
    for (std::size_t i = 0; i <= mask_; ++i) slots_[i].~slot();
    std::allocator<slot>().deallocate(slots_, mask_ + 1);
  }

  std::size_t size() const noexcept { return mask_ + 1; }

  /// Moves item into the ring (item is moved from only on ok). past_close: the channel's lock
  /// holder moving items written before completion up from the overflow (the closed bit stays).
  push_result try_push(T& item, bool past_close = false) noexcept {
    return try_push(item, past_close, [] {});
  }

  /// As try_push, calling after_claim() once the slot is claimed (the claim's CAS is seq_cst),
  /// before the item is moved in and published: the lock-free writer's look at the channel's gate,
  /// which so needs no fence of its own (see channel_core::try_write_fast).
  template <class AfterClaim>
  push_result try_push(T& item, bool past_close, AfterClaim&& after_claim) noexcept {
    // relaxed: only a guess at the position; the slot's sequence number and the CAS decide.
    std::uint64_t pos = tail_.load(std::memory_order_relaxed);
    unsigned backoff = 1;
    for (;;) {
      if ((pos & kClosed) != 0 && !past_close) return push_result::closed;
      slot& s = slots_[pos & mask_];
      // seq_cst, though acquire would do for the slot: the handshake with a writer waiting for
      // room goes through the reader's claim (head_'s CAS) and the waiter's look at the
      // positions (read_in_progress), not through this load (see try_pop).
      const std::uint64_t seq = s.seq.load(std::memory_order_seq_cst);
      const auto diff = static_cast<std::int64_t>(seq - (pos & ~kClosed));
      if (diff == 0) {
        // seq_cst: orders the claim before the completer's done check (see channel_core), and
        // before after_claim's look at the gate: the Dekker store of a lock-free write (a reader
        // that announces itself later sees this claim in its seq_cst look at tail_). A seq_cst
        // RMW followed by a seq_cst load is ordered store-to-load on x86 (a locked instruction)
        // and on ARMv8 (the CAS's stlxr/casal and the load's ldar are never reordered). On
        // failure pos is reloaded (relaxed: a guess).
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
          after_claim();
          ::new (static_cast<void*>(s.storage)) T(std::move(item));
          // release: publishes the item. No fence after it: the writer looked for waiting
          // readers after its claim, and a reader that announced itself since sees the claim
          // and does not wait for it (channel_core::start). A fence or a seq_cst store here
          // would stall on the slot's line, which the reader's core holds (it drains the store
          // buffer): a third of the writer's time per item in a two-core test.
          s.seq.store((pos & ~kClosed) + 1, std::memory_order_release);
          return push_result::ok;
        }
        back_off(backoff);  // another writer took pos: let it finish a few before retrying
      } else if (diff < 0) {
        return push_result::full;  // the slot still holds the item of the previous lap
      } else {
        pos = tail_.load(std::memory_order_relaxed);  // another writer took pos: a fresh guess
      }
    }
  }

  /// Takes the oldest item into out; pos receives its position. False if the ring is empty, its
  /// front item is still being written, or a peek froze the reads.
  bool try_pop(std::optional<T>& out, std::uint64_t& pos_out) noexcept {
    return try_pop(out, pos_out, [] {});
  }

  /// As try_pop, calling after_claim() once the slot is claimed (the claim's CAS is seq_cst),
  /// before the item is moved out and the slot freed: the lock-free reader's look at the
  /// channel's gate (see channel_core::try_read_fast).
  template <class AfterClaim>
  bool try_pop(std::optional<T>& out, std::uint64_t& pos_out, AfterClaim&& after_claim) noexcept {
    std::uint64_t pos = head_.load(std::memory_order_relaxed);  // relaxed: a guess, as above
    unsigned backoff = 1;
    for (;;) {
      if (pos & kFrozen) return false;
      slot& s = slots_[pos & mask_];
      // seq_cst, though acquire would do: acquires the item. The handshake with a waiting
      // reader goes through the writer's claim (tail_'s CAS) and the waiter's look at the
      // positions (count), not through this load (see try_push).
      const std::uint64_t seq = s.seq.load(std::memory_order_seq_cst);
      const auto diff = static_cast<std::int64_t>(seq - (pos + 1));
      if (diff == 0) {
        // seq_cst: a completer that reads head_ after raising its flag either sees this read or
        // this reader sees the flag (channel_core's done check); likewise a writer that
        // announced itself as waiting for room sees this claim, or after_claim's look at the
        // gate sees the writer (Dekker).
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) {
          after_claim();
          T* p = s.item();
          out.emplace(std::move(*p));
          p->~T();
          // release: frees the slot for the writer one lap ahead. No fence after it: a writer
          // that came to wait since the claim sees the claim and tries again once the slot is
          // free instead of waiting (channel_core::start).
          s.seq.store(pos + mask_ + 1, std::memory_order_release);
          pos_out = pos;
          return true;
        }
        back_off(backoff);  // another reader took pos
      } else if (diff < 0) {
        return false;  // empty, or the writer of this slot has not published yet
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

  /// Items written and not yet taken, claimed-but-unpublished writes included.
  std::size_t count() const noexcept {
    // seq_cst: the done check of a completer pairs with the readers' CAS (see try_pop). Head,
    // tail, head again: with head unchanged around the tail's load, the two are a snapshot of
    // that instant (head only grows). Otherwise readers and writers race on; a few tries, then
    // the difference clamped to the ring (never negative: tail is read after the first head).
    std::uint64_t head = head_.load(std::memory_order_seq_cst) & ~kFrozen;
    for (int tries = 0;; ++tries) {
      const std::uint64_t tail = tail_.load(std::memory_order_seq_cst) & ~kClosed;
      const std::uint64_t again = head_.load(std::memory_order_seq_cst) & ~kFrozen;
      if (again == head || tries == 8) {
        const auto n = static_cast<std::size_t>(tail - head);
        return n < size() ? n : size();
      }
      head = again;
    }
  }

  /// Whether the front item is there to take (a hint outside the channel's lock).
  bool front_ready() const noexcept {
    const std::uint64_t pos = head_.load(std::memory_order_seq_cst) & ~kFrozen;
    // seq_cst: pairs with the announce of a waiting reader that checks this.
    return slots_[pos & mask_].seq.load(std::memory_order_seq_cst) == pos + 1;
  }

  /// Whether a read would find nothing here and nothing behind this ring: the front slot holds
  /// no published item (empty, or its writer has not published yet: try_pop would fail too),
  /// reads are not frozen, and no successor ring took over the writes. A snapshot for a reader
  /// outside the channel's lock.
  bool plainly_empty() const noexcept {
    // relaxed: a stale head finds its slot already refilled or freed for a later lap (seq ahead
    // of pos + 1): not plainly empty. A write that happened before this call (through whatever
    // synchronisation) is seen anyway (read coherence).
    const std::uint64_t pos = head_.load(std::memory_order_relaxed);
    if ((pos & kFrozen) != 0) return false;
    // acquire: keeps the look at next_ below after this one (ldar on ARMv8; x86 keeps loads in
    // order). An empty front may be a ring drained after it was closed: a successor linked
    // before we saw that front is found by the later look (we take the lock then); one linked
    // after it had taken no write yet (writes reach a successor only once it is linked).
    const std::uint64_t seq = slots_[pos & mask_].seq.load(std::memory_order_acquire);
    // relaxed: only null or not matters here, not the successor's contents.
    return static_cast<std::int64_t>(seq - (pos + 1)) < 0 && next_.load(std::memory_order_relaxed) == nullptr;
  }

  /// Whether a write would find no room: the slot at the write position still holds the item of
  /// the previous lap (or a read of it is still in progress: try_push would fail too), and the
  /// ring still takes writes. A snapshot for a writer outside the channel's lock.
  bool plainly_full() const noexcept {
    // relaxed, both: the answer is only a snapshot, and a read that happened before this call is
    // seen anyway (read coherence). A stale tail finds its slot published or freed for a later
    // lap (seq at or past pos): not plainly full.
    const std::uint64_t pos = tail_.load(std::memory_order_relaxed);
    if ((pos & kClosed) != 0) return false;
    return static_cast<std::int64_t>(slots_[pos & mask_].seq.load(std::memory_order_relaxed) - pos) < 0;
  }

  /// For a write that just found the ring full: whether that was a slot a reader had claimed
  /// and not freed yet. The count says the ring is not full: such a slot is still being freed,
  /// or has been freed since the write looked (room now; testing has_room() here as well would
  /// miss that case, and the write would wait for a reader that already looked at the gate).
  bool read_in_progress() const noexcept { return count() < size(); }

  /// Whether a write would find a free slot (a hint).
  bool has_room() const noexcept {
    const std::uint64_t pos = tail_.load(std::memory_order_seq_cst);
    if (pos & kClosed) return false;
    return slots_[pos & mask_].seq.load(std::memory_order_seq_cst) == pos;
  }

  /// No more writes: try_push returns closed from now on (writes that already claimed a slot
  /// still publish).
  void close() noexcept {
    // seq_cst: ordered with the completer's done check that follows (see channel_core).
    tail_.fetch_or(kClosed, std::memory_order_seq_cst);
  }

  /// The ring that took over the writes when an unbounded channel outgrew this one (this one
  /// is closed then); null while this one takes the writes.
  channel_fast_ring* next() const noexcept { return next_.load(std::memory_order_acquire); }
  /// Links the successor (the channel's lock holder, after closing this ring) and keeps this ring
  /// allocated as long as the successor: a thread may still be about to look at it.
  static void link(channel_fast_ring* previous, channel_fast_ring* successor) noexcept {
    // release: a reader that finds the successor through next() sees it constructed.
    previous->next_.store(successor, std::memory_order_release);
    successor->previous_.reset(previous);
  }

  /// Calls copy_out with the front item if it is there. The caller holds the channel's lock (so
  /// no other peek or locked read runs); lock-free readers are held off while copy_out runs.
  template <class F>
  bool peek(F&& copy_out) {
    // seq_cst: after this no lock-free reader can claim the front slot (their CAS expects the
    // position without the bit); one that claimed it before moved head_ past it already.
    const std::uint64_t pos = head_.fetch_or(kFrozen, std::memory_order_seq_cst) & ~kFrozen;
    struct thaw {
      std::atomic<std::uint64_t>& head;
      // release: readers that see the bit gone may take the slot we only looked at.
      ~thaw() { head.fetch_and(~kFrozen, std::memory_order_release); }
    } guard{head_};
    slot& s = slots_[pos & mask_];
    // acquire: the item's contents.
    if (s.seq.load(std::memory_order_acquire) != pos + 1) return false;
    copy_out(static_cast<const T&>(*s.item()));
    return true;
  }

 private:
  /// After a lost CAS: with two cores claiming from one index, letting the winner take several
  /// positions while its cache holds the line costs far less than racing it for every one.
  static void back_off(unsigned& spins) noexcept {
    for (unsigned i = 0; i < spins; ++i) TPL_CPU_RELAX();
    if (spins < 64) spins *= 2;
  }

  struct slot {
    explicit slot(std::uint64_t s) noexcept : seq(s) {}
    std::atomic<std::uint64_t> seq;
    alignas(T) unsigned char storage[sizeof(T)];
    T* item() noexcept { return std::launder(reinterpret_cast<T*>(storage)); }
  };

  // Read-only after construction: shared by every core without traffic.
  slot* slots_ = nullptr;
  const std::size_t mask_;
  alignas(64) std::atomic<std::uint64_t> tail_{0};  // next write position | kClosed
  alignas(64) std::atomic<std::uint64_t> head_{0};  // next read position | kFrozen
  char pad_[64 - sizeof(std::atomic<std::uint64_t>)] = {};  // keeps the next allocation off head_'s line
  std::atomic<channel_fast_ring*> next_{nullptr};  // see next()
  std::unique_ptr<channel_fast_ring> previous_;    // owned, see link()
};

}  // namespace tpl::detail
