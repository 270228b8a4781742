// The waiters of tpl's synchronization primitives: the FIFO list, the asynchronous waiter (a task
// state racing a grant against a token registration) and the blocking waiter (a futex word on the
// waiting thread's stack). The shape is async_semaphore's; see tpl/sync/wait_list.hpp.
#include "tpl/sync/wait_list.hpp"

#include <atomic>
#include <cstdint>
#include <optional>

#include "tpl/detail/futex.hpp"
#include "tpl/detail/wait_guards.hpp"
#include "tpl/detail/waiter_firing.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/thread_pool.hpp"
#include "tpl/time_provider.hpp"

namespace tpl::detail {

void sync_wait_list::push_back(sync_waiter* w) noexcept {
  w->prev = tail_;
  w->next = nullptr;
  if (tail_ != nullptr)
    tail_->next = w;
  else
    head_ = w;
  tail_ = w;
  w->linked = true;
}

void sync_wait_list::unlink(sync_waiter* w) noexcept {
  if (w->prev != nullptr)
    w->prev->next = w->next;
  else
    head_ = w->next;
  if (w->next != nullptr)
    w->next->prev = w->prev;
  else
    tail_ = w->prev;
  w->prev = w->next = nullptr;
  w->linked = false;
}

sync_waiter* sync_wait_list::take_all() noexcept {
  sync_waiter* chain = head_;
  for (sync_waiter* w = head_; w != nullptr; w = w->next) {
    w->linked = false;
    w->prev = nullptr;
  }
  head_ = tail_ = nullptr;
  return chain;
}

void resolve_chain(sync_waiter* chain, wait_outcome outcome) noexcept {
  while (chain != nullptr) {
    sync_waiter* next = chain->next;  // resolve() may free or reuse the node
    chain->resolve(chain, outcome);
    chain = next;
  }
}

namespace {

// ---- asynchronous waits -----------------------------------------------------------------------

template <class R>
struct async_sync_waiter final : task_state<R>, pooled_allocation, sync_waiter {
  explicit async_sync_waiter(sync_waitable* o) noexcept
      : task_state<R>(2, false, &delete_as<async_sync_waiter>), owner(o) {
    resolve = [](sync_waiter* w, wait_outcome how) noexcept {
      auto* self = static_cast<async_sync_waiter*>(w);
      self->finish(how == wait_outcome::granted ? ending::granted : ending::destroyed);
    };
  }

  enum class ending { granted, canceled, destroyed };

  sync_waitable* owner;
  std::atomic<bool> resolved{false};
  wait_guards guards;

  void give_up() noexcept {
    if (owner->try_unlink(this)) finish(ending::canceled);  // else the owner resolves us
  }

  void finish(ending how) noexcept {
    // seq_cst, before clean_up(): the arming code that stores a registration after our clean-up
    // then sees `resolved` and takes it down itself (same hand-over as async_semaphore).
    resolved.store(true, std::memory_order_seq_cst);
    guards.clean_up();
    if (how == ending::granted && error) {
      this->set_error(std::move(error), false);
    } else if (how == ending::granted) {
      if constexpr (std::is_void_v<R>)
        this->set_value();
      else
        this->set_value(value);
    } else if (how == ending::canceled) {
      this->set_error(std::make_exception_ptr(operation_canceled()), true);
    } else {
      this->set_error(std::make_exception_ptr(invalid_operation(
                          "tpl: synchronization primitive destroyed while an asynchronous wait was queued")),
                      false);
    }
    complete_and_fire(*this);
    this->release();  // the pending operation's reference
  }
};

template <class R>
task<R> start_wait(sync_waitable& owner, const cancellation_token& token, take_or_enqueue_fn take, void* context) {
  if (token.is_cancellation_requested()) return task_from_canceled<R>();
  {
    // Probe with a node on the stack: a wait granted at once allocates nothing.
    sync_waiter probe;
    if (take(context, &probe, false)) {
      if (probe.error) return task_from_exception<R>(std::move(probe.error));
      if constexpr (std::is_void_v<R>)
        return completed_task();
      else
        return task_from_result(probe.value);
    }
  }
  auto* w = new async_sync_waiter<R>(&owner);
  task<R> result(adopt_state, w);
  if (take(context, w, true)) {
    // Granted after all: w was never queued, nothing else will resolve it.
    w->finish(async_sync_waiter<R>::ending::granted);
    return result;
  }
  if (token.can_be_canceled()) {
    try {
      w->guards.set_registration(token.register_callback([w] { w->give_up(); }));
    } catch (...) {
      // Arming failed (std::bad_alloc). Still queued: unlink and throw, so that the owner never
      // grants to a wait nobody awaits. Already resolved while we armed: the wait stands.
      if (owner.try_unlink(w)) {
        w->finish(async_sync_waiter<R>::ending::canceled);
        throw;
      }
    }
  }
  // If the wait was resolved while we were arming, what we armed since is ours to take down.
  if (w->resolved.load(std::memory_order_seq_cst)) w->guards.clean_up();
  return result;
}

// ---- blocking waits ---------------------------------------------------------------------------

// A blocked thread's waiter, on its stack. resolve() publishes and wakes without touching the node
// afterwards (futex_wake never dereferences the address).
struct blocking_sync_waiter : sync_waiter {
  // 0 waiting, 1 granted, 2 owner destroyed (both final, set by resolve()); 3 cancellation
  // requested (set by the token callback, only over 0, so that a sleeping waiter wakes and a
  // waiter about to sleep does not sleep).
  std::atomic<std::uint32_t> state{0};
  blocking_sync_waiter() {
    resolve = [](sync_waiter* w, wait_outcome how) noexcept {
      auto* self = static_cast<blocking_sync_waiter*>(w);
      // release: the waiter then reads value / error, written by the owner before this.
      self->state.store(how == wait_outcome::granted ? 1 : 2, std::memory_order_release);
      futex_wake_one(&self->state);
    };
  }
  static bool resolved(std::uint32_t s) noexcept { return s == 1 || s == 2; }
  void wait_resolved() {
    // acquire: pairs with resolve()'s release.
    for (std::uint32_t s; !resolved(s = state.load(std::memory_order_acquire));) futex_wait(&state, s);
  }
};

}  // namespace

task<> start_async_wait(sync_waitable& owner, const cancellation_token& token, take_or_enqueue_fn take,
                        void* context) {
  return start_wait<void>(owner, token, take, context);
}

task<std::int64_t> start_async_wait_value(sync_waitable& owner, const cancellation_token& token,
                                          take_or_enqueue_fn take, void* context) {
  return start_wait<std::int64_t>(owner, token, take, context);
}

bool blocking_wait(sync_waitable& owner, std::chrono::nanoseconds timeout, const cancellation_token& token,
                   take_or_enqueue_fn take, void* context, std::int64_t* value_out) {
  token.throw_if_cancellation_requested();
  blocking_sync_waiter w;
  auto granted = [&]() -> bool {
    if (w.error) std::rethrow_exception(w.error);
    if (value_out != nullptr) *value_out = w.value;
    return true;
  };
  if (take(context, &w, true)) return granted();
  if (timeout.count() == 0) {
    if (owner.try_unlink(&w)) return false;
    w.wait_resolved();
    if (w.state.load(std::memory_order_acquire) == 2)
      throw invalid_operation("tpl: synchronization primitive destroyed while a thread was waiting on it");
    return granted();
  }
  cancellation_registration reg;
  if (token.can_be_canceled()) {
    reg = token.register_callback([&w] {
      std::uint32_t expected = 0;
      // acq_rel: ordered with resolve()'s store; whichever lands first decides what we see.
      w.state.compare_exchange_strong(expected, 3, std::memory_order_acq_rel);
      futex_wake_one(&w.state);
    });
  }
  // The pool may refuse blocking on this thread (its constructor throws): leave the queue first,
  // or, if the owner granted us meanwhile, take the grant.
  std::optional<blocking_region> blocked;
  try {
    blocked.emplace();
  } catch (...) {
    if (owner.try_unlink(&w)) throw;
    w.wait_resolved();
  }
  const bool infinite = is_infinite(timeout);
  const auto deadline =
      saturating_add(std::chrono::steady_clock::now(), infinite ? std::chrono::nanoseconds(0) : timeout);
  for (;;) {
    // acquire: pairs with resolve()'s release (value / error) and the token callback's CAS.
    std::uint32_t st = w.state.load(std::memory_order_acquire);
    if (blocking_sync_waiter::resolved(st)) break;
    bool canceled = st == 3;
    bool timed_out = false;
    if (!canceled) {
      if (infinite)
        futex_wait(&w.state, 0);
      else
        timed_out = !futex_wait_until(&w.state, 0, deadline);
      // acquire: as above.
      st = w.state.load(std::memory_order_acquire);
      if (blocking_sync_waiter::resolved(st)) break;
      canceled = st == 3;
    }
    if (timed_out || canceled) {
      if (owner.try_unlink(&w)) {
        reg.reset();
        if (canceled) throw operation_canceled();
        return false;
      }
      w.wait_resolved();  // the owner took us: it is about to (or did) publish
      break;
    }
  }
  reg.reset();
  // acquire: as above.
  if (w.state.load(std::memory_order_acquire) == 2)
    throw invalid_operation("tpl: synchronization primitive destroyed while a thread was waiting on it");
  return granted();
}

}  // namespace tpl::detail
