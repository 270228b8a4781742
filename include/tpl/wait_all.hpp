// tpl/wait_all.hpp — blocking waits for several tasks, with a timeout and a cancellation token
// (.NET Task.WaitAll / Task.WaitAny).
//
//   std::vector<tpl::task<int>> parts = start_parts();
//   if (!tpl::wait_all(parts, std::chrono::seconds(5), token))   // false: not all done in 5 s
//     report_slow();
//   int first = tpl::wait_any(parts);                            // index of a completed task
//
// Semantics (.NET's):
//   1. wait_all blocks until every task has completed, then throws aggregate_exception with every
//      exception of every faulted task and an operation_canceled for each canceled one, in task
//      order; with a timeout it returns false if they have not all completed by then (and throws
//      nothing: the tasks go on running).
//   2. wait_any blocks until one task has completed and returns its index (the first in order if
//      several already are); it never throws a task's exception. With a timeout it returns -1
//      when none completed in time.
//   3. A token that is canceled while waiting (or before) throws operation_canceled; the tasks are
//      not affected. infinite_timeout waits without a limit; another negative timeout throws
//      std::invalid_argument; a timeout of zero only looks.
//   4. The timeout runs on `provider` (default: the system clock), so a fake_time_provider can
//      drive it in tests. A wait that ends early takes its registrations back off the tasks
//      (nothing accumulates on a long-lived task).
//   5. An empty task handle throws invalid_operation; wait_any of no tasks throws
//      std::invalid_argument (nothing could complete); wait_all of no tasks returns at once.
//   6. These block the calling thread (tell the pool, as every blocking wait of tpl's does); in a
//      coroutine, co_await when_all / when_any instead.
#pragma once

#include <chrono>
#include <cstddef>
#include <ranges>
#include <type_traits>
#include <vector>

#include "tpl/cancellation.hpp"
#include "tpl/task.hpp"
#include "tpl/time_provider.hpp"

namespace tpl {

namespace detail {
/// The shared core: waits for all (or any) of `states`. Returns false on timeout; for any, stores
/// the index that completed in *index. Throws operation_canceled, invalid_argument (timeout),
/// invalid_operation (an empty handle).
bool wait_for_tasks(const std::vector<task_state_base*>& states, bool all, std::chrono::nanoseconds timeout,
                    const cancellation_token& token, time_provider& provider, std::ptrdiff_t* index);
/// Throws aggregate_exception with the exceptions of the tasks that did not run to completion.
void throw_if_any_failed(const std::vector<task_state_base*>& states);

template <class R>
concept task_range = std::ranges::input_range<R> && is_task<std::remove_cvref_t<std::ranges::range_reference_t<R>>>::value;

template <task_range R>
std::vector<task_state_base*> states_of(R&& tasks) {
  std::vector<task_state_base*> states;
  if constexpr (std::ranges::sized_range<R>) states.reserve(std::ranges::size(tasks));
  for (auto&& t : tasks) states.push_back(task_access::state(t));
  return states;
}
}  // namespace detail

/// Blocks until every task has completed (.NET Task.WaitAll(tasks)); throws aggregate_exception if
/// any faulted or was canceled.
template <detail::task_range R>
void wait_all(R&& tasks) {
  const auto states = detail::states_of(tasks);
  (void)detail::wait_for_tasks(states, true, std::chrono::nanoseconds(infinite_timeout), {}, system_time_provider(), nullptr);
  detail::throw_if_any_failed(states);
}

/// As wait_all(tasks), giving up after `timeout` (false) or when `token` is canceled
/// (operation_canceled). .NET Task.WaitAll(tasks, timeout, token).
template <detail::task_range R>
bool wait_all(R&& tasks, std::chrono::nanoseconds timeout, const cancellation_token& token = {},
              time_provider& provider = system_time_provider()) {
  const auto states = detail::states_of(tasks);
  if (!detail::wait_for_tasks(states, true, timeout, token, provider, nullptr)) return false;
  detail::throw_if_any_failed(states);
  return true;
}

/// As wait_all(tasks) until `token` is canceled (.NET Task.WaitAll(tasks, token)).
template <detail::task_range R>
void wait_all(R&& tasks, const cancellation_token& token) {
  (void)wait_all(tasks, std::chrono::nanoseconds(infinite_timeout), token);
}

/// Blocks until one task has completed and returns its index (.NET Task.WaitAny(tasks)).
template <detail::task_range R>
int wait_any(R&& tasks) {
  std::ptrdiff_t index = -1;
  (void)detail::wait_for_tasks(detail::states_of(tasks), false, std::chrono::nanoseconds(infinite_timeout), {},
                               system_time_provider(), &index);
  return static_cast<int>(index);
}

/// As wait_any(tasks), returning -1 after `timeout`, throwing operation_canceled when `token` is
/// canceled (.NET Task.WaitAny(tasks, timeout, token)).
template <detail::task_range R>
int wait_any(R&& tasks, std::chrono::nanoseconds timeout, const cancellation_token& token = {},
             time_provider& provider = system_time_provider()) {
  std::ptrdiff_t index = -1;
  if (!detail::wait_for_tasks(detail::states_of(tasks), false, timeout, token, provider, &index)) return -1;
  return static_cast<int>(index);
}

/// As wait_any(tasks) until `token` is canceled (.NET Task.WaitAny(tasks, token)).
template <detail::task_range R>
int wait_any(R&& tasks, const cancellation_token& token) {
  return wait_any(tasks, std::chrono::nanoseconds(infinite_timeout), token);
}

}  // namespace tpl
