// tpl/sync/countdown_event.hpp — countdown_event: set when its count reaches zero (.NET
// CountdownEvent), with blocking waits that tell the thread pool they block.
//
//   tpl::countdown_event pending(3);
//   for (int i = 0; i < 3; ++i) tpl::run([&] { work(i); pending.signal(); });
//   pending.wait();                                   // or wait(timeout, token) -> bool
//
// signal(n) below zero, or on an event already set, throws invalid_operation and changes nothing;
// add_count on a set event throws invalid_operation (try_add_count returns false); counts must be
// positive (std::invalid_argument). async_countdown_event (tpl/sync/async_countdown_event.hpp) is
// the same with wait_async().
#pragma once

#include <chrono>
#include <cstdint>

#include "tpl/cancellation.hpp"
#include "tpl/detail/short_lock.hpp"
#include "tpl/sync/wait_list.hpp"
#include "tpl/time_provider.hpp"

namespace tpl {

namespace detail {
/// The count and the waiters shared by countdown_event and async_countdown_event.
class countdown_core : public sync_waitable {
 public:
  explicit countdown_core(std::int64_t initial_count);
  ~countdown_core();
  countdown_core(const countdown_core&) = delete;
  countdown_core& operator=(const countdown_core&) = delete;

  bool signal(std::int64_t n);
  void add_count(std::int64_t n);
  bool try_add_count(std::int64_t n);
  void reset(std::int64_t count);
  std::int64_t current_count() const noexcept;
  std::int64_t initial_count() const noexcept;
  bool take_or_enqueue(sync_waiter* w, bool may_enqueue) noexcept;
  bool try_unlink(sync_waiter* w) noexcept override;

 private:
  mutable short_lock lock_;
  std::int64_t count_;
  std::int64_t initial_;
  sync_wait_list waiters_;
};
}  // namespace detail

class countdown_event {
 public:
  /// Throws std::invalid_argument if initial_count < 0 (0: the event starts set).
  explicit countdown_event(std::int64_t initial_count) : core_(initial_count) {}

  /// Decrements the count by n (>= 1); true if it reached zero (the event is now set). Throws
  /// invalid_operation if the count is already zero or smaller than n.
  bool signal(std::int64_t n = 1) { return core_.signal(n); }
  /// Increments the count; throws invalid_operation if the event is already set.
  void add_count(std::int64_t n = 1) { core_.add_count(n); }
  /// As add_count; false instead of throwing if the event is already set.
  bool try_add_count(std::int64_t n = 1) { return core_.try_add_count(n); }
  /// Sets the count to `count` (initial_count() by default); waiters stay queued unless it is 0.
  void reset() { core_.reset(core_.initial_count()); }
  void reset(std::int64_t count) { core_.reset(count); }

  std::int64_t current_count() const noexcept { return core_.current_count(); }
  std::int64_t initial_count() const noexcept { return core_.initial_count(); }
  bool is_set() const noexcept { return current_count() == 0; }

  /// Blocks until the count is zero.
  void wait();
  /// Blocks until set (true), timeout (false; infinite_timeout: never) or cancellation (throws).
  bool wait(std::chrono::nanoseconds timeout, const cancellation_token& token = {});
  void wait(const cancellation_token& token) { (void)wait(std::chrono::nanoseconds(infinite_timeout), token); }

 private:
  detail::countdown_core core_;
};

}  // namespace tpl
