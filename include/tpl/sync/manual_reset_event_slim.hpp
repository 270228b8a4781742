// tpl/sync/manual_reset_event_slim.hpp — a blocking manual-reset event that spins briefly before
// it sleeps (.NET ManualResetEventSlim).
//
//   tpl::manual_reset_event_slim done;
//   std::thread t([&] { work(); done.set(); });
//   done.wait();                                        // or wait(timeout, token) -> bool
//
// A blocked wait tells the thread pool (detail::blocking_region), so a pool thread waiting here
// counts as blocked and the pool can add a thread meanwhile. Waiters are woken all at once by
// set(). Prefer async_manual_reset_event in coroutines: it suspends instead of blocking a thread.
#pragma once

#include <chrono>

#include "tpl/cancellation.hpp"
#include "tpl/detail/short_lock.hpp"
#include "tpl/sync/wait_list.hpp"
#include "tpl/time_provider.hpp"

namespace tpl {

namespace detail {
struct wait_queue_probe;  // tpl/testing/wait_queues.hpp
}  // namespace detail

class manual_reset_event_slim final : private detail::sync_waitable {
 public:
  /// spin_count: spin_wait steps tried before blocking (.NET SpinCount; 0 on a single core).
  explicit manual_reset_event_slim(bool initially_set = false, int spin_count = 35);
  ~manual_reset_event_slim();
  manual_reset_event_slim(const manual_reset_event_slim&) = delete;
  manual_reset_event_slim& operator=(const manual_reset_event_slim&) = delete;

  void set();
  void reset() noexcept;
  bool is_set() const noexcept;
  int spin_count() const noexcept { return spin_count_; }

  /// Blocks until set.
  void wait();
  /// Blocks until set (true), timeout passes (false; infinite_timeout: never) or token is canceled
  /// (throws operation_canceled).
  bool wait(std::chrono::nanoseconds timeout, const cancellation_token& token = {});
  void wait(const cancellation_token& token) { (void)wait(std::chrono::nanoseconds(infinite_timeout), token); }

 private:
  friend struct detail::wait_queue_probe;
  bool try_unlink(detail::sync_waiter* w) noexcept override;

  mutable detail::short_lock lock_;
  std::atomic<bool> set_;
  detail::sync_wait_list waiters_;
  int spin_count_;
};

}  // namespace tpl
