// tpl/sync/async_barrier.hpp — a barrier whose participants are coroutines: each phase completes
// when every participant has arrived (.NET Barrier, awaited instead of blocked on).
//
//   tpl::async_barrier step(4);
//   tpl::task<> participant(int id) {
//     for (int i = 0; i < 10; ++i) { compute(id, i); co_await step.arrive_and_wait_async(); }
//   }
//
// Semantics as tpl::barrier (post-phase action, barrier_post_phase_error, canceled arrivals are
// withdrawn, bad counts throw). The last arrival resumes the other participants inline, oldest
// first, after running the post-phase action. arrive_and_wait_async's result is the number of the
// phase that completed.
#pragma once

#include "tpl/sync/barrier.hpp"
#include "tpl/task.hpp"

namespace tpl {

class async_barrier {
 public:
  explicit async_barrier(std::int64_t participant_count, std::function<void(std::int64_t phase)> post_phase = {})
      : core_(participant_count, std::move(post_phase)) {}

  std::int64_t add_participants(std::int64_t n = 1) { return core_.add_participants(n); }
  void remove_participants(std::int64_t n = 1) { core_.remove_participants(n); }
  std::int64_t participant_count() const noexcept { return core_.participant_count(); }
  std::int64_t participants_remaining() const noexcept { return core_.participants_remaining(); }
  std::int64_t current_phase_number() const noexcept { return core_.current_phase_number(); }

  /// Arrives; completes (with the phase number) when every participant has arrived. Canceled
  /// (arrival withdrawn) if token is canceled first.
  task<std::int64_t> arrive_and_wait_async(const cancellation_token& token = {});

 private:
  detail::barrier_core core_;
};

}  // namespace tpl
