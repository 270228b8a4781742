// Who may poll a socket engine's readiness source (internal; socket_engine.cpp uses it, docs/io.md
// "Lent poll duty" describes it for users).
//
// In the default mode (completions on the pool) an engine thread that has queued a batch for the
// pool lends its polling to the batch items instead of going back to its blocking wait: a batch
// item whose queue runs dry takes the duty and polls without blocking for a short window, handling
// what it finds itself, so a connection that answers within that window is served with no
// wake-up of the engine thread. The word moves between three values:
//   engine  - the engine thread polls (blocks in the source's wait);
//   lent    - lent to the batch items, nobody polling; the engine thread sleeps on the word;
//   polling - one batch item polls.
// Invariants (checked, with the batch hand-off, in every interleaving by
// tests/net/net_model_poll_duty_test.cpp, which also gives counterexamples for each ordering
// below done the other way):
//   1. One holder at a time: the engine thread (word = engine) or the item whose try_take()
//      succeeded (word = polling); each hand-over of the source's state is a release/acquire
//      pair on the word.
//   2. The engine lends before it requests processing, with a seq_cst store that pairs with the
//      item's seq_cst clear of processing_requested and its seq_cst try_take(): whichever item the
//      request leads to finds the duty lent (or later) when its queue runs dry.
//   3. The duty is never held across a handler: an item that found events lends it again
//      (relend) before it handles them, and an item that relent it and then found its events
//      taken by another item tries to take it again instead of ending (that other item may have
//      found it still held and ended).
//   4. A lent duty goes back to the engine thread when a pool worker is about to block
//      (reclaim(), from the pool's blocking hook), when an item leaves it with no batch item
//      queued (5), and otherwise only after kWatchdog with nobody having taken it (a handler blocked where the pool cannot see it): sockets wait at most
//      that long for a poll while handlers run, like Go's sysmon polling the network. Each wakes
//      the engine's futex after changing the word, so the wake is never lost.
//   5. An item that polled nothing in its window leaves the duty lent if a batch item is queued
//      (it will take it: no wake-up of the engine), else takes it back for the engine. It lends
//      first and reads processing_requested after, both seq_cst: a queued item that it counts on
//      clears the flag after that read, so its try_take() comes after the lend. Reading first
//      would let that item clear the flag, find the duty still held and end.
//
//   poll_duty d;                       // engine: after queuing a batch
//   d.lend(); request_processing(); d.sleep_while_lent();
//   if (d.try_take()) { ...poll...; d.relend(); or d.leave(); if (!queued) d.reclaim(); }
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "tpl/detail/futex.hpp"

namespace tpl::net::detail {

class poll_duty {
 public:
  /// How long the engine leaves its duty lent with nobody taking it before it takes it back.
  static constexpr auto kWatchdog = std::chrono::milliseconds(1);

  /// Engine thread, holding the duty: lends it (invariant 2). seq_cst: a release of the source's
  /// state, and the store half of the Dekker pair with the items' clear-then-try_take.
  void lend() noexcept { word_.store(kLent, std::memory_order_seq_cst); }

  /// Engine thread, after lend(): sleeps until the duty is back (given back, reclaimed, or taken
  /// back by the watchdog). Returns true if the watchdog took it.
  bool sleep_while_lent() noexcept {
    for (;;) {
      // relaxed: the watchdog's hint, written by the holders (see try_take).
      const std::uint64_t takes = takes_.load(std::memory_order_relaxed);
      // acquire: pairs with the RMW continuing a holder's release sequence (reclaim) that made it
      // `engine`: the source's state as that holder left it.
      const std::uint32_t seen = word_.load(std::memory_order_acquire);
      if (seen == kEngine) return false;
      const bool woken = tpl::detail::futex_wait_until(&word_, seen, std::chrono::steady_clock::now() + kWatchdog);
      if (woken || seen != kLent || takes_.load(std::memory_order_relaxed) != takes) continue;
      std::uint32_t expected = kLent;
      // acquire: the source's state as the last holder left it (its release store of kLent).
      if (word_.compare_exchange_strong(expected, kEngine, std::memory_order_acquire, std::memory_order_relaxed))
        return true;
    }
  }

  /// A batch item whose queue ran dry: takes a lent duty. seq_cst on both outcomes: the load half
  /// of invariant 2's Dekker pair; on success also the acquire of the source's state.
  bool try_take() noexcept {
    std::uint32_t expected = kLent;
    if (!word_.compare_exchange_strong(expected, kPolling, std::memory_order_seq_cst, std::memory_order_seq_cst))
      return false;
    // relaxed load and store: only the holder writes it (holders are ordered by the word's
    // acquire/release, so no update is lost); the engine reads it as a hint.
    takes_.store(takes_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return true;
  }

  /// The holder, before it handles what it polled: lends the duty again (invariant 3). release:
  /// the source's state goes to the next holder (its try_take, or the watchdog's CAS).
  void relend() noexcept { word_.store(kLent, std::memory_order_release); }

  /// The holder, nothing having come in its window: lends the duty (seq_cst, as lend()) and
  /// returns; the caller then reads whether a batch item is queued (seq_cst) and, if none is,
  /// calls reclaim() so that the engine thread polls again (invariant 5).
  void leave() noexcept { word_.store(kLent, std::memory_order_seq_cst); }

  /// Any thread (a pool worker about to block, an item leaving with no item queued): takes a lent
  /// duty back for the engine thread and wakes it. Returns whether it did (false: the duty was
  /// elsewhere, or someone took it first, who answers for it).
  bool reclaim() noexcept {
    // relaxed pre-check: the CAS decides; most blocking waits find the duty elsewhere.
    if (word_.load(std::memory_order_relaxed) != kLent) return false;
    std::uint32_t expected = kLent;
    // relaxed: this thread touches none of the source's state, and the engine still acquires the
    // last holder's: this RMW continues the release sequence headed by that holder's release
    // store of kLent, so the engine's acquire load of kEngine synchronises with the holder
    // (C++20 [intro.races]: any RMW, by any thread, continues a release sequence; the ARMv8
    // and x86 mappings of acquire, release and RMW honour it).
    if (!word_.compare_exchange_strong(expected, kEngine, std::memory_order_relaxed, std::memory_order_relaxed))
      return false;
    tpl::detail::futex_wake_one(&word_);
    return true;
  }

 private:
  static constexpr std::uint32_t kEngine = 0, kLent = 1, kPolling = 2;
  std::atomic<std::uint32_t> word_{kEngine};
  std::atomic<std::uint64_t> takes_{0};  // times an item took the duty (the watchdog's hint)
};

}  // namespace tpl::net::detail
