// The start guard's slow path (tpl/detail/start_guard.hpp): measuring a thread's stack, and
// where a deferred start goes.
//
// The threshold is the stack's low end (stacks grow down on every platform tpl supports) plus a
// reserve: a quarter of the stack, at least 32 KiB and at most 1 MiB. The reserve must hold what
// runs between two coroutine starts (user code, the awaits' bookkeeping, up to
// kMaxInlineResumeDepth nested resumptions when a chain completes) in the largest frames tpl is
// built with (-O0 with AddressSanitizer).
//
// Under ThreadSanitizer the guard also keeps the recursion within the top kTsanStackBudgetBytes of
// the stack: TSan records the whole call stack with every allocation, so an allocation's cost
// grows with the depth it is made at, and a recursion that used the whole stack would make each
// coroutine frame's allocation walk tens of thousands of frames.
#include <pthread.h>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <utility>

#include "tpl/detail/start_guard.hpp"
#include "tpl/scheduler.hpp"
#include "tpl/thread_pool.hpp"

namespace tpl::detail {

namespace {

constexpr std::size_t kMinStackReserveBytes = 32 * 1024;
constexpr std::size_t kMaxStackReserveBytes = 1024 * 1024;
#if defined(TPL_TSAN)
constexpr std::size_t kTsanStackBudgetBytes = 512 * 1024;
#endif

// 0 when the stack cannot be measured (the guard then never defers for depth).
std::uintptr_t measure_stack_threshold() noexcept {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void* low = nullptr;
  std::size_t size = 0;
  const int rc = pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0 || low == nullptr || size == 0) return 0;
  const std::size_t reserve = std::clamp(size / 4, kMinStackReserveBytes, kMaxStackReserveBytes);
  if (reserve >= size) return 0;
  const std::uintptr_t threshold = reinterpret_cast<std::uintptr_t>(low) + reserve;
#if defined(TPL_TSAN)
  if (size - reserve > kTsanStackBudgetBytes)
    return reinterpret_cast<std::uintptr_t>(low) + (size - kTsanStackBudgetBytes);
#endif
  return threshold;
}

}  // namespace

bool should_defer_start_slow(std::uintptr_t stack_pointer) noexcept {
  start_guard_state& g = start_guard_tls();
  if (!g.measured) {
    g.stack_threshold = measure_stack_threshold();
    g.measured = true;
  }
  if (g.spawn_pending) {
    g.spawn_pending = false;
    g.defer_below = g.stack_threshold;
    return true;
  }
  g.defer_below = g.stack_threshold;
  return stack_pointer < g.stack_threshold;
}

void defer_start(std::coroutine_handle<> h) {
  start_guard_state& g = start_guard_tls();
  scheduler* s = nullptr;  // null: the default pool
  if (g.run_pending) {
    // Cleared before schedule() runs: a scheduler that throws leaves no request behind.
    g.run_pending = false;
    s = std::exchange(g.run_target, nullptr);
  } else if (scheduler* current = scheduler::current(); current != &inline_scheduler::instance()) {
    s = current;
  }
  if (s != nullptr)
    s->schedule(h);
  else
    thread_pool::default_pool().schedule(h);
}

namespace {
thread_local std::exception_ptr t_run_start_failure;
}  // namespace

void stash_run_start_failure(std::exception_ptr e) noexcept { t_run_start_failure = std::move(e); }

void rethrow_run_start_failure() {
  std::exception_ptr e = std::move(t_run_start_failure);
  t_run_start_failure = nullptr;
  std::rethrow_exception(std::move(e));
}

std::uintptr_t measured_stack_threshold() noexcept {
  start_guard_state& g = start_guard_tls();
  if (!g.measured) {
    g.stack_threshold = measure_stack_threshold();
    g.measured = true;
    if (!g.spawn_pending) g.defer_below = g.stack_threshold;
  }
  return g.stack_threshold;
}

std::uintptr_t stack_threshold_for_testing() noexcept { return start_guard_tls().stack_threshold; }

}  // namespace tpl::detail
