// Cancellation: the shared state behind cancellation_token_source / cancellation_token.
//
// The state holds a doubly-linked list of callback nodes under a short lock (registering and
// unregistering are a few instructions inside it). cancel() flips the phase, then repeatedly takes
// the newest node out of the list and runs it outside the lock, remembering which node runs and on
// which thread; unregistering a node that is running on another thread waits on a futex word that
// cancel() bumps after each callback.
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

#include "tpl/cancellation.hpp"
#include "tpl/detail/futex.hpp"
#include "tpl/detail/short_lock.hpp"
#include "tpl/detail/trampoline.hpp"
#include "tpl/detail/waiter_firing.hpp"
#include "tpl/task_completion_source.hpp"
#include "tpl/testing/wait_queues.hpp"
#include "tpl/time_provider.hpp"

namespace tpl::detail {

class cancellation_state {
 public:
  enum : std::uint8_t { not_canceled = 0, notifying = 1, notified = 2 };

  static void* operator new(std::size_t n) { return frame_alloc(n); }
  static void operator delete(void* p, std::size_t n) noexcept { frame_free(p, n); }

  std::atomic<std::uint32_t> refs{1};
  std::atomic<std::uint8_t> phase{not_canceled};
  short_lock lock;
  cancel_callback_node* head = nullptr;       // newest first; guarded by lock
  cancel_callback_node* executing = nullptr;  // guarded by lock
  std::thread::id executing_thread;           // guarded by lock
  std::atomic<std::uint32_t> callbacks_done{0};  // futex word bumped after each callback
  std::atomic<std::uint32_t> waiters{0};         // threads waiting for a running callback
};

cancellation_state* new_cancellation_state() { return new cancellation_state(); }

void add_ref(cancellation_state* s) noexcept {
  // relaxed: copied from a held reference (see task_state_base::add_ref).
  s->refs.fetch_add(1, std::memory_order_relaxed);
}

void release(cancellation_state* s) noexcept {
  // acq_rel: the destroyer must see every other holder's writes.
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete s;
}

bool is_canceled(const cancellation_state* s) noexcept {
  // acquire: a caller that sees cancellation also sees what the canceler wrote before cancel().
  return s->phase.load(std::memory_order_acquire) != cancellation_state::not_canceled;
}

bool try_link(cancellation_state* s, cancel_callback_node* n) noexcept {
  std::lock_guard g(s->lock);
  // relaxed: the phase only changes from not_canceled under this lock.
  if (s->phase.load(std::memory_order_relaxed) != cancellation_state::not_canceled) return false;
  n->prev = nullptr;
  n->next = s->head;
  if (s->head != nullptr) s->head->prev = n;
  s->head = n;
  n->linked = true;
  add_ref(s);  // the node keeps its state alive until its registration is reset
  return true;
}

namespace {
void unlink_locked(cancellation_state* s, cancel_callback_node* n) noexcept {
  if (n->prev != nullptr)
    n->prev->next = n->next;
  else
    s->head = n->next;
  if (n->next != nullptr) n->next->prev = n->prev;
  n->prev = n->next = nullptr;
  n->linked = false;
}
}  // namespace

void unlink_or_wait(cancel_callback_node* n) noexcept {
  cancellation_state* s = n->owner;
  for (;;) {
    // Read the futex word before looking, so a callback that finishes in between wakes us.
    const std::uint32_t seen = s->callbacks_done.load(std::memory_order_acquire);
    {
      std::lock_guard g(s->lock);
      if (n->linked) {
        unlink_locked(s, n);
        return;  // never ran, never will
      }
      // Ran already, or dropped by try_reset, or we are inside it (do not wait for ourselves).
      if (s->executing != n || s->executing_thread == std::this_thread::get_id()) return;
    }
    // seq_cst on waiters and callbacks_done: either cancel() sees us waiting and wakes us, or
    // the kernel sees callbacks_done already moved past `seen` and returns at once.
    s->waiters.fetch_add(1, std::memory_order_seq_cst);
    before_blocking_wait();
    futex_wait(&s->callbacks_done, seen);
    s->waiters.fetch_sub(1, std::memory_order_relaxed);
  }
}

bool cancel(cancellation_state* s, bool throw_on_first_exception) {
  {
    std::lock_guard g(s->lock);
    // relaxed inside the lock: registrations read it under the same lock; readers outside use
    // the release store below.
    if (s->phase.load(std::memory_order_relaxed) != cancellation_state::not_canceled) return false;
    // release: pairs with is_canceled()'s acquire.
    s->phase.store(cancellation_state::notifying, std::memory_order_release);
    s->executing_thread = std::this_thread::get_id();
  }
  add_ref(s);  // the callbacks may drop every other reference
  std::vector<std::exception_ptr> errors;
  std::exception_ptr first;
  for (;;) {
    cancel_callback_node* n;
    {
      std::lock_guard g(s->lock);
      n = s->head;
      if (n == nullptr) {
        s->executing = nullptr;
        break;
      }
      unlink_locked(s, n);
      s->executing = n;
    }
    try {
      n->invoke(n);
    } catch (...) {
      if (throw_on_first_exception)
        first = std::current_exception();
      else
        errors.push_back(std::current_exception());
    }
    {
      std::lock_guard g(s->lock);
      s->executing = nullptr;
    }
    // seq_cst: pairs with unlink_or_wait (see there); also publishes the callback's effects.
    s->callbacks_done.fetch_add(1, std::memory_order_seq_cst);
    if (s->waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(&s->callbacks_done);
    if (first) break;
  }
  if (first) {
    // The remaining callbacks are dropped without running (.NET's throwOnFirstException).
    std::lock_guard g(s->lock);
    while (s->head != nullptr) unlink_locked(s, s->head);
  }
  s->phase.store(cancellation_state::notified, std::memory_order_release);
  release(s);
  if (first) std::rethrow_exception(first);
  if (!errors.empty()) throw aggregate_exception(std::move(errors));
  return true;
}

bool try_reset(cancellation_state* s) noexcept {
  std::lock_guard g(s->lock);
  if (s->phase.load(std::memory_order_relaxed) != cancellation_state::not_canceled) return false;
  // Registrations still there belong to a finished operation: they will not run.
  while (s->head != nullptr) unlink_locked(s, s->head);
  return true;
}

}  // namespace tpl::detail

namespace tpl {

void cancellation_registration::reset() noexcept {
  detail::cancel_callback_node* n = std::exchange(node_, nullptr);
  if (n == nullptr) return;
  detail::unlink_or_wait(n);
  detail::cancellation_state* owner = n->owner;
  n->destroy(n);
  detail::release(owner);  // the node's reference, taken when it was linked
}

detail::cancellation_state* cancellation_token_source::checked() const {
  if (s_ == nullptr) throw invalid_operation("tpl: cancellation_token_source used after being moved from");
  return s_;
}

void cancellation_token_source::destroy() noexcept {
  if (timer_ != nullptr) {
    timer_->dispose();  // waits for a running cancel_after callback
    timer_.reset();
  }
  parents_.clear();  // unregister from the parents first: their callbacks point at s_
  if (s_ != nullptr) detail::release(std::exchange(s_, nullptr));
}

cancellation_token_source cancellation_token_source::create_linked(
    std::span<const cancellation_token> tokens) {
  if (tokens.empty()) throw std::invalid_argument("tpl: create_linked: no tokens to link to");
  cancellation_token_source linked;
  linked.parents_.reserve(tokens.size());
  for (const cancellation_token& t : tokens) {
    if (!t.can_be_canceled()) continue;
    detail::cancellation_state* self = linked.s_;
    // The callback may run right here (parent already canceled) or on the parent's canceling
    // thread; destroying `linked` unregisters first (waiting for a running callback), so `self`
    // outlives every run.
    linked.parents_.push_back(t.register_callback([self] { detail::cancel(self, false); }));
    if (linked.is_cancellation_requested()) break;
  }
  return linked;
}

namespace {

// The task behind when_cancelled(): completed by a callback on the token; if every handle goes
// away first, the state's destruction unregisters the callback.
struct cancel_wait_state final : detail::task_state<void>, detail::pooled_allocation {
  cancel_wait_state() noexcept : detail::task_state<void>(1, false, &destroy) {}
  cancellation_registration registration;

  static void destroy(detail::task_state_base* b) noexcept {
    auto* self = static_cast<cancel_wait_state*>(b);
    self->registration.reset();  // waits if the callback is running elsewhere
    delete self;
  }
  void on_canceled() noexcept {
    set_value();
    complete_and_fire(*this);
  }
};

}  // namespace

task<> when_cancelled(const cancellation_token& token) {
  if (!token.can_be_canceled())
    throw std::invalid_argument("when_cancelled: this token can never be canceled; the task would never complete");
  auto* s = new cancel_wait_state();
  task<> result(detail::adopt_state, s);
  // The callback does not own a reference: destroy() removes it before the state goes away.
  s->registration = token.register_callback([s] { s->on_canceled(); });
  return result;
}

}  // namespace tpl

namespace tpl::testing {

std::size_t threads_waiting_for_running_callback(const cancellation_token& token) noexcept {
  const detail::cancellation_state* s = token.state_for_tpl_internal();
  // relaxed: a count a test polls to learn that a thread came this far; it publishes nothing the
  // test then reads (the callback's effects reach the waiter through callbacks_done).
  return s == nullptr ? 0 : s->waiters.load(std::memory_order_relaxed);
}

}  // namespace tpl::testing
