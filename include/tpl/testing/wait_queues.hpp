// tpl/testing/wait_queues.hpp — how many operations are waiting on a channel, a synchronization
// primitive or a running cancellation callback, for tests that must know another thread has come
// to wait before they act. Sleeping "long enough" instead lets a test stop testing the window it
// is about without anyone noticing; a count it can poll turns that into a handshake.
//
//   std::thread reader([&] { got = tpl::sync_wait(ch.reader().read_async()); });
//   while (tpl::testing::queued_waiters(ch.reader()) == 0) std::this_thread::yield();  // bound it
//   ch.writer().try_write(1);  // now certainly hands the item to a queued read
//
// Each count is exact at the instant it is read (under the object's lock; the cancellation count
// is an atomic) and may change at once: a test polls until it reaches the value its handshake
// needs, with a bound. For tests and diagnostics only: a queue is walked, O(its length).
#pragma once

#include <cstddef>

#include "tpl/cancellation.hpp"
#include "tpl/channel.hpp"
#include "tpl/sync/async_semaphore.hpp"
#include "tpl/sync/manual_reset_event_slim.hpp"

namespace tpl {
namespace detail {

/// Reads the private wait queues of the primitives that befriend it (src/testing/wait_queues.cpp).
struct wait_queue_probe {
  static std::size_t queued(const manual_reset_event_slim& e) noexcept;
  static std::size_t queued(const async_semaphore& s) noexcept;
};

}  // namespace detail

namespace testing {

/// Threads blocked in wait() on e (after its spinning, queued for set()).
inline std::size_t queued_waiters(const manual_reset_event_slim& e) noexcept {
  return detail::wait_queue_probe::queued(e);
}

/// Waits queued on s for a count: blocking wait()s and pending wait_async()s alike.
inline std::size_t queued_waiters(const async_semaphore& s) noexcept {
  return detail::wait_queue_probe::queued(s);
}

/// Reader-side operations queued on the channel: read_async, next_async and wait_to_read_async
/// that wait for an item (or completion).
template <class T>
std::size_t queued_waiters(const channel_reader<T>& r) {
  return detail::channel_handle_access<T>::core(r).queued_reader_operations_for_testing();
}

/// Writer-side operations queued on the channel: write_async waiting with its item for room (or,
/// on a rendezvous channel, a reader) and wait_to_write_async.
template <class T>
std::size_t queued_waiters(const channel_writer<T>& w) {
  return detail::channel_handle_access<T>::core(w).queued_writer_operations_for_testing();
}

/// Threads that unregister a callback of token's source (cancellation_registration::reset() or
/// its destructor) while that callback runs on another thread, and so wait for it to return.
/// 0 for a token that cannot be canceled.
std::size_t threads_waiting_for_running_callback(const cancellation_token& token) noexcept;

}  // namespace testing
}  // namespace tpl
