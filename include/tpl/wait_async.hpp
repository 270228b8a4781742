// tpl/wait_async.hpp — task<T>::wait_async: wait for a task with a timeout and/or a cancellation
// token, without canceling the task itself (.NET Task.WaitAsync).
//
//   try {
//     auto v = co_await slow().wait_async(std::chrono::seconds(2), token);
//   } catch (const tpl::timeout_exception&) { /* slow() goes on running */ }
//     catch (const tpl::operation_canceled&) { /* token was canceled */ }
//
// On an already completed task wait_async returns that task: no allocation, no timer. Otherwise
// the first of {the task completes, the timeout elapses, the token is canceled} decides, and the
// two others are unregistered at once (the timer disposed, the waiter taken off the task, the
// token registration removed), so wait_async in a loop over a long-lived task leaks nothing.
// A result is copied from the task (the task stays shared), so T must be copyable.
//
// The same race (the task completes, or the token is canceled) serves continue_with's token
// overloads, whose definitions live here: with a token and without lazy_cancellation, the
// continuation waits on a `task<void>` that completes when the antecedent does, whatever its
// outcome, or is canceled by the token first.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>

#include "tpl/cancellation.hpp"
#include "tpl/detail/wait_guards.hpp"
#include "tpl/detail/waiter_firing.hpp"
#include "tpl/task.hpp"
#include "tpl/time_provider.hpp"

namespace tpl {

namespace detail {

// T is the result type; Source the awaited task's. With T = void and Source another type (the
// "ready" form), completion of the source in any state completes this task successfully.
template <class T, class Source = T>
struct wait_async_state final : task_state<T>, pooled_allocation, waiter {
  static constexpr bool kReadyOnly = !std::is_same_v<T, Source>;
  static_assert(!kReadyOnly || std::is_void_v<T>, "the ready form yields no value");

  // References: the returned handle, the pending operation, and the waiter node on the source
  // (taken when it is registered; dropped by the node's callback or by its removal).
  wait_async_state(task<Source> src) noexcept
      : task_state<T>(2, false, &delete_as<wait_async_state>), source(std::move(src)) {}

  task<Source> source;
  std::atomic<bool> decided{false};
  wait_guards guards;

  enum class outcome { completed, timed_out, canceled };

  void start(std::chrono::nanoseconds timeout, const cancellation_token& token, time_provider& provider) {
    this->add_ref();  // the node's reference
    this->set_callback(waiter_callback_for<&source_fired>);
    if (!task_access::state(source)->add_waiter(this)) {
      finish(outcome::completed);
      this->release_non_last();
      return;
    }
    try {
      if (token.can_be_canceled())
        guards.set_registration(token.register_callback([this] { finish(outcome::canceled); }));
      if (!is_infinite(timeout) && !decided.load(std::memory_order_acquire))
        guards.set_timer(provider.create_timer([this] { finish(outcome::timed_out); }, timeout, infinite_timeout));
    } catch (...) {
      // Arming failed (std::bad_alloc): the wait ends here, off the source and disarmed (finish
      // takes down what was armed; if the source completed first, finish does nothing and the
      // source's callback released the node). The caller throws; its task handle is dropped.
      finish(outcome::canceled);
      throw;
    }
    // acquire: a winner that cleaned up before we stored something left it to us.
    if (decided.load(std::memory_order_acquire)) guards.clean_up();
  }

  static void source_fired(waiter* w, fire_mode) noexcept {
    auto* self = static_cast<wait_async_state*>(w);
    self->finish(outcome::completed);
    self->release();  // the node's reference
  }

  void finish(outcome how) noexcept {
    // acq_rel: exactly one winner.
    if (decided.exchange(true, std::memory_order_acq_rel)) return;
    guards.clean_up();
    if (how != outcome::completed) {
      // Take our waiter off the source; if completion already took it, its callback drops the
      // node's reference itself.
      if (task_access::state(source)->remove_waiter(this)) this->release_non_last();
    }
    switch (how) {
      case outcome::completed: {
        if constexpr (kReadyOnly) {
          this->set_value();
          break;
        }
        auto* s = task_access::state(source);
        switch (s->status()) {
          case task_status::ran_to_completion:
            if constexpr (std::is_void_v<T> || kReadyOnly) {
              this->set_value();
            } else {
              try {
                this->set_value(static_cast<const T&>(s->value_ref()));
              } catch (...) {
                this->set_error(std::current_exception(), false);
              }
            }
            break;
          case task_status::canceled:
          case task_status::faulted: {
            auto errors = s->exceptions();
            if (s->status() == task_status::canceled)
              this->set_error(errors.front(), true);
            else
              this->set_errors(std::move(errors));
            break;
          }
          default:
            break;
        }
        break;
      }
      case outcome::timed_out:
        this->set_error(std::make_exception_ptr(timeout_exception()), false);
        break;
      case outcome::canceled:
        this->set_error(std::make_exception_ptr(operation_canceled()), true);
        break;
    }
    complete_and_fire(*this);
    this->release();  // the pending operation's reference
  }
};

template <class T>
task<T> start_wait_async(const task<T>& self, std::chrono::nanoseconds timeout,
                         const cancellation_token& token, time_provider& provider) {
  static_assert(std::is_void_v<T> || std::is_copy_constructible_v<T>,
                "wait_async copies the result out of the shared task: T must be copyable");
  if (!self.valid()) throw_empty_task("wait_async");
  check_timeout(timeout, "wait_async");
  if (self.is_completed()) return self;
  if (token.is_cancellation_requested()) return task_from_canceled<T>();
  if (timeout.count() == 0) return task_from_exception<T>(timeout_exception());
  if (is_infinite(timeout) && !token.can_be_canceled()) return self;
  auto* s = new wait_async_state<T>(self);
  task<T> result(adopt_state, s);
  s->start(timeout, token, provider);
  return result;
}

// A task<void> that completes when `source` does (in any state), or is canceled by `token` first.
template <class T>
task<void> start_wait_ready(const task<T>& source, const cancellation_token& token) {
  if (source.is_completed()) return task_from_result();
  if (token.is_cancellation_requested()) return task_from_canceled<void>();
  auto* s = new wait_async_state<void, T>(source);
  task<void> result(adopt_state, s);
  s->start(std::chrono::nanoseconds(infinite_timeout), token, system_time_provider());
  return result;
}

// continue_with with a token and/or a scheduler. The token is looked at three times: while the
// antecedent runs (eager form), once it has completed, and after the hop to the continuation's
// thread, so that a token canceled at any point before fn starts cancels the continuation.
template <class T, class F, class R>
task<R> run_continuation_on(task<T> antecedent, F fn, cancellation_token token,
                            task_continuation_options opts, scheduler* target) {
  const bool inline_allowed = has_option(opts, task_continuation_options::execute_synchronously);
  const bool hop_to_pool = target == nullptr && !inline_allowed;
  if (token.can_be_canceled() && !has_option(opts, task_continuation_options::lazy_cancellation)) {
    task<void> ready = start_wait_ready(antecedent, token);
    if (hop_to_pool)
      co_await ready.configure<await_options::suppress_throwing | await_options::force_yielding>();
    else
      co_await ready.configure<await_options::suppress_throwing>();
  } else if (hop_to_pool) {
    co_await antecedent
        .template configure<await_options::suppress_throwing | await_options::force_yielding>();
  } else {
    co_await antecedent.template configure<await_options::suppress_throwing>();
  }
  if (token.is_cancellation_requested()) co_await cancel_current_task{};
  if (!continuation_allowed(opts, antecedent.status())) co_await cancel_current_task{};
  if (target != nullptr && (!inline_allowed || scheduler::current() != target)) {
    co_await resume_on(*target);
    if (token.is_cancellation_requested()) co_await cancel_current_task{};
  }
  if constexpr (std::is_invocable_v<F&, task<T>&>) {
    co_return std::invoke(fn, antecedent);
  } else {
    co_return std::invoke(fn);
  }
}

}  // namespace detail

template <class T>
template <class F>
auto task<T>::continue_with(F fn, const cancellation_token& token, task_continuation_options opts) const
    -> task<detail::continuation_result_t<T, F>> {
  checked("continue_with()");
  detail::check_continuation_options(opts);
  return detail::run_continuation_on<T, F, detail::continuation_result_t<T, F>>(*this, std::move(fn),
                                                                                token, opts, nullptr);
}

template <class T>
template <class F>
auto task<T>::continue_with(F fn, scheduler& target, task_continuation_options opts) const
    -> task<detail::continuation_result_t<T, F>> {
  checked("continue_with()");
  detail::check_continuation_options(opts);
  return detail::run_continuation_on<T, F, detail::continuation_result_t<T, F>>(
      *this, std::move(fn), cancellation_token{}, opts, &target);
}

template <class T>
template <class F>
auto task<T>::continue_with(F fn, const cancellation_token& token, task_continuation_options opts,
                            scheduler& target) const -> task<detail::continuation_result_t<T, F>> {
  checked("continue_with()");
  detail::check_continuation_options(opts);
  return detail::run_continuation_on<T, F, detail::continuation_result_t<T, F>>(*this, std::move(fn),
                                                                                token, opts, &target);
}

template <class T>
template <class Rep, class Period>
task<T> task<T>::wait_async(std::chrono::duration<Rep, Period> timeout) const {
  return detail::start_wait_async(*this, std::chrono::duration_cast<std::chrono::nanoseconds>(timeout),
                                  cancellation_token{}, system_time_provider());
}

template <class T>
task<T> task<T>::wait_async(const cancellation_token& token) const {
  return detail::start_wait_async(*this, std::chrono::nanoseconds(infinite_timeout), token,
                                  system_time_provider());
}

template <class T>
template <class Rep, class Period>
task<T> task<T>::wait_async(std::chrono::duration<Rep, Period> timeout, const cancellation_token& token) const {
  return detail::start_wait_async(*this, std::chrono::duration_cast<std::chrono::nanoseconds>(timeout),
                                  token, system_time_provider());
}

template <class T>
template <class Rep, class Period>
task<T> task<T>::wait_async(std::chrono::duration<Rep, Period> timeout, const cancellation_token& token,
                            time_provider& provider) const {
  return detail::start_wait_async(*this, std::chrono::duration_cast<std::chrono::nanoseconds>(timeout),
                                  token, provider);
}

}  // namespace tpl
