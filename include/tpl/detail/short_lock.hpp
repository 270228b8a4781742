// tpl/detail/short_lock.hpp — the lock of tpl's short critical sections (internal): a word that
// is taken with one compare-and-swap, spins briefly when it is held, and then sleeps on a futex.
//
// Invariants:
// - state_ is 0 (free), 1 (held, nobody asleep) or 2 (held, a thread may be asleep on it). Only a
//   thread going to sleep writes 2, and it sleeps only while the word reads 2: an unlock that
//   reads 2 in its exchange wakes one sleeper; one that reads 1 knows nobody sleeps.
// - The spin is bounded (kSpins pauses, then kYields yields); after that a waiter sleeps, so a
//   holder that is descheduled, or that allocates or runs an item's move constructor under the
//   lock, costs its waiters a sleep and never an unbounded spin.
// - unlock() touches the lock once (its exchange) and then, at most, wakes a futex by address,
//   which never dereferences it: a thread that takes the lock after us may destroy it at once.
//
// Example:
//   tpl::detail::short_lock l;
//   { std::lock_guard g(l); ++shared_counter; }
#pragma once

#include <atomic>
#include <cstdint>

#include "tpl/detail/config.hpp"
#include "tpl/detail/futex.hpp"

namespace tpl::detail {

class short_lock {
 public:
  void lock() noexcept {
    std::uint32_t expected = 0;
    // acquire: the critical section sees the previous holder's writes (its release in unlock).
    // relaxed on failure: the slow path decides with its own acquiring operations.
    if (TPL_LIKELY(state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                                  std::memory_order_relaxed)))
      return;
    lock_contended();
  }

  bool try_lock() noexcept {
    std::uint32_t expected = 0;
    // acquire: as in lock().
    return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }

  void unlock() noexcept {
    // release: publishes the critical section to the next holder. One read-modify-write: it sees
    // a sleeper's 2 exactly (every write of the word is an RMW, totally ordered on this one
    // location on every architecture), and nothing of the lock is touched after it.
    if (TPL_UNLIKELY(state_.exchange(0, std::memory_order_release) == 2)) futex_wake_one(&state_);
  }

 private:
  static constexpr int kSpins = 128;
  static constexpr int kYields = 4;

  TPL_NOINLINE void lock_contended() noexcept;

  std::atomic<std::uint32_t> state_{0};
};

}  // namespace tpl::detail
