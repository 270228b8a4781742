// tpl/detail/channel_ring.hpp — the locked buffer of a channel (internal): a growable ring of
// items in one block, used under the channel core's lock (a channel's whole buffer before it
// moves to its lock-free ring, and the overflow behind that ring after).
//
// Invariants: the ring is one pointer to a block that starts with its header (head, size, mask),
// followed by the slots; a ring with no block points to the shared empty header, which is never
// written (its mask + 1 wraps to 0, so the first push grows); the slots hold exactly the size
// items from head on, wrapping at the power-of-two capacity; after the ring has grown to a
// channel's working size it allocates no more.
//
// Example:
//   channel_ring<int> r;
//   int v = 1;
//   r.push_back(std::move(v));   // allocates the first block (kChannelRingInitialSlots)
//   int x = r.pop_front();
#pragma once

#include <cstddef>
#include <limits>
#include <new>
#include <utility>

#include "tpl/detail/config.hpp"

namespace tpl::detail {

/// First allocation of a channel's ring buffer, in items (it doubles from there as needed).
inline constexpr std::size_t kChannelRingInitialSlots = 16;

/// The bookkeeping of a channel_ring, kept at the start of its slot block so that the ring itself
/// is one pointer (every channel has one, and a program may have a million channels).
struct channel_ring_header {
  std::size_t mask;  ///< slots - 1
  std::size_t head;
  std::size_t size;
};

/// The header of every ring that has no slots yet: capacity mask + 1 == 0 (so the first push
/// grows), size 0. Never written: nothing is pushed before the ring grows, nothing is popped from
/// an empty ring.
inline constinit channel_ring_header g_empty_channel_ring{std::numeric_limits<std::size_t>::max(), 0, 0};

/// A growable ring buffer (power-of-two slots) in one block: the header, then the slots. After it
/// has grown to the channel's working size it never allocates again.
template <class T>
class channel_ring {
 public:
  channel_ring() noexcept = default;
  channel_ring(const channel_ring&) = delete;
  channel_ring& operator=(const channel_ring&) = delete;
  ~channel_ring() {
    while (h_->size != 0) (void)pop_front();
    if (h_ != &g_empty_channel_ring) deallocate(h_);
  }

  std::size_t size() const noexcept { return h_->size; }
  bool empty() const noexcept { return h_->size == 0; }
  T& front() noexcept { return slots(h_)[h_->head]; }

  void push_back(T&& v) {
    if (h_->size == h_->mask + 1) grow();  // the empty header's mask + 1 wraps to 0
    channel_ring_header& h = *h_;
    ::new (static_cast<void*>(slots(h_) + ((h.head + h.size) & h.mask))) T(std::move(v));
    ++h.size;
  }
  T pop_front() noexcept {
    channel_ring_header& h = *h_;
    T& slot = slots(h_)[h.head];
    T v(std::move(slot));
    slot.~T();
    h.head = (h.head + 1) & h.mask;
    --h.size;
    return v;
  }
  T pop_back() noexcept {
    channel_ring_header& h = *h_;
    T& slot = slots(h_)[(h.head + h.size - 1) & h.mask];
    T v(std::move(slot));
    slot.~T();
    --h.size;
    return v;
  }

 private:
  static constexpr std::size_t kSlotsOffset =
      (sizeof(channel_ring_header) + alignof(T) - 1) / alignof(T) * alignof(T);
  static constexpr std::size_t kBlockAlign =
      alignof(T) > alignof(channel_ring_header) ? alignof(T) : alignof(channel_ring_header);
  static constexpr bool kOverAligned = kBlockAlign > __STDCPP_DEFAULT_NEW_ALIGNMENT__;

  static T* slots(channel_ring_header* h) noexcept {
    return reinterpret_cast<T*>(reinterpret_cast<char*>(h) + kSlotsOffset);
  }
  static std::size_t block_bytes(std::size_t capacity) {
    if (capacity > (std::numeric_limits<std::size_t>::max() - kSlotsOffset) / sizeof(T)) throw std::bad_alloc();
    return kSlotsOffset + capacity * sizeof(T);
  }
  static channel_ring_header* allocate(std::size_t capacity) {
    const std::size_t bytes = block_bytes(capacity);
    void* p = kOverAligned ? ::operator new(bytes, std::align_val_t(kBlockAlign)) : ::operator new(bytes);
    return ::new (p) channel_ring_header{capacity - 1, 0, 0};
  }
  static void deallocate(channel_ring_header* h) noexcept {
    h->~channel_ring_header();
    // Unsized: clang 16 declares the sized forms only with -fsized-deallocation.
    if constexpr (kOverAligned)
      ::operator delete(static_cast<void*>(h), std::align_val_t(kBlockAlign));
    else
      ::operator delete(static_cast<void*>(h));
  }

  TPL_NOINLINE void grow() {  // out of line, so push_back inlines into the fast paths
    const std::size_t capacity = h_->mask + 1;  // 0 for the empty header
    if (capacity == 0) {
      h_ = allocate(kChannelRingInitialSlots);
      return;
    }
    channel_ring_header* fresh = allocate(2 * capacity);
    T* from = slots(h_);
    T* to = slots(fresh);
    for (std::size_t i = 0; i < h_->size; ++i) {
      T& slot = from[(h_->head + i) & h_->mask];
      ::new (static_cast<void*>(to + i)) T(std::move(slot));
      slot.~T();
    }
    fresh->size = h_->size;
    deallocate(h_);
    h_ = fresh;
  }

  channel_ring_header* h_ = &g_empty_channel_ring;
};

}  // namespace tpl::detail
