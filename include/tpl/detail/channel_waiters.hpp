// tpl/detail/channel_waiters.hpp — what a channel's waiting operations are made of (internal):
// the node an operation waits in, the core's FIFO queues of nodes, and the list of nodes to
// resume once the core's lock is released.
//
// Invariants (every one kept under the owning core's lock):
// - A node is in at most one queue, and only while its state is queued.
// - A node is resolved exactly once, by whoever unlinks it (an operation that hands it an item or
//   room, completion, its token's callback, the core's destructor); the resolver sets outcome
//   (and error) and adds it to a wake list, so the continuation runs after the lock is released.
// - A resolved node is in no queue: its prev pointer's storage then holds its error.
// - A wake list touches no core state when it resumes: a resumed coroutine may destroy the channel.
//
// Example (what channel_core does with them):
//   channel_wake_list wake;
//   { std::lock_guard g(lock_); resolve(wake, take_front(readers_), channel_outcome::ok, nullptr); }
//   wake.wake_all(synchronous);
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <utility>

#include "tpl/cancellation.hpp"
#include "tpl/detail/config.hpp"
#include "tpl/detail/trampoline.hpp"

namespace tpl::detail {

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

/// A waiting operation: lives inside the awaiter, in the awaiting coroutine's frame. Two pairs of
/// fields are never needed at once and share their storage, so that an awaiter stays 56 bytes for a
/// small T (g++ gives every co_await of a coroutine its own awaiter in the frame, so a
/// coroutine that reads and writes channels carries several): prev (while queued) with error (once resolved with one; a resolved
/// node is in no queue), and the operation's token (until the awaiter registers with it) with
/// its registration (from then on; a linked registration holds its own reference to the
/// token's state).
struct channel_node {
  channel_node() noexcept : prev(nullptr), token() {}
  channel_node(const channel_node&) = delete;
  channel_node& operator=(const channel_node&) = delete;
  ~channel_node() {
    if (has_error) error.~exception_ptr();
    if (registered)
      registration.~cancellation_registration();
    else
      token.~cancellation_token();
  }

  union {
    channel_node* prev;       ///< while queued (has_error false)
    std::exception_ptr error;  ///< once resolved with an error (has_error true)
  };
  channel_node* next = nullptr;
  std::coroutine_handle<> continuation;
  union {
    cancellation_token token;                 ///< until registered
    cancellation_registration registration;  ///< once registered
  };
  channel_node_state state = channel_node_state::idle;
  channel_outcome outcome = channel_outcome::none;
  bool has_error = false;
  bool registered = false;

  /// Sets the error the operation fails (or, closed, ends) with. The node is in no queue.
  void set_error(std::exception_ptr e) noexcept {
    if (has_error) {
      error = std::move(e);
    } else {
      ::new (static_cast<void*>(&error)) std::exception_ptr(std::move(e));  // ends prev's lifetime
      has_error = true;
    }
  }
  /// The error, or null.
  std::exception_ptr error_or_null() const noexcept { return has_error ? error : std::exception_ptr(); }

  /// Registers fn with the token (if it can be canceled): from then on the node holds the
  /// registration instead of the token. May throw (allocation); the node is unchanged then.
  template <class F>
  void register_with_token(F&& fn) {
    cancellation_registration r = token.register_callback(static_cast<F&&>(fn));
    token.~cancellation_token();  // the linked registration keeps the state alive
    ::new (static_cast<void*>(&registration)) cancellation_registration(std::move(r));
    registered = true;
  }
  /// Waits for the token callback if it is running elsewhere, and unregisters it.
  void reset_registration() noexcept {
    if (registered && registration.active()) registration.reset();
  }
};

/// A node that carries an item: a blocked reader receives one, a blocked writer holds one.
template <class T>
struct channel_item_node : channel_node {
  std::optional<T> item;
};

/// An intrusive FIFO of nodes (guarded by the core's lock): a circular doubly linked list, so the
/// queue is one pointer (a channel has four, and a program may have a million channels) and removal
/// from the middle (cancellation) is O(1).
class channel_node_queue {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  channel_node* front() const noexcept { return head_; }
  void push_back(channel_node* n) noexcept {
    if (head_ == nullptr) {
      n->prev = n->next = n;
      head_ = n;
      return;
    }
    channel_node* tail = head_->prev;
    n->prev = tail;
    n->next = head_;
    tail->next = n;
    head_->prev = n;
  }
  channel_node* pop_front() noexcept {
    channel_node* n = head_;
    remove(n);
    return n;
  }
  void remove(channel_node* n) noexcept {
    if (n->next == n) {
      head_ = nullptr;
    } else {
      n->prev->next = n->next;
      n->next->prev = n->prev;
      if (head_ == n) head_ = n->next;
    }
    n->prev = n->next = nullptr;
  }
  /// The nodes queued: O(their number), for tests (tpl/testing/wait_queues.hpp).
  std::size_t size() const noexcept {
    const channel_node* p = head_;
    if (p == nullptr) return 0;
    std::size_t n = 0;
    do {
      ++n;
      p = p->next;
    } while (p != head_);
    return n;
  }
  bool contains(const channel_node* n) const noexcept {
    const channel_node* p = head_;
    if (p == nullptr) return false;
    do {
      if (p == n) return true;
      p = p->next;
    } while (p != head_);
    return false;
  }

 private:
  channel_node* head_ = nullptr;
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
  void wake_all_slow(bool synchronous) noexcept;  // out of line: the common case inlines

  channel_node* head_ = nullptr;
  channel_node* tail_ = nullptr;
};

}  // namespace tpl::detail
