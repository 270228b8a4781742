// tpl/sync/async_mutex.hpp — a mutual-exclusion lock whose waiters suspend instead of blocking
// (the .NET idiom `SemaphoreSlim(1, 1)` + `await WaitAsync()`, cppcoro's async_mutex).
//
//   tpl::async_mutex m;
//   tpl::task<> append(std::vector<int>& v, int x) {
//     auto guard = co_await m.lock_async();        // RAII: unlocks when it goes out of scope
//     co_await write_to_disk(v);                   // may suspend while holding the lock
//     v.push_back(x);
//   }
//   auto guard = co_await m.lock_async(token);     // canceled: throws operation_canceled
//
// Fairness: strictly first come, first served. unlock() hands the lock to the oldest waiter
// directly (the mutex stays locked), so a newcomer can never barge in ahead of a queued waiter.
// The waiter that gets the lock resumes inline on the unlocking thread, through tpl's
// bounded-depth trampoline (a long hand-off chain continues on the pool past the depth limit).
// Not recursive: a holder that locks again waits for itself forever (as with SemaphoreSlim).
// Unlocking a mutex that is not locked throws invalid_operation. Destroying a mutex with
// waiters queued fails their waits with invalid_operation.
//
// Cost: an uncontended lock_async() + unlock is two short locked sections and no allocation
// (the value_task holds the guard inline).
#pragma once

#include <mutex>  // std::adopt_lock_t
#include <utility>

#include "tpl/cancellation.hpp"
#include "tpl/detail/short_lock.hpp"
#include "tpl/sync/wait_list.hpp"
#include "tpl/task.hpp"
#include "tpl/value_task.hpp"

namespace tpl {

class async_mutex;

/// Owns a lock on an async_mutex; unlocks it when destroyed (or on unlock()). Move-only.
class [[nodiscard]] async_mutex_lock {
 public:
  async_mutex_lock() noexcept = default;
  /// Adopts a lock the caller already holds (after try_lock() or a manual lock).
  explicit async_mutex_lock(async_mutex& m, std::adopt_lock_t) noexcept : m_(&m) {}
  async_mutex_lock(async_mutex_lock&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  async_mutex_lock& operator=(async_mutex_lock&& o) noexcept {
    if (this != &o) {
      unlock();
      m_ = std::exchange(o.m_, nullptr);
    }
    return *this;
  }
  async_mutex_lock(const async_mutex_lock&) = delete;
  async_mutex_lock& operator=(const async_mutex_lock&) = delete;
  ~async_mutex_lock() { unlock(); }

  /// Unlocks now (idempotent).
  void unlock() noexcept;
  bool owns_lock() const noexcept { return m_ != nullptr; }
  /// Gives up ownership without unlocking; returns the mutex (the caller must unlock it).
  async_mutex* release() noexcept { return std::exchange(m_, nullptr); }

 private:
  async_mutex* m_ = nullptr;
};

class async_mutex final : private detail::sync_waitable {
 public:
  async_mutex() noexcept = default;
  ~async_mutex();
  async_mutex(const async_mutex&) = delete;
  async_mutex& operator=(const async_mutex&) = delete;

  /// Completes (with the guard) once the caller holds the lock: at once and without allocating if
  /// the mutex is free and nobody is queued; canceled if token is canceled before the lock is
  /// granted (the caller then holds nothing).
  value_task<async_mutex_lock> lock_async(const cancellation_token& token = {});
  /// Same as lock_async (cppcoro's name for the guard-returning lock).
  value_task<async_mutex_lock> scoped_lock_async(const cancellation_token& token = {}) { return lock_async(token); }
  /// Completes once the caller holds the lock, without a guard: pair it with unlock().
  task<> lock_async_unguarded(const cancellation_token& token = {});

  /// Takes the lock if it is free and nobody is queued.
  bool try_lock() noexcept;
  /// Releases the lock, handing it to the oldest waiter if there is one. Throws invalid_operation
  /// if the mutex is not locked.
  void unlock();
  /// A snapshot: whether some holder owns the lock right now.
  bool is_locked() const noexcept;

 private:
  bool try_unlink(detail::sync_waiter* w) noexcept override;
  bool take_or_enqueue(detail::sync_waiter* w, bool may_enqueue) noexcept;

  mutable detail::short_lock lock_;
  bool locked_ = false;
  detail::sync_wait_list waiters_;
};

inline void async_mutex_lock::unlock() noexcept {
  if (m_ != nullptr) std::exchange(m_, nullptr)->unlock();  // held by us: unlock cannot throw
}

}  // namespace tpl
