// tpl/sync/async_event.hpp — events that coroutines await: async_manual_reset_event (a gate that
// stays open once set, like a TaskCompletionSource you can reset) and async_auto_reset_event
// (each set() lets exactly one waiter through, like .NET AutoResetEvent without blocking).
//
//   tpl::async_manual_reset_event ready;
//   tpl::task<> consumer() { co_await ready.wait_async(); use(shared); }   // every waiter passes
//   void producer() { shared = make(); ready.set(); }
//
//   tpl::async_auto_reset_event item;            // one waiter per set(), FIFO
//   co_await item.wait_async(token);             // canceled: throws operation_canceled
//
// set() resumes the released waiters inline on the setting thread, oldest first (through tpl's
// bounded-depth trampoline): set() returns after each released waiter has run to its next
// suspension. A wait on a set event completes at once without allocating. Destroying an event with
// waiters queued fails their waits with invalid_operation.
#pragma once

#include "tpl/cancellation.hpp"
#include "tpl/detail/spin_lock.hpp"
#include "tpl/sync/wait_list.hpp"
#include "tpl/task.hpp"

namespace tpl {

/// Once set, every current and future wait completes until reset() (.NET ManualResetEventSlim's
/// semantics, awaited instead of blocked on).
class async_manual_reset_event final : private detail::sync_waitable {
 public:
  explicit async_manual_reset_event(bool initially_set = false) noexcept : set_(initially_set) {}
  ~async_manual_reset_event();
  async_manual_reset_event(const async_manual_reset_event&) = delete;
  async_manual_reset_event& operator=(const async_manual_reset_event&) = delete;

  /// Opens the gate and releases every waiter, oldest first.
  void set();
  /// Closes the gate; waits started afterwards wait for the next set().
  void reset() noexcept;
  bool is_set() const noexcept;
  /// Completes once the event is set (at once if it is); canceled if token is canceled first.
  task<> wait_async(const cancellation_token& token = {});

 private:
  bool try_unlink(detail::sync_waiter* w) noexcept override;

  mutable detail::spin_lock lock_;
  bool set_;
  detail::sync_wait_list waiters_;
};

/// Each set() releases one waiter (the oldest) or, with none waiting, leaves the event set so the
/// next wait passes and resets it (.NET AutoResetEvent). Setting a set event does nothing.
class async_auto_reset_event final : private detail::sync_waitable {
 public:
  explicit async_auto_reset_event(bool initially_set = false) noexcept : set_(initially_set) {}
  ~async_auto_reset_event();
  async_auto_reset_event(const async_auto_reset_event&) = delete;
  async_auto_reset_event& operator=(const async_auto_reset_event&) = delete;

  void set();
  void reset() noexcept;
  bool is_set() const noexcept;
  /// Completes once this wait consumed a set(); canceled if token is canceled first (a canceled
  /// wait never consumes a set()).
  task<> wait_async(const cancellation_token& token = {});

 private:
  bool try_unlink(detail::sync_waiter* w) noexcept override;

  mutable detail::spin_lock lock_;
  bool set_;
  detail::sync_wait_list waiters_;
};

}  // namespace tpl
