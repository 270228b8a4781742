// tpl::concurrent_exclusive_scheduler_pair: two queues and the processing work items that drain
// them, one mutex over all of it (as .NET's ValueLock).
//
// Invariants (under mutex_):
//   - exclusive_processing_ and concurrent_processing_ > 0 are never both true: an exclusive
//     processing item is launched only when no concurrent one exists, and concurrent ones only
//     when no exclusive one exists and no exclusive item waits. So exclusive items run alone.
//   - concurrent_processing_ <= max_concurrency_: at most that many concurrent items run at once.
//   - A queued item always has a processing item that will see it: enqueue() launches one when
//     none may take it, and a processing item decides to end in the same critical section in which
//     it finds nothing it may take, launching whatever the queues then need (decide_locked). No
//     item is left queued with no processing to run it.
//   - completed_ becomes true once, when completion was requested, the queues are empty and no
//     processing item exists; completion_ is then completed outside the lock.
//   - in_flight_ counts threads still using the pair outside the lock (launching, completing);
//     the destructor waits for it to drop to zero as well as for the processing to end.
#include "tpl/concurrent_exclusive_scheduler_pair.hpp"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

#include "tpl/detail/detached.hpp"
#include "tpl/detail/flow.hpp"
#include "tpl/detail/trampoline.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/thread_pool.hpp"

namespace tpl {

namespace {
int checked_limit(int v, const char* what) {
  if (v == concurrent_exclusive_scheduler_pair::unlimited) return INT_MAX;
  if (v <= 0)
    throw std::invalid_argument(std::string("concurrent_exclusive_scheduler_pair: ") + what +
                                " must be positive or concurrent_exclusive_scheduler_pair::unlimited (-1), not " +
                                std::to_string(v));
  return v;
}
}  // namespace

// A processing work item: a coroutine the underlying scheduler resumes once; it drains a queue
// and frees its frame (from the frame pool) when it returns. A member of the pair's friend, so
// that it may call process(), which is noexcept (the item's body never throws).
struct concurrent_exclusive_scheduler_pair::processing {
  static detail::suspended_item make(concurrent_exclusive_scheduler_pair* pair, bool exclusive) {
    pair->process(exclusive);
    co_return;
  }
};

concurrent_exclusive_scheduler_pair::concurrent_exclusive_scheduler_pair()
    : concurrent_exclusive_scheduler_pair(thread_pool::default_pool()) {}

concurrent_exclusive_scheduler_pair::concurrent_exclusive_scheduler_pair(scheduler& underlying, int max_concurrency_level,
                                                                         int max_items_per_task)
    : underlying_(underlying),
      max_concurrency_(checked_limit(max_concurrency_level, "max_concurrency_level")),
      max_items_per_task_(checked_limit(max_items_per_task, "max_items_per_task")),
      concurrent_(*this, false),
      exclusive_(*this, true) {}

concurrent_exclusive_scheduler_pair::~concurrent_exclusive_scheduler_pair() {
  if (running_in_this_pair()) {
    std::fputs("tpl: concurrent_exclusive_scheduler_pair destroyed from one of its own work items\n", stderr);
    std::abort();
  }
  complete();
  std::unique_lock g(mutex_);
  drained_.wait(g, [this] {
    return !exclusive_processing_ && concurrent_processing_ == 0 && in_flight_ == 0 && exclusive_queue_.empty() &&
           concurrent_queue_.empty();
  });
}

std::exception_ptr concurrent_exclusive_scheduler_pair::member_scheduler::run_item(std::coroutine_handle<> h) noexcept {
  // As scheduler::run, but what escapes the item is handed back (it faults completion()) rather
  // than ending the process.
  scheduler* previous = detail::current_scheduler_tls();
  detail::current_scheduler_tls() = this;
  detail::trampoline_state& t = detail::trampoline_tls();
  ++t.depth;
  std::exception_ptr escaped;
  try {
    h.resume();
  } catch (...) {
    escaped = std::current_exception();
  }
  --t.depth;
  detail::reset_context();
  detail::current_scheduler_tls() = previous;
  return escaped;
}

bool concurrent_exclusive_scheduler_pair::running_in_this_pair() const noexcept {
  const scheduler* s = scheduler::current();
  return s == &concurrent_ || s == &exclusive_;
}

void concurrent_exclusive_scheduler_pair::enqueue(std::coroutine_handle<> h, bool exclusive) {
  launches l;
  {
    std::lock_guard g(mutex_);
    if (completion_requested_ && !running_in_this_pair())
      throw invalid_operation(std::string("tpl: concurrent_exclusive_scheduler_pair: work queued on its ") +
                              (exclusive ? "exclusive" : "concurrent") + " scheduler after complete()");
    (exclusive ? exclusive_queue_ : concurrent_queue_).push_back(h);
    l = decide_locked();
  }
  carry_out(l);
}

void concurrent_exclusive_scheduler_pair::complete() {
  launches l;
  {
    std::lock_guard g(mutex_);
    if (completion_requested_) return;
    completion_requested_ = true;
    l = decide_locked();
  }
  carry_out(l);
}

std::size_t concurrent_exclusive_scheduler_pair::queued_concurrent() const {
  std::lock_guard g(mutex_);
  return concurrent_queue_.size();
}

std::size_t concurrent_exclusive_scheduler_pair::queued_exclusive() const {
  std::lock_guard g(mutex_);
  return exclusive_queue_.size();
}

concurrent_exclusive_scheduler_pair::launches concurrent_exclusive_scheduler_pair::decide_locked() {
  launches l;
  if (!exclusive_processing_ && concurrent_processing_ == 0 && !exclusive_queue_.empty()) {
    exclusive_processing_ = true;
    l.exclusive = true;
  } else if (!exclusive_processing_ && exclusive_queue_.empty()) {
    // One processing item per queued item, up to the limit (those already running may take some:
    // a surplus one finds the queue empty and ends).
    const std::size_t queued = concurrent_queue_.size();
    while (concurrent_processing_ < max_concurrency_ && static_cast<std::size_t>(l.concurrent) < queued) {
      ++concurrent_processing_;
      ++l.concurrent;
    }
  }
  if (completion_requested_ && !completed_ && !exclusive_processing_ && concurrent_processing_ == 0 &&
      exclusive_queue_.empty() && concurrent_queue_.empty()) {
    completed_ = true;
    l.complete_now = true;
    l.faults = std::move(faults_);
  }
  if (l.exclusive || l.concurrent > 0 || l.complete_now) ++in_flight_;
  return l;
}

void concurrent_exclusive_scheduler_pair::carry_out(launches& l) {
  if (!l.exclusive && l.concurrent == 0 && !l.complete_now) return;
  if (l.exclusive) launch(true);
  for (int i = 0; i < l.concurrent; ++i) launch(false);
  if (l.complete_now) {
    // completion_ runs its continuations asynchronously: none runs here, inside the pair.
    if (l.faults.empty())
      completion_.set_result();
    else
      completion_.set_exception(std::move(l.faults));
  }
  std::lock_guard g(mutex_);
  if (--in_flight_ == 0) drained_.notify_all();
}

void concurrent_exclusive_scheduler_pair::launch(bool exclusive) noexcept {
  std::coroutine_handle<> h;
  try {
    h = processing::make(this, exclusive).handle;
    underlying_.schedule(h);
    return;
  } catch (...) {
    if (h) h.destroy();
    std::lock_guard g(mutex_);
    faults_.push_back(std::current_exception());
    completion_requested_ = true;
  }
  // The underlying scheduler (or the frame allocation) failed: the slot is ours, so drain it on this
  // thread rather than leave queued work with nobody to run it.
  process(exclusive);
}

void concurrent_exclusive_scheduler_pair::process(bool exclusive) noexcept {
  member_scheduler& runner = exclusive ? exclusive_ : concurrent_;
  long long ran = 0;
  for (;;) {
    std::coroutine_handle<> h;
    launches l;
    {
      std::lock_guard g(mutex_);
      std::deque<std::coroutine_handle<>>& queue = exclusive ? exclusive_queue_ : concurrent_queue_;
      // Concurrent processing yields to waiting exclusive work; either kind yields to the
      // underlying scheduler after max_items_per_task items (a fresh processing item goes on).
      const bool take = !queue.empty() && ran < max_items_per_task_ && (exclusive || exclusive_queue_.empty());
      if (take) {
        h = queue.front();
        queue.pop_front();
      } else {
        if (exclusive)
          exclusive_processing_ = false;
        else
          --concurrent_processing_;
        l = decide_locked();
        if (!exclusive_processing_ && concurrent_processing_ == 0 && in_flight_ == 0) drained_.notify_all();
      }
    }
    if (!h) {
      carry_out(l);
      return;  // the pair may be gone from here on
    }
    ++ran;
    if (std::exception_ptr e = runner.run_item(h)) {
      std::lock_guard g(mutex_);
      faults_.push_back(std::move(e));
      completion_requested_ = true;
    }
  }
}

}  // namespace tpl
