// tpl/task.hpp — tpl::task<T>: a hot, shareable coroutine task with .NET Task semantics.
//
// Provides task<T> / task<> (task<void>), await_options (.NET ConfigureAwaitOptions),
// task_continuation_options, task_from_result / task_from_exception / task_from_canceled /
// completed_task.
//
// A function returning task<T> that contains co_await / co_return is a coroutine. It starts
// running inside the call (hot, like a .NET async method) and runs until its first real suspension.
// The task handle is reference-counted and copyable: any number of coroutines may co_await it, any
// number of threads may wait() on it, and the result stays readable for as long as one handle lives.
//
//   tpl::task<int> fetch_answer() {
//     co_await tpl::yield();            // continue on the thread pool
//     co_return 42;
//   }
//   tpl::task<> caller() {
//     tpl::task<int> t = fetch_answer();
//     int a = co_await t;               // suspends until t completes; rethrows its exception
//     int b = co_await t;               // a task can be awaited again: same result
//     std::printf("%d\n", a + b);
//   }
//   int main() { caller().wait(); }     // wait(): blocks; throws aggregate_exception on fault
//
// Comparison with value_task<T>: value_task is move-only and awaited once, and can hold a result
// without any allocation (the .NET ValueTask trade-off). Use task<T> by default.
//
// Faults: co_await rethrows the first exception of the task; wait() / get() throw
// aggregate_exception with all of them (when_all collects every exception, in task order). A body
// that lets operation_canceled escape ends canceled; awaiting a canceled task throws
// operation_canceled.
#pragma once

#include <chrono>
#include <concepts>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "tpl/detail/promise.hpp"
#include "tpl/detail/task_awaiter.hpp"
#include "tpl/detail/task_state.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/scheduler.hpp"

namespace tpl {

template <class T = void>
class task;
class cancellation_token;
class time_provider;

/// How a co_await behaves (.NET ConfigureAwaitOptions). Combine with |.
enum class await_options : std::uint8_t {
  none = 0,
  /// The await never throws: it completes when the task does, whatever its outcome; inspect the
  /// task afterwards. The await yields no value.
  suppress_throwing = 1,
  /// The continuation always runs asynchronously on the pool, even if the task already completed.
  force_yielding = 2,
};
constexpr await_options operator|(await_options a, await_options b) noexcept {
  return static_cast<await_options>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
constexpr bool has_option(await_options set, await_options o) noexcept {
  return (static_cast<std::uint8_t>(set) & static_cast<std::uint8_t>(o)) != 0;
}

/// When a continue_with continuation runs (.NET TaskContinuationOptions). Combine with |.
enum class task_continuation_options : std::uint32_t {
  none = 0,
  not_on_ran_to_completion = 1u << 16,
  not_on_faulted = 1u << 17,
  not_on_canceled = 1u << 18,
  only_on_ran_to_completion = (1u << 17) | (1u << 18),
  only_on_faulted = (1u << 16) | (1u << 18),
  only_on_canceled = (1u << 16) | (1u << 17),
  /// Run on the thread that completes the antecedent (or the caller, if already complete)
  /// instead of queuing to the pool. Keep such continuations short.
  execute_synchronously = 1u << 19,
  /// With a cancellation token: the continuation is canceled only once the antecedent has
  /// completed, never before (.NET LazyCancellation). Without it, canceling the token cancels the
  /// continuation at once, while the antecedent still runs.
  lazy_cancellation = 1u << 20,
};
constexpr task_continuation_options operator|(task_continuation_options a,
                                              task_continuation_options b) noexcept {
  return static_cast<task_continuation_options>(static_cast<std::uint32_t>(a) |
                                                static_cast<std::uint32_t>(b));
}
constexpr bool has_option(task_continuation_options set, task_continuation_options o) noexcept {
  return (static_cast<std::uint32_t>(set) & static_cast<std::uint32_t>(o)) ==
         static_cast<std::uint32_t>(o);
}

/// Options when creating a task or task_completion_source (.NET TaskCreationOptions).
enum class task_creation_options : std::uint32_t {
  none = 0,
  /// task_factory::start_new: queue behind the work already waiting (the global FIFO queue), not
  /// on the calling worker's own deque (.NET PreferFairness).
  prefer_fairness = 1,
  /// task_factory::start_new: run on a thread of its own, not a pool thread, so that a long or
  /// blocking body takes no pool thread (.NET LongRunning).
  long_running = 2,
  /// Continuations of the task are always queued to the pool instead of running inline on the
  /// thread that completes it (.NET RunContinuationsAsynchronously).
  run_continuations_asynchronously = 64,
};
constexpr task_creation_options operator|(task_creation_options a, task_creation_options b) noexcept {
  return static_cast<task_creation_options>(static_cast<std::uint32_t>(a) |
                                            static_cast<std::uint32_t>(b));
}
constexpr bool has_option(task_creation_options set, task_creation_options o) noexcept {
  return (static_cast<std::uint32_t>(set) & static_cast<std::uint32_t>(o)) ==
         static_cast<std::uint32_t>(o);
}

namespace detail {

template <class T>
class task_promise;

struct adopt_state_t {
  explicit adopt_state_t() = default;
};
inline constexpr adopt_state_t adopt_state{};

struct task_access {
  template <class Task>
  static auto* state(const Task& t) noexcept {
    return t.s_;
  }
};

template <class T>
struct is_task : std::false_type {};
template <class T>
struct is_task<task<T>> : std::true_type {};

template <class T, class F>
using continuation_result_t = std::conditional_t<std::is_invocable_v<F&, task<T>&>,
                                                 std::invoke_result<F&, task<T>&>,
                                                 std::invoke_result<F&>>::type;

bool continuation_allowed(task_continuation_options opts, task_status antecedent) noexcept;
/// Throws std::invalid_argument for options continue_with rejects: bits that name no option, or
/// not_on_* flags that together exclude every outcome (.NET: ArgumentOutOfRangeException).
void check_continuation_options(task_continuation_options opts);

template <class T, class F, class R>
task<R> run_continuation(task<T> antecedent, F fn, task_continuation_options opts);
template <class T, class F, class R>
task<R> run_continuation_on(task<T> antecedent, F fn, cancellation_token token,
                            task_continuation_options opts, scheduler* target);

}  // namespace detail

template <class T>
class [[nodiscard]] task {
 public:
  using value_type = T;
  using promise_type = detail::task_promise<T>;

  /// An empty handle: valid() is false; awaiting or waiting on it throws invalid_operation.
  task() noexcept = default;
  task(detail::adopt_state_t, detail::task_state<T>* s) noexcept : s_(s) {}
  task(const task& o) noexcept : s_(o.s_) {
    if (s_ != nullptr) s_->add_ref();
  }
  task(task&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  task& operator=(task o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~task() {
    if (s_ != nullptr) s_->release();
  }

  /// False for a default-constructed or moved-from handle.
  bool valid() const noexcept { return s_ != nullptr; }

  task_status status() const { return checked("status()")->status(); }
  bool is_completed() const { return checked("is_completed()")->is_completed(); }
  bool is_completed_successfully() const { return status() == task_status::ran_to_completion; }
  bool is_faulted() const { return status() == task_status::faulted; }
  bool is_canceled() const { return status() == task_status::canceled; }

  /// Blocks until completion. Throws aggregate_exception if the task faulted or was canceled.
  void wait() const {
    auto* s = checked("wait()");
    if (!s->is_completed()) detail::block_until_completed(*s);
    if (s->status() != task_status::ran_to_completion) s->throw_for_wait();
  }

  /// Blocks up to timeout. Returns false on timeout; throws like wait() if it completed badly.
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) const {
    auto* s = checked("wait_for()");
    if (!s->is_completed() &&
        !detail::block_until_completed(
            *s, detail::saturating_add(std::chrono::steady_clock::now(), timeout)))
      return false;
    if (s->status() != task_status::ran_to_completion) s->throw_for_wait();
    return true;
  }

  /// Blocks until completion and returns the result (.NET Task.Result); throws aggregate_exception.
  decltype(auto) get() const& {
    wait();
    if constexpr (!std::is_void_v<T>) return static_cast<const T&>(s_->value_ref_for_wait());
  }
  /// On an rvalue: moves the result out when this is the only handle, else copies it.
  decltype(auto) get() && {
    wait();
    if constexpr (!std::is_void_v<T>) return detail::take_or_copy<T>(s_->value_ref_for_wait(), *s_);
  }

  /// .NET Task.Exception: null unless faulted; else an aggregate_exception with every fault.
  std::exception_ptr exception() const {
    auto* s = checked("exception()");
    if (s->status() != task_status::faulted) return nullptr;
    return std::make_exception_ptr(aggregate_exception(s->exceptions()));
  }

  auto operator co_await() const& noexcept { return detail::task_awaiter<T, false, false>(s_); }
  auto operator co_await() && noexcept {
    return detail::task_awaiter<T, true, false>(std::exchange(s_, nullptr));
  }

  /// co_await t.configure(await_options::suppress_throwing | await_options::force_yielding).
  template <await_options Opts>
  auto configure() const& noexcept {
    return detail::task_awaiter<T, false, has_option(Opts, await_options::suppress_throwing),
                                has_option(Opts, await_options::force_yielding)>(s_);
  }
  /// Run-time form of configure<Opts>(). suppress_throwing needs task<void> here (as in .NET,
  /// where the await would have no value to return): use configure<Opts>() for task<T>.
  auto configure(await_options opts) const& {
    if constexpr (!std::is_void_v<T>) {
      if (has_option(opts, await_options::suppress_throwing))
        throw std::invalid_argument(
            "await_options::suppress_throwing on task<T>: use configure<Opts>(), whose await yields "
            "no value, or await a task<void>");
    }
    return detail::configured_awaiter<T>(s_, has_option(opts, await_options::force_yielding),
                                         has_option(opts, await_options::suppress_throwing));
  }

  /// Waits for completion without throwing (same as configure(suppress_throwing)).
  auto when_ready() const& noexcept { return detail::task_awaiter<T, false, true>(s_); }

  /// Runs fn(task<T>&) (or fn()) after this task completes, as a new task (.NET ContinueWith).
  /// If opts exclude the outcome, the continuation task ends canceled without calling fn.
  /// Options that exclude every outcome (only_on_ran_to_completion | only_on_faulted, the three
  /// not_on_* together) throw std::invalid_argument here, as .NET throws
  /// ArgumentOutOfRangeException.
  template <class F>
  auto continue_with(F fn, task_continuation_options opts = task_continuation_options::none) const
      -> task<detail::continuation_result_t<T, F>> {
    checked("continue_with()");
    detail::check_continuation_options(opts);
    return detail::run_continuation<T, F, detail::continuation_result_t<T, F>>(*this, std::move(fn),
                                                                               opts);
  }

  /// As continue_with(fn, opts), with a token (.NET ContinueWith(action, token, options)): a token
  /// canceled before fn starts cancels the continuation, at once (while this task still runs) or,
  /// with task_continuation_options::lazy_cancellation, only once this task has completed. fn
  /// that has started runs to its end. Defined in tpl/wait_async.hpp (included by tpl/tpl.hpp).
  template <class F>
  auto continue_with(F fn, const cancellation_token& token,
                     task_continuation_options opts = task_continuation_options::none) const
      -> task<detail::continuation_result_t<T, F>>;
  /// As continue_with(fn, opts), with fn queued to scheduler `target` instead of the pool (.NET
  /// ContinueWith(action, scheduler)). With execute_synchronously, fn runs inline only when the
  /// thread that completes this task is already running `target`'s work (scheduler::current());
  /// otherwise it is queued to `target`. Defined in tpl/wait_async.hpp.
  template <class F>
  auto continue_with(F fn, scheduler& target,
                     task_continuation_options opts = task_continuation_options::none) const
      -> task<detail::continuation_result_t<T, F>>;
  /// The full form (.NET ContinueWith(action, token, options, scheduler)). Defined in
  /// tpl/wait_async.hpp.
  template <class F>
  auto continue_with(F fn, const cancellation_token& token, task_continuation_options opts,
                     scheduler& target) const -> task<detail::continuation_result_t<T, F>>;

  /// A task that completes like this one, or fails with timeout_exception after `timeout`, or is
  /// canceled when `token` is, whichever comes first; this task itself is not canceled (.NET
  /// WaitAsync). On a completed task it returns this task (no allocation). Defined in
  /// tpl/wait_async.hpp (included by tpl/tpl.hpp).
  template <class Rep, class Period>
  task wait_async(std::chrono::duration<Rep, Period> timeout) const;
  task wait_async(const cancellation_token& token) const;
  template <class Rep, class Period>
  task wait_async(std::chrono::duration<Rep, Period> timeout, const cancellation_token& token) const;
  template <class Rep, class Period>
  task wait_async(std::chrono::duration<Rep, Period> timeout, const cancellation_token& token,
                  time_provider& provider) const;

  /// Identity: two handles to the same task.
  friend bool operator==(const task& a, const task& b) noexcept { return a.s_ == b.s_; }

 private:
  friend struct detail::task_access;

  detail::task_state<T>* checked(const char* op) const {
    if (TPL_UNLIKELY(s_ == nullptr)) detail::throw_empty_task(op);
    return s_;
  }

  detail::task_state<T>* s_ = nullptr;
};

namespace detail {

template <class T>
class task_promise final : public value_promise<T, task_promise<T>> {
 public:
  task_promise() noexcept = default;
  /// tpl::run's coroutine (tpl/run.hpp), whose parameter is a run_call or run_call_on: its
  /// start is queued on the run's scheduler (start_guard.hpp). Runs after the parameters are copied, so
  /// no user code comes between this request and the initial_suspend that consumes it.
  template <class F>
  explicit task_promise(run_call_on<F>& call) noexcept {
    begin_run_request(call.target);
  }
  template <class F>
  explicit task_promise(run_call<F>&) noexcept {
    begin_run_request(nullptr);
  }

  task<T> get_return_object() noexcept {
    this->set_frame_address(std::coroutine_handle<task_promise>::from_promise(*this).address());
    return task<T>(adopt_state, this);
  }
};

template <class T, class F, class R>
task<R> run_continuation(task<T> antecedent, F fn, task_continuation_options opts) {
  if (has_option(opts, task_continuation_options::execute_synchronously))
    co_await task_awaiter<T, false, true, false, true>(task_access::state(antecedent));
  else
    co_await antecedent
        .template configure<await_options::suppress_throwing | await_options::force_yielding>();
  if (!continuation_allowed(opts, antecedent.status())) co_await cancel_current_task{};
  if constexpr (std::is_invocable_v<F&, task<T>&>) {
    co_return std::invoke(fn, antecedent);
  } else {
    co_return std::invoke(fn);
  }
}

/// A completed state that is not a coroutine frame.
template <class T>
struct ready_state final : task_state<T>, pooled_allocation {
  ready_state() noexcept : task_state<T>(1, false, &delete_as<ready_state>) {}
};

task<void> cached_completed_task() noexcept;
task<bool> cached_bool_task(bool v) noexcept;
/// Cached tasks for -1..8 (what .NET caches).
task<int> cached_int_task(int v) noexcept;
inline constexpr int kMinCachedInt = -1;
inline constexpr int kMaxCachedInt = 8;

}  // namespace detail

/// A completed task (.NET Task.CompletedTask). Cached: costs no allocation.
inline task<> completed_task() noexcept { return detail::cached_completed_task(); }

/// A task completed with v (.NET Task.FromResult). bool and ints in [-1, 8] come from a cache;
/// other values take a pooled state (no allocation after warm-up).
template <class T>
task<std::decay_t<T>> task_from_result(T&& v) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, bool>) {
    return detail::cached_bool_task(v);
  } else if constexpr (std::is_same_v<U, int>) {
    if (v >= detail::kMinCachedInt && v <= detail::kMaxCachedInt) return detail::cached_int_task(v);
  }
  auto* s = new detail::ready_state<U>();
  try {
    s->set_value(static_cast<T&&>(v));
  } catch (...) {
    delete s;  // U's constructor threw: the state holds no value and nobody else has it
    throw;
  }
  s->publish_completion_unshared();
  return task<U>(detail::adopt_state, s);
}
inline task<> task_from_result() noexcept { return completed_task(); }

/// A task faulted with e (.NET Task.FromException). e must not be null. The task is faulted
/// whatever e is: an operation_canceled faults it too, as in .NET (task_from_canceled() gives a
/// canceled task; only a coroutine body that throws operation_canceled ends canceled).
template <class T = void>
task<T> task_from_exception(std::exception_ptr e) {
  if (!e) throw std::invalid_argument("task_from_exception: null exception_ptr");
  auto* s = new detail::ready_state<T>();
  s->set_error(std::move(e), false);
  s->publish_completion_unshared();
  return task<T>(detail::adopt_state, s);
}
template <class T = void, class E>
  requires(!std::is_same_v<std::decay_t<E>, std::exception_ptr>)
task<T> task_from_exception(E&& e) {
  return task_from_exception<T>(std::make_exception_ptr(static_cast<E&&>(e)));
}

/// A canceled task (.NET Task.FromCanceled).
template <class T = void>
task<T> task_from_canceled() {
  auto* s = new detail::ready_state<T>();
  s->set_canceled();
  s->publish_completion_unshared();
  return task<T>(detail::adopt_state, s);
}

namespace detail {
/// A task canceled with e, an operation_canceled (or derived) exception: awaiting it rethrows e.
/// For the library's own cancellations that carry their exception (a channel completed with an
/// operation_canceled error).
template <class T = void>
task<T> task_canceled_with(std::exception_ptr e) {
  auto* s = new ready_state<T>();
  s->set_error(std::move(e), true);
  s->publish_completion_unshared();
  return task<T>(adopt_state, s);
}
}  // namespace detail

}  // namespace tpl
