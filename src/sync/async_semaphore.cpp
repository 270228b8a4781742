// async_semaphore: a count and a FIFO of waiters under one short lock (detail::short_lock). Every decision about a
// waiter (granted, timed out, canceled, semaphore destroyed) is made under the lock by unlinking
// it, so exactly one party resolves each waiter; resolving runs outside the lock.
#include "tpl/sync/async_semaphore.hpp"

#include <atomic>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "tpl/detail/futex.hpp"
#include "tpl/detail/wait_guards.hpp"
#include "tpl/detail/waiter_firing.hpp"
#include "tpl/thread_pool.hpp"

namespace tpl {

namespace {

void link_back(detail::semaphore_waiter*& head, detail::semaphore_waiter*& tail, detail::semaphore_waiter* w) {
  w->prev = tail;
  w->next = nullptr;
  if (tail != nullptr)
    tail->next = w;
  else
    head = w;
  tail = w;
  w->linked = true;
}

void unlink(detail::semaphore_waiter*& head, detail::semaphore_waiter*& tail, detail::semaphore_waiter* w) {
  if (w->prev != nullptr)
    w->prev->next = w->next;
  else
    head = w->next;
  if (w->next != nullptr)
    w->next->prev = w->prev;
  else
    tail = w->prev;
  w->prev = w->next = nullptr;
  w->linked = false;
}

// A blocked thread's waiter, on its stack. resolve() publishes and wakes without touching the node
// afterwards (futex_wake never dereferences it).
struct blocking_semaphore_waiter : detail::semaphore_waiter {
  // 0 waiting, 1 granted, 2 semaphore destroyed (both final, set by resolve()); 3 cancellation
  // requested (set by the token callback, only over 0, so that a sleeping waiter wakes and a
  // waiter about to sleep does not).
  std::atomic<std::uint32_t> state{0};
  blocking_semaphore_waiter() {
    resolve = [](detail::semaphore_waiter* w, bool granted) noexcept {
      auto* self = static_cast<blocking_semaphore_waiter*>(w);
      // release: the waiter reads nothing else, but its return must happen after our unlink.
      self->state.store(granted ? 1 : 2, std::memory_order_release);
      detail::futex_wake_one(&self->state);
    };
  }
  static bool resolved(std::uint32_t s) noexcept { return s == 1 || s == 2; }
  void wait_resolved() {
    // acquire: pairs with resolve()'s release.
    for (std::uint32_t s; !resolved(s = state.load(std::memory_order_acquire));) detail::futex_wait(&state, s);
  }
};

// The task of an asynchronous wait. Like delay(): a timer and a token registration race with
// release(); the semaphore's lock decides, and the decider disposes the two others (dispose and
// reset wait for a callback running elsewhere, which finds the waiter already unlinked).
template <class R>
struct async_semaphore_waiter final : detail::task_state<R>, detail::pooled_allocation, detail::semaphore_waiter {
  explicit async_semaphore_waiter(async_semaphore* s) noexcept
      : detail::task_state<R>(2, false, &detail::delete_as<async_semaphore_waiter>), sem(s) {
    resolve = [](detail::semaphore_waiter* w, bool granted) noexcept {
      static_cast<async_semaphore_waiter*>(w)->finish(granted ? outcome::granted : outcome::destroyed);
    };
  }

  enum class outcome { granted, timed_out, canceled, destroyed };

  async_semaphore* sem;
  std::atomic<bool> resolved{false};
  detail::wait_guards guards;

  void give_up(outcome how) noexcept {
    if (sem->try_unlink(this)) finish(how);  // else release() or the destructor resolves us
  }

  void finish(outcome how) noexcept {
    // seq_cst, before clean_up(): setup code that stores a timer or registration after our
    // clean-up then sees `resolved` and takes it down itself.
    resolved.store(true, std::memory_order_seq_cst);
    guards.clean_up();
    switch (how) {
      case outcome::granted:
        if constexpr (std::is_void_v<R>)
          this->set_value();
        else
          this->set_value(true);
        break;
      case outcome::timed_out:
        if constexpr (std::is_void_v<R>)
          this->set_value();  // not reachable: task<> waits have no timeout
        else
          this->set_value(false);
        break;
      case outcome::canceled:
        this->set_error(std::make_exception_ptr(operation_canceled()), true);
        break;
      case outcome::destroyed:
        this->set_error(std::make_exception_ptr(invalid_operation(
                            "tpl: async_semaphore destroyed while this wait was queued")),
                        false);
        break;
    }
    detail::complete_and_fire(*this);
    this->release();  // the pending operation's reference
  }
};

template <class R>
task<R> start_async_wait(async_semaphore& sem, std::chrono::nanoseconds timeout, const cancellation_token& token,
                         time_provider* provider) {
  auto* w = new async_semaphore_waiter<R>(&sem);
  task<R> result(detail::adopt_state, w);
  if (sem.take_or_enqueue(w)) {
    // A count was free after all: no queueing.
    w->release();  // the pending reference: nothing else will resolve it
    if constexpr (std::is_void_v<R>)
      return completed_task();
    else
      return task_from_result(true);
  }
  using outcome = typename async_semaphore_waiter<R>::outcome;
  try {
    if (token.can_be_canceled())
      w->guards.set_registration(token.register_callback([w] { w->give_up(outcome::canceled); }));
    if (provider != nullptr && !detail::is_infinite(timeout))
      w->guards.set_timer(provider->create_timer([w] { w->give_up(outcome::timed_out); }, timeout, infinite_timeout));
  } catch (...) {
    // Arming failed (std::bad_alloc). Still queued: unlink and throw, so that no later release()
    // grants a count to a wait nobody awaits. Already resolved (granted, or the semaphore
    // destroyed) while we armed: the wait stands, with what we armed taken down.
    if (sem.try_unlink(w)) {
      w->finish(outcome::canceled);
      throw;
    }
  }
  // If the wait was resolved while we were arming, whatever we armed since is ours to take down.
  if (w->resolved.load(std::memory_order_seq_cst)) w->guards.clean_up();
  return result;
}

}  // namespace

async_semaphore::async_semaphore(std::int64_t initial_count, std::int64_t max_count)
    : count_(initial_count), max_(max_count) {
  if (max_count <= 0) throw std::invalid_argument("tpl: async_semaphore: max_count must be positive");
  if (initial_count < 0 || initial_count > max_count)
    throw std::invalid_argument("tpl: async_semaphore: initial_count must be in [0, max_count]");
}

async_semaphore::~async_semaphore() {
  detail::semaphore_waiter* list;
  {
    std::lock_guard g(lock_);
    list = head_;
    for (auto* w = head_; w != nullptr; w = w->next) w->linked = false;
    head_ = tail_ = nullptr;
  }
  while (list != nullptr) {
    detail::semaphore_waiter* next = list->next;
    list->resolve(list, false);
    list = next;
  }
}

std::int64_t async_semaphore::current_count() const noexcept {
  std::lock_guard g(lock_);
  return count_;
}

bool async_semaphore::take_or_enqueue(detail::semaphore_waiter* w) noexcept {
  std::lock_guard g(lock_);
  if (count_ > 0 && head_ == nullptr) {
    --count_;
    return true;
  }
  link_back(head_, tail_, w);
  return false;
}

bool async_semaphore::try_unlink(detail::semaphore_waiter* w) noexcept {
  std::lock_guard g(lock_);
  if (!w->linked) return false;
  unlink(head_, tail_, w);
  return true;
}

std::int64_t async_semaphore::release(std::int64_t count) {
  if (count < 1) throw std::invalid_argument("tpl: async_semaphore::release: count must be at least 1");
  detail::semaphore_waiter* granted = nullptr;  // singly linked through next, in FIFO order
  detail::semaphore_waiter* granted_tail = nullptr;
  std::int64_t previous;
  {
    std::lock_guard g(lock_);
    previous = count_;
    if (count > max_ - count_) throw semaphore_full();
    while (count > 0 && head_ != nullptr) {
      detail::semaphore_waiter* w = head_;
      unlink(head_, tail_, w);
      if (granted_tail != nullptr)
        granted_tail->next = w;
      else
        granted = w;
      granted_tail = w;
      --count;
    }
    count_ += count;
  }
  while (granted != nullptr) {
    detail::semaphore_waiter* next = granted->next;
    granted->resolve(granted, true);
    granted = next;
  }
  return previous;
}

void async_semaphore::wait() { (void)wait(std::chrono::nanoseconds(infinite_timeout)); }

bool async_semaphore::wait(std::chrono::nanoseconds timeout, const cancellation_token& token) {
  detail::check_timeout(timeout, "async_semaphore::wait");
  token.throw_if_cancellation_requested();
  blocking_semaphore_waiter w;
  if (take_or_enqueue(&w)) return true;
  // Cancellation moves the futex word from 0 to 3, so a cancel that lands just before we sleep is
  // not lost. The registration is reset (which waits for a running callback) before w goes away.
  cancellation_registration reg;
  if (token.can_be_canceled()) {
    reg = token.register_callback([&w] {
      std::uint32_t expected = 0;
      // acq_rel: ordered with resolve()'s store; whichever lands first decides what we see.
      w.state.compare_exchange_strong(expected, 3, std::memory_order_acq_rel);
      detail::futex_wake_one(&w.state);
    });
  }
  // The current scheduler may refuse to block (a single-threaded test scheduler throws from
  // on_blocking_call): take w back out before the exception leaves.
  std::optional<detail::blocking_region> blocked;
  try {
    blocked.emplace("async_semaphore::wait()");
  } catch (...) {
    if (!try_unlink(&w)) {
      w.wait_resolved();  // release() took us: let it finish with w, and give the count back
      // acquire: wait_resolved() already synchronised with resolve(); this re-reads its value.
      if (w.state.load(std::memory_order_acquire) == 1) release();
    }
    throw;
  }
  const bool infinite = detail::is_infinite(timeout);
  const auto deadline =
      detail::saturating_add(std::chrono::steady_clock::now(), infinite ? std::chrono::nanoseconds(0) : timeout);
  for (;;) {
    std::uint32_t st = w.state.load(std::memory_order_acquire);
    if (blocking_semaphore_waiter::resolved(st)) break;
    bool canceled = st == 3;
    bool timed_out = false;
    if (!canceled) {
      if (infinite)
        detail::futex_wait(&w.state, 0);
      else
        timed_out = !detail::futex_wait_until(&w.state, 0, deadline);
      st = w.state.load(std::memory_order_acquire);
      if (blocking_semaphore_waiter::resolved(st)) break;
      canceled = st == 3;
    }
    if (timed_out || canceled) {
      if (try_unlink(&w)) {
        reg.reset();
        if (canceled) throw operation_canceled();
        return false;
      }
      w.wait_resolved();  // release() took us: it is about to (or did) publish
      break;
    }
  }
  reg.reset();
  if (w.state.load(std::memory_order_acquire) == 2)
    throw invalid_operation("tpl: async_semaphore destroyed while a thread was waiting on it");
  return true;
}

task<> async_semaphore::wait_async(const cancellation_token& token) {
  if (token.is_cancellation_requested()) return task_from_canceled();
  {
    std::lock_guard g(lock_);
    if (count_ > 0 && head_ == nullptr) {
      --count_;
      return completed_task();
    }
  }
  return start_async_wait<void>(*this, std::chrono::nanoseconds(infinite_timeout), token, nullptr);
}

task<bool> async_semaphore::wait_async(std::chrono::nanoseconds timeout, const cancellation_token& token,
                                       time_provider& provider) {
  detail::check_timeout(timeout, "async_semaphore::wait_async");
  if (token.is_cancellation_requested()) return task_from_canceled<bool>();
  {
    std::lock_guard g(lock_);
    if (count_ > 0 && head_ == nullptr) {
      --count_;
      return task_from_result(true);
    }
  }
  if (timeout.count() == 0) return task_from_result(false);
  return start_async_wait<bool>(*this, timeout, token, &provider);
}

}  // namespace tpl
