// tpl/dedicated_thread_scheduler.hpp — tpl::dedicated_thread_scheduler: a scheduler with n threads
// of its own sharing one FIFO queue (the seeds' StaTaskScheduler; .NET's
// ConcurrentExclusiveSchedulerPair-style isolation for code that must not share the pool).
//
//   tpl::dedicated_thread_scheduler ui(1);            // one thread: items run in order
//   auto t = tpl::run(ui, [] { return render(); });  // runs on ui's thread
//   co_await tpl::resume_on(ui);                      // continue there from a coroutine
//
// Items run through scheduler::run, so while they run scheduler::current() is this scheduler:
// yield() and queued continuations come back to it. The threads are not pool threads: blocking in
// them never makes the default pool add threads. Destruction runs everything still queued
// (including what that work queues), then joins the threads; it must not happen on one of them.
// Work scheduled after destruction began runs inline on the scheduling thread.
#pragma once

#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tpl/scheduler.hpp"

namespace tpl {

class dedicated_thread_scheduler final : public scheduler {
 public:
  /// n threads (at least 1: n == 0 throws std::invalid_argument), named name-0, name-1, ...
  explicit dedicated_thread_scheduler(unsigned n = 1, std::string name = "tpl-dedicated");
  ~dedicated_thread_scheduler() override;
  dedicated_thread_scheduler(const dedicated_thread_scheduler&) = delete;
  dedicated_thread_scheduler& operator=(const dedicated_thread_scheduler&) = delete;

  void schedule(std::coroutine_handle<> h) override;

  unsigned thread_count() const noexcept { return static_cast<unsigned>(threads_.size()); }
  /// Whether the calling thread is one of this scheduler's threads.
  bool owns_current_thread() const noexcept;
  /// Items queued and not yet started.
  std::size_t queued() const;

 private:
  void loop(unsigned index);

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::coroutine_handle<>> queue_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::string name_;
  std::vector<std::thread> threads_;
};

}  // namespace tpl
