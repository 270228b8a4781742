// barrier and async_barrier: participants, arrivals and the phase under one short lock (detail::short_lock). The arrival
// that completes a phase runs the post-phase action outside the lock (arrivals for the next phase
// cannot start before the phase's participants are released), then releases them.
#include "tpl/sync/barrier.hpp"

#include <limits>
#include <mutex>

#include "tpl/exceptions.hpp"
#include "tpl/sync/async_barrier.hpp"

namespace tpl {

namespace detail {

barrier_core::barrier_core(std::int64_t participants, std::function<void(std::int64_t)> post_phase)
    : participants_(participants), post_phase_(std::move(post_phase)) {
  if (participants < 0) throw std::invalid_argument("tpl: barrier: participant_count must not be negative");
}

barrier_core::~barrier_core() {
  sync_waiter* chain;
  {
    std::lock_guard g(lock_);
    chain = waiters_.take_all();
  }
  resolve_chain(chain, wait_outcome::destroyed);
}

std::int64_t barrier_core::add_participants(std::int64_t n) {
  if (n < 1) throw std::invalid_argument("tpl: barrier::add_participants: n must be at least 1");
  std::lock_guard g(lock_);
  if (n > std::numeric_limits<std::int32_t>::max() - participants_)
    throw std::invalid_argument("tpl: barrier::add_participants: too many participants");
  participants_ += n;
  return finishing_ ? phase_ + 1 : phase_;
}

void barrier_core::remove_participants(std::int64_t n) {
  if (n < 1) throw std::invalid_argument("tpl: barrier::remove_participants: n must be at least 1");
  std::unique_lock held(lock_);
  if (n > participants_)
    throw std::invalid_argument("tpl: barrier::remove_participants: more participants than registered");
  if (participants_ - n < arrived_)
    throw invalid_operation("tpl: barrier::remove_participants: more participants have arrived than would remain");
  participants_ -= n;
  if (arrived_ > 0 && arrived_ == participants_ && !finishing_) finish_phase(held, nullptr);
}

std::int64_t barrier_core::participant_count() const noexcept {
  std::lock_guard g(lock_);
  return participants_;
}

std::int64_t barrier_core::participants_remaining() const noexcept {
  std::lock_guard g(lock_);
  return participants_ - arrived_;
}

std::int64_t barrier_core::current_phase_number() const noexcept {
  std::lock_guard g(lock_);
  return phase_;
}

bool barrier_core::arrive(sync_waiter* w, bool may_enqueue) {
  std::unique_lock held(lock_);
  if (participants_ == 0) {
    w->error = std::make_exception_ptr(invalid_operation("tpl: barrier: arrival at a barrier with no participants"));
    return true;
  }
  if (finishing_ || arrived_ >= participants_) {
    w->error = std::make_exception_ptr(
        invalid_operation("tpl: barrier: more arrivals in this phase than registered participants"));
    return true;
  }
  if (arrived_ + 1 == participants_) {
    ++arrived_;
    finish_phase(held, w);
    return true;
  }
  if (!may_enqueue) return false;
  ++arrived_;
  waiters_.push_back(w);
  return false;
}

void barrier_core::finish_phase(std::unique_lock<short_lock>& held, sync_waiter* last) {
  finishing_ = true;
  const std::int64_t phase = phase_;
  sync_waiter* chain = waiters_.take_all();
  held.unlock();
  std::exception_ptr error;
  if (post_phase_) {
    try {
      post_phase_(phase);
    } catch (...) {
      error = std::make_exception_ptr(barrier_post_phase_error(std::current_exception()));
    }
  }
  held.lock();
  finishing_ = false;
  arrived_ = 0;
  ++phase_;
  held.unlock();
  for (sync_waiter* w = chain; w != nullptr; w = w->next) {
    w->value = phase;
    w->error = error;
  }
  if (last != nullptr) {
    last->value = phase;
    last->error = error;
  }
  resolve_chain(chain, wait_outcome::granted);
}

bool barrier_core::try_unlink(sync_waiter* w) noexcept {
  std::lock_guard g(lock_);
  if (!waiters_.unlink_if_linked(w)) return false;
  --arrived_;  // a withdrawn arrival
  return true;
}

}  // namespace detail

void barrier::signal_and_wait() { (void)signal_and_wait(std::chrono::nanoseconds(infinite_timeout)); }

bool barrier::signal_and_wait(std::chrono::nanoseconds timeout, const cancellation_token& token) {
  detail::check_timeout(timeout, "barrier::signal_and_wait");
  auto take = [this](detail::sync_waiter* w, bool may_enqueue) { return core_.arrive(w, may_enqueue); };
  return detail::blocking_wait(core_, timeout, token, take);
}

task<std::int64_t> async_barrier::arrive_and_wait_async(const cancellation_token& token) {
  auto take = [this](detail::sync_waiter* w, bool may_enqueue) { return core_.arrive(w, may_enqueue); };
  return detail::start_async_wait_value(core_, token, take);
}

}  // namespace tpl
