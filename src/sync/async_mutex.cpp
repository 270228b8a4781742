// async_mutex: a flag and a FIFO of waiters under one short lock (detail::short_lock). unlock() with waiters queued hands
// the lock to the oldest one without clearing the flag (no barging).
#include "tpl/sync/async_mutex.hpp"

#include <mutex>

#include "tpl/exceptions.hpp"

namespace tpl {

namespace {
value_task<async_mutex_lock> guard_after(task<> wait, async_mutex* m) {
  co_await std::move(wait);
  co_return async_mutex_lock(*m, std::adopt_lock);
}
}  // namespace

async_mutex::~async_mutex() {
  detail::sync_waiter* chain;
  {
    std::lock_guard g(lock_);
    chain = waiters_.take_all();
  }
  detail::resolve_chain(chain, detail::wait_outcome::destroyed);
}

bool async_mutex::take_or_enqueue(detail::sync_waiter* w, bool may_enqueue) noexcept {
  std::lock_guard g(lock_);
  if (!locked_) {
    locked_ = true;  // nobody can be queued while the mutex is free: unlock hands it over
    return true;
  }
  if (may_enqueue) waiters_.push_back(w);
  return false;
}

bool async_mutex::try_unlink(detail::sync_waiter* w) noexcept {
  std::lock_guard g(lock_);
  return waiters_.unlink_if_linked(w);
}

bool async_mutex::try_lock() noexcept {
  std::lock_guard g(lock_);
  if (locked_) return false;
  locked_ = true;
  return true;
}

bool async_mutex::is_locked() const noexcept {
  std::lock_guard g(lock_);
  return locked_;
}

void async_mutex::unlock() {
  detail::sync_waiter* next;
  {
    std::lock_guard g(lock_);
    if (!locked_) throw invalid_operation("tpl: async_mutex::unlock: the mutex is not locked");
    next = waiters_.pop_front();
    if (next == nullptr) locked_ = false;  // else the lock passes to `next` still set
  }
  if (next != nullptr) next->resolve(next, detail::wait_outcome::granted);
}

value_task<async_mutex_lock> async_mutex::lock_async(const cancellation_token& token) {
  if (!token.is_cancellation_requested() && try_lock()) return value_task<async_mutex_lock>(async_mutex_lock(*this, std::adopt_lock));
  return guard_after(lock_async_unguarded(token), this);
}

task<> async_mutex::lock_async_unguarded(const cancellation_token& token) {
  auto take = [this](detail::sync_waiter* w, bool may_enqueue) { return take_or_enqueue(w, may_enqueue); };
  return detail::start_async_wait(*this, token, take);
}

}  // namespace tpl
