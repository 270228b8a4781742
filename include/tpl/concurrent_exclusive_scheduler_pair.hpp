// tpl/concurrent_exclusive_scheduler_pair.hpp — reader/writer scheduling of work items
// (.NET ConcurrentExclusiveSchedulerPair): two schedulers over one underlying scheduler; what runs
// on exclusive_scheduler() runs alone, what runs on concurrent_scheduler() runs alongside other
// concurrent work, up to max_concurrency_level items at once.
//
//   tpl::concurrent_exclusive_scheduler_pair pair;            // over the default pool
//   auto reader = tpl::run(pair.concurrent_scheduler(), [&] { return lookup(table, key); });
//   auto writer = tpl::run(pair.exclusive_scheduler(), [&] { table.insert(k, v); });
//   pair.complete();                                           // no more work is accepted
//   pair.completion().wait();                                  // what was queued has run
//
// Semantics:
//   1. A work item is a coroutine handle given to one of the two schedulers (tpl::run(s, f),
//      co_await tpl::resume_on(s), a continuation queued to the current scheduler). It runs until
//      it next suspends; a coroutine that awaits something continues where tpl's awaits continue
//      (on the completing thread), so co_await resume_on(pair.exclusive_scheduler()) to come back,
//      while yield() and queued continuations return to the scheduler the item runs on
//      (scheduler::current()).
//   2. Exclusive items run one at a time and never while a concurrent item runs. Concurrent items
//      run up to max_concurrency_level at once. When both kinds wait, exclusive work goes first:
//      concurrent processing stops taking items as soon as an exclusive item is queued (.NET).
//   3. The pair runs its items from processing work items it queues to the underlying scheduler:
//      one for exclusive work, up to max_concurrency_level for concurrent work. Each runs at most
//      max_items_per_task items before it ends and the pair queues a fresh one, so other work on
//      the underlying scheduler gets its turn (unlimited: until the queue is empty).
//   4. complete() ends acceptance: from then on schedule() throws invalid_operation, unless the
//      caller is itself running one of the pair's items (its continuations belong to accepted work
//      and may be queued from places that cannot throw). completion() completes once complete()
//      was called and everything accepted has run.
//   5. An exception that escapes resuming a work item (a coroutine type that rethrows from its
//      promise; tpl's tasks keep their exceptions in their task, as .NET's tasks do) and a failure
//      to queue processing to the underlying scheduler fault completion() (with every such
//      exception) and request completion, as .NET faults the pair's Completion.
//   6. max_concurrency_level and max_items_per_task: a positive number, or `unlimited` (-1, .NET's
//      -1). 0 or any other negative value throws std::invalid_argument.
//   7. The destructor requests completion and blocks until the pair's processing has ended; do not
//      destroy the pair from one of its own items.
#pragma once

#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <vector>

#include "tpl/scheduler.hpp"
#include "tpl/task.hpp"
#include "tpl/task_completion_source.hpp"

namespace tpl {

class concurrent_exclusive_scheduler_pair {
 public:
  /// The sentinel for no limit (.NET -1).
  static constexpr int unlimited = -1;

  /// Over the default thread pool, concurrency and items per task unlimited.
  concurrent_exclusive_scheduler_pair();
  /// Over `underlying` (which must outlive the pair). Throws std::invalid_argument for a limit that
  /// is neither positive nor unlimited.
  explicit concurrent_exclusive_scheduler_pair(scheduler& underlying, int max_concurrency_level = unlimited,
                                               int max_items_per_task = unlimited);
  ~concurrent_exclusive_scheduler_pair();
  concurrent_exclusive_scheduler_pair(const concurrent_exclusive_scheduler_pair&) = delete;
  concurrent_exclusive_scheduler_pair& operator=(const concurrent_exclusive_scheduler_pair&) = delete;

  /// Runs items alongside other concurrent items (.NET ConcurrentScheduler).
  scheduler& concurrent_scheduler() noexcept { return concurrent_; }
  /// Runs items alone (.NET ExclusiveScheduler).
  scheduler& exclusive_scheduler() noexcept { return exclusive_; }

  /// Stops accepting work (.NET Complete()); idempotent.
  void complete();
  /// Completes when complete() was called and all accepted work has run; faulted per semantics 5.
  task<> completion() const { return completion_.get_task(); }

  /// The concurrency limit in force (unlimited: the largest int, as .NET reports it).
  int max_concurrency_level() const noexcept { return max_concurrency_; }
  int max_items_per_task() const noexcept { return max_items_per_task_; }

  /// Items queued and not yet started, of each kind (diagnostics and tests).
  std::size_t queued_concurrent() const;
  std::size_t queued_exclusive() const;

 private:
  class member_scheduler final : public scheduler {
   public:
    member_scheduler(concurrent_exclusive_scheduler_pair& pair, bool exclusive) noexcept
        : pair_(pair), exclusive_(exclusive) {}
    void schedule(std::coroutine_handle<> h) override { pair_.enqueue(h, exclusive_); }
    /// Resumes h with this scheduler current; returns what escaped it, if anything.
    std::exception_ptr run_item(std::coroutine_handle<> h) noexcept;

   private:
    concurrent_exclusive_scheduler_pair& pair_;
    bool exclusive_;
  };

  struct processing;  // the coroutine type of a processing work item (src/)
  friend struct processing;

  /// A launch decided under the lock, carried out after it (the underlying scheduler may run the
  /// processing inline, which takes the lock again).
  struct launches {
    bool exclusive = false;
    int concurrent = 0;
    bool complete_now = false;
    std::vector<std::exception_ptr> faults;  // complete_now: what completion() faults with
  };

  void enqueue(std::coroutine_handle<> h, bool exclusive);
  launches decide_locked();
  void carry_out(launches& l);
  void launch(bool exclusive) noexcept;
  void process(bool exclusive) noexcept;
  bool running_in_this_pair() const noexcept;

  scheduler& underlying_;
  const int max_concurrency_;
  const int max_items_per_task_;
  member_scheduler concurrent_;
  member_scheduler exclusive_;

  // Everything below is guarded by mutex_.
  mutable std::mutex mutex_;
  std::condition_variable drained_;  // the destructor waits here for processing to end
  std::deque<std::coroutine_handle<>> concurrent_queue_;
  std::deque<std::coroutine_handle<>> exclusive_queue_;
  int concurrent_processing_ = 0;   // concurrent processing work items queued or running
  bool exclusive_processing_ = false;
  bool completion_requested_ = false;
  bool completed_ = false;
  int in_flight_ = 0;  // carry_out() calls under way (they still use the pair)
  std::vector<std::exception_ptr> faults_;
  task_completion_source<void> completion_{task_creation_options::run_continuations_asynchronously};
};

}  // namespace tpl
