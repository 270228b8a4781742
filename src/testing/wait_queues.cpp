// tpl::testing::queued_waiters for the synchronization primitives: see tpl/testing/wait_queues.hpp.
// (The channels' counts are templates, in the header; the cancellation count is in
// src/cancellation.cpp, beside the state it reads.)
#include "tpl/testing/wait_queues.hpp"

#include <mutex>

namespace tpl::detail {

std::size_t wait_queue_probe::queued(const manual_reset_event_slim& e) noexcept {
  std::lock_guard g(e.lock_);
  return e.waiters_.size();
}

std::size_t wait_queue_probe::queued(const async_semaphore& s) noexcept {
  std::lock_guard g(s.lock_);
  std::size_t n = 0;
  for (const semaphore_waiter* w = s.head_; w != nullptr; w = w->next) ++n;
  return n;
}

}  // namespace tpl::detail
