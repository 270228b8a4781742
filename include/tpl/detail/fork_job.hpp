// tpl/detail/fork_job.hpp — a function queued on the pool from the caller's stack, for
// tpl::parallel::invoke (internal; src/thread_pool/fork_join.cpp is the pool's side).
//
// A fork job lives in its invoker's stack frame; no allocation, no reference count. The pool
// queues it as a tagged pointer (bit 0 set: coroutine frames are at least 8-aligned, so no
// coroutine handle has it) on the invoking worker's own deque, beside coroutine items.
//
// Who runs a job, and how its invoker learns that it ran:
//  - The invoker takes it back (its own deque's pop returns it): nobody else ever saw it, so the
//    invoker runs it as a plain call and touches no atomic.
//  - A thief steals it (a steal is exclusive: the deque hands an item to exactly one taker): the
//    thief runs it and then publishes `kDone` with one exchange; if the invoker had announced
//    that it sleeps (kSleeping), the thief wakes it.
//  - Queued from outside the pool (the invoker is no worker): a worker runs it as a thief does.
//
// Invariants:
//  - A job is run exactly once: by its invoker after a successful pop, or by the one thread the
//    queue handed it to. Never both (model: tests/model_fork_join_test.cpp).
//  - state goes 0 -> kDone, or 0 -> kSleeping -> kDone, and only the runner writes kDone. The
//    invoker reads the job's results only after it has seen kDone (acquire) or run it itself.
//  - The invoker's frame outlives every access to the job but one: the runner's futex wake
//    after its exchange, which is a system call on the word's address (harmless if the frame is
//    gone: a futex wake on an address nobody waits on does nothing, and a waiter that shares the
//    address sees a spurious wake-up, which every futex waiter tolerates).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>

#include "tpl/detail/config.hpp"
#include "tpl/detail/flow.hpp"

namespace tpl::detail {

struct fork_job {
  static constexpr std::uint32_t kDone = 1;
  static constexpr std::uint32_t kSleeping = 2;

  /// Runs the function; an exception it throws is kept in `error`.
  void (*execute)(fork_job* self) noexcept;
  /// The invoker's execution context (async_local values) at the call, nullptr for the default
  /// one; the invoker holds a reference to it until every job is joined. Every job runs in it
  /// (fork_execute), wherever it runs.
  context_data* context = nullptr;
  std::exception_ptr error;
  std::atomic<std::uint32_t> state{0};

  explicit fork_job(void (*run)(fork_job*) noexcept) noexcept : execute(run) {}
  fork_job(const fork_job&) = delete;
  fork_job& operator=(const fork_job&) = delete;
};

/// A fork job over a function object held by reference (it lives in the invoker's frame too).
template <class F>
struct fork_job_of final : fork_job {
  explicit fork_job_of(F& f) noexcept : fork_job(&run), fn(&f) {}
  F* fn;

 private:
  static void run(fork_job* self) noexcept {
    try {
      (*static_cast<fork_job_of*>(self)->fn)();
    } catch (...) {
      self->error = std::current_exception();
    }
  }
};

/// Runs j on the calling thread in j->context, as .NET runs each Parallel.Invoke action in the
/// captured ExecutionContext: values the function sets stay in its own copy (they reach neither
/// the thread's context afterwards nor the other functions).
inline void fork_execute(fork_job* j) noexcept {
  flow_state& f = flow_tls();
  context_data* const outer = f.current;
  if (TPL_LIKELY(outer == j->context)) {
    // Already in it (the invoker's own thread, or both the default context): no swap. If the
    // function replaced the thread's context, the thread's reference to outer went with it; the
    // invoker's reference keeps outer alive, so the thread takes a new one.
    j->execute(j);
    context_data* const now = f.current;
    if (TPL_UNLIKELY(now != outer)) {
      add_ref(outer);
      f.current = outer;
      release(now);
    }
    return;
  }
  add_ref(j->context);  // the thread's reference while the function runs (it may replace it)
  f.current = j->context;
  j->execute(j);
  context_data* const now = f.current;
  f.current = outer;
  release(now);
}

/// Where fork_push put a job, which decides how it is joined.
enum class fork_placement : std::uint8_t {
  own_deque,  ///< the calling worker's deque: join with fork_join_local
  pool,       ///< the default pool, from a thread that is no worker: join with fork_wait
};

/// Queues j so that an idle worker can take it. Throws std::bad_alloc when no queue can take it (j is then not queued).
fork_placement fork_push(fork_job* j);
/// On a pool worker: queues jobs[count - 1], ..., jobs[0] on its deque as fork_push would one
/// by one (jobs[0] last, so it is taken back first), with one publication and one wake check,
/// and returns true; each is then joined with fork_join_local. Elsewhere returns false and
/// queues nothing. Throws std::bad_alloc, with nothing queued, when the deque cannot grow.
bool fork_push_local_many(fork_job* const* jobs, std::size_t count);
/// Joins a job queued on the calling worker's deque: runs it here if it is still there, else
/// helps with other fork jobs (stealing only those: never a coroutine, which could wait for what
/// the caller does after the join) and finally sleeps until its thief has run it.
void fork_join_local(fork_job* j) noexcept;
/// Announces kSleeping and sleeps (holding a blocking_scope) until j is done; returns at once if
/// it already is. Joins a job queued from outside the pool, and ends fork_join_local's wait.
void fork_wait(fork_job* j) noexcept;

}  // namespace tpl::detail
