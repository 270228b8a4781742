// The pool's global FIFO queue: a growable ring buffer under a small spin lock. Critical sections
// are a few instructions, so spinning (with a yield fallback) beats parking on a futex. The ring
// keeps its capacity, so after warm-up queuing allocates nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "tpl/detail/config.hpp"
#include "tpl/detail/spin_lock.hpp"

namespace tpl::detail {

class global_queue {
 public:
  global_queue() : slots_(new void*[kInitialCapacity]), capacity_(kInitialCapacity) {}

  void push(void* item) {
    lock_.lock();
    if (count_ == capacity_) grow();
    slots_[(head_ + count_) & (capacity_ - 1)] = item;
    ++count_;
    // seq_cst: read by the parking protocol's final check (see wake_protocol.cpp).
    size_.store(count_, std::memory_order_seq_cst);
    lock_.unlock();
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

  void grow() {
    std::unique_ptr<void*[]> bigger(new void*[capacity_ * 2]);
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = slots_[(head_ + i) & (capacity_ - 1)];
    slots_ = std::move(bigger);
    head_ = 0;
    capacity_ *= 2;
  }

  spin_lock lock_;
  std::unique_ptr<void*[]> slots_;
  std::size_t capacity_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::atomic<std::size_t> size_{0};
};

}  // namespace tpl::detail
