// async_manual_reset_event and async_auto_reset_event: a flag and a FIFO of waiters under one
// short lock; waiters released by set() are resolved outside the lock.
#include "tpl/sync/async_event.hpp"

#include <mutex>

namespace tpl {

// ---- shared state ------------------------------------------------------------------------------

namespace detail {

async_event_state::~async_event_state() {
  sync_waiter* chain;
  {
    std::lock_guard g(lock_);
    chain = waiters_.take_all();
  }
  resolve_chain(chain, wait_outcome::destroyed);
}

void async_event_state::reset() noexcept {
  std::lock_guard g(lock_);
  set_ = false;
}

bool async_event_state::is_set() const noexcept {
  std::lock_guard g(lock_);
  return set_;
}

bool async_event_state::try_unlink(sync_waiter* w) noexcept {
  std::lock_guard g(lock_);
  return waiters_.unlink_if_linked(w);
}

}  // namespace detail

// ---- async_manual_reset_event -------------------------------------------------------------------

void async_manual_reset_event::set() {
  detail::sync_waiter* chain;
  {
    std::lock_guard g(lock_);
    set_ = true;
    chain = waiters_.take_all();
  }
  detail::resolve_chain(chain, detail::wait_outcome::granted);
}

task<> async_manual_reset_event::wait_async(const cancellation_token& token) {
  auto take = [this](detail::sync_waiter* w, bool may_enqueue) {
    std::lock_guard g(lock_);
    if (set_) return true;
    if (may_enqueue) waiters_.push_back(w);
    return false;
  };
  return detail::start_async_wait(*this, token, take);
}

// ---- async_auto_reset_event ---------------------------------------------------------------------

void async_auto_reset_event::set() {
  detail::sync_waiter* released;
  {
    std::lock_guard g(lock_);
    released = waiters_.pop_front();
    if (released == nullptr) set_ = true;  // no waiter: the next wait consumes it
  }
  if (released != nullptr) released->resolve(released, detail::wait_outcome::granted);
}

task<> async_auto_reset_event::wait_async(const cancellation_token& token) {
  auto take = [this](detail::sync_waiter* w, bool may_enqueue) {
    std::lock_guard g(lock_);
    if (set_) {
      set_ = false;  // a set event has no waiters: this wait consumes it
      return true;
    }
    if (may_enqueue) waiters_.push_back(w);
    return false;
  };
  return detail::start_async_wait(*this, token, take);
}

}  // namespace tpl
