// wait_all / wait_any (tpl/wait_all.hpp): one registration per task on a shared, reference-counted
// wait record, and a manual_reset_event_slim the waiting thread blocks on.
//
// Invariants:
//   - The record lives while the waiting thread holds its reference or any registration may still
//     fire: every registration that add_waiter() accepted holds one reference, dropped by its fire
//     or, when remove_waiter() takes it back before completion, by the waiting thread.
//   - The event is set exactly when the wait is decided: the last pending task completed (all),
//     the first one did (any), or the timeout timer fired. Cancellation is the event wait's own.
//   - The timeout timer captures the record without a reference: it is disposed (which waits for a
//     running callback) before the waiting thread drops its reference.
#include "tpl/wait_all.hpp"

#include <atomic>
#include <memory>
#include <stdexcept>

#include "tpl/sync/manual_reset_event_slim.hpp"

namespace tpl::detail {

namespace {

struct wait_record {
  struct registration : waiter {
    wait_record* owner = nullptr;
    std::ptrdiff_t index = 0;
  };

  wait_record(std::size_t n, bool wait_for_all) : all(wait_for_all), remaining(n), registrations(new registration[n]) {}

  void add_ref() noexcept {
    // relaxed: taken while the caller's own reference keeps the record alive.
    refs.fetch_add(1, std::memory_order_relaxed);
  }
  void release() noexcept {
    // acq_rel: whoever drops the last reference sees every other holder's writes before deleting.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  void task_completed(std::ptrdiff_t index) noexcept {
    if (all) {
      // acq_rel: the decrement that reaches zero orders after every other completion's.
      if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) done.set();
    } else {
      std::ptrdiff_t none = -1;
      // acq_rel: the winner's index is published with the event; losers read it.
      if (first.compare_exchange_strong(none, index, std::memory_order_acq_rel, std::memory_order_acquire)) done.set();
    }
  }

  static void fire(waiter* w, fire_mode) noexcept {
    auto* r = static_cast<registration*>(w);
    wait_record* owner = r->owner;
    owner->task_completed(r->index);
    owner->release();
  }

  const bool all;
  std::atomic<int> refs{1};
  std::atomic<std::size_t> remaining;
  std::atomic<std::ptrdiff_t> first{-1};
  manual_reset_event_slim done;
  std::unique_ptr<registration[]> registrations;
};

// Drops the waiting thread's reference (and the registrations' that never fired) however the wait
// ends.
struct record_guard {
  wait_record* record;
  std::size_t registered = 0;
  const std::vector<task_state_base*>* states;
  timer timeout;
  ~record_guard() {
    timeout.dispose();  // waits for a running callback: it uses the record without a reference
    for (std::size_t i = 0; i < registered; ++i) {
      wait_record::registration& r = record->registrations[i];
      if (r.owner != nullptr && (*states)[i]->remove_waiter(&r)) record->release();
    }
    record->release();
  }
};

}  // namespace

bool wait_for_tasks(const std::vector<task_state_base*>& states, bool all, std::chrono::nanoseconds timeout,
                    const cancellation_token& token, time_provider& provider, std::ptrdiff_t* index) {
  const char* what = all ? "wait_all" : "wait_any";
  check_timeout(timeout, what);
  for (task_state_base* s : states)
    if (s == nullptr) throw_empty_task(what);
  if (!all && states.empty()) throw std::invalid_argument("wait_any: no tasks (nothing could complete)");
  token.throw_if_cancellation_requested();

  // Decided without waiting?
  if (all) {
    bool every = true;
    for (task_state_base* s : states) every = every && s->is_completed();
    if (every) return true;
  } else {
    for (std::size_t i = 0; i < states.size(); ++i)
      if (states[i]->is_completed()) {
        *index = static_cast<std::ptrdiff_t>(i);
        return true;
      }
  }
  if (timeout.count() == 0) return false;

  auto* record = new wait_record(states.size(), all);
  record_guard guard{record, 0, &states, {}};
  for (std::size_t i = 0; i < states.size(); ++i) {
    wait_record::registration& r = record->registrations[i];
    r.index = static_cast<std::ptrdiff_t>(i);
    r.set_callback(waiter_callback_for<&wait_record::fire>);
    r.owner = record;
    record->add_ref();  // the registration's, if add_waiter accepts it
    guard.registered = i + 1;
    if (!states[i]->add_waiter(&r)) {
      r.owner = nullptr;  // completed meanwhile: nothing to take back
      record->release();
      record->task_completed(r.index);
      if (!all) break;  // decided
    }
  }

  if (detail::is_infinite(timeout) || &provider == &system_time_provider()) {
    (void)record->done.wait(timeout, token);  // false on timeout; throws operation_canceled
  } else {
    guard.timeout = provider.create_timer([record] { record->done.set(); }, timeout, std::chrono::nanoseconds(infinite_timeout));
    record->done.wait(token);  // throws operation_canceled
  }
  // The event may have been set by the timer: what counts is whether the tasks are done.
  if (all) {
    // acquire: pairs with the completions' acq_rel decrements.
    return record->remaining.load(std::memory_order_acquire) == 0;
  }
  // acquire: pairs with the winner's CAS.
  const std::ptrdiff_t winner = record->first.load(std::memory_order_acquire);
  if (winner < 0) return false;
  *index = winner;
  return true;
}

void throw_if_any_failed(const std::vector<task_state_base*>& states) {
  std::vector<std::exception_ptr> errors;
  for (task_state_base* s : states) {
    if (s->status() == task_status::ran_to_completion) continue;
    for (auto& e : s->exceptions()) errors.push_back(std::move(e));
  }
  if (!errors.empty()) throw aggregate_exception(std::move(errors));
}

}  // namespace tpl::detail
