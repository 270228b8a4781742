// The pool's side of fork jobs (tpl/detail/fork_job.hpp, for tpl::parallel::invoke): queuing a
// job from its invoker's stack, running a stolen one, and joining.
//
// Joining a job queued on the invoker's own deque (fork_join_local):
//  1. Pop the deque. The job on top is the invoker's (each invoke pushes its jobs and joins them
//     newest first, and nested invokes have joined theirs before they return), unless the
//     invoker's own functions queued coroutines and did not wait for them: those are moved to
//     the worker's fair queue, where any worker takes them, and the pop goes on.
//  2. The pop returned the job: run it here as a plain call (no atomic: see fork_job.hpp).
//  3. The deque is empty: the job was stolen. Help: steal *fork jobs* from the other workers'
//     deques and run them here, nested, until the job is done. Only fork jobs: a coroutine run
//     nested here could wait for what the invoker's caller does after the join, and the wait
//     would then never end (oneTBB's isolation guards the same hazard). A fork job waits only
//     for its own jobs, which are below it on this stack or on a thief's.
//  4. Nothing to steal for kHelpSpin: announce kSleeping (CAS from 0; if it fails the job is
//     done) and sleep on the word inside a blocking_region, so the pool may add a worker for
//     the work queued meanwhile. The thief's exchange to kDone reads kSleeping and wakes us.
// Nested help runs on this thread's stack; below the start guard's threshold (little stack
// left) the join does not help and goes straight to step 4.
//
// Queuing (fork_push): a job pushed onto the invoker's own deque is followed by the pool's wake
// check, so that an idle worker comes to steal it. Onto an empty deque (an invoke's first job,
// where a thief matters most) that check is after_push's, behind its seq_cst fence; onto a deque
// that already holds items (the deep levels of a recursion) it is made without the fence, which
// would otherwise be most of a fork's cost. Without the fence the look may be satisfied before
// the push is visible, and a worker parking at that moment may miss the job: the job is then run
// by its invoker's join (step 2), never stranded (tests/model_pool_handshake_test.cpp explores
// the look in both orders); a later push's check can still wake the parked worker for the rest.
//
// An invoke of three or more functions on a worker queues its jobs together (fork_push_local_many):
// one push_many (every slot written, then one release store of bottom) and one wake check, fenced
// or not as above by whether the deque held items before. For the wake protocol the batch is one
// push; each job is then joined as above, in the order run_first pops them
// (tests/model_fork_batch_test.cpp).
//
// Memory orders (the same on ARMv8 and x86): the runner's exchange is release, so the job's
// results and error are visible to whoever reads kDone with acquire (the invoker's load, or its
// failed CAS). Sleeping is announced by a CAS and done is published by an exchange on the same
// word, so they are totally ordered: either the CAS sees kDone (and the invoker does not sleep),
// or the exchange sees kSleeping (and wakes it). tests/model_fork_join_test.cpp checks this, and
// the take-back/steal exclusivity, in every interleaving.
#include <chrono>
#include <optional>

#include "pool_impl.hpp"
#include "tpl/detail/config.hpp"
#include "tpl/detail/flow.hpp"
#include "tpl/detail/fork_job.hpp"
#include "tpl/detail/futex.hpp"
#include "tpl/detail/start_guard.hpp"

namespace tpl {

namespace {

/// How long a join whose job was stolen keeps looking for fork jobs before it sleeps: the
/// pool's own spin bound, for the same reason (about a park/unpark round trip).
constexpr auto kHelpSpin = pool_detail::kSpinBeforeParkUs;

void* tag(detail::fork_job* j) noexcept { return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(j) | 1u); }

}  // namespace

bool thread_pool::impl::is_fork_job(void* item) noexcept {
  return (reinterpret_cast<std::uintptr_t>(item) & 1u) != 0;
}

// A stolen job, or one queued from outside, run by a worker (or by drain_inline at shutdown).
void thread_pool::impl::run_fork_job(void* item) noexcept {
  auto* j = reinterpret_cast<detail::fork_job*>(reinterpret_cast<std::uintptr_t>(item) & ~std::uintptr_t{1});
  detail::fork_execute(j);  // in the invoker's context; the runner's own (a helper's) is kept
  // release: the function's effects and j->error happen before the invoker's acquire of kDone.
  if (j->state.exchange(detail::fork_job::kDone, std::memory_order_release) == detail::fork_job::kSleeping)
    detail::futex_wake_one(&j->state);  // after the exchange j may be gone: a system call on the address only
}

namespace detail {

fork_placement fork_push(fork_job* j) {
  using impl = thread_pool::impl;
  impl::thread_context& ctx = impl::t_context;
  // Not fork_push_local_many(&j, 1): that call and its loop cost invoke's two-function path (the
  // hottest) about 30 instructions (callgrind, fib).
  if (ctx.pool != nullptr) {
    if (ctx.self->local.push(tag(j)))
      ctx.pool->after_fork_push_unfenced();  // items below: see the file comment
    else
      ctx.pool->after_push();
    return fork_placement::own_deque;
  }
  thread_pool::default_pool();  // builds it on first use
  // acquire: pairs with the release store that publishes the default pool once it is built.
  impl* p = impl::default_impl.load(std::memory_order_acquire);
  p->push_from_outside(tag(j), p->queue_for_outside());
  return fork_placement::pool;
}

bool fork_push_local_many(fork_job* const* jobs, std::size_t count) {
  using impl = thread_pool::impl;
  impl::thread_context& ctx = impl::t_context;
  if (ctx.pool == nullptr) return false;
  // The last first: jobs[0] ends at the bottom, where the invoker's first join pops it.
  const auto n = static_cast<std::int64_t>(count);
  if (ctx.self->local.push_many(n, [jobs, n](std::int64_t i) { return tag(jobs[n - 1 - i]); }))
    ctx.pool->after_fork_push_unfenced();  // items below: see the file comment
  else
    ctx.pool->after_push();
  return true;
}

namespace {

// The rest of a join whose first pop did not return the job: top is a coroutine above it, or
// null (the deque is empty: the job was stolen).
TPL_NOINLINE void fork_join_local_slow(fork_job* j, void* top) noexcept {
  using impl = thread_pool::impl;
  impl::thread_context& ctx = impl::t_context;
  impl& pool = *ctx.pool;
  impl::worker& self = *ctx.self;
  void* const mine = tag(j);
  while (top != nullptr) {
    // A coroutine the invoker's functions queued and did not wait for (never a fork job: every
    // invoke joins all of its own before it returns). It goes where any worker takes it; push
    // can throw only when the fair queue cannot grow.
    try {
      self.fair.push(top);
      pool.after_push();
    } catch (...) {
      pool.run_nested(self, top);  // no room to move it: run it here rather than lose it
    }
    top = self.local.pop();
    if (top == mine) {
      fork_execute(j);  // taken back: nobody else saw it
      return;
    }
  }
  pool.wait_for_stolen(self, j);
}

}  // namespace

// The common case stays small: the pop returns the job, which runs here as a plain call. The
// rest (coroutines above it, a stolen job) is out of line, so this path pays no frame for it.
void fork_join_local(fork_job* j) noexcept {
  void* const top = thread_pool::impl::t_context.self->local.pop();
  if (TPL_LIKELY(top == tag(j))) {
    fork_execute(j);  // taken back: nobody else saw it
    return;
  }
  fork_join_local_slow(j, top);
}

// Step 4 of the join (file comment), and the whole wait of a job queued from outside.
void fork_wait(fork_job* j) noexcept {
  std::uint32_t s = 0;
  // acquire (also on failure): kDone read here makes the job's results visible.
  if (!j->state.compare_exchange_strong(s, fork_job::kSleeping, std::memory_order_acquire)) return;
  std::optional<blocking_region> blocked;
  try {
    blocked.emplace("tpl::parallel::invoke");
  } catch (...) {
    // A scheduler that refuses blocking (a test scheduler) is never a pool worker's, and a
    // thread outside the pool has nothing else to run: sleep without the scope.
  }
  while (j->state.load(std::memory_order_acquire) != fork_job::kDone) futex_wait(&j->state, fork_job::kSleeping);
}

}  // namespace detail

// Step 3 of the join (file comment), then step 4.
void thread_pool::impl::wait_for_stolen(worker& self, detail::fork_job* j) noexcept {
  const bool may_help =
      reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0)) >= detail::measured_stack_threshold();
  auto spin_until = clock::now() + kHelpSpin;
  unsigned looks = 0;
  for (;;) {
    // acquire: pairs with the runner's release exchange.
    if (j->state.load(std::memory_order_acquire) == detail::fork_job::kDone) return;
    if (may_help) {
      if (void* item = steal_fork_job(self)) {
        run_fork_job(item);
        spin_until = clock::now() + kHelpSpin;
        continue;
      }
    }
    // Check the clock every 64 looks only: a look is a few loads.
    if ((++looks & 63) != 0 || clock::now() < spin_until) {
      TPL_CPU_RELAX();
      continue;
    }
    detail::fork_wait(j);
    return;
  }
}

// Runs a coroutine item on the stack of a join, keeping the invoker's execution context (run()
// resets the thread's context after the item, as a worker's loop does between items).
void thread_pool::impl::run_nested(worker& self, void* item) noexcept {
  detail::flow_state& f = detail::flow_tls();
  detail::context_data* outer = f.current;
  f.current = nullptr;
  run(self, item);
  f.current = outer;
}

// A fork job from another worker's deque (the top one, if it is a fork job: a coroutine there
// is left where it is).
void* thread_pool::impl::steal_fork_job(worker& self) noexcept {
  // acquire: the slots below slot_count are published (release) before the count, as find_work
  // relies on; each slot's pointer is then read relaxed.
  const std::size_t n = slot_count.load(std::memory_order_acquire);
  if (n <= 1) return nullptr;
  const std::size_t start = self.rng() % n;
  for (std::size_t k = 0; k < n; ++k) {
    worker& victim = *slots[(start + k) % n].load(std::memory_order_relaxed);
    if (&victim == &self) continue;
    if (void* item = victim.local.steal_if([](void* p) { return is_fork_job(p); })) return item;
  }
  return nullptr;
}

}  // namespace tpl
