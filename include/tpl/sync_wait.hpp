// tpl/sync_wait.hpp — tpl::sync_wait: block the calling thread until an awaitable completes, for
// code outside the pool (main(), tests, a callback from a C library).
//
//   int main() {
//     int v = tpl::sync_wait(compute());          // task<int>: the result
//     tpl::sync_wait(tpl::when_all(a(), b()));    // any awaitable works
//   }
//
// Unlike task::wait()/get(), sync_wait rethrows the task's own (first) exception, not an
// aggregate_exception: it is the blocking form of co_await (.NET GetAwaiter().GetResult()).
// Blocking a pool thread on pool work can starve the pool; see docs/thread-pool.md.
#pragma once

#include <type_traits>
#include <utility>

#include "tpl/task.hpp"
#include "tpl/value_task.hpp"

namespace tpl {

namespace detail {
template <class T>
struct is_value_task : std::false_type {};
template <class T>
struct is_value_task<value_task<T>> : std::true_type {};

template <class A>
using await_result_t = decltype(get_awaiter(std::declval<A>()).await_resume());

template <class A>
task<std::remove_cvref_t<await_result_t<A>>> wrap_awaitable(A a) {
  co_return co_await static_cast<A&&>(a);
}
}  // namespace detail

template <class T>
T sync_wait(const task<T>& t) {
  auto* s = detail::task_access::state(t);
  if (s == nullptr) detail::throw_empty_task("sync_wait");
  if (!s->is_completed()) detail::block_until_completed(*s);
  if constexpr (std::is_void_v<T>) {
    s->value_ref();
  } else {
    return static_cast<const T&>(s->value_ref());
  }
}

template <class T>
T sync_wait(task<T>&& t) {
  auto* s = detail::task_access::state(t);
  if (s == nullptr) detail::throw_empty_task("sync_wait");
  if (!s->is_completed()) detail::block_until_completed(*s);
  if constexpr (std::is_void_v<T>) {
    s->value_ref();
  } else {
    return detail::take_or_copy<T>(s->value_ref(), *s);
  }
}

/// Consumes the value_task (an lvalue one too: it may be awaited once either way).
template <class T>
T sync_wait(value_task<T>&& t) {
  return t.get();
}
template <class T>
T sync_wait(value_task<T>& t) {
  return t.get();
}

/// Any other awaitable: runs it from a task and blocks for that task.
template <class A>
  requires(!detail::is_task<std::remove_cvref_t<A>>::value &&
           !detail::is_value_task<std::remove_cvref_t<A>>::value)
auto sync_wait(A&& awaitable) {
  return sync_wait(detail::wrap_awaitable<A>(static_cast<A&&>(awaitable)));
}

}  // namespace tpl
