// The pool's two hooks for the socket engines (internal; socket_engine.cpp uses them, docs/io.md
// "Lent poll duty" explains why):
//   - a blocking hook, called on a pool worker just before it blocks (a wait of tpl's, a
//     blocking_scope): an engine whose poll duty is lent to its batch items takes it back, so
//     sockets are polled while the handler that would have taken it waits;
//   - current_worker_has_queued_work(), which a batch item polling with the lent duty asks
//     between polls, so that a worker with work queued for it stops polling and runs it.
// Invariants: the hook is set at most once (the engines' creation) and is noexcept; both are
// callable from any thread (outside the pool they do nothing / answer false).
//
//   tpl::detail::set_worker_blocking_hook(&reclaim_lent_duties);
//   if (tpl::detail::current_worker_has_queued_work()) break;  // stop polling
#pragma once

namespace tpl::detail {

using worker_blocking_hook = void (*)() noexcept;

/// Installs the hook run before a pool worker blocks (replaces any earlier one).
void set_worker_blocking_hook(worker_blocking_hook hook) noexcept;

/// Runs the installed hook, if any (the pool's blocking paths call it).
void run_worker_blocking_hook() noexcept;

/// True on a pool worker that has an item in its next slot or deque, or whose pool's global
/// queue is not empty (relaxed reads: a hint, checked again by the worker's own loop).
bool current_worker_has_queued_work() noexcept;

}  // namespace tpl::detail
