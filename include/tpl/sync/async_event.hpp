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
#include "tpl/detail/short_lock.hpp"
#include "tpl/sync/wait_list.hpp"
#include "tpl/task.hpp"

namespace tpl {

namespace detail {
/// What the two async events share: the flag, the FIFO of waiters and one lock over both; the
/// destructor fails queued waits with invalid_operation.
class async_event_state : public sync_waitable {
 public:
  /// Closes the gate; waits started afterwards wait for the next set().
  void reset() noexcept;
  bool is_set() const noexcept;

 protected:
  explicit async_event_state(bool initially_set) noexcept : set_(initially_set) {}
  ~async_event_state();
  async_event_state(const async_event_state&) = delete;
  async_event_state& operator=(const async_event_state&) = delete;

  bool try_unlink(sync_waiter* w) noexcept final;

  mutable short_lock lock_;
  bool set_;
  sync_wait_list waiters_;
};
}  // namespace detail

/// Once set, every current and future wait completes until reset() (.NET ManualResetEventSlim's
/// semantics, awaited instead of blocked on).
class async_manual_reset_event final : private detail::async_event_state {
 public:
  explicit async_manual_reset_event(bool initially_set = false) noexcept : async_event_state(initially_set) {}

  /// Opens the gate and releases every waiter, oldest first.
  void set();
  /// Closes the gate; waits started afterwards wait for the next set().
  using async_event_state::reset;
  using async_event_state::is_set;
  /// Completes once the event is set (at once if it is); canceled if token is canceled first.
  task<> wait_async(const cancellation_token& token = {});
};

/// Each set() releases one waiter (the oldest) or, with none waiting, leaves the event set so the
/// next wait passes and resets it (.NET AutoResetEvent). Setting a set event does nothing.
class async_auto_reset_event final : private detail::async_event_state {
 public:
  explicit async_auto_reset_event(bool initially_set = false) noexcept : async_event_state(initially_set) {}

  void set();
  using async_event_state::reset;
  using async_event_state::is_set;
  /// Completes once this wait consumed a set(); canceled if token is canceled first (a canceled
  /// wait never consumes a set()).
  task<> wait_async(const cancellation_token& token = {});
};

}  // namespace tpl
