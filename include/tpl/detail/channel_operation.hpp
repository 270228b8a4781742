// tpl/detail/channel_operation.hpp — one channel operation as an awaitable (internal; the public
// face is tpl/channel.hpp, which names these types in its readers' and writers' signatures).
//
// Provides channel_operation<T, Op> (read_async, next_async, write_async, wait_to_read_async and
// wait_to_write_async all return one) and channel_handle<T>, the reference-counted pointer to a
// channel_core that channel, channel_reader and channel_writer share.
//
//   tpl::task<int> first(tpl::channel_reader<int> r) {
//     co_return co_await r.read_async();  // a channel_operation<int, read>, awaited where it is made
//   }
//
// Invariants: an operation is awaited at most once, as an rvalue, while the channel it names is
// alive (it holds no reference to the channel); its waiting node is the operation itself, so it
// lives in the awaiting coroutine's frame and neither the synchronous nor the waiting path
// allocates; moving an operation is allowed only before it is awaited.
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "tpl/cancellation.hpp"
#include "tpl/detail/channel_core.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/task.hpp"

namespace tpl {
namespace detail {

template <channel_op Op>
inline constexpr bool channel_op_carries_item = Op == channel_op::read || Op == channel_op::next ||
                                                Op == channel_op::write;

template <class T, channel_op Op>
using channel_await_result_t = std::conditional_t<
    Op == channel_op::read, T,
    std::conditional_t<Op == channel_op::next, std::optional<T>,
                       std::conditional_t<Op == channel_op::write, void, bool>>>;

/// A ref-counted pointer to a channel_core: what channel, channel_reader and channel_writer share.
template <class T>
class channel_handle {
 public:
  channel_handle() noexcept = default;
  explicit channel_handle(channel_core<T>* c) noexcept : core_(c) {}
  channel_handle(const channel_handle& o) noexcept : core_(o.core_) {
    if (core_ != nullptr) core_->add_ref();
  }
  channel_handle(channel_handle&& o) noexcept : core_(std::exchange(o.core_, nullptr)) {}
  channel_handle& operator=(channel_handle o) noexcept {
    std::swap(core_, o.core_);
    return *this;
  }
  ~channel_handle() {
    if (core_ != nullptr) core_->release();
  }
  channel_core<T>* get() const noexcept { return core_; }
  channel_core<T>& checked() const {
    if (TPL_UNLIKELY(core_ == nullptr)) throw_channel_misuse("tpl: channel: empty handle");
    return *core_;
  }
  channel_core<T>* share() const noexcept {
    core_->add_ref();
    return core_;
  }

 private:
  channel_core<T>* core_ = nullptr;
};

}  // namespace detail

/// One channel operation (read_async, next_async, write_async, wait_to_read_async,
/// wait_to_write_async): an awaitable that starts when awaited, may be awaited once, and needs no
/// allocation. It is awaited where it is made, `co_await r.read_async()`: it does not hold the
/// channel, so `co_await` takes it only as an rvalue, and `auto op = r.read_async(); co_await op;`
/// does not compile (the channel could be gone by then). To keep an operation for later, make it a
/// task (`as_task()`, which starts it at once); `co_await std::move(op)` states that the channel
/// is still alive.
template <class T, detail::channel_op Op>
class [[nodiscard]] channel_operation
    : private std::conditional_t<detail::channel_op_carries_item<Op>, detail::channel_item_node<T>,
                                 detail::channel_node> {
  using node_t = std::conditional_t<detail::channel_op_carries_item<Op>, detail::channel_item_node<T>,
                                    detail::channel_node>;

 public:
  using result_type = detail::channel_await_result_t<T, Op>;

  channel_operation(detail::channel_core<T>* core, cancellation_token token) noexcept : core_(core) {
    this->token = std::move(token);
  }
  template <class U>
  channel_operation(detail::channel_core<T>* core, cancellation_token token, U&& item) : core_(core) {
    this->token = std::move(token);
    this->item.emplace(static_cast<U&&>(item));
  }
  /// Moves an operation that was not awaited yet (to pass it on, e.g. into as_task()).
  channel_operation(channel_operation&& o) : node_t(), core_(o.core_) {
    if (o.state != detail::channel_node_state::idle || o.core_ == nullptr)
      detail::throw_channel_misuse("tpl: channel operation moved after it was awaited");
    this->token = o.token;  // an operation not awaited yet holds its token, not a registration
    if constexpr (detail::channel_op_carries_item<Op>) this->item = std::move(o.item);
    o.core_ = nullptr;
  }
  channel_operation(const channel_operation&) = delete;
  channel_operation& operator=(const channel_operation&) = delete;
  channel_operation& operator=(channel_operation&&) = delete;
  ~channel_operation() = default;

  /// What `co_await` uses: it refers to the operation, which the awaiting coroutine's frame keeps
  /// (as the full-expression's temporary, or the variable named in std::move) until it resumes.
  class awaiter {
   public:
    explicit awaiter(channel_operation& op) noexcept : op_(op) {}
    bool await_ready() { return op_.ready(); }
    bool await_suspend(std::coroutine_handle<> h) { return op_.suspend(h); }
    result_type await_resume() { return op_.resume(); }

   private:
    channel_operation& op_;
  };
  /// Rvalues only: see the class comment.
  awaiter operator co_await() && noexcept { return awaiter(*this); }

  /// Runs the operation as a task (one coroutine frame): for when_any, continue_with, blocking
  /// waits, or to await it later. The task starts the operation at once (tasks start hot), so it
  /// is made while the channel is alive; a waiting operation still fails with channel_closed when
  /// the channel's last handle goes.
  task<result_type> as_task() && { return run_as_task(std::move(*this)); }

 private:
  static task<result_type> run_as_task(channel_operation op) { co_return co_await std::move(op); }

  bool ready() {
    if (TPL_UNLIKELY(core_ == nullptr || this->state != detail::channel_node_state::idle))
      detail::throw_channel_misuse("tpl: a channel operation may be awaited once");
    const bool cancelable = this->token.can_be_canceled();
    if (cancelable && this->token.is_cancellation_requested()) {
      this->state = detail::channel_node_state::resolved;
      this->outcome = detail::channel_outcome::failed;
      this->set_error(detail::make_channel_canceled());
      return true;
    }
    // The busy-pipeline case first (an item or room is there, nobody waits): lock-free on a busy
    // channel's ring, a few instructions under the lock otherwise; no suspension machinery, no
    // token registration. On the ring, a moment's watch for the other side before waiting.
    bool done_fast = try_fast();
    if (!done_fast && core_->spin_for(Op)) done_fast = try_fast();
    if (done_fast) {
      this->state = detail::channel_node_state::resolved;
      this->outcome = detail::channel_outcome::ok;
      if constexpr (Op == detail::channel_op::write) {
        // The write is done; now and then the writer lets its worker's other work run.
        if (core_->capacity() == detail::kUnboundedChannelCapacity && detail::unbounded_write_yields())
          return false;
      }
      return true;
    }
    // Without a token, await_suspend does the general attempt and the queuing under one lock.
    if (!cancelable) return false;
    // Try the synchronous path before paying for a token registration.
    return core_->start(Op, *this, false);
  }

  bool suspend(std::coroutine_handle<> h) {
    if (this->state == detail::channel_node_state::resolved) {
      detail::dispatch_after_others(h);  // written, and yielding (see await_ready)
      return true;
    }
    this->continuation = h;
    if (this->token.can_be_canceled()) {
      detail::channel_core<T>* core = core_;
      detail::channel_node* self = this;
      this->register_with_token([core, self] { core->cancel(Op, *self); });
    }
    // Once start() queued the node, it may be resumed (and *this destroyed) on another thread.
    return !core_->start(Op, *this, true);
  }

  result_type resume() {
    // Waits for our token callback if it is still running elsewhere (it found us decided).
    this->reset_registration();
    switch (this->outcome) {
      case detail::channel_outcome::ok:
        break;
      case detail::channel_outcome::closed:
        if constexpr (Op == detail::channel_op::read || Op == detail::channel_op::write) {
          detail::throw_channel_closed(this->error_or_null());
        } else if constexpr (Op == detail::channel_op::next) {
          if (std::exception_ptr e = this->error_or_null()) std::rethrow_exception(e);
          return std::nullopt;
        } else {
          if (std::exception_ptr e = this->error_or_null()) std::rethrow_exception(e);
          return false;
        }
      case detail::channel_outcome::failed:
      case detail::channel_outcome::none:
        std::rethrow_exception(this->error_or_null());
    }
    if constexpr (Op == detail::channel_op::read) {
      T v(std::move(*this->item));
      this->item.reset();
      return v;
    } else if constexpr (Op == detail::channel_op::next) {
      // Built from the value rather than moved as a whole optional: g++ copies an optional
      // <int64_t> as one 16-byte load, which stalls on the two smaller stores that just made it.
      if (!this->item) return std::nullopt;
      return std::optional<T>(std::in_place, std::move(*this->item));
    } else if constexpr (Op == detail::channel_op::write) {
      return;
    } else {
      return true;
    }
  }

  /// The busy case: an item or room is there and nobody waits (see channel_core's fast paths).
  bool try_fast() {
    if constexpr (Op == detail::channel_op::read || Op == detail::channel_op::next) {
      return core_->try_read_fast(this->item);
    } else if constexpr (Op == detail::channel_op::write) {
      if (!core_->try_write_fast(*this->item)) return false;
      this->item.reset();
      return true;
    } else {
      return core_->wait_ready_fast(Op);  // an item (room) is plainly there: true
    }
  }

  detail::channel_core<T>* core_;
};

template <class T>
using channel_read_operation = channel_operation<T, detail::channel_op::read>;
template <class T>
using channel_next_operation = channel_operation<T, detail::channel_op::next>;
template <class T>
using channel_write_operation = channel_operation<T, detail::channel_op::write>;
template <class T>
using channel_wait_to_read_operation = channel_operation<T, detail::channel_op::wait_to_read>;
template <class T>
using channel_wait_to_write_operation = channel_operation<T, detail::channel_op::wait_to_write>;

}  // namespace tpl
