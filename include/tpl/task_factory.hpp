// tpl/task_factory.hpp — tpl::task_factory::start_new (.NET Task.Factory.StartNew) with creation
// options, a state argument and a scheduler, and tpl::unwrap (.NET Unwrap).
//
//   auto a = tpl::task_factory::start_new([] { return 42; });                        // default pool
//   auto b = tpl::task_factory::start_new([] { crunch(); }, tpl::task_creation_options::long_running);
//   auto c = tpl::task_factory::start_new([](int n) { return n * 2; }, 21,
//                                         tpl::task_creation_options::none, my_scheduler);
//   tpl::task<tpl::task<int>> nested = tpl::task_factory::start_new([] { return async_op(); });
//   tpl::task<int> flat = tpl::unwrap(nested);   // completes when async_op()'s task does
//
// Unlike tpl::run (Task.Run), start_new does not unwrap: a function returning a task gives a
// task<task<U>>, exactly as StartNew gives Task<Task<U>>; unwrap() flattens it. Options:
//   - long_running: the function runs on a new thread of its own (not a pool thread), which ends
//     with it; blocking there never holds a pool thread.
//   - prefer_fairness: queued behind the work already waiting (scheduler::schedule_after_others:
//     on a pool worker its yield queue, else the global queue) instead of the worker's own deque.
//   - run_continuations_asynchronously: the returned task's continuations are queued, never run
//     inline on the thread that completes it.
// A token that is canceled before the function starts gives a canceled task and the function never
// runs (as in .NET).
#pragma once

#include <functional>
#include <thread>
#include <type_traits>
#include <utility>

#include "tpl/cancellation.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/scheduler.hpp"
#include "tpl/task.hpp"
#include "tpl/thread_pool.hpp"

namespace tpl {

namespace detail {

/// co_await: continues on a new detached thread of its own (long_running). If no thread can be
/// created, std::system_error propagates from the co_await (the coroutine was not suspended).
struct resume_on_new_thread {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const {
    std::thread([h] { run_item(h); }).detach();
  }
  void await_resume() const noexcept {}
};

/// co_await: continues on s, behind the work already waiting.
struct resume_after_others_on {
  scheduler* s;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const { s->schedule_after_others(h); }
  void await_resume() const noexcept {}
};

/// co_await: marks the awaiting task's continuations as always queued; does not suspend.
struct make_continuations_asynchronous {
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) const noexcept {
    h.promise().set_run_continuations_asynchronously(true);
    return false;
  }
  void await_resume() const noexcept {}
};

template <class R, class F>
task<R> start_new_impl(F fn, task_creation_options opts, scheduler* s, cancellation_token token) {
  token.throw_if_cancellation_requested();
  if (has_option(opts, task_creation_options::run_continuations_asynchronously))
    co_await make_continuations_asynchronous{};
  if (has_option(opts, task_creation_options::long_running)) {
    co_await resume_on_new_thread{};
  } else if (has_option(opts, task_creation_options::prefer_fairness)) {
    co_await resume_after_others_on{s};
  } else {
    co_await resume_on(*s);
  }
  token.throw_if_cancellation_requested();
  if constexpr (std::is_void_v<R>) {
    std::invoke(fn);
  } else {
    co_return std::invoke(fn);
  }
}

template <class T>
task<T> unwrap_impl(task<task<T>> outer) {
  task<T> inner = co_await outer;
  if constexpr (std::is_void_v<T>) {
    co_await inner;
  } else {
    co_return co_await inner;
  }
}

}  // namespace detail

/// .NET Task.Factory: start_new queues a function and returns its task (never unwrapped).
class task_factory {
 public:
  /// fn() on the default pool.
  template <class F>
    requires std::is_invocable_v<std::decay_t<F>&>
  static task<std::invoke_result_t<std::decay_t<F>&>> start_new(
      F&& fn, task_creation_options opts = task_creation_options::none, cancellation_token token = {}) {
    return detail::start_new_impl<std::invoke_result_t<std::decay_t<F>&>, std::decay_t<F>>(
        static_cast<F&&>(fn), opts, &thread_pool::default_pool(), std::move(token));
  }

  /// fn() on scheduler s.
  template <class F>
    requires std::is_invocable_v<std::decay_t<F>&>
  static task<std::invoke_result_t<std::decay_t<F>&>> start_new(F&& fn, task_creation_options opts, scheduler& s,
                                                                 cancellation_token token = {}) {
    return detail::start_new_impl<std::invoke_result_t<std::decay_t<F>&>, std::decay_t<F>>(
        static_cast<F&&>(fn), opts, &s, std::move(token));
  }

  /// fn(state) on scheduler s (.NET's StartNew(Func<object, T>, object state, ...)); state is
  /// moved into the task.
  template <class F, class State>
    requires std::is_invocable_v<std::decay_t<F>&, std::decay_t<State>&>
  static task<std::invoke_result_t<std::decay_t<F>&, std::decay_t<State>&>> start_new(
      F&& fn, State&& state, task_creation_options opts, scheduler& s, cancellation_token token = {}) {
    using R = std::invoke_result_t<std::decay_t<F>&, std::decay_t<State>&>;
    return detail::start_new_impl<R>(
        [f = std::decay_t<F>(static_cast<F&&>(fn)), st = std::decay_t<State>(static_cast<State&&>(state))]() mutable {
          return std::invoke(f, st);
        },
        opts, &s, std::move(token));
  }
};

/// Flattens a task of a task: completes as the inner task does (value, exception or
/// cancellation); canceled or faulted if the outer one is.
template <class T>
task<T> unwrap(task<task<T>> outer) {
  if (!outer.valid()) detail::throw_empty_task("unwrap()");
  return detail::unwrap_impl<T>(std::move(outer));
}

}  // namespace tpl
