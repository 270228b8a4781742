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
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>

#include "tpl/cancellation.hpp"
#include "tpl/detail/wait_guards.hpp"
#include "tpl/task.hpp"
#include "tpl/time_provider.hpp"

namespace tpl {

namespace detail {

template <class T>
struct wait_async_state final : task_state<T>, pooled_allocation, waiter {
  // References: the returned handle, the pending operation, and the waiter node on the source
  // (taken when it is registered; dropped by the node's callback or by its removal).
  wait_async_state(task<T> src) noexcept
      : task_state<T>(2, false, &delete_as<wait_async_state>), source(std::move(src)) {}

  task<T> source;
  std::atomic<bool> decided{false};
  wait_guards guards;

  enum class outcome { completed, timed_out, canceled };

  void start(std::chrono::nanoseconds timeout, const cancellation_token& token, time_provider& provider) {
    this->add_ref();  // the node's reference
    this->on_complete = &source_fired;
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
        auto* s = task_access::state(source);
        switch (s->status()) {
          case task_status::ran_to_completion:
            if constexpr (std::is_void_v<T>) {
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
    this->complete_and_fire();
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

}  // namespace detail

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
