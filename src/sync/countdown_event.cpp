// countdown_event and async_countdown_event: a count and a FIFO of waiters under one short lock (detail::short_lock).
#include "tpl/sync/countdown_event.hpp"

#include <limits>
#include <string>
#include <mutex>
#include <stdexcept>

#include "tpl/exceptions.hpp"
#include "tpl/sync/async_countdown_event.hpp"

namespace tpl {

namespace detail {

namespace {
void check_positive(std::int64_t n, const char* what) {
  if (n < 1) throw std::invalid_argument(std::string("tpl: ") + what + ": the count must be at least 1");
}
}  // namespace

countdown_core::countdown_core(std::int64_t initial_count) : count_(initial_count), initial_(initial_count) {
  if (initial_count < 0) throw std::invalid_argument("tpl: countdown event: initial_count must not be negative");
}

countdown_core::~countdown_core() {
  sync_waiter* chain;
  {
    std::lock_guard g(lock_);
    chain = waiters_.take_all();
  }
  resolve_chain(chain, wait_outcome::destroyed);
}

bool countdown_core::signal(std::int64_t n) {
  check_positive(n, "countdown event signal");
  sync_waiter* chain;
  {
    std::lock_guard g(lock_);
    if (count_ == 0) throw invalid_operation("tpl: countdown event signal: the event is already set (count is 0)");
    if (n > count_)
      throw invalid_operation("tpl: countdown event signal: would decrement the count below zero (count is " +
                              std::to_string(count_) + ", signal of " + std::to_string(n) + ")");
    count_ -= n;
    if (count_ != 0) return false;
    chain = waiters_.take_all();
  }
  resolve_chain(chain, wait_outcome::granted);
  return true;
}

bool countdown_core::try_add_count(std::int64_t n) {
  check_positive(n, "countdown event add_count");
  std::lock_guard g(lock_);
  if (count_ == 0) return false;
  if (n > std::numeric_limits<std::int64_t>::max() - count_)
    throw invalid_operation("tpl: countdown event add_count: the count would overflow");
  count_ += n;
  return true;
}

void countdown_core::add_count(std::int64_t n) {
  if (!try_add_count(n)) throw invalid_operation("tpl: countdown event add_count: the event is already set");
}

void countdown_core::reset(std::int64_t count) {
  if (count < 0) throw std::invalid_argument("tpl: countdown event reset: the count must not be negative");
  sync_waiter* chain = nullptr;
  {
    std::lock_guard g(lock_);
    count_ = count;
    initial_ = count;
    if (count == 0) chain = waiters_.take_all();
  }
  resolve_chain(chain, wait_outcome::granted);
}

std::int64_t countdown_core::current_count() const noexcept {
  std::lock_guard g(lock_);
  return count_;
}

std::int64_t countdown_core::initial_count() const noexcept {
  std::lock_guard g(lock_);
  return initial_;
}

bool countdown_core::take_or_enqueue(sync_waiter* w, bool may_enqueue) noexcept {
  std::lock_guard g(lock_);
  if (count_ == 0) return true;
  if (may_enqueue) waiters_.push_back(w);
  return false;
}

bool countdown_core::try_unlink(sync_waiter* w) noexcept {
  std::lock_guard g(lock_);
  return waiters_.unlink_if_linked(w);
}

}  // namespace detail

void countdown_event::wait() { (void)wait(std::chrono::nanoseconds(infinite_timeout)); }

bool countdown_event::wait(std::chrono::nanoseconds timeout, const cancellation_token& token) {
  detail::check_timeout(timeout, "countdown_event::wait");
  auto take = [this](detail::sync_waiter* w, bool may_enqueue) { return core_.take_or_enqueue(w, may_enqueue); };
  return detail::blocking_wait(core_, timeout, token, take);
}

task<> async_countdown_event::wait_async(const cancellation_token& token) {
  auto take = [this](detail::sync_waiter* w, bool may_enqueue) { return core_.take_or_enqueue(w, may_enqueue); };
  return detail::start_async_wait(core_, token, take);
}

}  // namespace tpl
