// tpl/detail/channel_core.hpp — the shared state behind tpl::channel<T>: a ring buffer of items,
// four FIFO queues of waiting operations and the completion state, all under one spin lock
// (internal; the public face is tpl/channel.hpp).
//
// Protocol. Every decision about a waiting operation (handed an item, given room, completed,
// canceled, channel destroyed) is made under the lock by unlinking its node and marking it
// resolved, so exactly one party resolves each node; the node's continuation is then resumed
// outside the lock. The node lives in the awaiting coroutine's frame (inside the awaiter), so
// neither the synchronous nor the waiting path allocates.
//
// Cancellation. The token callback only ever takes the lock and, if the node is still queued,
// unlinks it. A node is registered with its token before it is queued; a callback that runs before
// the node is queued leaves a mark that the queuing code sees under the lock. Whoever resolves a
// node other than its own callback resets the registration before resuming the coroutine (waiting
// for a callback running on another thread), so a callback never touches a core that is gone.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "tpl/cancellation.hpp"
#include "tpl/detail/config.hpp"
#include "tpl/detail/spin_lock.hpp"
#include "tpl/detail/task_state.hpp"
#include "tpl/detail/trampoline.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/task_completion_source.hpp"

namespace tpl {

/// What a bounded channel does with a write when it is full (.NET BoundedChannelFullMode).
enum class bounded_channel_full_mode : std::uint8_t {
  wait,         ///< the write waits for room (try_write returns false)
  drop_newest,  ///< the newest item in the channel is dropped to make room
  drop_oldest,  ///< the oldest item in the channel is dropped to make room
  drop_write,   ///< the item being written is dropped (the write still reports success)
};

namespace detail {

/// Capacity of an unbounded channel.
inline constexpr std::size_t kUnboundedChannelCapacity = std::numeric_limits<std::size_t>::max();
/// First allocation of a channel's ring buffer, in items (it doubles from there as needed).
inline constexpr std::size_t kChannelRingInitialSlots = 16;

enum class channel_op : std::uint8_t { read, next, write, wait_to_read, wait_to_write };

/// Where a waiting node is, or how it ended (guarded by the core's lock once it was started).
enum class channel_node_state : std::uint8_t {
  idle,              ///< not started
  queued,            ///< in one of the core's queues
  cancel_requested,  ///< its token fired before it was queued
  resolved,          ///< outcome is final; whoever set it resumes the coroutine
};

/// How an operation ended.
enum class channel_outcome : std::uint8_t {
  none,
  ok,      ///< item read / written, or wait_to_* returned true
  closed,  ///< the channel is completed (error: the completion error, may be null)
  failed,  ///< rethrow error as is (canceled, misuse, channel destroyed)
};

[[noreturn]] void throw_channel_closed(const std::exception_ptr& completion_error);
[[noreturn]] void throw_channel_misuse(const char* what);
std::exception_ptr make_channel_canceled();
std::exception_ptr make_channel_misuse(const char* what);
std::exception_ptr make_channel_destroyed();
std::exception_ptr make_channel_complete_twice();
void check_channel_capacity(std::ptrdiff_t capacity, bounded_channel_full_mode mode);

/// A waiting operation: lives inside the awaiter, in the awaiting coroutine's frame.
struct channel_node {
  channel_node* prev = nullptr;
  channel_node* next = nullptr;
  std::coroutine_handle<> continuation;
  cancellation_registration registration;
  std::exception_ptr error;
  channel_node_state state = channel_node_state::idle;
  channel_outcome outcome = channel_outcome::none;
};

/// A node that carries an item: a blocked reader receives one, a blocked writer holds one.
template <class T>
struct channel_item_node : channel_node {
  std::optional<T> item;
};

/// An intrusive FIFO of nodes (guarded by the core's lock).
class channel_node_queue {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  void push_back(channel_node* n) noexcept {
    n->prev = tail_;
    n->next = nullptr;
    if (tail_ != nullptr)
      tail_->next = n;
    else
      head_ = n;
    tail_ = n;
  }
  channel_node* pop_front() noexcept {
    channel_node* n = head_;
    remove(n);
    return n;
  }
  void remove(channel_node* n) noexcept {
    if (n->prev != nullptr)
      n->prev->next = n->next;
    else
      head_ = n->next;
    if (n->next != nullptr)
      n->next->prev = n->prev;
    else
      tail_ = n->prev;
    n->prev = n->next = nullptr;
  }
  bool contains(const channel_node* n) const noexcept {
    for (const channel_node* p = head_; p != nullptr; p = p->next)
      if (p == n) return true;
    return false;
  }

 private:
  channel_node* head_ = nullptr;
  channel_node* tail_ = nullptr;
};

/// Resolved nodes to resume once the lock is released, in the order they were resolved. Links
/// through channel_node::next (a node is out of every queue once resolved).
class channel_wake_list {
 public:
  void add(channel_node* n) noexcept {
    n->next = nullptr;
    if (tail_ != nullptr)
      tail_->next = n;
    else
      head_ = n;
    tail_ = n;
  }
  bool empty() const noexcept { return head_ == nullptr; }
  /// Resumes every node: asynchronously (the current scheduler / default pool) unless the channel
  /// allows synchronous continuations. Touches no core state: a resumed coroutine may destroy the
  /// channel.
  void wake_all(bool synchronous) noexcept {
    if (head_ != nullptr) wake_all_slow(synchronous);  // the common case, nobody to wake, inline
  }

 private:
  TPL_NOINLINE void wake_all_slow(bool synchronous) noexcept {
    channel_node* n = head_;
    head_ = tail_ = nullptr;
    while (n != nullptr) {
      channel_node* next = n->next;  // read before resuming: the resumed frame may free n
      // Waits for the node's cancellation callback if it is running elsewhere: after this it can
      // no longer touch the core (which the resumed coroutine may destroy).
      if (n->registration.active()) n->registration.reset();
      if (synchronous)
        resume_inline(n->continuation);
      else
        dispatch(n->continuation);
      n = next;
    }
  }

  channel_node* head_ = nullptr;
  channel_node* tail_ = nullptr;
};

/// A growable ring buffer (power-of-two slots). After it has grown to the channel's working size
/// it never allocates again.
template <class T>
class channel_ring {
 public:
  channel_ring() noexcept = default;
  channel_ring(const channel_ring&) = delete;
  channel_ring& operator=(const channel_ring&) = delete;
  ~channel_ring() {
    while (size_ != 0) (void)pop_front();
    if (slots_ != nullptr) std::allocator<T>().deallocate(slots_, mask_ + 1);
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T& front() noexcept { return slots_[head_]; }

  void push_back(T&& v) {
    if (size_ == capacity()) grow();
    ::new (static_cast<void*>(slots_ + ((head_ + size_) & mask_))) T(std::move(v));
    ++size_;
  }
  T pop_front() noexcept {
    T& slot = slots_[head_];
    T v(std::move(slot));
    slot.~T();
    head_ = (head_ + 1) & mask_;
    --size_;
    return v;
  }
  T pop_back() noexcept {
    T& slot = slots_[(head_ + size_ - 1) & mask_];
    T v(std::move(slot));
    slot.~T();
    --size_;
    return v;
  }

 private:
  std::size_t capacity() const noexcept { return slots_ == nullptr ? 0 : mask_ + 1; }
  TPL_NOINLINE void grow() {  // out of line, so push_back inlines into the fast paths
    const std::size_t new_capacity = slots_ == nullptr ? kChannelRingInitialSlots : 2 * capacity();
    T* fresh = std::allocator<T>().allocate(new_capacity);
    for (std::size_t i = 0; i < size_; ++i) {
      T& slot = slots_[(head_ + i) & mask_];
      ::new (static_cast<void*>(fresh + i)) T(std::move(slot));
      slot.~T();
    }
    if (slots_ != nullptr) std::allocator<T>().deallocate(slots_, capacity());
    slots_ = fresh;
    mask_ = new_capacity - 1;
    head_ = 0;
  }

  T* slots_ = nullptr;
  std::size_t mask_ = 0;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

struct channel_settings {
  std::size_t capacity = kUnboundedChannelCapacity;  ///< 0: rendezvous (unbuffered)
  bounded_channel_full_mode full_mode = bounded_channel_full_mode::wait;
  bool single_reader = false;
  bool single_writer = false;
  bool synchronous_continuations = false;
};

template <class T>
class channel_core final : public pooled_allocation {
 public:
  using item_node = channel_item_node<T>;

  channel_core(channel_settings settings, std::function<void(T)> item_dropped) : settings_(settings) {
    // Kept out of line: most channels have no callback, and the core stays small (a seed 001 chain
    // makes a million channels).
    if (item_dropped) item_dropped_ = std::make_unique<std::function<void(T)>>(std::move(item_dropped));
  }
  channel_core(const channel_core&) = delete;
  channel_core& operator=(const channel_core&) = delete;

  /// Nodes still queued fail with channel_closed ("destroyed"); items still buffered are destroyed.
  ~channel_core() {
    channel_wake_list wake;
    {
      std::lock_guard g(lock_);
      for (channel_node_queue* q : {&readers_, &writers_, &read_waiters_, &write_waiters_})
        while (!q->empty()) resolve(wake, take_front(*q), channel_outcome::failed, make_channel_destroyed());
    }
    wake.wake_all(false);
    if (completion_ && !done_) completion_->try_set_exception(make_channel_destroyed());
  }

  // relaxed: a new handle is copied from a live one, which keeps the count above zero.
  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    // acq_rel: the last owner must see every other owner's writes before destroying the core.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  const channel_settings& settings() const noexcept { return settings_; }

  // ---- writer side ---------------------------------------------------------------------------

  /// The common case of a busy channel, in as few instructions as possible: room in the buffer,
  /// nobody waiting, not completed. Writes item and returns true; otherwise touches nothing and
  /// returns false (the caller takes the general path, which handles every other case).
  bool try_write_fast(T& item) {
    std::lock_guard g(lock_);
    // Nobody waits at all: with room in the buffer no writer can be waiting either.
    if (completed_ || waiting_ != 0 || items_.size() >= settings_.capacity) return false;
    items_.push_back(std::move(item));
    return true;
  }

  /// Writes item (moved from only on success). False if the channel is full (wait mode) or, for a
  /// rendezvous channel, no reader is waiting. Throws channel_closed once completed.
  bool try_write(T& item) {
    if (try_write_fast(item)) return true;
    channel_wake_list wake;
    std::optional<T> dropped;
    write_result r;
    std::exception_ptr closed_error;
    {
      std::lock_guard g(lock_);
      r = write_locked(item, wake, dropped);
      if (r == write_result::closed) closed_error = error_;
    }
    finish(wake, dropped, false, settings_.synchronous_continuations);
    if (r == write_result::closed) throw_channel_closed(closed_error);
    return r == write_result::written;
  }

  bool try_complete(std::exception_ptr error) noexcept {
    channel_wake_list wake;
    bool now_done = false;
    {
      std::lock_guard g(lock_);
      if (completed_) return false;
      completed_ = true;
      error_ = std::move(error);
      while (!writers_.empty()) resolve(wake, take_front(writers_), channel_outcome::closed, error_);
      while (!write_waiters_.empty()) resolve(wake, take_front(write_waiters_), channel_outcome::closed, error_);
      if (items_.empty()) now_done = mark_done_locked(wake);
    }
    const bool synchronous = settings_.synchronous_continuations;
    finish_done(now_done);
    wake.wake_all(synchronous);
    return true;
  }

  // ---- reader side ---------------------------------------------------------------------------

  /// The reading twin of try_write_fast: an item is buffered, no writer waits for room, and it is
  /// not the last item of a completed channel (taking that one finishes the channel). Takes the
  /// oldest item into out and returns true; otherwise returns false.
  bool try_read_fast(std::optional<T>& out) {
    std::lock_guard g(lock_);
    // Nobody waits at all: with an item buffered no reader can be waiting either.
    if (waiting_ != 0 || items_.size() <= static_cast<std::size_t>(completed_)) return false;
    out.emplace(items_.pop_front());
    return true;
  }

  /// Takes the oldest item into out. False if none is there (or the channel is done).
  bool try_read(std::optional<T>& out) {
    if (try_read_fast(out)) return true;
    channel_wake_list wake;
    bool now_done = false;
    read_result r;
    {
      std::lock_guard g(lock_);
      r = read_locked(out, wake, now_done);
    }
    const bool synchronous = settings_.synchronous_continuations;
    finish_done(now_done);
    wake.wake_all(synchronous);
    return r == read_result::taken;
  }

  template <class F>
  bool peek(F&& copy_out) {
    std::lock_guard g(lock_);
    if (items_.empty()) return false;
    copy_out(static_cast<const T&>(items_.front()));
    return true;
  }

  std::size_t count() const noexcept {
    std::lock_guard g(lock_);
    return items_.size();
  }

  task<> completion() {
    std::lock_guard g(lock_);
    if (!completion_) {
      if (done_) return error_ ? task_from_exception(error_) : completed_task();
      completion_.emplace(settings_.synchronous_continuations
                              ? task_creation_options::none
                              : task_creation_options::run_continuations_asynchronously);
    }
    return completion_->get_task();
  }

  // ---- asynchronous operations ---------------------------------------------------------------

  /// Runs op for node under the lock. Returns true if the node is resolved now (its outcome is
  /// set; the caller continues without suspending). Otherwise, if may_queue, the node is queued
  /// (it will be resolved and resumed later) and false is returned; if not, nothing happened.
  bool start(channel_op op, channel_node& node, bool may_queue) {
    channel_wake_list wake;
    std::optional<T> dropped;
    bool now_done = false;
    bool resolved_now = true;
    bool pinned = false;
    const bool synchronous = settings_.synchronous_continuations;
    {
      std::lock_guard g(lock_);
      if (node.state == channel_node_state::cancel_requested) {
        node.state = channel_node_state::resolved;
        node.outcome = channel_outcome::failed;
        node.error = make_channel_canceled();
      } else {
        resolved_now = attempt_locked(op, node, wake, dropped, now_done);
        if (!resolved_now && may_queue) enqueue_locked(op, node, wake);
        if (node.state == channel_node_state::resolved) resolved_now = true;  // misuse reported
      }
      // Once our node is queued, another thread may resume our coroutine, which may drop the last
      // handle: the nodes we still have to wake keep the core alive through this reference.
      if (!resolved_now && !wake.empty()) {
        add_ref();
        pinned = true;
      }
    }
    if (!resolved_now) {
      // Queued: from here on, touch nothing of the core or of node.
      wake.wake_all(synchronous);
      if (pinned) release();
      return false;
    }
    finish(wake, dropped, now_done, synchronous);
    return true;
  }

  /// The token callback of a started node.
  void cancel(channel_op op, channel_node& node) noexcept {
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
      node.error = make_channel_canceled();
    }
    // Always asynchronous: the canceling thread runs cancel() for many registrations, and this
    // callback's registration is reset by the resumed coroutine (which waits for us to return).
    dispatch(node.continuation);
  }

 private:
  enum class write_result { written, full, closed };
  enum class read_result { taken, empty, closed };

  // Nodes leave the four queues only through these two (and join them only in enqueue_locked),
  // which keeps waiting_, the fast paths' test, exact.
  channel_node* take_front(channel_node_queue& q) noexcept {
    --waiting_;
    return q.pop_front();
  }
  void unlink(channel_node_queue& q, channel_node* n) noexcept {
    --waiting_;
    q.remove(n);
  }

  static void resolve(channel_wake_list& wake, channel_node* n, channel_outcome outcome,
                      std::exception_ptr error) noexcept {
    n->state = channel_node_state::resolved;
    n->outcome = outcome;
    if (error) n->error = std::move(error);  // skips an out-of-line exception_ptr assignment
    wake.add(n);
  }

  channel_node_queue& queue_of(channel_op op) noexcept {
    switch (op) {
      case channel_op::read:
      case channel_op::next:
        return readers_;
      case channel_op::write:
        return writers_;
      case channel_op::wait_to_read:
        return read_waiters_;
      case channel_op::wait_to_write:
        break;
    }
    return write_waiters_;
  }

  bool has_room_locked() const noexcept {
    if (settings_.capacity == 0) return !readers_.empty();
    return items_.size() < settings_.capacity || settings_.full_mode != bounded_channel_full_mode::wait;
  }

  void wake_waiters_locked(channel_node_queue& q, channel_wake_list& wake) noexcept {
    while (!q.empty()) resolve(wake, take_front(q), channel_outcome::ok, nullptr);
  }

  write_result write_locked(T& item, channel_wake_list& wake, std::optional<T>& dropped) {
    if (completed_) return write_result::closed;
    if (!readers_.empty()) {
      // A reader waits, so the buffer is empty: hand the item straight over.
      auto* r = static_cast<item_node*>(take_front(readers_));
      r->item.emplace(std::move(item));
      resolve(wake, r, channel_outcome::ok, nullptr);
      return write_result::written;
    }
    if (settings_.capacity == 0) return write_result::full;
    if (items_.size() < settings_.capacity) {
      items_.push_back(std::move(item));
      wake_waiters_locked(read_waiters_, wake);
      return write_result::written;
    }
    switch (settings_.full_mode) {
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

  read_result read_locked(std::optional<T>& out, channel_wake_list& wake, bool& now_done) {
    if (!items_.empty()) {
      out.emplace(items_.pop_front());
      if (!writers_.empty()) {
        // The room just made goes to the oldest blocked writer.
        auto* w = static_cast<item_node*>(take_front(writers_));
        items_.push_back(std::move(*w->item));
        w->item.reset();
        resolve(wake, w, channel_outcome::ok, nullptr);
      } else {
        wake_waiters_locked(write_waiters_, wake);
      }
      if (completed_ && items_.empty()) now_done = mark_done_locked(wake);
      return read_result::taken;
    }
    if (!writers_.empty()) {
      // Rendezvous: take the item from the oldest blocked writer.
      auto* w = static_cast<item_node*>(take_front(writers_));
      out.emplace(std::move(*w->item));
      w->item.reset();
      resolve(wake, w, channel_outcome::ok, nullptr);
      return read_result::taken;
    }
    return completed_ ? read_result::closed : read_result::empty;
  }

  /// The synchronous attempt of op. True if node is resolved.
  bool attempt_locked(channel_op op, channel_node& node, channel_wake_list& wake, std::optional<T>& dropped,
                      bool& now_done) {
    auto finish = [&node](channel_outcome outcome, std::exception_ptr error) {
      node.state = channel_node_state::resolved;
      node.outcome = outcome;
      if (error) node.error = std::move(error);
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
            return finish(channel_outcome::closed, error_);
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
            return finish(channel_outcome::closed, error_);
          case write_result::full:
            return false;
        }
        return false;
      }
      case channel_op::wait_to_read:
        if (!items_.empty() || !writers_.empty()) return finish(channel_outcome::ok, nullptr);
        if (completed_) return finish(channel_outcome::closed, error_);
        return false;
      case channel_op::wait_to_write:
        if (completed_) return finish(channel_outcome::closed, error_);
        if (has_room_locked()) return finish(channel_outcome::ok, nullptr);
        return false;
    }
    return false;
  }

  void enqueue_locked(channel_op op, channel_node& node, channel_wake_list& wake) {
    const bool reader_side = op != channel_op::write && op != channel_op::wait_to_write;
    if (reader_side && settings_.single_reader && (!readers_.empty() || !read_waiters_.empty())) {
      node.state = channel_node_state::resolved;
      node.outcome = channel_outcome::failed;
      node.error = make_channel_misuse(
          "tpl: channel: a second read is waiting while another one is pending on a single_reader "
          "channel (single_reader promises at most one reading operation at a time)");
      return;
    }
    if (!reader_side && settings_.single_writer && (!writers_.empty() || !write_waiters_.empty())) {
      node.state = channel_node_state::resolved;
      node.outcome = channel_outcome::failed;
      node.error = make_channel_misuse(
          "tpl: channel: a second write is waiting while another one is pending on a single_writer "
          "channel (single_writer promises at most one writing operation at a time)");
      return;
    }
    node.state = channel_node_state::queued;
    queue_of(op).push_back(&node);
    ++waiting_;
    if (settings_.capacity == 0) {
      // Rendezvous: a waiting reader is room for a writer, a waiting writer an item for a reader.
      if (op == channel_op::read || op == channel_op::next) wake_waiters_locked(write_waiters_, wake);
      if (op == channel_op::write) wake_waiters_locked(read_waiters_, wake);
    }
  }

  /// Completed and drained: every reader learns it. Returns true (the completion task is due).
  bool mark_done_locked(channel_wake_list& wake) noexcept {
    done_ = true;
    while (!readers_.empty()) resolve(wake, take_front(readers_), channel_outcome::closed, error_);
    while (!read_waiters_.empty()) resolve(wake, take_front(read_waiters_), channel_outcome::closed, error_);
    return completion_.has_value();
  }

  /// After the lock: the item-dropped callback, the completion task, then the wake-ups, last
  /// because a resumed coroutine may destroy the channel (synchronous: read before any of them).
  void finish(channel_wake_list& wake, std::optional<T>& dropped, bool now_done, bool synchronous) {
    struct waker {
      channel_wake_list& wake;
      bool synchronous;
      ~waker() { wake.wake_all(synchronous); }
    } guard{wake, synchronous};
    finish_done(now_done);
    if (dropped && item_dropped_ != nullptr) (*item_dropped_)(std::move(*dropped));
  }

  void finish_done(bool now_done) noexcept {
    if (!now_done) return;
    // completion_ and error_ no longer change once done_ is set.
    if (error_)
      completion_->try_set_exception(error_);
    else
      completion_->try_set_result();
  }

  // What the fast paths touch comes first and together (48 bytes: one cache line when the core
  // starts at a multiple of 64, two at most), so a read or write moves as few lines between
  // the producer's and the consumer's cores as possible.
  mutable spin_lock lock_;
  bool completed_ = false;     // no more writes
  bool done_ = false;          // completed and drained
  std::uint32_t waiting_ = 0;  // nodes in the four queues below
  channel_ring<T> items_;
  const channel_settings settings_;  // capacity first: read by the fast paths
  std::atomic<std::uint32_t> refs_{1};
  std::exception_ptr error_;
  channel_node_queue readers_;        // read_async / next_async, FIFO
  channel_node_queue writers_;        // write_async blocked with their item, FIFO
  channel_node_queue read_waiters_;   // wait_to_read_async
  channel_node_queue write_waiters_;  // wait_to_write_async
  std::optional<task_completion_source<>> completion_;
  std::unique_ptr<std::function<void(T)>> item_dropped_;
};

}  // namespace detail
}  // namespace tpl
