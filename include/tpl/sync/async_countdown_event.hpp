// tpl/sync/async_countdown_event.hpp — a countdown event coroutines await (.NET CountdownEvent
// with an asynchronous wait): it is set when its count reaches zero.
//
//   tpl::async_countdown_event pending(3);
//   for (int i = 0; i < 3; ++i) start(i, [&] { pending.signal(); });
//   co_await pending.wait_async(token);
//
// Errors as countdown_event: signal below zero or on a set event throws invalid_operation; counts
// must be positive. The signal that reaches zero resumes the waiters inline, oldest first.
#pragma once

#include "tpl/sync/countdown_event.hpp"
#include "tpl/task.hpp"

namespace tpl {

class async_countdown_event {
 public:
  /// Throws std::invalid_argument if initial_count < 0.
  explicit async_countdown_event(std::int64_t initial_count) : core_(initial_count) {}

  bool signal(std::int64_t n = 1) { return core_.signal(n); }
  void add_count(std::int64_t n = 1) { core_.add_count(n); }
  bool try_add_count(std::int64_t n = 1) { return core_.try_add_count(n); }
  void reset() { core_.reset(core_.initial_count()); }
  void reset(std::int64_t count) { core_.reset(count); }
  std::int64_t current_count() const noexcept { return core_.current_count(); }
  std::int64_t initial_count() const noexcept { return core_.initial_count(); }
  bool is_set() const noexcept { return current_count() == 0; }

  /// Completes when the count is zero (at once if it is); canceled if token is canceled first.
  task<> wait_async(const cancellation_token& token = {});

 private:
  detail::countdown_core core_;
};

}  // namespace tpl
