// tpl/detail/trampoline.hpp — bounded-depth inline resumption of coroutines (internal).
//
// When a task completes, its first awaiter is resumed on the completing thread. Done naively, a
// chain of a million tasks completing one another nests a million stack frames; compilers only
// sometimes turn symmetric transfer into a tail call (g++ 12 does not at -O0 or under ASan), so tpl
// never relies on it. Every inline resumption goes through resume_inline(), which counts nested
// resumptions on this thread: below kMaxInlineResumeDepth it resumes directly (a counter
// increment); at the limit it queues the coroutine to the pool instead (the role .NET's
// TryEnsureSufficientExecutionStack plays), and the chain goes on from a fresh stack there.
//
// Why the pool and not a per-thread deferred list drained by the outermost frame: code running at
// an intermediate depth may block (task::wait(), a user's mutex) on a continuation that would sit
// in that list, behind its own stack frame: a deadlock. A queued continuation is picked up by any
// worker. On a pool thread the item goes to the worker's next slot, so the same worker continues
// the chain itself right after unwinding (unless it stays busy: then another worker takes it).
#pragma once

#include <coroutine>
#include <cstdint>

#include "tpl/detail/config.hpp"

namespace tpl::detail {

/// Nested inline steps allowed before queuing. A completion firing its waiters and a coroutine
/// resumed inline each count one step, so a chain of tasks advances about 16 links per stack.
/// Each step costs a few hundred bytes of stack at -O2 and about a KiB at -O0 under ASan, so the
/// limit stays far below any thread's stack.
inline constexpr std::uint32_t kMaxInlineResumeDepth = 32;

struct trampoline_state {
  std::uint32_t depth;
};

inline thread_local trampoline_state t_trampoline{};
TPL_TLS_ACCESSOR(trampoline_state, trampoline_tls, t_trampoline)

/// Queues h on the calling thread's current scheduler, or the default pool.
void dispatch(std::coroutine_handle<> h);

/// As dispatch, for a coroutine the running one just unblocked (a channel's reader or writer, a
/// task's asynchronous continuation, the depth guard's hand-off): on a thread pool worker it goes
/// to the worker's next slot and runs right after the current item, on the same core (see
/// thread_pool's worker::next).
void dispatch_wakeup(std::coroutine_handle<> h);

/// Call before a wait of tpl's that holds no blocking_scope (which does the same): on a thread
/// pool worker, the coroutine in its next slot moves where any worker can take it, and an idle
/// worker is woken for it. Without this, the coroutine would wait for this thread's wait to end,
/// and it may be what the wait is for.
void before_blocking_wait() noexcept;

/// Resumes h on this thread now, or queues it if this thread is already kMaxInlineResumeDepth
/// resumptions deep.
inline void resume_inline(std::coroutine_handle<> h) noexcept {
  trampoline_state& t = trampoline_tls();
  if (TPL_UNLIKELY(t.depth >= kMaxInlineResumeDepth)) {
    dispatch_wakeup(h);  // on a pool worker: next on this worker, once the stack has unwound
    return;
  }
  ++t.depth;
  h.resume();
  --t.depth;
}

/// Runs h as a top-level item (thread pool workers and schedulers use this).
inline void run_item(std::coroutine_handle<> h) noexcept { resume_inline(h); }

}  // namespace tpl::detail
