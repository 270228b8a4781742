// A Chase-Lev work-stealing deque of pointers (the C11 formulation of Lê, Pop, Cohen and
// Zappa Nardelli, "Correct and Efficient Work-Stealing for Weak Memory Models", PPoPP 2013).
// The owner pushes and pops at the bottom (LIFO); thieves take from the top (FIFO). The buffer
// grows; retired buffers are kept until the deque dies, because a thief may still be reading one.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "full_fence.hpp"

namespace tpl::detail {

class work_stealing_deque {
 public:
  explicit work_stealing_deque(std::int64_t initial_capacity = 1024) : buffer_(nullptr) {
    // The ring is owned (by the temporary, then by retired_) from the moment it exists: if the
    // list cannot grow, the constructor throws std::bad_alloc with nothing leaked.
    retired_.push_back(std::make_unique<ring>(initial_capacity));
    // relaxed: the deque is not shared yet; the worker that owns it is published with release.
    buffer_.store(retired_.back().get(), std::memory_order_relaxed);
  }
  work_stealing_deque(const work_stealing_deque&) = delete;
  work_stealing_deque& operator=(const work_stealing_deque&) = delete;

  /// Owner only. Returns whether the deque held items below this one as far as the owner saw
  /// (top_ as read here may be stale, so true can also mean that thieves just took the last of
  /// them; false is exact: the deque was empty).
  bool push(void* item) {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    // acquire: pairs with thieves' CAS on top_, so we never overwrite a slot still being read.
    const std::int64_t t = top_.load(std::memory_order_acquire);
    ring* r = buffer_.load(std::memory_order_relaxed);
    if (b - t > r->capacity - 1) r = grow(r, t, b);
    r->put(b, item);
    // release: a thief that acquires the new bottom sees the slot and the item's contents.
    bottom_.store(b + 1, std::memory_order_release);
    return b > t;
  }

  /// Owner only: pushes item(0), item(1), ..., item(n - 1) as n pushes would (item(n - 1) ends
  /// at the bottom, taken back first), published by one release store, so that a thief sees all
  /// of them or none. Returns what push returns for the first of them. Throws std::bad_alloc,
  /// with nothing pushed, when the buffer cannot grow. (push is not push_many(1): its single
  /// grow keeps two registers fewer live on every pool push, 4 instructions measured.)
  template <class Item>
  bool push_many(std::int64_t n, Item item) {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    // acquire: as push's (thieves' CAS on top_ has finished reading the slots below t).
    const std::int64_t t = top_.load(std::memory_order_acquire);
    ring* r = buffer_.load(std::memory_order_relaxed);
    while (b - t + n > r->capacity) r = grow(r, t, b);
    std::atomic<void*>* const slots = r->slots.get();  // read once: the stores below cannot change them
    const std::int64_t mask = r->mask;
    // relaxed: as ring::put's.
    for (std::int64_t i = 0; i < n; ++i) slots[(b + i) & mask].store(item(i), std::memory_order_relaxed);
    // release: a thief that acquires the new bottom sees every slot written above and the items'
    // contents.
    bottom_.store(b + n, std::memory_order_release);
    return b > t;
  }

  /// Owner only. nullptr when empty.
  void* pop() {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    ring* r = buffer_.load(std::memory_order_relaxed);
    bottom_.store(b, std::memory_order_relaxed);
    // seq_cst (full_fence.hpp): the store to bottom_ must be ordered before the load of top_
    // against thieves doing the mirror image (load top_, then bottom_): the classic Chase-Lev
    // race on the last item.
    full_fence();
    std::int64_t t = top_.load(std::memory_order_relaxed);
    void* item = nullptr;
    if (t <= b) {
      item = r->get(b);
      if (t == b) {
        // Last item: race thieves for it. seq_cst as in the paper.
        if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                          std::memory_order_relaxed))
          item = nullptr;
        bottom_.store(b + 1, std::memory_order_relaxed);
      }
    } else {
      bottom_.store(b + 1, std::memory_order_relaxed);
    }
    return item;
  }

  /// Any thread. nullptr when empty or when it lost a race (the caller may look elsewhere).
  void* steal() {
    return steal_if([](void*) { return true; });
  }

  /// As steal(), taking the top item only if pred(item) holds: otherwise it stays where it is
  /// (nothing is written: the item read is only looked at). nullptr when empty, refused or lost.
  template <class Pred>
  void* steal_if(Pred pred) {
    // acquire on both: see the owner's pushes (slot contents) published by the release store.
    std::int64_t t = top_.load(std::memory_order_acquire);
    full_fence();  // seq_cst: orders the load of top_ before that of bottom_ (the owner's mirror)
    const std::int64_t b = bottom_.load(std::memory_order_acquire);
    if (t >= b) return nullptr;
    // acquire: a grown buffer is published with release by the owner.
    ring* r = buffer_.load(std::memory_order_acquire);
    void* item = r->get(t);
    if (!pred(item)) return nullptr;
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                      std::memory_order_relaxed))
      return nullptr;
    return item;
  }

  /// Approximate (racy by nature): for statistics and "is there work" checks.
  std::int64_t size_approx() const noexcept {
    // relaxed: a hint only.
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    const std::int64_t t = top_.load(std::memory_order_relaxed);
    return b > t ? b - t : 0;
  }

  /// seq_cst loads, for the parking protocol's final "is there work" check.
  bool empty_seq_cst() const noexcept {
    return bottom_.load(std::memory_order_seq_cst) <= top_.load(std::memory_order_seq_cst);
  }

 private:
  struct ring {
    explicit ring(std::int64_t cap) : capacity(cap), mask(cap - 1), slots(new std::atomic<void*>[cap]) {}
    std::int64_t capacity;
    std::int64_t mask;
    std::unique_ptr<std::atomic<void*>[]> slots;
    // relaxed: slot accesses are ordered by the top_/bottom_ protocol around them.
    void put(std::int64_t i, void* v) noexcept { slots[i & mask].store(v, std::memory_order_relaxed); }
    void* get(std::int64_t i) const noexcept { return slots[i & mask].load(std::memory_order_relaxed); }
  };

  ring* grow(ring* old, std::int64_t t, std::int64_t b) {
    // Owned from the start: if retired_ cannot grow, push throws std::bad_alloc with the deque
    // unchanged and the new ring freed.
    auto owned = std::make_unique<ring>(old->capacity * 2);
    ring* bigger = owned.get();
    for (std::int64_t i = t; i < b; ++i) bigger->put(i, old->get(i));
    retired_.push_back(std::move(owned));
    // release: thieves that acquire the new buffer see the copied slots.
    buffer_.store(bigger, std::memory_order_release);
    return bigger;
  }

  alignas(64) std::atomic<std::int64_t> top_{0};
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  alignas(64) std::atomic<ring*> buffer_;
  std::vector<std::unique_ptr<ring>> retired_;  // owner only; includes the live buffer
};

}  // namespace tpl::detail
