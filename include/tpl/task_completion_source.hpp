// tpl/task_completion_source.hpp — a task completed by hand (.NET TaskCompletionSource<T>).
//
//   tpl::task_completion_source<int> tcs;
//   tpl::task<int> t = tcs.get_task();      // hand this out
//   ...
//   tcs.set_result(42);                     // completes t; its first awaiter continues here
//   tcs.try_set_result(7);                  // false: already completed
//
// Copies share the same task (reference semantics, like the .NET class). If the last copy is
// destroyed without completing the task, the task faults with invalid_operation ("broken
// promise") instead of leaving its awaiters waiting forever.
//
// With task_creation_options::run_continuations_asynchronously, the task's continuations are
// queued to the pool instead of running inside set_result() (use it when the completing thread
// holds a lock or must not run arbitrary code).
#pragma once

#include <atomic>
#include <exception>
#include <type_traits>
#include <utility>
#include <vector>

#include "tpl/detail/waiter_firing.hpp"
#include "tpl/task.hpp"

namespace tpl {

namespace detail {
template <class T>
struct tcs_state final : task_state<T>, pooled_allocation {
  tcs_state() noexcept : task_state<T>(1, false, &delete_as<tcs_state>) {}
  std::atomic<bool> reserved{false};      // the one completer has claimed it
  std::atomic<std::uint32_t> sources{1};  // live task_completion_source copies
};
/// Marks task_completion_source::try_set_canceled_with as the library's own.
struct canceled_exception_tag {
  explicit canceled_exception_tag() = default;
};
[[noreturn]] void throw_tcs_already_completed();
[[noreturn]] void throw_tcs_empty();
std::exception_ptr make_broken_promise_error();
}  // namespace detail

template <class T = void>
class task_completion_source {
 public:
  explicit task_completion_source(task_creation_options opts = task_creation_options::none)
      : s_(new detail::tcs_state<T>()) {
    if (has_option(opts, task_creation_options::run_continuations_asynchronously))
      s_->set_run_continuations_asynchronously(true);
  }
  task_completion_source(const task_completion_source& o) noexcept : s_(o.s_) {
    if (s_ != nullptr) {
      // relaxed: copying from a live source, which keeps both counts above zero.
      s_->sources.fetch_add(1, std::memory_order_relaxed);
      s_->add_ref();
    }
  }
  task_completion_source(task_completion_source&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  task_completion_source& operator=(task_completion_source o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~task_completion_source() {
    if (s_ == nullptr) return;
    // acq_rel: the last source must see every other source's completion attempt.
    if (s_->sources.fetch_sub(1, std::memory_order_acq_rel) == 1 && !s_->is_completed())
      try_complete_with_error(detail::make_broken_promise_error(), false);
    s_->release();
  }

  /// The task this source completes. Every call returns a handle to the same task.
  task<T> get_task() const {
    checked()->add_ref();
    return task<T>(detail::adopt_state, s_);
  }

  template <class... A>
    requires(std::is_void_v<T> ? sizeof...(A) == 0 : std::is_constructible_v<T, A&&...>)
  bool try_set_result(A&&... a) {
    if (!reserve()) return false;
    try {
      s_->set_value(static_cast<A&&>(a)...);
    } catch (...) {
      s_->set_error(std::current_exception(), false);
    }
    detail::complete_and_fire(*s_);
    return true;
  }
  template <class... A>
    requires(std::is_void_v<T> ? sizeof...(A) == 0 : std::is_constructible_v<T, A&&...>)
  void set_result(A&&... a) {
    if (!try_set_result(static_cast<A&&>(a)...)) detail::throw_tcs_already_completed();
  }

  /// Faults the task with e. An operation_canceled faults it too, as .NET's TrySetException does;
  /// try_set_canceled() cancels it.
  bool try_set_exception(std::exception_ptr e) {
    if (!e) throw std::invalid_argument("try_set_exception: null exception_ptr");
    checked();
    return try_complete_with_error(std::move(e), false);
  }
  /// Faults with several exceptions: wait() reports all, co_await rethrows the first.
  bool try_set_exception(std::vector<std::exception_ptr> errors) {
    if (errors.empty()) throw std::invalid_argument("try_set_exception: no exceptions");
    for (auto& e : errors)
      if (!e) throw std::invalid_argument("try_set_exception: null exception_ptr");
    if (!reserve()) return false;
    s_->set_errors(std::move(errors));
    detail::complete_and_fire(*s_);
    return true;
  }
  void set_exception(std::exception_ptr e) {
    if (!try_set_exception(std::move(e))) detail::throw_tcs_already_completed();
  }
  void set_exception(std::vector<std::exception_ptr> errors) {
    if (!try_set_exception(std::move(errors))) detail::throw_tcs_already_completed();
  }
  /// Faults with an exception object: tcs.set_exception(std::runtime_error("...")).
  template <class E>
    requires(!std::is_same_v<std::decay_t<E>, std::exception_ptr> &&
             !std::is_same_v<std::decay_t<E>, std::vector<std::exception_ptr>>)
  bool try_set_exception(E&& e) {
    return try_set_exception(std::make_exception_ptr(static_cast<E&&>(e)));
  }
  template <class E>
    requires(!std::is_same_v<std::decay_t<E>, std::exception_ptr> &&
             !std::is_same_v<std::decay_t<E>, std::vector<std::exception_ptr>>)
  void set_exception(E&& e) {
    set_exception(std::make_exception_ptr(static_cast<E&&>(e)));
  }

  bool try_set_canceled() {
    if (!reserve()) return false;
    s_->set_canceled();
    detail::complete_and_fire(*s_);
    return true;
  }
  void set_canceled() {
    if (!try_set_canceled()) detail::throw_tcs_already_completed();
  }

  /// Cancels the task with e, an operation_canceled (or derived) exception that awaiting it
  /// rethrows. For the library's own completions (a channel completed with such an error);
  /// .NET's TrySetCanceled(token) is the public analogue.
  bool try_set_canceled_with(detail::canceled_exception_tag, std::exception_ptr e) {
    checked();
    return try_complete_with_error(std::move(e), true);
  }

 private:
  detail::tcs_state<T>* checked() const {
    if (TPL_UNLIKELY(s_ == nullptr)) detail::throw_tcs_empty();
    return s_;
  }
  bool reserve() {
    // relaxed: the flag only elects the one completer; the result is published by the acq_rel
    // completion CAS in complete_and_fire().
    return !checked()->reserved.exchange(true, std::memory_order_relaxed);
  }
  bool try_complete_with_error(std::exception_ptr e, bool canceled) {
    if (!reserve()) return false;
    s_->set_error(std::move(e), canceled);
    detail::complete_and_fire(*s_);
    return true;
  }

  detail::tcs_state<T>* s_;
};

}  // namespace tpl
