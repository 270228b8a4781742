// tpl/run.hpp — tpl::run: run a function on the thread pool and get a task for its result
// (.NET Task.Run).
//
//   tpl::task<int> t = tpl::run([] { return expensive(); });
//   tpl::task<int> u = tpl::run([]() -> tpl::task<int> { co_return co_await other(); });  // unwrapped
//   tpl::task<> v = tpl::run(my_scheduler, [] { ... });     // on a given scheduler
//
// If fn returns a task<U> (or value_task<U>), the result is unwrapped to task<U>, as Task.Run does.
// An exception thrown by fn faults the task. fn is moved into the task's frame, which comes from
// the frame pool.
#pragma once

#include <functional>
#include <type_traits>
#include <utility>

#include "tpl/scheduler.hpp"
#include "tpl/task.hpp"
#include "tpl/thread_pool.hpp"
#include "tpl/value_task.hpp"

namespace tpl {

namespace detail {
template <class R>
struct unwrap_result {
  using type = R;
};
template <class U>
struct unwrap_result<task<U>> {
  using type = U;
};
template <class U>
struct unwrap_result<value_task<U>> {
  using type = U;
};
template <class F>
using run_result_t = typename unwrap_result<std::invoke_result_t<F&>>::type;

// The parameter (a run_call or run_call_on, holding fn) makes task_promise queue this coroutine
// on the run's scheduler before its body runs (start_guard.hpp): the body starts there, and the
// frame holds no awaiter for getting there. A scheduler that refuses it (schedule() throws)
// faults the task with that exception; fn is not called.
template <class Call>
task<run_result_t<decltype(Call::fn)>> run_on(Call call) {
  using F = decltype(Call::fn);
  using R = std::invoke_result_t<F&>;
  if constexpr (!std::is_same_v<R, run_result_t<F>>) {
    co_return co_await std::invoke(call.fn);
  } else if constexpr (std::is_void_v<R>) {
    std::invoke(call.fn);
  } else {
    co_return std::invoke(call.fn);
  }
}
}  // namespace detail

/// Runs fn on the default thread pool.
template <class F>
  requires std::is_invocable_v<std::decay_t<F>&>
task<detail::run_result_t<std::decay_t<F>>> run(F&& fn) {
  return detail::run_on(detail::run_call<std::decay_t<F>>{static_cast<F&&>(fn)});
}

/// Runs fn on scheduler s.
template <class F>
  requires std::is_invocable_v<std::decay_t<F>&>
task<detail::run_result_t<std::decay_t<F>>> run(scheduler& s, F&& fn) {
  return detail::run_on(detail::run_call_on<std::decay_t<F>>{static_cast<F&&>(fn), &s});
}

}  // namespace tpl
