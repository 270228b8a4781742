// tpl/sync/wait_list.hpp — the waiter queue shared by tpl's synchronization primitives
// (internal: async_mutex, the events, countdown events and barriers build on it).
//
// A primitive keeps its state and an intrusive FIFO of waiters under one small lock. A waiter is
// either a blocked thread (a node on its stack, woken through a futex) or an asynchronous wait (a
// task<> state from the frame pool). Every decision about a waiter (granted, canceled, timed out,
// primitive destroyed) is made under the primitive's lock by unlinking it, so exactly one party
// resolves each waiter; resolving (waking the thread, completing the task) runs outside the lock.
//
//   class my_event : detail::sync_waitable {
//     bool try_unlink(detail::sync_waiter* w) noexcept override {
//       std::lock_guard g(lock_); return waiters_.unlink_if_linked(w); }
//     task<> wait_async(const cancellation_token& t) {
//       auto take = [this](detail::sync_waiter* w, bool may_enqueue) {
//         std::lock_guard g(lock_);
//         if (set_) return true;                    // granted at once
//         if (may_enqueue) waiters_.push_back(w);   // queued: resolved later by set()
//         return false; };
//       return detail::start_async_wait(*this, t, take);
//     }
//   };
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <type_traits>

#include "tpl/cancellation.hpp"
#include "tpl/task.hpp"

namespace tpl::detail {

enum class wait_outcome : std::uint8_t { granted, destroyed };

struct sync_waiter {
  sync_waiter* prev = nullptr;
  sync_waiter* next = nullptr;
  bool linked = false;  // guarded by the owner's lock
  /// A value the owner hands to the waiter with the grant (a barrier's phase, say).
  std::int64_t value = 0;
  /// Set by the owner before a grant to fail the wait with it (a barrier's post-phase error).
  std::exception_ptr error;
  /// Called outside the owner's lock after the owner unlinked the waiter.
  void (*resolve)(sync_waiter*, wait_outcome) noexcept = nullptr;
};

/// An intrusive doubly linked FIFO of waiters. Not synchronized: the owner's lock guards it.
class sync_wait_list {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  sync_waiter* front() const noexcept { return head_; }
  void push_back(sync_waiter* w) noexcept;
  void unlink(sync_waiter* w) noexcept;
  bool unlink_if_linked(sync_waiter* w) noexcept {
    if (!w->linked) return false;
    unlink(w);
    return true;
  }
  sync_waiter* pop_front() noexcept {
    sync_waiter* w = head_;
    if (w != nullptr) unlink(w);
    return w;
  }
  /// Unlinks every waiter and returns them as a chain through `next`, oldest first.
  sync_waiter* take_all() noexcept;
  /// The waiters queued: O(their number), for tests (tpl/testing/wait_queues.hpp).
  std::size_t size() const noexcept {
    std::size_t n = 0;
    for (const sync_waiter* w = head_; w != nullptr; w = w->next) ++n;
    return n;
  }

 private:
  sync_waiter* head_ = nullptr;
  sync_waiter* tail_ = nullptr;
};

/// Resolves a chain returned by take_all() (or built through `next`), in order.
void resolve_chain(sync_waiter* chain, wait_outcome outcome) noexcept;

/// A primitive waiters queue on. try_unlink is called by a waiter that gives up (cancel, timeout):
/// under the owner's lock, it unlinks w if it is still queued (and undoes what w's arrival meant,
/// e.g. a barrier's arrival count) and returns true; false if w was already resolved or is being
/// resolved.
class sync_waitable {
 public:
  virtual bool try_unlink(sync_waiter* w) noexcept = 0;

 protected:
  ~sync_waitable() = default;
};

/// Called by a wait; takes the owner's lock itself. Grants at once (true: w is not queued; the
/// function may set w->value / w->error) or, if may_enqueue, queues w (false). With may_enqueue
/// false it must change nothing unless it grants: asynchronous waits probe first with a node on
/// the stack, so that a wait granted at once allocates nothing.
using take_or_enqueue_fn = bool (*)(void* context, sync_waiter* w, bool may_enqueue);

/// An asynchronous wait: completes when the owner grants it, canceled if token is canceled first,
/// faulted with invalid_operation if the owner is destroyed with the wait queued, or with w->error
/// if the owner set one. A grant at once costs no allocation.
task<> start_async_wait(sync_waitable& owner, const cancellation_token& token, take_or_enqueue_fn take,
                        void* context);
/// As start_async_wait; the task's result is the w->value the owner handed over.
task<std::int64_t> start_async_wait_value(sync_waitable& owner, const cancellation_token& token,
                                          take_or_enqueue_fn take, void* context);

/// A blocking wait (holds a blocking_region while it sleeps). Returns true with *value_out set when
/// granted, false when timeout (steady clock; infinite_timeout waits forever) passes first. Throws
/// operation_canceled if token is canceled first, w->error if the owner set one, invalid_operation
/// if the owner is destroyed with the wait queued.
bool blocking_wait(sync_waitable& owner, std::chrono::nanoseconds timeout, const cancellation_token& token,
                   take_or_enqueue_fn take, void* context, std::int64_t* value_out = nullptr);

template <class F>
task<> start_async_wait(sync_waitable& owner, const cancellation_token& token, F& take) {
  return start_async_wait(
      owner, token, [](void* c, sync_waiter* w, bool q) { return (*static_cast<F*>(c))(w, q); }, &take);
}
template <class F>
task<std::int64_t> start_async_wait_value(sync_waitable& owner, const cancellation_token& token, F& take) {
  return start_async_wait_value(
      owner, token, [](void* c, sync_waiter* w, bool q) { return (*static_cast<F*>(c))(w, q); }, &take);
}

template <class F>
bool blocking_wait(sync_waitable& owner, std::chrono::nanoseconds timeout, const cancellation_token& token, F& take,
                   std::int64_t* value_out = nullptr) {
  return blocking_wait(
      owner, timeout, token, [](void* c, sync_waiter* w, bool q) { return (*static_cast<F*>(c))(w, q); }, &take, value_out);
}

}  // namespace tpl::detail
