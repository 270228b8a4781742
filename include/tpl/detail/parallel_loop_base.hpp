// tpl/detail/parallel_loop_base.hpp — what tpl/parallel.hpp's blocking and asynchronous loops
// share (internal): the options and result types, the loop-wide flags, the worker budget and the
// fire-and-forget coroutine that carries a loop's helpers and workers.
//
// Invariants: a loop_worker's frame frees itself at its end (final_suspend never suspends), and a
// loop_worker that could not be queued is destroyed by start_worker, so no worker frame leaks.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <ranges>
#include <vector>

#include "tpl/cancellation.hpp"
#include "tpl/detail/config.hpp"
#include "tpl/detail/detached.hpp"
#include "tpl/detail/short_lock.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/scheduler.hpp"
#include "tpl/task.hpp"
#include "tpl/task_completion_source.hpp"

namespace tpl {

/// Options of a parallel loop (.NET ParallelOptions).
struct parallel_options {
  /// 0: default; -1: unlimited; n > 0: at most n bodies at once. See the file comment.
  int max_degree_of_parallelism = 0;
  /// Cancels the loop: no new iteration starts; asynchronous bodies see it through their token.
  cancellation_token token{};
  /// Where helpers / workers run; nullptr: thread_pool::default_pool().
  tpl::scheduler* scheduler = nullptr;
};

/// How a blocking loop ended (.NET ParallelLoopResult).
struct parallel_loop_result {
  /// True if every iteration ran: neither stop() nor break_() was called.
  bool is_completed = true;
  /// The lowest iteration that called break_(), if any did.
  std::optional<std::int64_t> lowest_break_iteration;
};

namespace detail {

/// The loop-wide flags a parallel_loop_state reads and writes (shared by every worker of a loop).
struct loop_control {
  static constexpr std::uint32_t kStopped = 1, kBroken = 2, kExceptional = 4, kCanceled = 8;
  std::atomic<std::uint32_t> flags{0};
  /// The lowest break_() iteration, as an offset from the loop's start (max: none).
  std::atomic<std::uint64_t> lowest_break{std::numeric_limits<std::uint64_t>::max()};
  std::mutex errors_lock;
  std::vector<std::exception_ptr> errors;

  void stop();
  void break_at(std::uint64_t offset);
  void fail(std::exception_ptr e);
  /// True if the iteration at `offset` must not start (or should end early).
  bool must_exit(std::uint64_t offset) const noexcept {
    // relaxed: advisory flags; a worker that misses a fresh stop runs one more iteration, which
    // .NET allows too. Results are read after the loop's final synchronisation.
    const std::uint32_t f = flags.load(std::memory_order_relaxed);
    if ((f & (kStopped | kExceptional | kCanceled)) != 0) return true;
    return (f & kBroken) != 0 && offset > lowest_break.load(std::memory_order_relaxed);
  }
};

/// The scheduler a loop uses and its default worker count.
scheduler& loop_scheduler(const parallel_options& o) noexcept;
/// Checks o.max_degree_of_parallelism and returns the worker budget: blocking loops count the
/// caller (default: threads of the scheduler's pool + 1), asynchronous ones do not (default:
/// cores). Unlimited: max of uint64.
std::uint64_t loop_degree(const parallel_options& o, bool blocking);

/// A loop helper or worker: created suspended, started by scheduling its handle (detached.hpp);
/// bodies never let an exception escape (see the callers).
using loop_worker = suspended_item;

/// Queues w on s; if that throws, destroys w and rethrows.
void start_worker(scheduler& s, loop_worker w);

template <class R>
concept random_access_sized = std::ranges::random_access_range<R> && std::ranges::sized_range<R>;

}  // namespace detail
}  // namespace tpl
