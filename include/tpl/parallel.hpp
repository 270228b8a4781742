// tpl/parallel.hpp — parallel loops (.NET System.Threading.Tasks.Parallel): blocking for_ /
// for_each over ranges of indices or items, and asynchronous for_async / for_each_async whose
// bodies are coroutines.
//
//   // Blocking, CPU-bound: the calling thread works too; range partitioning, not one queue item
//   // per index.
//   tpl::parallel::for_(0, n, [&](int i) { out[i] = f(in[i]); });
//   auto r = tpl::parallel::for_(0, n, [&](int i, tpl::parallel_loop_state& s) {
//     if (found(i)) s.break_();                       // finish every index below i, skip the rest
//   });                                               // r.lowest_break_iteration == i
//
//   // Asynchronous, I/O-bound: at most 8 bodies in flight; the token each body gets is canceled
//   // on the first failure (or when options.token is).
//   co_await tpl::parallel::for_each_async(urls, [](const std::string& url, tpl::cancellation_token t)
//       -> tpl::task<> { co_await download(url, t); }, {.max_degree_of_parallelism = 8});
//
// Options: max_degree_of_parallelism 0 = default (blocking loops: the scheduler's thread count
// plus the caller; asynchronous loops: the number of cores), -1 = unlimited, n > 0 = at most n;
// any other negative value throws std::invalid_argument. token cancels the loop; scheduler (default:
// the default pool) runs the helpers / workers.
//
// Outcomes. Blocking loops: every exception a body throws is collected, the loop stops starting
// iterations after the first, and for_ throws aggregate_exception with all of them; a canceled
// token throws operation_canceled. Asynchronous loops: the returned task faults with every
// exception the bodies threw (operation_canceled ones excepted: those come from the loop's own
// cancellation after a failure), or ends canceled if the token was canceled (or bodies only
// threw operation_canceled), or completes.
//
// Blocking loops and the pool: the caller runs iterations itself, and while it waits for helpers
// still finishing theirs it holds a detail::blocking_region, so a pool thread running a for_ counts
// as blocked. A helper that starts after the loop ended does nothing: a loop never depends on its
// helpers starting, so a for_ inside a busy pool (even nested in another for_) cannot deadlock.
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

#include "tpl/cancellation.hpp"
#include "tpl/detail/config.hpp"
#include "tpl/detail/frame_pool.hpp"
#include "tpl/detail/parallel_async_loop.hpp"
#include "tpl/detail/parallel_loop_base.hpp"
#include "tpl/detail/short_lock.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/scheduler.hpp"
#include "tpl/task.hpp"
#include "tpl/task_completion_source.hpp"

namespace tpl {
namespace detail {

/// The shared part of a blocking loop: index claiming, helpers, waiting for them. The body is
/// reached through run_range (a template instantiation) with ctx pointing to the caller's stack:
/// only helpers counted in `active` touch it, and the caller waits for them before returning.
struct sync_loop : std::enable_shared_from_this<sync_loop> {
  loop_control control;
  std::uint64_t count = 0;
  std::atomic<std::uint64_t> next{0};
  std::uint64_t workers = 1;
  std::atomic<std::uint64_t> helpers_left{0};  // helpers that may still be started
  std::atomic<std::uint32_t> active{0};        // helpers inside the body-running part
  std::atomic<bool> done{false};               // the caller finished: late helpers do nothing
  scheduler* sched = nullptr;
  cancellation_token token;
  void (*run_range)(void* ctx, sync_loop& loop, std::uint64_t begin, std::uint64_t end) = nullptr;
  void* ctx = nullptr;
  std::int64_t report_from = 0;  // the loop's `from`, for lowest_break_iteration

  /// Runs the loop on the calling thread with helpers; returns the result or throws.
  parallel_loop_result run();
  void work();
  void helper_main();
  void maybe_start_helper();
};

template <class I, class Body>
struct sync_for_context;

}  // namespace detail

/// Lets a blocking loop's body end the loop early (.NET ParallelLoopState).
class parallel_loop_state {
 public:
  /// Ends the loop as soon as possible: no new iteration starts (.NET Stop). Throws
  /// invalid_operation if break_() was called in this loop.
  void stop() { control_->stop(); }
  /// Ends the loop after every iteration below this one has run; iterations above it do not start
  /// (.NET Break). Throws invalid_operation if stop() was called in this loop.
  void break_() { control_->break_at(offset_); }
  bool is_stopped() const noexcept {
    // relaxed: a snapshot for the body's information.
    return (control_->flags.load(std::memory_order_relaxed) & detail::loop_control::kStopped) != 0;
  }
  /// True once some iteration threw.
  bool is_exceptional() const noexcept {
    // relaxed: a snapshot.
    return (control_->flags.load(std::memory_order_relaxed) & detail::loop_control::kExceptional) != 0;
  }
  /// The lowest iteration that called break_() so far.
  std::optional<std::int64_t> lowest_break_iteration() const noexcept {
    // relaxed: a snapshot.
    const std::uint64_t b = control_->lowest_break.load(std::memory_order_relaxed);
    if (b == std::numeric_limits<std::uint64_t>::max()) return std::nullopt;
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(from_) + b);
  }
  /// True if this iteration may end early: the loop was stopped, failed, canceled, or broken at a
  /// lower iteration.
  bool should_exit_current_iteration() const noexcept { return control_->must_exit(offset_); }

  parallel_loop_state(detail::loop_control* c, std::int64_t from, std::uint64_t offset) noexcept
      : control_(c), from_(from), offset_(offset) {}

 private:
  detail::loop_control* control_;
  std::int64_t from_;
  std::uint64_t offset_;
};

namespace detail {

template <class I, class Body>
struct sync_for_context {
  Body* body;
  I from;
  static void run_range(void* ctx, sync_loop& loop, std::uint64_t begin, std::uint64_t end) {
    auto* self = static_cast<sync_for_context*>(ctx);
    for (std::uint64_t k = begin; k < end; ++k) {
      if (TPL_UNLIKELY(loop.control.must_exit(k))) return;
      const I i = static_cast<I>(static_cast<std::uint64_t>(self->from) + k);  // modular: exact in range
      if constexpr (std::is_invocable_v<Body&, I, parallel_loop_state&>) {
        parallel_loop_state state(&loop.control, static_cast<std::int64_t>(self->from), k);
        std::invoke(*self->body, i, state);
      } else {
        std::invoke(*self->body, i);
      }
    }
  }
};

template <class I, class Body>
parallel_loop_result run_sync_for(I from, I to, Body& body, const parallel_options& options) {
  const std::uint64_t degree = loop_degree(options, true);
  options.token.throw_if_cancellation_requested();
  if (!(from < to)) return {};
  auto loop = std::make_shared<sync_loop>();
  loop->count = static_cast<std::uint64_t>(to) - static_cast<std::uint64_t>(from);  // modular: exact
  loop->workers = std::min(degree, loop->count);
  loop->sched = &loop_scheduler(options);
  loop->token = options.token;
  sync_for_context<I, Body> ctx{&body, from};
  loop->run_range = &sync_for_context<I, Body>::run_range;
  loop->ctx = &ctx;
  loop->report_from = static_cast<std::int64_t>(from);
  return loop->run();
}


}  // namespace detail

namespace parallel {

/// Runs body(i) (or body(i, parallel_loop_state&)) for every i in [from, to), in parallel, and
/// returns when all are done (.NET Parallel.For). See the file comment for options and errors.
template <std::integral I, class Body>
  requires(std::is_invocable_v<Body&, I> || std::is_invocable_v<Body&, I, parallel_loop_state&>)
parallel_loop_result for_(I from, I to, Body&& body, const parallel_options& options = {}) {
  return detail::run_sync_for(from, to, body, options);
}

/// Runs body(item) (or body(item, parallel_loop_state&)) for every item of a forward range, in
/// parallel (.NET Parallel.ForEach). Iteration numbers (break_, lowest_break_iteration) are
/// positions in the range. A range that is not random-access is first walked once to collect
/// iterators.
template <std::ranges::forward_range R, class Body>
parallel_loop_result for_each(R&& range, Body&& body, const parallel_options& options = {}) {
  using ref = std::ranges::range_reference_t<R>;
  static_assert(std::is_invocable_v<Body&, ref> || std::is_invocable_v<Body&, ref, parallel_loop_state&>,
                "tpl::parallel::for_each: body must be callable with (item) or (item, parallel_loop_state&)");
  auto call = [&body](auto&& item, std::int64_t, parallel_loop_state* st) {
    if constexpr (std::is_invocable_v<Body&, ref, parallel_loop_state&>)
      std::invoke(body, static_cast<ref>(item), *st);
    else
      std::invoke(body, static_cast<ref>(item));
  };
  if constexpr (detail::random_access_sized<R>) {
    auto first = std::ranges::begin(range);
    const auto n = static_cast<std::int64_t>(std::ranges::size(range));
    return parallel::for_(std::int64_t{0}, n, [&](std::int64_t i, parallel_loop_state& st) {
      call(first[static_cast<std::ranges::range_difference_t<R>>(i)], i, &st);
    }, options);
  } else {
    std::vector<std::ranges::iterator_t<R>> its;
    for (auto it = std::ranges::begin(range); it != std::ranges::end(range); ++it) its.push_back(it);
    return parallel::for_(std::int64_t{0}, static_cast<std::int64_t>(its.size()),
                          [&](std::int64_t i, parallel_loop_state& st) {
                            call(*its[static_cast<std::size_t>(i)], i, &st);
                          }, options);
  }
}

/// Runs co_await body(i, token) for every i in [from, to) with at most max_degree_of_parallelism
/// bodies in flight (.NET Parallel.ForAsync). Workers take the next index with one atomic. The
/// task completes when every body has; see the file comment for faults and cancellation.
/// Throws std::invalid_argument at once for a bad degree.
template <std::integral I, class Body>
  requires std::is_invocable_v<Body&, I, const cancellation_token&>
task<> for_async(I from, I to, Body body, const parallel_options& options = {}) {
  if (!(from < to)) {
    (void)detail::loop_degree(options, false);  // validates
    if (options.token.is_cancellation_requested()) return task_from_canceled();
    return completed_task();
  }
  const auto count = static_cast<std::uint64_t>(to) - static_cast<std::uint64_t>(from);  // modular: exact
  return detail::run_async_loop(detail::index_source<I>(from, count), std::move(body), options, count);
}

/// Runs co_await body(item, token) for every item of range with at most max_degree_of_parallelism
/// bodies in flight (.NET Parallel.ForEachAsync). A random-access sized range is indexed with one
/// atomic per claim; any other input range is advanced under a lock, one item per claim. An lvalue
/// range is used in place and must outlive the returned task; an rvalue range is moved into it.
template <std::ranges::input_range R, class Body>
task<> for_each_async(R&& range, Body body, const parallel_options& options = {}) {
  using holder = std::conditional_t<std::is_lvalue_reference_v<R>, R, std::remove_cvref_t<R>>;
  if constexpr (detail::random_access_sized<std::remove_reference_t<R>>) {
    const auto n = static_cast<std::uint64_t>(std::ranges::size(range));
    if (n == 0) {
      (void)detail::loop_degree(options, false);
      if (options.token.is_cancellation_requested()) return task_from_canceled();
      return completed_task();
    }
    return detail::run_async_loop(detail::random_access_source<holder>(std::forward<R>(range)), std::move(body),
                                  options, n);
  } else {
    return detail::run_async_loop(detail::iterator_source<holder>(std::forward<R>(range)), std::move(body), options,
                                  std::numeric_limits<std::uint64_t>::max());
  }
}

}  // namespace parallel
}  // namespace tpl

