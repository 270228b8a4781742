// manual_reset_event_slim: an atomic flag for the spinning fast path, plus a FIFO of blocked
// waiters under a short lock for the slow path.
#include "tpl/sync/manual_reset_event_slim.hpp"

#include <mutex>
#include <stdexcept>

#include "tpl/sync/spin_wait.hpp"

namespace tpl {

manual_reset_event_slim::manual_reset_event_slim(bool initially_set, int spin_count)
    : set_(initially_set), spin_count_(spin_wait::single_core() ? 0 : spin_count) {
  if (spin_count < 0) throw std::invalid_argument("tpl: manual_reset_event_slim: spin_count must not be negative");
}

manual_reset_event_slim::~manual_reset_event_slim() {
  detail::sync_waiter* chain;
  {
    std::lock_guard g(lock_);
    chain = waiters_.take_all();
  }
  detail::resolve_chain(chain, detail::wait_outcome::destroyed);
}

void manual_reset_event_slim::set() {
  detail::sync_waiter* chain;
  {
    std::lock_guard g(lock_);
    // release: a spinning reader that sees true (is_set's acquire) sees the setter's writes.
    set_.store(true, std::memory_order_release);
    chain = waiters_.take_all();
  }
  detail::resolve_chain(chain, detail::wait_outcome::granted);
}

void manual_reset_event_slim::reset() noexcept {
  std::lock_guard g(lock_);
  // relaxed: under the lock; a spinning reader that still sees true saw a set() that happened.
  set_.store(false, std::memory_order_relaxed);
}

bool manual_reset_event_slim::is_set() const noexcept {
  // acquire: whoever sees the event set also sees what the setter wrote before set().
  return set_.load(std::memory_order_acquire);
}

bool manual_reset_event_slim::try_unlink(detail::sync_waiter* w) noexcept {
  std::lock_guard g(lock_);
  return waiters_.unlink_if_linked(w);
}

void manual_reset_event_slim::wait() { (void)wait(std::chrono::nanoseconds(infinite_timeout)); }

bool manual_reset_event_slim::wait(std::chrono::nanoseconds timeout, const cancellation_token& token) {
  detail::check_timeout(timeout, "manual_reset_event_slim::wait");
  token.throw_if_cancellation_requested();
  if (is_set()) return true;
  if (timeout.count() != 0) {
    spin_wait sw;
    for (int i = 0; i < spin_count_; ++i) {
      sw.spin_once();
      if (is_set()) return true;
      if (sw.next_spin_will_yield() && token.is_cancellation_requested()) break;
    }
  }
  auto take = [this](detail::sync_waiter* w, bool may_enqueue) {
    std::lock_guard g(lock_);
    // relaxed: set_ is written under this lock.
    if (set_.load(std::memory_order_relaxed)) return true;
    if (may_enqueue) waiters_.push_back(w);
    return false;
  };
  return detail::blocking_wait(*this, timeout, token, take);
}

}  // namespace tpl
