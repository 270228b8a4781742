// tpl/parallel_invoke.hpp — tpl::parallel::invoke: run functions in parallel and return when all
// have run (.NET Parallel.Invoke); tpl's fork-join for CPU-bound recursion.
//
//   long fib(int n) {
//     if (n < 2) return n;
//     long a = 0, b = 0;
//     tpl::parallel::invoke([&] { a = fib(n - 1); },   // runs here
//                           [&] { b = fib(n - 2); });  // queued: an idle worker may steal it
//     return a + b;
//   }
//
// The first function runs on the calling thread; the others are queued, from the caller's stack
// (nothing is allocated), on the calling worker's own deque, where idle workers steal them. When
// the first returns, the caller takes back each function nobody stole and runs it as a plain call
// (newest first). For a stolen one it helps: it runs fork jobs stolen from other workers (other
// invokes' functions, never a coroutine) until its own is done, then sleeps (as a blocking wait:
// the pool may add a thread meanwhile). So a recursion of invokes spreads over the pool like
// rayon::join, and an unstolen function costs about a deque push and pop.
//
// From a thread that is no pool worker (main, say), the queued functions go to the default pool
// and the caller, after running the first, blocks until they have run.
//
// Exceptions: every function runs, whatever the others throw; then invoke throws
// aggregate_exception holding every exception thrown, in the order of the functions (.NET's
// AggregateException).
//
// Rules: functions must not wait (task::wait(), sync_wait) for work that the caller of invoke does
// after invoke returns. Use tpl::spawn (tpl/spawn.hpp) for fork-join of coroutines that await I/O:
// invoke blocks its thread for the whole join, as .NET's Parallel.Invoke does.
#pragma once

#include <cstddef>
#include <exception>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tpl/detail/fork_job.hpp"
#include "tpl/exceptions.hpp"

namespace tpl::parallel {

namespace detail {

enum class job_queue : unsigned char { own_deque, pool, none };

template <std::size_t N>
void run_forked(tpl::detail::fork_job* (&jobs)[N]) {
  // jobs[0] runs here; jobs[1..N-1] are queued newest-first-joined: pushed from the last, so
  // jobs[1] is on top of the deque and the oldest (the last function) is the first a thief takes.
  job_queue where[N] = {};
  for (std::size_t i = N - 1; i >= 1; --i) {
    try {
      where[i] = tpl::detail::fork_push(jobs[i]) == tpl::detail::fork_placement::own_deque ? job_queue::own_deque
                                                                                           : job_queue::pool;
    } catch (...) {
      where[i] = job_queue::none;  // no queue could take it: it runs here, in its turn
    }
  }
  jobs[0]->execute(jobs[0]);
  for (std::size_t i = 1; i < N; ++i) {
    switch (where[i]) {
      case job_queue::own_deque:
        tpl::detail::fork_join_local(jobs[i]);
        break;
      case job_queue::pool:
        tpl::detail::fork_wait(jobs[i]);
        break;
      case job_queue::none:
        jobs[i]->execute(jobs[i]);
        break;
    }
  }
  std::vector<std::exception_ptr> errors;
  for (tpl::detail::fork_job* j : jobs)
    if (j->error) errors.push_back(std::move(j->error));
  if (!errors.empty()) throw aggregate_exception(std::move(errors));
}

}  // namespace detail

/// Runs every function, in parallel where workers are free, and returns when all have returned.
/// Throws aggregate_exception with every exception they threw.
template <class... F>
  requires(std::is_invocable_v<std::remove_reference_t<F>&> && ...)
void invoke(F&&... fns) {
  if constexpr (sizeof...(F) == 1) {
    try {
      (fns(), ...);
    } catch (...) {
      throw aggregate_exception({std::current_exception()});
    }
  } else if constexpr (sizeof...(F) > 1) {
    std::tuple<tpl::detail::fork_job_of<std::remove_reference_t<F>>...> jobs{fns...};
    std::apply(
        [](auto&... j) {
          tpl::detail::fork_job* list[] = {&j...};
          detail::run_forked(list);
        },
        jobs);
  }
}

}  // namespace tpl::parallel
