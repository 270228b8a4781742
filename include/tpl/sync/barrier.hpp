// tpl/sync/barrier.hpp — barrier: a fixed group of participants waits at each phase until all of
// them have arrived (.NET Barrier), with blocking waits that tell the thread pool they block.
//
//   tpl::barrier sync_point(3, [](std::int64_t phase) { std::printf("phase %lld done\n", (long long)phase); });
//   // in each of the 3 participants:
//   for (int step = 0; step < 10; ++step) { compute(step); sync_point.signal_and_wait(); }
//
// The last participant to arrive runs the post-phase action (if any), then every participant of
// the phase is released and the next phase begins. If the action throws, every participant of that
// phase gets barrier_post_phase_error holding the exception (.NET BarrierPostPhaseException); the
// barrier moves on to the next phase all the same. A wait that is canceled or times out withdraws
// its arrival. Negative participant counts and removing more participants than registered throw
// std::invalid_argument; arriving at a barrier with no participants, or with more arrivals than
// participants, throws invalid_operation.
//
// A blocked participant tells its pool (detail::blocking_region): more pool work items blocking on
// one barrier than the pool has threads need the pool to add threads, which it does for blocked
// workers. async_barrier (tpl/sync/async_barrier.hpp) suspends instead of blocking.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>

#include "tpl/cancellation.hpp"
#include "tpl/detail/short_lock.hpp"
#include "tpl/sync/wait_list.hpp"
#include "tpl/time_provider.hpp"

namespace tpl {

/// The post-phase action of a barrier threw; inner() is what it threw.
class barrier_post_phase_error : public std::runtime_error {
 public:
  explicit barrier_post_phase_error(std::exception_ptr inner)
      : std::runtime_error("tpl: the barrier's post-phase action threw"), inner_(std::move(inner)) {}
  const std::exception_ptr& inner() const noexcept { return inner_; }

 private:
  std::exception_ptr inner_;
};

namespace detail {
/// Participants, arrivals, phase and waiters shared by barrier and async_barrier.
class barrier_core : public sync_waitable {
 public:
  barrier_core(std::int64_t participants, std::function<void(std::int64_t)> post_phase);
  ~barrier_core();
  barrier_core(const barrier_core&) = delete;
  barrier_core& operator=(const barrier_core&) = delete;

  std::int64_t add_participants(std::int64_t n);
  void remove_participants(std::int64_t n);
  std::int64_t participant_count() const noexcept;
  std::int64_t participants_remaining() const noexcept;
  std::int64_t current_phase_number() const noexcept;
  /// Arrives: grants at once if w is the last arrival (after the post-phase action ran), else
  /// queues w. w->value gets the finished phase's number.
  bool arrive(sync_waiter* w, bool may_enqueue);
  bool try_unlink(sync_waiter* w) noexcept override;

 private:
  /// Called with lock held by the arrival that completes the phase; releases the lock.
  void finish_phase(std::unique_lock<short_lock>& held, sync_waiter* last);

  mutable short_lock lock_;
  std::int64_t participants_;
  std::int64_t arrived_ = 0;
  std::int64_t phase_ = 0;
  bool finishing_ = false;  // the post-phase action is running
  std::function<void(std::int64_t)> post_phase_;
  sync_wait_list waiters_;
};
}  // namespace detail

class barrier {
 public:
  /// post_phase (optional) runs once per phase, on the last arriving thread, with the phase
  /// number. Throws std::invalid_argument if participant_count < 0.
  explicit barrier(std::int64_t participant_count, std::function<void(std::int64_t phase)> post_phase = {})
      : core_(participant_count, std::move(post_phase)) {}

  /// Registers n more participants; returns the phase they first take part in.
  std::int64_t add_participants(std::int64_t n = 1) { return core_.add_participants(n); }
  /// Unregisters n participants (if the others have all arrived, the phase ends).
  void remove_participants(std::int64_t n = 1) { core_.remove_participants(n); }
  std::int64_t participant_count() const noexcept { return core_.participant_count(); }
  std::int64_t participants_remaining() const noexcept { return core_.participants_remaining(); }
  std::int64_t current_phase_number() const noexcept { return core_.current_phase_number(); }

  /// Arrives and blocks until every participant has arrived.
  void signal_and_wait();
  /// Arrives and blocks up to timeout: true when the phase completed, false (arrival withdrawn)
  /// on timeout; throws operation_canceled (arrival withdrawn) if token is canceled first.
  bool signal_and_wait(std::chrono::nanoseconds timeout, const cancellation_token& token = {});
  void signal_and_wait(const cancellation_token& token) {
    (void)signal_and_wait(std::chrono::nanoseconds(infinite_timeout), token);
  }

 private:
  detail::barrier_core core_;
};

}  // namespace tpl
