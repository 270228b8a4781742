// tpl/spawn.hpp — tpl::spawn: start a coroutine task on the pool, for fork-join (one frame).
//
// spawn(f) calls f, which must return the task of a coroutine it calls (`[=] { return child(x); }`),
// and queues that coroutine instead of running it inline: on a pool worker it goes to the worker's
// own deque, where an idle worker can steal it; awaiting it on the same worker while it is still
// queued takes it back and runs it there, so an unstolen child costs no suspension of its parent.
//
//   tpl::task<long> fib(int n) {
//     if (n < 2) co_return n;
//     tpl::task<long> left = tpl::spawn([=] { return fib(n - 1); });  // may run on another worker
//     long right = co_await fib(n - 2);                                // runs here
//     co_return co_await left + right;
//   }
//
// Rules that make it fast (docs/tasks.md, "Fork-join"):
//  - Run the last child inline (a plain co_await of the call), spawn the others.
//  - Await spawned tasks newest first: only the task on top of the worker's deque is taken back.
//  - Awaiting in another order, or from another thread, is still correct: the awaiter suspends
//    and the child runs wherever it is taken.
//
// Compared with tpl::run(f): run queues f itself (the whole call runs on the pool) and, when f
// returns a task, unwraps it: two frames. spawn runs f on the calling thread, up to the moment
// f's coroutine is created, and queues only the coroutine's body: one frame. Use run for a
// function that does work before it calls its coroutine, spawn for fork-join.
#pragma once

#include <functional>
#include <type_traits>
#include <utility>

#include "tpl/detail/start_guard.hpp"
#include "tpl/task.hpp"
#include "tpl/value_task.hpp"

namespace tpl {

namespace detail {
template <class R>
inline constexpr bool is_spawnable_v = false;
template <class T>
inline constexpr bool is_spawnable_v<task<T>> = true;
template <class T>
inline constexpr bool is_spawnable_v<value_task<T>> = true;

struct spawn_request_scope {
  spawn_request_scope() noexcept { begin_spawn_request(); }
  ~spawn_request_scope() { end_spawn_request(); }
  spawn_request_scope(const spawn_request_scope&) = delete;
  spawn_request_scope& operator=(const spawn_request_scope&) = delete;
};
}  // namespace detail

/// Calls fn(args...), whose result must be a tpl::task<T> or tpl::value_task<T>, and queues the
/// first coroutine it starts (its body runs on the current scheduler: a pool worker's own deque,
/// or the default pool from other threads) instead of running it inline. If fn starts no
/// coroutine (returns a completed task), nothing is queued and its result is returned as is.
template <class F, class... Args>
  requires std::is_invocable_v<F&&, Args&&...>
auto spawn(F&& fn, Args&&... args) -> std::invoke_result_t<F&&, Args&&...> {
  using result_t = std::invoke_result_t<F&&, Args&&...>;
  static_assert(detail::is_spawnable_v<result_t>,
                "tpl::spawn: the function must return the tpl::task<T> (or value_task<T>) of a "
                "coroutine it calls; use tpl::run for a function that returns a value");
  detail::spawn_request_scope request;
  return std::invoke(static_cast<F&&>(fn), static_cast<Args&&>(args)...);
}

}  // namespace tpl
