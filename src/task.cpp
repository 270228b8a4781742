// Out-of-line parts of the task core: fault reporting, blocking waits, cached tasks.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "tpl/detail/detached.hpp"
#include "tpl/detail/futex.hpp"
#include "tpl/detail/waiter_firing.hpp"
#include "tpl/thread_pool.hpp"
#include "tpl/task.hpp"
#include "tpl/task_completion_source.hpp"
#include "tpl/value_task.hpp"
#include "tpl/when_all.hpp"

namespace tpl::detail {

// ---- faults ---------------------------------------------------------------------------------

namespace {
const std::vector<std::exception_ptr>* aggregate_inners(const std::exception_ptr& e,
                                                        std::vector<std::exception_ptr>& storage) {
  try {
    std::rethrow_exception(e);
  } catch (const aggregate_exception& a) {
    storage = a.inner_exceptions();
  } catch (...) {
    storage = {e};
  }
  return &storage;
}
}  // namespace

void task_state_base::throw_for_await() const {
  mark_error_observed();
  if (stored_status() == task_status::canceled) {
    if (has_error_) std::rethrow_exception(error());
    throw operation_canceled();
  }
  if (error_is_aggregate_) {
    std::vector<std::exception_ptr> inner;
    aggregate_inners(error(), inner);
    std::rethrow_exception(inner.front());
  }
  if (has_error_) std::rethrow_exception(error());
  throw invalid_operation("tpl: result requested from a task that has not completed");
}

std::vector<std::exception_ptr> task_state_base::exceptions() const {
  mark_error_observed();
  std::vector<std::exception_ptr> out;
  if (stored_status() == task_status::canceled) {
    out.push_back(has_error_ ? error() : std::make_exception_ptr(operation_canceled()));
  } else if (stored_status() == task_status::faulted) {
    if (error_is_aggregate_)
      aggregate_inners(error(), out);
    else
      out.push_back(error());
  }
  return out;
}

void task_state_base::throw_for_wait() const {
  auto all = exceptions();
  if (all.empty()) throw invalid_operation("tpl: result requested from a task that has not completed");
  throw aggregate_exception(std::move(all));
}

bool is_operation_canceled(const std::exception_ptr& e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const operation_canceled&) {
    return true;
  } catch (...) {
    return false;
  }
}

void throw_empty_task(const char* operation) {
  throw invalid_operation(std::string("tpl: ") + operation +
                          " on an empty task (default-constructed or moved-from)");
}

void throw_tcs_already_completed() {
  throw invalid_operation("tpl: task_completion_source: the task was already completed");
}
void throw_tcs_empty() {
  throw invalid_operation("tpl: task_completion_source used after being moved from");
}
std::exception_ptr make_broken_promise_error() {
  // One immutable exception object serves every broken promise: abandoning a source costs no
  // allocation.
  static const std::exception_ptr error = std::make_exception_ptr(invalid_operation(
      "tpl: broken promise: every task_completion_source of this task was destroyed before it "
      "completed the task"));
  return error;
}
void throw_value_task_consumed(const char* operation) {
  throw invalid_operation(std::string("tpl: ") + operation +
                          " on a value_task that was already awaited, consumed or moved from "
                          "(a value_task may be awaited once; use as_task() to share it)");
}

void validate_tasks(std::size_t count, const void* const* states) {
  for (std::size_t i = 0; i < count; ++i)
    if (states[i] == nullptr) throw_empty_task("when_all");
}

void check_continuation_options(task_continuation_options opts) {
  constexpr auto kNotOnAny = static_cast<std::uint32_t>(task_continuation_options::not_on_ran_to_completion |
                                                        task_continuation_options::not_on_faulted |
                                                        task_continuation_options::not_on_canceled);
  constexpr auto kKnown = kNotOnAny |
                         static_cast<std::uint32_t>(task_continuation_options::execute_synchronously |
                                                    task_continuation_options::lazy_cancellation);
  const auto bits = static_cast<std::uint32_t>(opts);
  if ((bits & ~kKnown) != 0)
    throw std::invalid_argument("continue_with: task_continuation_options holds bits that name no option");
  if ((bits & kNotOnAny) == kNotOnAny)
    throw std::invalid_argument(
        "continue_with: the task_continuation_options exclude every outcome of the antecedent "
        "(ran to completion, faulted and canceled), so the continuation could never run");
}

bool continuation_allowed(task_continuation_options opts, task_status antecedent) noexcept {
  switch (antecedent) {
    case task_status::ran_to_completion:
      return !has_option(opts, task_continuation_options::not_on_ran_to_completion);
    case task_status::faulted:
      return !has_option(opts, task_continuation_options::not_on_faulted);
    case task_status::canceled:
      return !has_option(opts, task_continuation_options::not_on_canceled);
    default:
      return false;
  }
}

// ---- blocking waits -------------------------------------------------------------------------

namespace {
struct blocking_waiter : waiter {
  std::atomic<std::uint32_t> done{0};
  static void fire(waiter* w, fire_mode) noexcept {
    auto* self = static_cast<blocking_waiter*>(w);
    // release: the woken thread reads the task's result (already published by the completion
    // CAS) and then frees this node; futex_wake never touches the node's memory.
    self->done.store(1, std::memory_order_release);
    futex_wake_one(&self->done);
  }
};
}  // namespace

namespace {
// Before blocking on a task whose coroutine sits queued on this worker's own deque (typically
// queued by this very thread a moment ago), run it here: the wait may then not block at all
// (.NET's wait inlining).
bool ran_inline(task_state_base& s) {
  void* frame = s.frame_address();
  if (frame == nullptr) return false;
  thread_pool* pool = thread_pool::current();
  if (pool == nullptr) return false;
  return pool->try_run_inline(std::coroutine_handle<>::from_address(frame));
}
}  // namespace

bool run_deferred_inline(task_state_base& s) noexcept {
  try {
    return ran_inline(s);
  } catch (...) {
    return false;  // putting back another item failed: the awaiter waits as usual
  }
}

namespace {
// The current scheduler may refuse to block (a single-threaded test scheduler throws from
// on_blocking_call): w is then taken back out before the exception leaves, so the task never fires
// a waiter whose stack frame is gone.
void enter_blocking(std::optional<blocking_region>& blocked, const char* what, task_state_base& s,
                    blocking_waiter& w) {
  try {
    blocked.emplace(what);
  } catch (...) {
    if (!s.remove_waiter(&w)) {
      // Completion took the node: it fires (or has fired); wait for that before w goes away.
      // acquire: pairs with fire()'s release, after which fire() no longer touches w.
      while (w.done.load(std::memory_order_acquire) == 0) futex_wait(&w.done, 0);
    }
    throw;
  }
}
}  // namespace

void block_until_completed(task_state_base& s) {
  if (ran_inline(s) && s.is_completed()) return;
  blocking_waiter w;
  w.set_callback(waiter_callback_for<&blocking_waiter::fire>);
  if (!s.add_waiter(&w)) return;
  std::optional<blocking_region> blocked;
  enter_blocking(blocked, "task::wait()", s, w);
  // acquire: pairs with fire()'s release.
  while (w.done.load(std::memory_order_acquire) == 0) futex_wait(&w.done, 0);
}

bool block_until_completed(task_state_base& s, std::chrono::steady_clock::time_point deadline) {
  if (ran_inline(s) && s.is_completed()) return true;
  blocking_waiter w;
  w.set_callback(waiter_callback_for<&blocking_waiter::fire>);
  if (!s.add_waiter(&w)) return true;
  std::optional<blocking_region> blocked;
  enter_blocking(blocked, "task::wait_for()", s, w);
  while (w.done.load(std::memory_order_acquire) == 0) {
    if (!futex_wait_until(&w.done, 0, deadline)) {
      if (s.remove_waiter(&w)) return false;
      // Completion took the node: it fires (or has fired); wait for that before w goes away.
      while (w.done.load(std::memory_order_acquire) == 0) futex_wait(&w.done, 0);
      return true;
    }
  }
  return true;
}

// ---- deferred firing --------------------------------------------------------------------------

namespace {
struct to_pool {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const { dispatch(h); }
  void await_resume() const noexcept {}
};

detached fire_from_pool(waiter* list, bool force_async) {
  co_await to_pool{};
  fire_waiters(list, force_async);
}
}  // namespace

void fire_waiters_later(waiter* list, bool force_async) noexcept {
  try {
    fire_from_pool(list, force_async);
  } catch (const std::bad_alloc&) {
    // No memory for the hop's frame: fire here, past the depth guard, rather than lose the
    // waiters (a deeper stack is recoverable, lost continuations are not). Queuing the hop can
    // need memory as well; that is the terminate case of docs/thread-pool.md, "Out of memory".
    trampoline_state& t = trampoline_tls();
    const std::uint32_t saved = t.depth;
    t.depth = 0;
    fire_waiters(list, force_async);
    t.depth = saved;
  }
}

// ---- cached tasks ---------------------------------------------------------------------------

namespace {
template <class T>
ready_state<T>* make_immortal_ready(auto&&... v) {
  auto* s = new ready_state<T>();
  s->set_value(static_cast<decltype(v)&&>(v)...);
  s->publish_completion_unshared();
  s->make_immortal();
  return s;
}
}  // namespace

task<void> cached_completed_task() noexcept {
  static ready_state<void>* s = make_immortal_ready<void>();
  return task<void>(adopt_state, s);
}

task<bool> cached_bool_task(bool v) noexcept {
  static ready_state<bool>* t = make_immortal_ready<bool>(true);
  static ready_state<bool>* f = make_immortal_ready<bool>(false);
  return task<bool>(adopt_state, v ? t : f);
}

task<int> cached_int_task(int v) noexcept {
  static ready_state<int>** cache = [] {
    auto** c = new ready_state<int>*[kMaxCachedInt - kMinCachedInt + 1];
    for (int i = kMinCachedInt; i <= kMaxCachedInt; ++i) c[i - kMinCachedInt] = make_immortal_ready<int>(i);
    return c;
  }();
  return task<int>(adopt_state, cache[v - kMinCachedInt]);
}

}  // namespace tpl::detail
