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
// (nothing is allocated), on the calling worker's own deque, where idle workers steal them (all
// in one publication and one wake check, the last function where a thief takes first). When
// the first returns, the caller takes back each function nobody stole and runs it as a plain call
// (newest first). For a stolen one it helps: it runs fork jobs stolen from other workers (other
// invokes' functions, never a coroutine) until its own is done, then sleeps (as a blocking wait:
// the pool may add a thread meanwhile). So a recursion of invokes spreads over the pool like
// rayon::join, and an unstolen function costs about a deque push and pop.
//
// From a thread that is no pool worker (main, say), the queued functions go to the default pool
// and the caller, after running the first, blocks until they have run.
//
// Every function runs in the caller's execution context (async_local values) as it was at the
// call, wherever it runs; a value a function sets stays in its own copy (.NET runs each action in
// the captured ExecutionContext the same way).
//
// Exceptions: every function runs, whatever the others throw; then invoke throws
// aggregate_exception holding every exception thrown, in the order of the functions (.NET's
// AggregateException).
//
// With options (.NET Parallel.Invoke(ParallelOptions, ...)): a token canceled before the call
// throws operation_canceled and runs nothing; one canceled during the call lets the functions that
// started finish, starts no other, and then throws operation_canceled (aggregate_exception if a
// function threw). max_degree_of_parallelism caps how many functions run at once (checked as
// parallel::for_ checks it: n > 0, 0 default, -1 unlimited, else std::invalid_argument). With a
// scheduler that is not the caller's, the whole invoke runs on that scheduler, the caller
// blocking until it ends; its queued functions go to the deque of the pool worker it runs on,
// else (a scheduler whose threads are no pool workers) to the default pool.
//
//   tpl::parallel::invoke({.max_degree_of_parallelism = 2, .token = t}, load_a, load_b, load_c);
//
// Rules: functions must not wait (task::wait(), sync_wait) for work that the caller of invoke does
// after invoke returns. Use tpl::spawn (tpl/spawn.hpp) for fork-join of coroutines that await I/O:
// invoke blocks its thread for the whole join, as .NET's Parallel.Invoke does.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tpl/cancellation.hpp"
#include "tpl/detail/config.hpp"
#include "tpl/detail/fork_job.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/parallel.hpp"
#include "tpl/run.hpp"

namespace tpl::parallel {

namespace detail {

enum class job_queue : unsigned char { own_deque, pool, none };

/// Runs jobs[0..count-1]: jobs[0] here; jobs[1..count-1] queued and joined newest first (pushed
/// from the last, so jobs[1] is on top of the deque and the oldest, the last function, is the
/// first a thief takes). On a pool worker two or more are queued in one batch. The loops run to
/// N and skip what is past count: plain invoke passes count as the constant N (an
/// integral_constant), so that the compiler drops the tests and unrolls the loops; the options
/// form passes a std::size_t.
template <std::size_t N, class Count>
void run_first(tpl::detail::fork_job* (&jobs)[N], Count count) {
  // Every function runs in the caller's context as it is now; this reference keeps it alive
  // until the last join (a function may replace the thread's own).
  struct context_hold {
    tpl::detail::context_data* c = tpl::detail::flow_tls().current;
    context_hold() noexcept { tpl::detail::add_ref(c); }
    ~context_hold() { tpl::detail::release(c); }
  } hold;
  for (std::size_t i = 0; i < N; ++i)
    if (i < count) jobs[i]->context = hold.c;
  if constexpr (N == 1) {
    tpl::detail::fork_execute(jobs[0]);
    return;
  }
  if (count > 2) {
    // Two or more to queue: on a pool worker all go onto its deque at once (one publication,
    // one wake check) and are joined there.
    bool local;
    try {
      local = tpl::detail::fork_push_local_many(&jobs[1], count - 1);
    } catch (...) {
      // The deque could not grow, and nothing was queued: each runs here, in its turn.
      for (std::size_t i = 0; i < N; ++i)
        if (i < count) tpl::detail::fork_execute(jobs[i]);
      return;
    }
    if (local) {
      tpl::detail::fork_execute(jobs[0]);
      for (std::size_t i = 1; i < N; ++i) {
        if (i >= count) break;
        tpl::detail::fork_join_local(jobs[i]);
      }
      return;
    }
  }
  // One to queue, or a thread that is no pool worker: each is queued where fork_push puts it.
  job_queue where[N] = {};
  for (std::size_t i = N - 1; i >= 1; --i) {
    if (i >= count) continue;
    try {
      where[i] = tpl::detail::fork_push(jobs[i]) == tpl::detail::fork_placement::own_deque ? job_queue::own_deque
                                                                                           : job_queue::pool;
    } catch (...) {
      where[i] = job_queue::none;  // no queue could take it: it runs here, in its turn
    }
  }
  tpl::detail::fork_execute(jobs[0]);
  for (std::size_t i = 1; i < N; ++i) {
    if (i >= count) break;
    switch (where[i]) {
      case job_queue::own_deque:
        tpl::detail::fork_join_local(jobs[i]);
        break;
      case job_queue::pool:
        tpl::detail::fork_wait(jobs[i]);
        break;
      case job_queue::none:
        tpl::detail::fork_execute(jobs[i]);
        break;
    }
  }
}

/// After the joins, when a function threw: throws aggregate_exception with the functions'
/// exceptions, in their order (out of line: the common case only tests the error slots).
template <std::size_t N>
[[noreturn]] TPL_NOINLINE void throw_errors_slow(tpl::detail::fork_job* (&jobs)[N]) {
  std::vector<std::exception_ptr> errors;
  for (tpl::detail::fork_job* j : jobs)
    if (j->error) errors.push_back(std::move(j->error));
  throw aggregate_exception(std::move(errors));
}

/// After the joins: throws aggregate_exception with the functions' exceptions, if any.
template <std::size_t N>
void throw_errors(tpl::detail::fork_job* (&jobs)[N]) {
  bool any = false;
  for (tpl::detail::fork_job* j : jobs) any |= static_cast<bool>(j->error);
  if (TPL_UNLIKELY(any)) throw_errors_slow(jobs);
}

template <class R, std::size_t... I>
std::array<tpl::detail::fork_job_of<R>, sizeof...(I)> make_runner_jobs(R& runner, std::index_sequence<I...>) {
  return {((void)I, tpl::detail::fork_job_of<R>(runner))...};
}

template <std::size_t N>
void run_forked(tpl::detail::fork_job* (&jobs)[N]) {
  run_first(jobs, std::integral_constant<std::size_t, N>{});
  throw_errors(jobs);
}

/// The options form: `runners` fork jobs (the caller's own run included) claim the functions in
/// order from a shared index, so at most that many run at once, and each claim checks the token.
template <std::size_t N>
void run_claimed(tpl::detail::fork_job* (&fns)[N], std::size_t runners, const cancellation_token& token) {
  struct shared_state {
    tpl::detail::fork_job* (&fns)[N];
    const cancellation_token& token;
    std::atomic<std::size_t> next{0};
    std::atomic<bool> canceled{false};
  } st{fns, token};
  auto runner = [&st] {
    for (;;) {
      // relaxed: the index only hands out distinct functions; their effects are published by
      // the runners' joins.
      const std::size_t i = st.next.fetch_add(1, std::memory_order_relaxed);
      if (i >= N) return;
      if (st.token.is_cancellation_requested()) {
        st.canceled.store(true, std::memory_order_relaxed);  // read after the joins
        continue;
      }
      tpl::detail::fork_execute(st.fns[i]);
    }
  };
  std::array<tpl::detail::fork_job_of<decltype(runner)>, N> jobs = make_runner_jobs(runner, std::make_index_sequence<N>{});
  tpl::detail::fork_job* list[N];
  for (std::size_t i = 0; i < N; ++i) list[i] = &jobs[i];
  // The functions run in the caller's context, as the runners do (run_first holds a reference to
  // it until the last runner is joined).
  for (tpl::detail::fork_job* f : fns) f->context = tpl::detail::flow_tls().current;
  run_first(list, runners);
  throw_errors(fns);
  // relaxed: every runner's store happens before its join returned (kDone is acquire/release).
  if (st.canceled.load(std::memory_order_relaxed)) throw operation_canceled();
}

}  // namespace detail

/// Runs every function, in parallel where workers are free, and returns when all have returned.
/// Throws aggregate_exception with every exception they threw, or operation_canceled when the
/// token stopped some from starting. See the file comment.
template <class... F>
  requires(std::is_invocable_v<std::remove_reference_t<F>&> && ...)
void invoke(const parallel_options& options, F&&... fns) {
  constexpr std::size_t n = sizeof...(F);
  const std::uint64_t degree = tpl::detail::loop_degree(options, true);
  options.token.throw_if_cancellation_requested();
  if constexpr (n != 0) {
    tpl::scheduler* target = options.scheduler;
    if (target != nullptr && target != tpl::scheduler::current()) {
      parallel_options here = options;
      here.scheduler = nullptr;
      tpl::run(*target, [&] { invoke(here, static_cast<F&&>(fns)...); }).get();
      return;
    }
    std::tuple<tpl::detail::fork_job_of<std::remove_reference_t<F>>...> jobs{fns...};
    std::apply(
        [&](auto&... j) {
          tpl::detail::fork_job* list[] = {&j...};
          detail::run_claimed(list, static_cast<std::size_t>(std::min<std::uint64_t>(degree, n)), options.token);
        },
        jobs);
  }
}

/// Runs every function, in parallel where workers are free, and returns when all have returned.
/// Throws aggregate_exception with every exception they threw.
template <class... F>
  requires(std::is_invocable_v<std::remove_reference_t<F>&> && ...)
void invoke(F&&... fns) {
  if constexpr (sizeof...(F) != 0) {
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
