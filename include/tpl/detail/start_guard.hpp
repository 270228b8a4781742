// tpl/detail/start_guard.hpp — where a hot coroutine task starts: here, or queued (internal).
//
// A task coroutine is hot: its body runs inside the call until it first suspends. Two things make
// a start go to the scheduler instead, and both are decided by one comparison in the promise's
// initial_suspend, so the common start pays a thread-local load and a compare:
//
//  1. The stack is nearly used up. `co_return 1 + co_await count(n - 1)` recurses one stack
//     frame per level; at a million levels any stack overflows (.NET crashes there too). A start
//     whose stack pointer is below the thread's threshold (the stack's low end plus a reserve, see
//     src/start_guard.cpp) queues its coroutine instead; the caller's await suspends, its stack
//     unwinds, and the recursion goes on from a fresh stack on a pool thread. This is .NET's
//     TryEnsureSufficientExecutionStack idea, applied when a coroutine is called.
//  2. tpl::spawn asked for it: spawn sets the threshold above every address, so the next
//     coroutine start on this thread (the one spawn's function makes) takes the slow path, which
//     sees the request, clears it and queues that coroutine.
//  3. It is tpl::run's own coroutine (tpl/run.hpp): its promise's constructor, which runs inside
//     the call after the parameters are copied and before initial_suspend, makes the same request
//     with the scheduler to queue on (begin_run_request), and its own start consumes it. No user
//     code runs between the request and its start, so no other coroutine can take it. Unlike a
//     spawn, such a start is not marked started_deferred: awaiting a tpl::run task never runs
//     its queued item inline (.NET's await of Task.Run's task does not either).
//
// Invariants:
//  - `defer_below` is either the measured threshold, or kUnmeasured (above every stack address,
//    so the first start on a thread takes the slow path, which measures), or kUnmeasured with
//    `spawn_pending` set. It never lets a start below the measured threshold run inline.
//  - A spawn request is consumed by exactly one start, or withdrawn by spawn itself
//    (end_spawn_request) when its function made no coroutine; it never leaks into a later call.
//  - `run_pending` (with `run_target`) is set from a tpl::run promise's constructor until the
//    defer_start() of that same coroutine's initial suspension, on this thread, which clears both;
//    no other start comes in between, so no other coroutine ever sees them.
//  - The state is thread-local and touched only by its own thread: no atomics.
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>

#include "tpl/detail/config.hpp"

namespace tpl {
class scheduler;
}

namespace tpl::detail {

/// The parameter of tpl::run's coroutine (tpl/run.hpp): task_promise's constructor sees it and
/// asks for the start to be queued on `target` (begin_run_request). The function travels in it,
/// so that the request costs the frame no field of its own.
template <class F>
struct run_call_on {
  F fn;
  scheduler* target;
};
/// The same for the default pool (tpl::run(fn), the common form): the function alone.
template <class F>
struct run_call {
  F fn;
};

struct start_guard_state {
  static constexpr std::uintptr_t kUnmeasured = ~std::uintptr_t{0};
  /// Starts whose stack pointer is below this go to the slow path.
  std::uintptr_t defer_below = kUnmeasured;
  /// The measured threshold (valid when measured).
  std::uintptr_t stack_threshold = 0;
  bool measured = false;
  bool spawn_pending = false;
  /// A tpl::run start is under way: queued on run_target (the default pool when null) by the
  /// defer_start() of its initial suspension, which clears both.
  bool run_pending = false;
  scheduler* run_target = nullptr;
};

inline thread_local start_guard_state t_start_guard{};
TPL_TLS_ACCESSOR(start_guard_state, start_guard_tls, t_start_guard)

/// The slow path of should_defer_start: measures the stack on a thread's first start, consumes a
/// spawn request. True when the coroutine must be queued.
bool should_defer_start_slow(std::uintptr_t stack_pointer) noexcept;

/// The current stack pointer. Read directly where the architecture allows it:
/// __builtin_frame_address would make every coroutine body set up a frame pointer.
[[gnu::always_inline]] inline std::uintptr_t current_stack_pointer() noexcept {
  std::uintptr_t sp;
#if defined(__x86_64__)
  asm volatile("movq %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
  asm volatile("mov %0, sp" : "=r"(sp));
#else
  sp = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
#endif
  return sp;
}

/// True when the coroutine starting now must be queued instead of running inline.
[[gnu::always_inline]] inline bool should_defer_start() noexcept {
  const std::uintptr_t sp = current_stack_pointer();
  if (TPL_LIKELY(sp >= start_guard_tls().defer_below)) return false;
  return should_defer_start_slow(sp);
}

/// Queues a coroutine whose start was deferred: a tpl::run start to its scheduler; any other to
/// the current scheduler (a pool worker: its own deque), or to the default pool when the thread
/// has none or runs the inline scheduler (which would start it on this same stack).
void defer_start(std::coroutine_handle<> h);

/// In a deferred start's initial_suspend, before defer_start(): whether this start is a tpl::run
/// start (its task is then not marked started_deferred).
inline bool deferring_run_start() noexcept { return start_guard_tls().run_pending; }

/// A tpl::run start whose scheduler refused the coroutine (schedule() threw): the exception is
/// kept here, on the starting thread, until the coroutine's initial await_resume, which runs at
/// once on the same thread, throws it into the body (the task faults with it).
void stash_run_start_failure(std::exception_ptr e) noexcept;
[[noreturn]] void rethrow_run_start_failure();

/// tpl::spawn: the next coroutine started on this thread is queued.
inline void begin_spawn_request() noexcept {
  start_guard_state& g = start_guard_tls();
  g.spawn_pending = true;
  g.defer_below = start_guard_state::kUnmeasured;
}
/// tpl::run's promise: the coroutine starting now (this one) is queued on `target` (null: the
/// default pool).
inline void begin_run_request(scheduler* target) noexcept {
  start_guard_state& g = start_guard_tls();
  g.spawn_pending = true;
  g.run_pending = true;
  g.run_target = target;
  g.defer_below = start_guard_state::kUnmeasured;
}
/// tpl::spawn, after its function returned or threw: withdraws a request no start consumed.
inline void end_spawn_request() noexcept {
  start_guard_state& g = start_guard_tls();
  if (TPL_UNLIKELY(g.spawn_pending)) {
    g.spawn_pending = false;
    g.defer_below = g.measured ? g.stack_threshold : start_guard_state::kUnmeasured;
  }
}

/// The stack address below which this thread has little stack left (measured on first use; 0
/// when the stack could not be measured). tpl::parallel::invoke does not help other work below it.
std::uintptr_t measured_stack_threshold() noexcept;

/// Testing: the threshold measured for this thread (0 before the first coroutine start on it, or
/// when its stack could not be measured).
std::uintptr_t stack_threshold_for_testing() noexcept;

}  // namespace tpl::detail
