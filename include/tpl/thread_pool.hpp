// tpl/thread_pool.hpp — tpl::thread_pool: the work-stealing thread pool every task runs on.
//
// Each worker owns a lock-free work-stealing deque (owner pushes and pops LIFO, thieves steal
// FIFO); a global FIFO queue takes work queued from outside the pool and yields. Workers look for
// work in the order: own deque, global queue, other workers' deques (random start). An idle worker
// spins briefly, then parks; a parked worker is woken only when no other worker is already
// searching, so a burst of queued items costs one wake-up, not one per item (a cross-core wake
// costs tens of microseconds on a VM).
//
//   tpl::thread_pool pool({.thread_count = 4});
//   auto t = tpl::run(pool, [] { return 6 * 7; });
//   int v = tpl::sync_wait(t);
//
//   tpl::thread_pool::default_pool();     // the process-wide pool: one thread per core
//
// Destroying a pool (or calling shutdown()) runs everything already queued, including work queued by
// that work, then joins the threads: no queued item is dropped. Work scheduled on a pool after
// shutdown() has drained it runs inline on the scheduling thread (while the object still exists;
// scheduling on a destroyed pool is a use after free like any other). A pool must not be shut
// down from one of its own threads.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tpl/scheduler.hpp"

namespace tpl {

namespace detail {
/// Marks a blocking wait on the calling thread: while it lives, the thread's pool (if the thread is
/// a pool worker) counts the worker as blocked. Every blocking wait in tpl goes through one.
class blocking_region {
 public:
  blocking_region() noexcept;
  ~blocking_region();
  blocking_region(const blocking_region&) = delete;
  blocking_region& operator=(const blocking_region&) = delete;

 private:
  void* pool_;
};
}  // namespace detail

struct thread_pool_options {
  /// Number of worker threads; 0 means one per hardware thread.
  unsigned thread_count = 0;
  /// Prefix of the workers' thread names (visible in debuggers and top).
  std::string thread_name = "tpl-worker";
};

struct thread_pool_stats {
  unsigned thread_count = 0;
  unsigned idle_threads = 0;
  unsigned spinning_threads = 0;
  std::size_t global_queue_length = 0;
  std::size_t local_queue_length = 0;  ///< summed over all workers
  std::uint64_t items_executed = 0;
  /// Workers currently blocked in a tpl blocking wait (task::wait/get, sync_wait,
  /// async_semaphore::wait). The injection policy that reacts to it comes with the pool-policies
  /// work; today it is observed, not acted on.
  unsigned blocked_threads = 0;
  std::uint64_t wakeups = 0;           ///< parked workers woken to take work
  /// Parked workers that found work on their periodic re-check instead of being woken: each one is
  /// a missed wake-up that the safety net caught (expected 0; see docs/thread-pool.md).
  std::uint64_t wakeups_by_park_timeout = 0;
};

class thread_pool final : public scheduler {
 public:
  explicit thread_pool(thread_pool_options options = {});
  ~thread_pool() override;
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// The process-wide pool used by tpl::run, yield() and asynchronous continuations. Created on
  /// first use, never destroyed (its threads end with the process).
  static thread_pool& default_pool();

  /// The pool whose worker is the calling thread, or nullptr.
  static thread_pool* current() noexcept;

  /// Queues h: on this worker's own deque when called from one of this pool's threads, else on
  /// the global queue.
  void schedule(std::coroutine_handle<> h) override;
  /// Queues h on the global queue, behind the work already waiting (yield()).
  void schedule_after_others(std::coroutine_handle<> h) override;

  unsigned thread_count() const noexcept;
  thread_pool_stats stats() const noexcept;

  /// Runs all queued work (and the work it queues) to the end and joins the threads. Idempotent;
  /// the destructor calls it. Must not be called from one of this pool's threads.
  void shutdown();

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace tpl
