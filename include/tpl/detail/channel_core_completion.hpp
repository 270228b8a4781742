// tpl/detail/channel_core_completion.hpp — channel_core's completion (internal; included by
// channel_core.hpp): complete(), the completion task, finishing a drained channel, and the work
// done after the lock is released (item-dropped callback, completion task, wake-ups).
//
// Invariants:
// - completed_ (no more writes) is set once, under the lock, with the gate's kCompleted and the
//   ring's closed bit; queued writers and write waiters are then resolved as closed.
// - done_ (completed and drained) is set once, under the lock, by whoever sees the buffer empty
//   after completion: the completer, a locked read, or service() called by the lock-free reader
//   that took the last item; every queued reader and read waiter is then resolved as closed.
// - The completion error and the completion source no longer change once done_ is set, so they
//   are read after the lock without it.
#pragma once

#include "tpl/detail/channel_core.hpp"

namespace tpl::detail {

template <class T>
inline bool channel_core<T>::try_complete(std::exception_ptr error) {
  // The cold block holds the error: allocated before the lock if there is none yet (acquire:
  // pairs with cold_locked()'s release; a block made meanwhile makes this one spare).
  std::unique_ptr<cold_state> spare;
  if (error && cold_.load(std::memory_order_acquire) == nullptr) spare = std::make_unique<cold_state>();
  channel_wake_list wake;
  bool now_done = false;
  {
    std::lock_guard g(lock_);
    if (completed_) return false;
    if (error) cold_locked(std::move(spare)).error = std::move(error);
    completed_ = true;
    // seq_cst, then the ring's close and the done check below (seq_cst loads): a lock-free
    // reader that took the last item either is seen by the check or sees kCompleted and comes
    // to the lock to finish the channel itself.
    gate_.fetch_or(kCompleted, std::memory_order_seq_cst);
    if (ring()) ring()->close();
    while (!writers_.empty()) resolve(wake, take_front(writers_), channel_outcome::closed, error_locked());
    while (!write_waiters_.empty()) resolve(wake, take_front(write_waiters_), channel_outcome::closed, error_locked());
    if (buffer_empty_locked()) now_done = mark_done_locked(wake);
  }
  const bool synchronous = has_mode(kSynchronous);
  finish_done(now_done);
  wake.wake_all(synchronous);
  return true;
}

template <class T>
inline task<> channel_core<T>::completion() {
  std::lock_guard g(lock_);
  if (!has_completion_locked()) {
    if (done_) {
      // As .NET's channels: an operation_canceled completion error cancels the completion task,
      // any other error faults it.
      const std::exception_ptr& e = error_locked();
      if (!e) return completed_task();
      return is_operation_canceled(e) ? task_canceled_with(e) : task_from_exception(e);
    }
    cold_locked().completion = std::make_unique<task_completion_source<>>(
        has_mode(kSynchronous) ? task_creation_options::none
                               : task_creation_options::run_continuations_asynchronously);
  }
  return cold_locked().completion->get_task();
}

template <class T>
inline bool channel_core<T>::mark_done_locked(channel_wake_list& wake) noexcept {
  done_ = true;
  while (!readers_.empty()) resolve(wake, take_front(readers_), channel_outcome::closed, error_locked());
  while (!read_waiters_.empty()) resolve(wake, take_front(read_waiters_), channel_outcome::closed, error_locked());
  return has_completion_locked();
}

template <class T>
inline void channel_core<T>::finish(channel_wake_list& wake, std::optional<T>& dropped, bool now_done, bool synchronous) {
  struct waker {
    channel_wake_list& wake;
    bool synchronous;
    ~waker() { wake.wake_all(synchronous); }
  } guard{wake, synchronous};
  finish_done(now_done);
  if (dropped) {
    // acquire: pairs with cold_locked()'s release (the constructor's store is published with
    // the core itself). The callback is set by the constructor only.
    const cold_state* c = cold_.load(std::memory_order_acquire);
    if (c != nullptr && c->item_dropped) c->item_dropped(std::move(*dropped));
  }
}

template <class T>
inline void channel_core<T>::finish_done(bool now_done) noexcept {
  if (!now_done) return;
  // The completion source and the error no longer change once done_ is set; now_done means the
  // source exists. acquire: pairs with cold_locked()'s release (we also set done_ under the lock).
  const cold_state* c = cold_.load(std::memory_order_acquire);
  if (c->error && is_operation_canceled(c->error))
    c->completion->try_set_canceled_with(canceled_exception_tag{}, c->error);
  else if (c->error)
    c->completion->try_set_exception(c->error);
  else
    c->completion->try_set_result();
}

}  // namespace tpl::detail
