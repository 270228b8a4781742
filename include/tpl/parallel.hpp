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
#include <exception>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <new>
#include <mutex>
#include <optional>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

#include "tpl/cancellation.hpp"
#include "tpl/detail/config.hpp"
#include "tpl/detail/frame_pool.hpp"
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

/// A fire-and-forget coroutine for loop helpers and workers: created suspended, started by
/// scheduling its handle; the frame comes from the frame pool and frees itself at the end.
struct loop_worker {
  struct promise_type {
    loop_worker get_return_object() noexcept {
      return loop_worker{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }  // bodies never escape: see callers
    static void* operator new(std::size_t n) { return frame_alloc(n); }
    static void operator delete(void* p, std::size_t n) noexcept { frame_free(p, n); }
  };
  std::coroutine_handle<promise_type> handle;
};

/// Queues w on s; if that throws, destroys w and rethrows.
void start_worker(scheduler& s, loop_worker w);

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

template <class R>
concept random_access_sized = std::ranges::random_access_range<R> && std::ranges::sized_range<R>;

// ---- asynchronous loops -------------------------------------------------------------------------

/// The shared part of an asynchronous loop: cancellation, errors, worker budget, the result.
struct async_loop_core {
  cancellation_token external;
  cancellation_token_source source;  // linked to external: bodies get its token
  cancellation_token token;
  task_completion_source<> result;
  scheduler* sched = nullptr;
  std::atomic<std::uint64_t> workers_left{0};  // workers that may still be started
  std::atomic<std::uint32_t> running{1};       // workers started and not finished (+1: the first)
  std::mutex errors_lock;
  std::vector<std::exception_ptr> errors;

  explicit async_loop_core(const parallel_options& o, std::uint64_t degree);
  /// Takes one slot of the worker budget; false if none is left.
  bool take_worker_slot() noexcept;
  void give_back_worker_slot() noexcept;
  void fail(std::exception_ptr e);
  /// Called by each worker at its end; the last one completes the result.
  void worker_finished() noexcept;
  bool canceled() const noexcept { return token.is_cancellation_requested(); }
};

/// True if the awaitable reports completion (task / value_task do); others count as pending.
template <class A>
bool completed_now(const A& a) {
  if constexpr (requires { a.is_completed(); })
    return a.is_completed();
  else
    return false;
}

/// Indices claimed at once, at most: a worker claims more while bodies complete synchronously
/// (so that 1,000,000 no-op bodies do not pay one contended atomic each) and drops back to one as
/// soon as a body suspends (so slow bodies are spread one index at a time).
inline constexpr std::uint64_t kMaxAsyncBatch = 64;

template <class Source, class Body>
struct async_loop final : async_loop_core {
  Source source_items;
  Body body;
  async_loop(const parallel_options& o, std::uint64_t degree, Source&& src, Body&& b)
      : async_loop_core(o, degree), source_items(std::move(src)), body(std::move(b)) {}
};

template <class Loop>
loop_worker async_worker(std::shared_ptr<Loop> s);

template <class Loop>
void start_another_worker(const std::shared_ptr<Loop>& s) {
  if (!s->source_items.may_have_more() || !s->take_worker_slot()) return;
  // relaxed: the count only has to be atomic; the finisher synchronises through the acq_rel
  // decrement in worker_finished().
  s->running.fetch_add(1, std::memory_order_relaxed);
  try {
    start_worker(*s->sched, async_worker(s));
  } catch (...) {
    s->give_back_worker_slot();
    s->worker_finished();  // undo our count; the loop goes on with the workers it has
  }
}

/// The body's awaitable, created and destroyed out of line. A coroutine that loops around a
/// co_await may resume on another thread, and clang (seen with clang 16 under TSan) hoists
/// thread-local addresses out of the loop into the frame: inlined code that touches tpl's
/// thread-locals (the frame pool in the body's ramp, the destroy stack in task release) would then
/// use the first thread's copy. Keeping those calls out of the worker's own body avoids that.
template <class A>
concept awaitable_result = requires(A& a) { a.operator co_await(); } || requires(A& a) { a.await_ready(); };

template <class A>
class body_awaitable {
  static_assert(awaitable_result<A>,
                "tpl::parallel::for_async / for_each_async: the body must return an awaitable "
                "(tpl::task<>, tpl::value_task<>, ...), e.g. [](int i, const tpl::cancellation_token& t) "
                "-> tpl::task<> { co_await work(i, t); }");

 public:
  template <class Loop, class Item>
  TPL_NOINLINE body_awaitable(Loop& s, Item&& item) {
    ::new (static_cast<void*>(storage_)) A(std::invoke(s.body, std::forward<Item>(item),
                                                       static_cast<const cancellation_token&>(s.token)));
  }
  TPL_NOINLINE ~body_awaitable() { std::destroy_at(&get()); }
  body_awaitable(const body_awaitable&) = delete;
  body_awaitable& operator=(const body_awaitable&) = delete;
  A& get() noexcept { return *std::launder(reinterpret_cast<A*>(storage_)); }

 private:
  alignas(A) unsigned char storage_[sizeof(A)];
};

template <class Loop, class Item>
using body_result_t = std::invoke_result_t<decltype(std::declval<Loop&>().body)&, Item, const cancellation_token&>;

template <class Loop>
loop_worker async_worker(std::shared_ptr<Loop> s) {
  start_another_worker(s);  // .NET's shape: each worker starts the next while budget remains
  std::uint64_t batch = 1;
  bool failed = false;
  while (!failed && !s->canceled()) {
    // Claiming runs user code for an input range (begin, ++, *, the item's copy): what it throws
    // fails the loop like a body's exception (.NET records MoveNext's exception the same way).
    std::optional<decltype(s->source_items.claim(batch))> claimed;
    try {
      claimed.emplace(s->source_items.claim(batch));
    } catch (...) {
      s->fail(std::current_exception());
      break;
    }
    auto& claim = *claimed;
    if (claim.empty()) break;
    bool all_synchronous = true;
    for (auto it = claim.begin(); it != claim.end(); ++it) {
      if (s->canceled()) break;
      try {
        using item_t = decltype(claim.item(it));
        body_awaitable<body_result_t<Loop, item_t>> awaitable(*s, claim.item(it));
        if (!completed_now(awaitable.get())) all_synchronous = false;
        co_await awaitable.get();  // an lvalue await: nothing of the task is released inline here
      } catch (...) {
        s->fail(std::current_exception());
        failed = true;
      }
      if (failed) break;
    }
    batch = all_synchronous ? std::min(batch * 2, kMaxAsyncBatch) : 1;
  }
  s->worker_finished();
}

/// Integer indices: one atomic claims the next batch.
template <class I>
struct index_source {
  I from;
  std::uint64_t count;
  std::atomic<std::uint64_t> next{0};
  index_source(I f, std::uint64_t c) : from(f), count(c) {}
  index_source(index_source&& o) noexcept : from(o.from), count(o.count) {}
  struct claim_t {
    const index_source* src;
    std::uint64_t b, e;
    bool empty() const noexcept { return b >= e; }
    std::uint64_t begin() const noexcept { return b; }
    std::uint64_t end() const noexcept { return e; }
    I item(std::uint64_t k) const noexcept { return static_cast<I>(static_cast<std::uint64_t>(src->from) + k); }
  };
  claim_t claim(std::uint64_t n) {
    // relaxed: each index is handed to exactly one worker by the atomicity of the add; the
    // body's inputs are the loop's own immutable fields.
    const std::uint64_t b = next.fetch_add(n, std::memory_order_relaxed);
    if (b >= count) return {this, 0, 0};
    return {this, b, std::min(b + n, count)};
  }
  bool may_have_more() const noexcept {
    // relaxed: a hint for starting another worker; claiming re-checks.
    return next.load(std::memory_order_relaxed) < count;
  }
};

/// A random-access sized range (held by reference for lvalues, owned for rvalues): indices.
template <class Holder>
struct random_access_source {
  Holder range;  // R& or R
  std::uint64_t count;
  std::atomic<std::uint64_t> next{0};
  explicit random_access_source(Holder r)
      : range(std::forward<Holder>(r)), count(static_cast<std::uint64_t>(std::ranges::size(range))) {}
  random_access_source(random_access_source&& o) noexcept
      : range(std::forward<Holder>(o.range)), count(o.count) {}
  struct claim_t {
    random_access_source* src;
    std::uint64_t b, e;
    bool empty() const noexcept { return b >= e; }
    std::uint64_t begin() const noexcept { return b; }
    std::uint64_t end() const noexcept { return e; }
    decltype(auto) item(std::uint64_t k) const {
      return std::ranges::begin(src->range)[static_cast<std::ranges::range_difference_t<std::remove_reference_t<Holder>>>(k)];
    }
  };
  claim_t claim(std::uint64_t n) {
    // relaxed: as index_source::claim.
    const std::uint64_t b = next.fetch_add(n, std::memory_order_relaxed);
    if (b >= count) return {this, 0, 0};
    return {this, b, std::min(b + n, count)};
  }
  bool may_have_more() const noexcept {
    // relaxed: a hint, as index_source.
    return next.load(std::memory_order_relaxed) < count;
  }
};

/// Any other input range: the iterator advances under a short lock (never held across a body);
/// one item per claim. Items of an input range are moved out; a forward range's lvalue items are
/// referenced in place; prvalue items (views) are held by the claim while their body runs.
template <class Holder>
struct iterator_source {
  using R = std::remove_reference_t<Holder>;
  using iterator = std::ranges::iterator_t<R>;
  using ref = std::ranges::range_reference_t<R>;
  static constexpr bool by_reference = std::ranges::forward_range<R> && std::is_lvalue_reference_v<ref>;
  using stored = std::conditional_t<by_reference, std::remove_reference_t<ref>*, std::remove_cvref_t<ref>>;

  Holder range;
  short_lock lock;
  std::optional<iterator> it;
  bool advance_pending = false;  // the item at *it was claimed: step past it on the next claim
  bool broken = false;           // the range threw: claim nothing more
  std::atomic<bool> exhausted{false};
  explicit iterator_source(Holder r) : range(std::forward<Holder>(r)) {}
  iterator_source(iterator_source&& o) noexcept : range(std::forward<Holder>(o.range)) {}

  struct claim_t {
    std::optional<stored> value;
    bool empty() const noexcept { return !value.has_value(); }
    int begin() const noexcept { return 0; }
    int end() const noexcept { return value ? 1 : 0; }
    decltype(auto) item(int) {
      if constexpr (by_reference)
        return static_cast<ref>(**value);
      else
        return static_cast<stored&>(*value);
    }
  };
  claim_t claim(std::uint64_t) {
    claim_t c;
    std::lock_guard g(lock);
    if (broken) return c;
    // The iterator steps past a claimed item only when the next item is claimed, so an exception
    // from ++ (the range failing to produce the next item) never loses the item already taken.
    try {
      if (!it) {
        it.emplace(std::ranges::begin(range));
      } else if (advance_pending) {
        advance_pending = false;
        ++*it;
      }
      if (*it == std::ranges::end(range)) {
        // relaxed: a hint for starting workers (may_have_more).
        exhausted.store(true, std::memory_order_relaxed);
        return c;
      }
      if constexpr (by_reference)
        c.value.emplace(std::addressof(**it));
      else if constexpr (std::ranges::forward_range<R>)
        c.value.emplace(**it);
      else
        c.value.emplace(std::ranges::iter_move(*it));
      advance_pending = true;
    } catch (...) {
      broken = true;
      exhausted.store(true, std::memory_order_relaxed);  // relaxed: a hint, as above
      throw;
    }
    return c;
  }
  bool may_have_more() const noexcept {
    // relaxed: a hint.
    return !exhausted.load(std::memory_order_relaxed);
  }
};

template <class Source, class Body>
task<> run_async_loop(Source&& src, Body&& body, const parallel_options& options, std::uint64_t item_count_hint) {
  const std::uint64_t degree = std::min(loop_degree(options, false), std::max<std::uint64_t>(item_count_hint, 1));
  if (options.token.is_cancellation_requested()) return task_from_canceled();
  using loop_t = async_loop<std::decay_t<Source>, std::decay_t<Body>>;
  auto s = std::make_shared<loop_t>(options, degree, std::move(src), std::move(body));
  task<> result = s->result.get_task();
  s->workers_left.store(degree - 1, std::memory_order_relaxed);  // relaxed: not shared yet
  start_worker(*s->sched, async_worker(s));
  return result;
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
