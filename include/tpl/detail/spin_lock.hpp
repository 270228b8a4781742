// tpl/detail/spin_lock.hpp — a test-and-test-and-set spin lock for critical sections of a few
// instructions, with a yield fallback under contention (internal).
#pragma once

#include <atomic>
#include <thread>

#include "tpl/detail/config.hpp"

namespace tpl::detail {

class spin_lock {
 public:
  void lock() noexcept {
    // acquire: the critical section must see the previous holder's writes.
    if (TPL_LIKELY(!locked_.exchange(true, std::memory_order_acquire))) return;
    lock_contended();
  }
  // release: publishes the critical section to the next holder.
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  TPL_NOINLINE void lock_contended() noexcept {
    for (unsigned spins = 0;;) {
      // relaxed: we only wait for it to look free before trying the exchange again.
      while (locked_.load(std::memory_order_relaxed)) {
        if (spins++ < 64)
          TPL_CPU_RELAX();
        else
          std::this_thread::yield();
      }
      // acquire: the critical section must see the previous holder's writes.
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  std::atomic<bool> locked_{false};
};

}  // namespace tpl::detail
