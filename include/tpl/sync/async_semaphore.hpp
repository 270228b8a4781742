// tpl/sync/async_semaphore.hpp — a counting semaphore with asynchronous waits (.NET SemaphoreSlim).
//
//   tpl::async_semaphore gate(4);                 // at most 4 at once
//   co_await gate.wait_async();
//   try { co_await do_work(); } catch (...) { gate.release(); throw; }
//   gate.release();
//
//   if (co_await gate.wait_async(std::chrono::seconds(1), token)) { ... gate.release(); }
//
// Waiters are served first come, first served (asynchronous and blocking alike). A wait that
// times out or is canceled leaves the queue at once and never consumes a count. release(n) beyond
// max_count throws semaphore_full and changes nothing. Destroying a semaphore with waiters still
// queued fails their waits with invalid_operation (blocking waiters must not exist then: destroying
// an object another thread is blocked on is undefined, as for any object).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

#include "tpl/cancellation.hpp"
#include "tpl/detail/short_lock.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/task.hpp"
#include "tpl/time_provider.hpp"

namespace tpl {

/// release() would take the count above max_count (.NET SemaphoreFullException).
class semaphore_full : public invalid_operation {
 public:
  semaphore_full() : invalid_operation("tpl: async_semaphore::release would exceed max_count") {}
};

namespace detail {
struct wait_queue_probe;  // tpl/testing/wait_queues.hpp

struct semaphore_waiter {
  semaphore_waiter* prev = nullptr;
  semaphore_waiter* next = nullptr;
  bool linked = false;  // guarded by the semaphore's lock
  /// Called outside the lock after the waiter was unlinked by release() (granted = true) or by the
  /// semaphore's destruction (granted = false).
  void (*resolve)(semaphore_waiter*, bool granted) noexcept = nullptr;
};
}  // namespace detail

class async_semaphore {
 public:
  /// Throws std::invalid_argument if initial_count < 0, max_count <= 0 or initial_count > max_count.
  explicit async_semaphore(std::int64_t initial_count,
                           std::int64_t max_count = std::numeric_limits<std::int64_t>::max());
  ~async_semaphore();
  async_semaphore(const async_semaphore&) = delete;
  async_semaphore& operator=(const async_semaphore&) = delete;

  std::int64_t current_count() const noexcept;
  std::int64_t max_count() const noexcept { return max_; }

  /// Blocks until a count is available.
  void wait();
  /// Blocks up to timeout (system time); false if it timed out. Throws operation_canceled if token
  /// is canceled first.
  bool wait(std::chrono::nanoseconds timeout, const cancellation_token& token = {});

  /// Completes when a count was taken for the caller (immediately, without allocating, if one is
  /// free). Canceled if token is canceled first.
  task<> wait_async(const cancellation_token& token = {});
  /// As wait_async, giving up after timeout: true if a count was taken, false on timeout.
  task<bool> wait_async(std::chrono::nanoseconds timeout, const cancellation_token& token = {},
                        time_provider& provider = system_time_provider());

  /// Returns `count` to the semaphore, waking up to that many waiters in FIFO order. Returns the
  /// count before the call. Throws std::invalid_argument if count < 1, semaphore_full if the count
  /// would exceed max_count.
  std::int64_t release(std::int64_t count = 1);

  /// Internal: for waiters giving up (timeout / cancel). True if w was still queued (now removed).
  bool try_unlink(detail::semaphore_waiter* w) noexcept;
  /// Internal: takes a count or queues w. True if a count was taken (w not queued).
  bool take_or_enqueue(detail::semaphore_waiter* w) noexcept;

 private:
  friend struct detail::wait_queue_probe;
  mutable detail::short_lock lock_;
  std::int64_t count_;
  const std::int64_t max_;
  detail::semaphore_waiter* head_ = nullptr;  // oldest
  detail::semaphore_waiter* tail_ = nullptr;
};

}  // namespace tpl
