// short_lock's contended path: a bounded spin, then sleep on the futex (see
// tpl/detail/short_lock.hpp for the states and the invariants).
#include "tpl/detail/short_lock.hpp"

#include <thread>

namespace tpl::detail {

void short_lock::lock_contended() noexcept {
  // The holder is usually a few instructions from done: watch the word (relaxed: only a hint to
  // try the CAS, which acquires), then give the processor away a few times.
  for (int i = 0; i < kSpins + kYields; ++i) {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    if (s == 0) {
      // acquire: as in lock().
      if (state_.compare_exchange_weak(s, 1, std::memory_order_acquire, std::memory_order_relaxed)) return;
    } else if (s == 2) {
      break;  // others sleep already: queue behind them rather than race them
    }
    if (i < kSpins)
      TPL_CPU_RELAX();
    else
      std::this_thread::yield();
  }
  // Sleep. Writing 2 marks that a sleeper may exist; taking the lock this way leaves it at 2, so
  // our own unlock later wakes the next sleeper if there is one (at worst one futile wake-up).
  // acquire: as in lock(), when the exchange finds the word free.
  while (state_.exchange(2, std::memory_order_acquire) != 0) futex_wait(&state_, 2);
}

}  // namespace tpl::detail
