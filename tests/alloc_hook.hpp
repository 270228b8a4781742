// tests/alloc_hook.hpp — the global operator new of the tpl_alloc_tests binary (tests/alloc_*.cpp),
// defined once in tests/alloc_hook.cpp: it counts every allocation and can make one fail.
//
// Every replaceable form of operator new (plain, array, nothrow, aligned) goes through one
// function that counts the allocation (all threads) and, while a failure is armed on the calling
// thread, counts down and fails the armed allocation: the throwing forms throw std::bad_alloc, the
// nothrow forms return nullptr. Only the thread that armed a failure sees it: the allocations of
// other threads (pool workers, timer and gate threads) never fail, so a failure never lands inside
// a noexcept completion path that runs on a worker (where terminating is tpl's documented policy).
// The matching operator deletes release with std::free (every form allocates with malloc or
// posix_memalign).
#pragma once

namespace tpl_alloc {

/// Allocations made so far by every thread (all forms of operator new).
long allocations() noexcept;

/// From now on, the `n`-th allocation (n >= 1) made by the calling thread outside a `paused`
/// scope fails. With `persistent`, every allocation after it fails too, until disarm_failure().
void arm_failure(long n, bool persistent = false) noexcept;
/// Stops failing allocations on the calling thread (failure_injected() keeps its value).
void disarm_failure() noexcept;
/// Whether an armed failure has fired on the calling thread since the last arm_failure().
bool failure_injected() noexcept;

/// In this scope the calling thread's allocations neither count toward the armed failure nor fail
/// (the test's own bookkeeping, and the waits that collect a scenario's outcome).
class paused {
 public:
  paused() noexcept;
  ~paused();
  paused(const paused&) = delete;
  paused& operator=(const paused&) = delete;

 private:
  bool was_paused_;
};

}  // namespace tpl_alloc
