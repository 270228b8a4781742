// The pool's global FIFO queue: a growable ring buffer under a short lock (detail::short_lock: a
// bounded spin, then a futex wait). Critical sections are a few instructions and never allocate:
// a push that finds the ring full allocates the larger one with the lock released. The ring keeps
// its capacity, so after warm-up queuing allocates nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "tpl/detail/config.hpp"
#include "tpl/detail/short_lock.hpp"

namespace tpl::detail {

class global_queue {
 public:
  global_queue() : slots_(new void*[kInitialCapacity]), capacity_(kInitialCapacity) {}

  /// Queues item. Throws std::bad_alloc, with nothing queued and the lock free, if the ring is
  /// full and a larger one cannot be allocated: the lock is never held across the allocation.
  void push(void* item) {
    std::unique_ptr<void*[]> bigger;  // allocated outside the lock
    std::size_t bigger_capacity = 0;
    for (;;) {
      lock_.lock();
      if (count_ == capacity_) {
        if (bigger_capacity != capacity_ * 2) {
          // Full, and no ring of the right size at hand: allocate one without the lock. Another
          // pusher may grow the ring meanwhile; this one is then the wrong size and we look again.
          bigger_capacity = capacity_ * 2;
          lock_.unlock();
          bigger.reset(new void*[bigger_capacity]);
          continue;
        }
        grow_into(std::move(bigger));
      }
      slots_[(head_ + count_) & (capacity_ - 1)] = item;
      ++count_;
      // seq_cst: read by the parking protocol's final check (see wake_protocol.cpp).
      size_.store(count_, std::memory_order_seq_cst);
      lock_.unlock();
      return;
    }
  }

  void* pop() {
    // relaxed: a hint to skip the lock when empty; a miss is caught by the parking re-check.
    if (size_.load(std::memory_order_relaxed) == 0) return nullptr;
    lock_.lock();
    void* item = nullptr;
    if (count_ != 0) {
      item = slots_[head_];
      head_ = (head_ + 1) & (capacity_ - 1);
      --count_;
      size_.store(count_, std::memory_order_relaxed);
    }
    lock_.unlock();
    return item;
  }

  std::size_t size_approx() const noexcept { return size_.load(std::memory_order_relaxed); }
  bool empty_seq_cst() const noexcept { return size_.load(std::memory_order_seq_cst) == 0; }

 private:
  static constexpr std::size_t kInitialCapacity = 1024;

  /// Moves the items into bigger (twice the capacity), under the lock.
  void grow_into(std::unique_ptr<void*[]> bigger) noexcept {
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = slots_[(head_ + i) & (capacity_ - 1)];
    slots_ = std::move(bigger);
    head_ = 0;
    capacity_ *= 2;
  }

  short_lock lock_;
  std::unique_ptr<void*[]> slots_;
  std::size_t capacity_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::atomic<std::size_t> size_{0};
};

}  // namespace tpl::detail
