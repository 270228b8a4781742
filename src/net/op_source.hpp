// A socket direction's reusable operation (internal): the object a stream socket's receive (or
// send), or a datagram socket's receive_from, waits in, kept in the socket's context and reused
// by the next operation, so that an operation that has to wait returns a source-backed
// value_task and takes no coroutine frame (.NET's Socket keeps an AwaitableSocketAsyncEventArgs
// per direction for the same reason).
//
//   op_source<receive_op>& s = ctx.receive_source();
//   if (s.try_claim()) {                           // else: another operation holds it; use a frame
//     s.op().buffer = buffer;  s.op().received = 0;
//     if (ctx.wait(ctx.reads(), s.begin(), observed, token, s.registration())) return s.waiting();
//     ... finished during the handshake: read s.op(), then s.end_unawaited() ...
//   }
//
// Invariants:
//   - One operation at a time holds the source: try_claim() takes `claimed_` with an exchange and
//     only the winner touches the op, the core or the registration, until it gives the claim back
//     (end_unawaited(), or get_result() once the value_task was awaited). A second operation of the
//     same direction while one is pending finds the source claimed and takes the frame path, whose
//     handshake reports it (kBusy).
//   - The hand-off between the finisher and the awaiter is manual_reset_value_task_source_core's
//     (one atomic word; tests/model_value_task_source_test.cpp). The op's registration in the
//     direction's slot is socket_context's handshake, unchanged (tests/net/net_model_readiness_
//     test.cpp). Exactly one party finishes a waiting op (pending_op.hpp), so the core is completed
//     once per operation; that party chooses, per completion, whether the awaiter runs inline (a
//     readiness handler) or is queued (close(), a cancel callback).
//   - A waiting operation holds a reference to the context (taken in waiting(), once the op is in
//     the slot and before its value_task exists, so before anyone can await it), given back as the
//     last step of get_result(): the socket object may be closed or destroyed meanwhile, and the
//     source lives in the context. The registration is reset (waiting for a cancel callback that is
//     running: it uses the op and the direction) before the core is reset and the claim given back.
//   - A value_task destroyed unawaited (on_abandoned) is awaited by a detached task of its own,
//     so its operation still ends in get_result: the claim and the context reference are given
//     back when the operation ends (data, close(), its token), as for an awaited one. Its outcome
//     is dropped. This is the ordinary await protocol of the core, nothing new between threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "operations.hpp"
#include "socket_engine.hpp"
#include "tpl/cancellation.hpp"
#include "tpl/task.hpp"
#include "tpl/net/socket_error.hpp"
#include "tpl/net/udp_socket.hpp"
#include "tpl/value_task.hpp"
#include "tpl/value_task_source.hpp"

namespace tpl::net::detail {

/// What a finished operation reports to its awaiter: an error (errno or kAborted, kCanceled,
/// kBusy) and its count (bytes received, or sent so far).
struct op_outcome {
  int error = 0;
  std::size_t count = 0;
};

/// A datagram receive's outcome: op_outcome and the sender's address.
struct receive_from_outcome {
  int error = 0;
  std::size_t count = 0;
  socket_address from;
};

template <class Op>
struct op_source_traits;

template <>
struct op_source_traits<receive_op> {
  using result = std::size_t;
  using outcome_type = op_outcome;
  static op_outcome outcome(const receive_op& op) noexcept { return {op.error, op.received}; }
  static std::size_t result_of(const op_outcome& r) {
    if (r.error != 0) throw_op_error(r.error, "receive");
    return r.count;
  }
};

template <>
struct op_source_traits<send_op> {
  using result = void;
  using outcome_type = op_outcome;
  static op_outcome outcome(const send_op& op) noexcept { return {op.error, op.sent}; }
  static void result_of(const op_outcome& r) {
    if (r.error == kCanceled) throw send_canceled(r.count);
    if (r.error != 0) throw_op_error(r.error, "send");
  }
};

template <>
struct op_source_traits<receive_from_op> {
  using result = received_from;
  using outcome_type = receive_from_outcome;
  static receive_from_outcome outcome(const receive_from_op& op) noexcept { return {op.error, op.received, op.from}; }
  static received_from result_of(const receive_from_outcome& r) {
    if (r.error != 0) throw_op_error(r.error, "receive_from");
    return received_from{r.count, to_endpoint(r.from.get(), r.from.length)};
  }
};

template <class Op>
class op_source final : public value_task_source<typename op_source_traits<Op>::result> {
  using traits = op_source_traits<Op>;
  using T = typename traits::result;

 public:
  explicit op_source(readiness_target& owner) noexcept : owner_(&owner) {
    op_.self = this;
    op_.on_finished = &on_finished;
  }
  op_source(const op_source&) = delete;
  op_source& operator=(const op_source&) = delete;

  /// Takes the source for one operation; false if another operation holds it.
  bool try_claim() noexcept {
    // acquire: pairs with the release that gave the claim back, so the previous operation's
    // writes (the core's reset, the op's fields) happen before ours.
    return !claimed_.exchange(true, std::memory_order_acquire);
  }

  /// The claimed operation's own fields (buffer, counts), for the caller to set.
  Op& op() noexcept { return op_; }

  /// The op, its common fields reset, ready for socket_context::wait.
  pending_op& begin() noexcept {
    op_.error = 0;
    // relaxed: the previous operation's cancel callback is unregistered (reset() waited for it)
    // and its claim was handed to us with acquire; the next reader is try_register, under a lock.
    op_.cancel_requested.store(false, std::memory_order_relaxed);
    return op_;
  }
  cancellation_registration& registration() noexcept { return reg_; }

  /// The op waits in its direction's slot: keeps the context alive and names the operation.
  value_task<T> waiting() noexcept {
    owner_->add_ref();
    return value_task<T>(*this, core_.version());
  }

  /// Gives the claim back after an operation that finished without waiting (no value_task named
  /// it; the core was not touched).
  void end_unawaited() noexcept {
    reg_.reset();
    // release: our writes to the op happen before the next claimant's (see try_claim).
    claimed_.store(false, std::memory_order_release);
  }

  /// A value_task of ours destroyed unawaited: a task of its own awaits the operation, so that
  /// get_result still runs when it ends and gives the claim and the context reference back.
  void on_abandoned(std::uint32_t token) noexcept override {
    try {
      static_cast<void>(await_abandoned(*this, token));
    } catch (...) {
      // No memory for its frame: the claim and the reference stay held, the direction takes the
      // frame path from now on, and the context's memory lives until the process ends.
    }
  }

  task_status get_status(std::uint32_t token) const override { return core_.get_status(token); }
  bool on_completed(std::coroutine_handle<> continuation, std::uint32_t token) override {
    return core_.on_completed(continuation, token);
  }
  T get_result(std::uint32_t token) override {
    const typename traits::outcome_type r = core_.get_result(token);
    reg_.reset();  // waits for a cancel callback that is running (it uses the op and the direction)
    core_.reset();
    readiness_target* owner = owner_;
    // release: as in end_unawaited; the core's reset is part of what the next claimant must see.
    claimed_.store(false, std::memory_order_release);
    owner->release();  // may destroy the context, and this source with it: nothing of it after
    return traits::result_of(r);
  }

 private:
  struct bound_op final : Op {
    op_source* self = nullptr;
  };

  // Detached: the returned task is dropped at once and the coroutine ends by itself.
  static task<> await_abandoned(op_source& s, std::uint32_t token) {
    try {
      static_cast<void>(co_await value_task<T>(s, token));
    } catch (...) {
      // Nobody wants the dropped operation's outcome (aborted, canceled or an errno).
    }
  }

  static void on_finished(pending_op* p, bool queued) noexcept {
    auto& op = static_cast<bound_op&>(static_cast<Op&>(*p));
    op_source& s = *op.self;
    // Written by the one party that finishes this operation, before the completion publishes it;
    // read only by that completion (manual_reset_value_task_source_core::signal_completion).
    s.core_.set_run_continuations_asynchronously(queued);
    s.core_.set_result(traits::outcome(op));  // the awaiter may resume (and reuse us) inside
  }

  readiness_target* owner_;
  std::atomic<bool> claimed_{false};
  bound_op op_;
  cancellation_registration reg_;
  manual_reset_value_task_source_core<typename traits::outcome_type> core_;
};

/// A datagram socket's reusable receive (allocated once, when the udp_socket is built: a stream
/// socket's context does not carry it).
struct datagram_sources {
  explicit datagram_sources(readiness_target& owner) noexcept : receive_from(owner) {}
  op_source<receive_from_op> receive_from;
};

}  // namespace tpl::net::detail
