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

template <class F>
task<run_result_t<F>> run_on(scheduler& s, F fn) {
  co_await resume_on(s);
  using R = std::invoke_result_t<F&>;
  if constexpr (!std::is_same_v<R, run_result_t<F>>) {
    co_return co_await std::invoke(fn);
  } else if constexpr (std::is_void_v<R>) {
    std::invoke(fn);
  } else {
    co_return std::invoke(fn);
  }
}
}  // namespace detail

/// Runs fn on the default thread pool.
template <class F>
  requires std::is_invocable_v<std::decay_t<F>&>
task<detail::run_result_t<std::decay_t<F>>> run(F&& fn) {
  return detail::run_on<std::decay_t<F>>(thread_pool::default_pool(), static_cast<F&&>(fn));
}

/// Runs fn on scheduler s.
template <class F>
  requires std::is_invocable_v<std::decay_t<F>&>
task<detail::run_result_t<std::decay_t<F>>> run(scheduler& s, F&& fn) {
  return detail::run_on<std::decay_t<F>>(s, static_cast<F&&>(fn));
}

}  // namespace tpl
