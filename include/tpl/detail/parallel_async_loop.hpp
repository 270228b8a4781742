// tpl/detail/parallel_async_loop.hpp — the machinery of tpl::parallel::for_async and
// for_each_async (internal): the shared loop state, the item sources, and the workers that claim
// items and await the bodies.
//
// Invariants: at most `degree` workers run bodies at once; a source hands each index or item to
// one claim, and the first item of every claim gets its body run, canceled or not (.NET's
// ForEachAsync runs the body of every element it took from the enumerator, with the loop's token:
// an item taken from an input range is consumed and must not be dropped); the later indices of a
// batched claim run until the loop is canceled; the loop's task completes once, after the last
// worker has finished, with every body's exception (operation_canceled excepted when it comes
// from the loop's own cancellation).
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
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

#include "tpl/detail/parallel_loop_base.hpp"

namespace tpl::detail {

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
    std::optional<decltype(s->source_items.claim(batch, s->token))> claimed;
    try {
      claimed.emplace(s->source_items.claim(batch, s->token));
    } catch (...) {
      s->fail(std::current_exception());
      break;
    }
    auto& claim = *claimed;
    if (claim.empty()) break;
    bool all_synchronous = true;
    for (auto it = claim.begin(); it != claim.end(); ++it) {
      // The claim's first item was taken (the loop checked cancellation before claiming); the
      // rest of a batch of indices is skipped once the loop is canceled.
      if (it != claim.begin() && s->canceled()) break;
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

/// [0, count) handed out in batches, one atomic add per claim: the claiming half of index_source
/// and random_access_source.
struct counted_claims {
  std::uint64_t count;
  std::atomic<std::uint64_t> next{0};
  explicit counted_claims(std::uint64_t c) noexcept : count(c) {}
  /// The next batch of at most n positions, [b, e); empty once every position is claimed.
  std::pair<std::uint64_t, std::uint64_t> claim_positions(std::uint64_t n) noexcept {
    // relaxed: each position is handed to exactly one worker by the atomicity of the add; the
    // bodies' inputs are the loop's own fields, written before the loop's workers started.
    const std::uint64_t b = next.fetch_add(n, std::memory_order_relaxed);
    if (b >= count) return {0, 0};
    return {b, std::min(b + n, count)};
  }
  bool may_have_more() const noexcept {
    // relaxed: a hint for starting another worker; claiming re-checks.
    return next.load(std::memory_order_relaxed) < count;
  }
};

/// Integer indices: one atomic claims the next batch.
template <class I>
struct index_source : counted_claims {
  I from;
  index_source(I f, std::uint64_t c) : counted_claims(c), from(f) {}
  index_source(index_source&& o) noexcept : counted_claims(o.count), from(o.from) {}
  struct claim_t {
    const index_source* src;
    std::uint64_t b, e;
    bool empty() const noexcept { return b >= e; }
    std::uint64_t begin() const noexcept { return b; }
    std::uint64_t end() const noexcept { return e; }
    I item(std::uint64_t k) const noexcept { return static_cast<I>(static_cast<std::uint64_t>(src->from) + k); }
  };
  claim_t claim(std::uint64_t n, const cancellation_token&) {
    const auto [b, e] = claim_positions(n);
    return {this, b, e};
  }
};

/// A random-access sized range (held by reference for lvalues, owned for rvalues): indices.
template <class Holder>
struct random_access_source : counted_claims {
  Holder range;  // R& or R
  explicit random_access_source(Holder r)
      : counted_claims(static_cast<std::uint64_t>(std::ranges::size(r))), range(std::forward<Holder>(r)) {}
  random_access_source(random_access_source&& o) noexcept
      : counted_claims(o.count), range(std::forward<Holder>(o.range)) {}
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
  claim_t claim(std::uint64_t n, const cancellation_token&) {
    const auto [b, e] = claim_positions(n);
    return {this, b, e};
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
  /// Nothing once `token` is canceled: checked under the lock, as .NET's ForEachAsync checks its
  /// cancellation under its lock before MoveNext, so the items claimed are exactly those the
  /// range produced before the cancellation (a dereference that cancels still hands its item).
  claim_t claim(std::uint64_t, const cancellation_token& token) {
    claim_t c;
    std::lock_guard g(lock);
    if (broken || token.is_cancellation_requested()) return c;
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

}  // namespace tpl::detail
