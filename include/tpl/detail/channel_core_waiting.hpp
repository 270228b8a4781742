// tpl/detail/channel_core_waiting.hpp — channel_core's general paths (internal; included by
// channel_core.hpp): operations that take the lock, wait, or serve waiters: try_write / try_read
// past their fast paths, start() (an asynchronous operation's attempt, and its queuing), cancel(),
// service() (what a lock-free operation that found someone waiting does under the lock), and the
// locked attempt of each operation.
//
// Invariants:
// - Every decision about a waiting node is made under the lock; exactly one party resolves it,
//   and its continuation is resumed after the lock is released (see channel_waiters.hpp).
// - The gate's waiter count equals the queued nodes, plus nodes announcing themselves in start()
//   (which take their unit back unless they stay queued). Nodes join a queue only in
//   enqueue_locked and leave it only through take_front / unlink.
// - A node does not queue while the other side holds a ring claim that its attempt needs,
//   unless it watched that claim for kChannelClaimWaits rounds: then it queues, marks the gate
//   kStraggler, runs the heavy fence, and serves the channel once more; the claimer's second look
//   after publishing does the rest (see channel_core.hpp's protocol comment and
//   docs/internals.md). kStraggler is set only while a node is counted in the gate.
#pragma once

#include "tpl/detail/channel_core.hpp"

namespace tpl::detail {

template <class T>
inline bool channel_core<T>::try_write(T& item) {
  if (try_write_fast(item)) return true;
  if (plainly_full_fast()) return false;
  return try_write_locked(item);
}

template <class T>
TPL_NOINLINE bool channel_core<T>::try_write_locked(T& item) {
  channel_wake_list wake;
  std::optional<T> dropped;
  write_result r;
  {
    std::lock_guard g(lock_);
    r = write_locked(item, wake, dropped);
  }
  finish(wake, dropped, false, has_mode(kSynchronous));
  // A completed channel refuses the item like a full one (.NET TryWrite returns false and never
  // throws); write_async and wait_to_write_async are the calls that report the completion.
  return r == write_result::written;
}

template <class T>
inline bool channel_core<T>::try_read(std::optional<T>& out) {
  if (try_read_fast(out)) return true;
  if (plainly_empty_fast()) return false;
  return try_read_locked(out);
}

template <class T>
TPL_NOINLINE bool channel_core<T>::try_read_locked(std::optional<T>& out) {
  channel_wake_list wake;
  bool now_done = false;
  read_result r;
  {
    std::lock_guard g(lock_);
    r = read_locked(out, wake, now_done);
  }
  const bool synchronous = has_mode(kSynchronous);
  finish_done(now_done);
  wake.wake_all(synchronous);
  return r == read_result::taken;
}

template <class T>
TPL_NOINLINE bool channel_core<T>::start(channel_op op, channel_node& node, bool may_queue) {
  const bool synchronous = has_mode(kSynchronous);
  int claim_waits = 0;          // times we waited for another thread's claim to finish
  bool queue_anyway = false;    // that thread is slow: queue, and let its second look find us
  for (;;) {
    channel_wake_list wake;
    std::optional<T> dropped;
    bool now_done = false;
    bool resolved_now = true;
    bool pinned = false;
    bool in_progress = false;
    bool fence_and_serve = false;  // queued past a claim in progress (queue_anyway)
    {
      std::lock_guard g(lock_);
      if (node.state == channel_node_state::cancel_requested) {
        node.state = channel_node_state::resolved;
        node.outcome = channel_outcome::failed;
        node.set_error(make_channel_canceled());
      } else {
        // Announce before the attempt (seq_cst, the waiter's half of the Dekker handshake):
        // a lock-free write that claims its slot after this sees us waiting and comes to the
        // lock to serve us once its item is in; a read that frees room after our attempt
        // does the same for a writer. Taken back below unless the node stays queued. Without
        // a ring every operation takes the lock, so there is nobody to announce to: the node
        // is counted only if it is queued (two locked instructions fewer per operation).
        // relaxed: the gate changes only under the lock, which we hold.
        const bool announce = may_queue && (gate_.load(std::memory_order_relaxed) & kLockedMode) == 0;
        if (announce) gate_.fetch_add(kWaitUnit, std::memory_order_seq_cst);
        resolved_now = attempt_locked(op, node, wake, dropped, now_done);
        if (!resolved_now && may_queue) {
          // An item claimed on the ring but not yet published (or, for a write, a slot
          // claimed by a reader but not yet freed): its writer (reader) may have looked at
          // the gate before our announce and then would not serve us. It is a few
          // instructions from done; try again then instead of waiting for it.
          in_progress = claim_in_progress_locked(op);
          if (in_progress && queue_anyway) {
            // Its thread did not finish the claim while we watched (descheduled?). Queue
            // after all: past the heavy fence below, either its publication is visible to
            // our service() or its second look (after publishing) sees us counted in the
            // gate and it serves us (asymmetric Dekker, see asymmetric_fence.hpp).
            in_progress = false;
            fence_and_serve = true;
          }
          if (!in_progress) {
            enqueue_locked(op, node, wake);
            if (!announce && node.state == channel_node_state::queued) gate_count_locked(+1);
            // Counted (announced or just now), so kStraggler stays until this node leaves. relaxed:
            // under the lock; the heavy fence below orders it for the claimer's second look.
            if (fence_and_serve && node.state == channel_node_state::queued)
              gate_.store(gate_.load(std::memory_order_relaxed) | kStraggler, std::memory_order_relaxed);
          }
        }
        if (node.state == channel_node_state::resolved) resolved_now = true;  // misuse reported
        // Lowering the count only sends fewer operations to the lock.
        if (announce && node.state != channel_node_state::queued) gate_count_locked(-1);
      }
      // Once our node is queued, another thread may resume our coroutine, which may drop the
      // last handle: the nodes we still have to wake keep the core alive through this reference.
      if (!resolved_now && !in_progress && (!wake.empty() || fence_and_serve)) {
        add_ref();
        pinned = true;
      }
    }
    if (in_progress) {
      finish(wake, dropped, now_done, synchronous);  // (nothing to do after a failed attempt)
      // Bounded: after kChannelClaimWaits rounds of watching, queue (see queue_anyway).
      if (!wait_for_claim(op) && ++claim_waits >= kChannelClaimWaits) queue_anyway = true;
      continue;
    }
    if (!resolved_now) {
      // Queued: from here on, touch nothing of node, and of the core only through our pin.
      wake.wake_all(synchronous);
      if (fence_and_serve) {
        asymmetric_fence_heavy();
        service();
      }
      if (pinned) release();
      return false;
    }
    finish(wake, dropped, now_done, synchronous);
    return true;
  }
}

template <class T>
inline void channel_core<T>::cancel(channel_op op, channel_node& node) noexcept {
  {
    std::lock_guard g(lock_);
    if (node.state == channel_node_state::idle) {
      node.state = channel_node_state::cancel_requested;  // start() will see it
      return;
    }
    if (node.state != channel_node_state::queued) return;  // already decided
    unlink(queue_of(op), &node);
    node.state = channel_node_state::resolved;
    node.outcome = channel_outcome::failed;
    node.set_error(make_channel_canceled());
  }
  // Always asynchronous: the canceling thread runs cancel() for many registrations, and this
  // callback's registration is reset by the resumed coroutine (which waits for us to return).
  dispatch(node.continuation);
}

template <class T>
inline bool channel_core<T>::claim_in_progress_locked(channel_op op) const noexcept {
  if (ring() == nullptr) return false;
  if (is_read_side(op)) return buffer_size_locked() != 0;
  return op == channel_op::write && ring()->read_in_progress();
}

template <class T>
inline bool channel_core<T>::wait_for_claim(channel_op op) const noexcept {
  for (int i = 0; i < kChannelSpinChecks; ++i) {
    if (is_read_side(op) ? rring()->front_ready() : ring()->has_room()) return true;
    TPL_CPU_RELAX();
  }
  std::this_thread::yield();
  return false;
}

template <class T>
void channel_core<T>::service() {
  channel_wake_list wake;
  bool now_done = false;
  {
    std::lock_guard g(lock_);
    if (!items_.empty()) refill_locked();
    serve_readers_locked(wake);
    if (!read_waiters_.empty() && buffer_has_ready_locked()) wake_waiters_locked(read_waiters_, wake);
    give_room_locked(wake);
    if (completed_ && !done_ && buffer_empty_locked()) now_done = mark_done_locked(wake);
  }
  finish_done(now_done);
  wake.wake_all(has_mode(kSynchronous));
}

template <class T>
inline void channel_core<T>::serve_readers_locked(channel_wake_list& wake) {
  while (!readers_.empty()) {
    auto* r = static_cast<item_node*>(readers_.front());
    if (!pop_buffer_locked(r->item)) return;
    resolve(wake, take_front(readers_), channel_outcome::ok, nullptr);
  }
}

template <class T>
inline void channel_core<T>::give_room_locked(channel_wake_list& wake) {
  while (!writers_.empty()) {
    auto* w = static_cast<item_node*>(writers_.front());
    if (!push_buffer_locked(*w->item)) return;
    w->item.reset();
    resolve(wake, take_front(writers_), channel_outcome::ok, nullptr);
    wake_waiters_locked(read_waiters_, wake);
  }
  if (!write_waiters_.empty() && has_room_locked()) wake_waiters_locked(write_waiters_, wake);
}

template <class T>
inline auto channel_core<T>::write_locked(T& item, channel_wake_list& wake, std::optional<T>& dropped) -> write_result {
  if (completed_) return write_result::closed;
  if (!readers_.empty() && buffer_empty_locked()) {
    // A reader waits and nothing is buffered: hand the item straight over. (With a ring, a
    // reader also waits while the ring's front is being written by a writer that claimed it
    // after the reader queued; the items behind it come first, so this one joins them and the
    // front's writer serves the reader.)
    auto* r = static_cast<item_node*>(take_front(readers_));
    r->item.emplace(std::move(item));
    resolve(wake, r, channel_outcome::ok, nullptr);
    return write_result::written;
  }
  if (capacity_ == 0) return write_result::full;
  if (push_buffer_locked(item)) {
    serve_readers_locked(wake);
    wake_waiters_locked(read_waiters_, wake);
    if (!ring()) count_write_locked();
    return write_result::written;
  }
  switch (full_mode()) {  // full (only a channel without a ring drops)
    case bounded_channel_full_mode::wait:
      return write_result::full;
    case bounded_channel_full_mode::drop_write:
      dropped.emplace(std::move(item));
      return write_result::written;
    case bounded_channel_full_mode::drop_newest:
      dropped.emplace(items_.pop_back());
      items_.push_back(std::move(item));
      return write_result::written;
    case bounded_channel_full_mode::drop_oldest:
      dropped.emplace(items_.pop_front());
      items_.push_back(std::move(item));
      return write_result::written;
  }
  return write_result::full;
}

template <class T>
inline auto channel_core<T>::read_locked(std::optional<T>& out, channel_wake_list& wake, bool& now_done) -> read_result {
  if (pop_buffer_locked(out)) {
    // The room just made goes to the oldest blocked writer.
    give_room_locked(wake);
    if (completed_ && buffer_empty_locked()) now_done = mark_done_locked(wake);
    return read_result::taken;
  }
  if (!writers_.empty() && buffer_empty_locked()) {
    // Rendezvous: take the oldest blocked writer's item.
    auto* w = static_cast<item_node*>(take_front(writers_));
    out.emplace(std::move(*w->item));
    w->item.reset();
    resolve(wake, w, channel_outcome::ok, nullptr);
    return read_result::taken;
  }
  // A completed channel whose last item is still being written is not done yet.
  return completed_ && buffer_empty_locked() ? read_result::closed : read_result::empty;
}

template <class T>
inline bool channel_core<T>::attempt_locked(channel_op op, channel_node& node, channel_wake_list& wake, std::optional<T>& dropped, bool& now_done) {
  auto finish = [&node](channel_outcome outcome, std::exception_ptr error) {
    node.state = channel_node_state::resolved;
    node.outcome = outcome;
    if (error) node.set_error(std::move(error));
    return true;
  };
  switch (op) {
    case channel_op::read:
    case channel_op::next: {
      auto& n = static_cast<item_node&>(node);
      switch (read_locked(n.item, wake, now_done)) {
        case read_result::taken:
          return finish(channel_outcome::ok, nullptr);
        case read_result::closed:
          return finish(channel_outcome::closed, error_locked());
        case read_result::empty:
          return false;
      }
      return false;
    }
    case channel_op::write: {
      auto& n = static_cast<item_node&>(node);
      switch (write_locked(*n.item, wake, dropped)) {
        case write_result::written:
          n.item.reset();
          return finish(channel_outcome::ok, nullptr);
        case write_result::closed:
          return finish(channel_outcome::closed, error_locked());
        case write_result::full:
          return false;
      }
      return false;
    }
    case channel_op::wait_to_read:
      if (buffer_has_ready_locked() || !writers_.empty()) return finish(channel_outcome::ok, nullptr);
      if (completed_ && buffer_empty_locked()) return finish(channel_outcome::closed, error_locked());
      return false;
    case channel_op::wait_to_write:
      if (completed_) return finish(channel_outcome::closed, error_locked());
      if (has_room_locked()) return finish(channel_outcome::ok, nullptr);
      return false;
  }
  return false;
}

template <class T>
inline void channel_core<T>::enqueue_locked(channel_op op, channel_node& node, channel_wake_list& wake) {
  const bool reader_side = is_read_side(op);
  if (reader_side && has_mode(kSingleReader) && (!readers_.empty() || !read_waiters_.empty())) {
    node.state = channel_node_state::resolved;
    node.outcome = channel_outcome::failed;
    node.set_error(make_channel_misuse(
        "tpl: channel: a second read is waiting while another one is pending on a single_reader "
        "channel (single_reader promises at most one reading operation at a time)"));
    return;
  }
  if (!reader_side && has_mode(kSingleWriter) && (!writers_.empty() || !write_waiters_.empty())) {
    node.state = channel_node_state::resolved;
    node.outcome = channel_outcome::failed;
    node.set_error(make_channel_misuse(
        "tpl: channel: a second write is waiting while another one is pending on a single_writer "
        "channel (single_writer promises at most one writing operation at a time)"));
    return;
  }
  node.state = channel_node_state::queued;
  queue_of(op).push_back(&node);  // counted in the gate by start()
  if (capacity_ == 0) {
    // Rendezvous: a waiting reader is room for a writer, a waiting writer an item for a reader.
    if (op == channel_op::read || op == channel_op::next) wake_waiters_locked(write_waiters_, wake);
    if (op == channel_op::write) wake_waiters_locked(read_waiters_, wake);
  }
}

}  // namespace tpl::detail
