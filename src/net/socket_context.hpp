// One socket's pending operations (internal): .NET's SocketAsyncContext.Unix, reduced to one
// waiting operation per direction. Knows nothing of epoll: the engine calls on_readiness(bits).
//
// The readiness handshake (the reason this file exists). Sockets are registered edge-triggered,
// so the kernel reports "readable" once per change, not while data stays. An operation that tried
// its syscall and got EAGAIN must not register as waiting after the edge that would have woken it
// was already delivered, or it waits for ever with data in the kernel. Each direction (op_queue)
// therefore keeps a sequence number:
//   operation: observed = sequence (acquire); try the syscall; on EAGAIN, lock; if sequence !=
//              observed (an edge came since), unlock and try again; else store itself in the
//              waiting slot; unlock; suspend.
//   handler:   lock; ++sequence; take the waiting operation; unlock; if it took one, try its
//              syscall for it, and on EAGAIN register it again by the same rule.
// The handler's increment and the operation's comparison are under the same lock, so either the
// operation sees the new number (and retries the syscall, which finds what the edge announced) or
// the handler finds the operation waiting (and retries for it). The edge itself comes after the
// kernel queued the data, so a syscall made after the number was read and before the edge sees
// the data. The acquire load keeps the syscall after the read. tests/net/net_model_readiness_
// test.cpp checks this exhaustively, with one operation object reused from one operation to the
// next as op_source.hpp does, and variants that must fail (the number read after the syscall;
// registration without the comparison; registration without looking at `closed`; the object
// reused before its cancel callback is done).
//
// Close, cancel and the descriptor:
//   - close() marks both directions closed and takes their waiting operations (they complete with
//     "aborted", queued to the pool, never run inside close()); a registration after that sees
//     `closed`. Cancel takes the operation out of the slot only if it is still waiting there, so
//     a canceled receive has consumed nothing: what the kernel holds stays for the next receive.
//     If the handler already took it, the handler finishes it (with data) or re-registers it,
//     where the lock makes it see `cancel_requested`.
//   - Every syscall on the descriptor is made inside fd_acquire()/fd_release(); close() sets the
//     closed bit and the last user closes the descriptor, so a number is never reused while a
//     syscall may still be made on it. A use that finds the bit set still counts itself in and
//     out, so the count may reach 0 twice; the released bit makes exactly one party close.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <mutex>  // std::lock_guard

#include "op_source.hpp"
#include "pending_op.hpp"
#include "socket_engine.hpp"
#include "tpl/cancellation.hpp"
#include "tpl/detail/short_lock.hpp"

namespace tpl::net::detail {

/// One direction of one socket: the sequence number, the waiting slot and `closed`.
class op_queue {
 public:
  enum class registration : std::uint8_t { waiting, retry, closed, canceled, busy };

  std::uint32_t observe() const noexcept {
    // acquire: the caller's syscall must not be made before this read (see the file header).
    return sequence_.load(std::memory_order_acquire);
  }
  registration try_register(pending_op* op, std::uint32_t observed) noexcept;
  /// A readiness edge: bumps the sequence and takes the waiting operation, if any.
  pending_op* on_ready() noexcept;
  /// Marks the direction closed; returns the waiting operation, if any.
  pending_op* close() noexcept;
  /// Takes op if it is the waiting one.
  bool cancel(pending_op* op) noexcept;

 private:
  // A few loads and stores under it, never an allocation or a callback (tpl's short_lock: one
  // compare-and-swap to take it, a bounded spin and then a futex sleep when it is held).
  tpl::detail::short_lock lock_;
  std::atomic<std::uint32_t> sequence_{0};  // changed only under lock_
  pending_op* waiting_ = nullptr;
  bool closed_ = false;
};

class socket_context final : public readiness_target {
 public:
  /// Takes ownership of fd (non-blocking already) and attaches it to an engine; on failure closes
  /// fd and throws socket_error.
  static socket_context* create(int fd);

  int fd() const noexcept { return fd_; }
  op_queue& reads() noexcept { return reads_; }
  op_queue& writes() noexcept { return writes_; }
  /// The reusable operations a stream socket's receive and send wait in (op_source.hpp).
  op_source<receive_op>& receive_source() noexcept { return receive_source_; }
  op_source<send_op>& send_source() noexcept { return send_source_; }
  /// A datagram socket's reusable receive: null until enable_datagram_sources(), which the
  /// udp_socket's constructor calls before the socket is shared (so reading the pointer needs no
  /// ordering); always null for other sockets.
  datagram_sources* datagram() noexcept { return datagram_.get(); }
  void enable_datagram_sources() { datagram_ = std::make_unique<datagram_sources>(*this); }

  /// A use of the descriptor: false once close() was called (the caller reports "aborted").
  bool fd_acquire() noexcept;
  void fd_release() noexcept;
  bool is_closed() const noexcept;

  /// Tries op once, guarded; returns done with kAborted after close().
  attempt_result attempt(pending_op& op) noexcept;

  /// After an attempt of op found no data/room (`observed`: q.observe() read before that
  /// attempt): runs the handshake until op is done (false: the caller continues at once) or waits
  /// (true: op.continuation will be resumed). Registers the token's callback first.
  bool wait(op_queue& q, pending_op& op, std::uint32_t observed, const cancellation_token& token,
            cancellation_registration& reg);

  /// Completes pending operations with "aborted", stops events, closes the descriptor once no
  /// syscall uses it. Idempotent, thread-safe.
  void close() noexcept;

  void on_readiness(std::uint32_t bits) noexcept override;

 private:
  explicit socket_context(int fd) noexcept : fd_(fd) {}
  ~socket_context() override;
  void drive(op_queue& q) noexcept;

  void close_fd_once() noexcept;

  static constexpr std::uint32_t kFdClosed = 1u << 31;    // close() was called
  static constexpr std::uint32_t kFdReleased = 1u << 30;  // the descriptor itself is closed

  const int fd_;
  socket_engine* engine_ = nullptr;
  std::atomic<std::uint32_t> fd_state_{0};  // users in the low bits, then kFdReleased, kFdClosed
  std::atomic<bool> close_started_{false};
  op_queue reads_;
  op_queue writes_;
  op_source<receive_op> receive_source_{*this};
  op_source<send_op> send_source_{*this};
  std::unique_ptr<datagram_sources> datagram_;
};

/// A counted reference to a context (slow-path coroutines hold one, so a socket object may be
/// destroyed while its operation finishes).
class context_ref {
 public:
  context_ref() noexcept = default;
  explicit context_ref(socket_context* c) noexcept : c_(c) {
    if (c_ != nullptr) c_->add_ref();
  }
  context_ref(const context_ref& o) noexcept : context_ref(o.c_) {}
  context_ref(context_ref&& o) noexcept : c_(o.c_) { o.c_ = nullptr; }
  context_ref& operator=(const context_ref&) = delete;
  ~context_ref() {
    if (c_ != nullptr) c_->release();
  }
  socket_context* operator->() const noexcept { return c_; }
  socket_context& operator*() const noexcept { return *c_; }

 private:
  socket_context* c_ = nullptr;
};

/// The awaiter a slow path co_awaits: suspends unless the operation finishes during the handshake.
class op_awaiter {
 public:
  op_awaiter(socket_context& c, op_queue& q, pending_op& op, std::uint32_t observed,
             const cancellation_token& token) noexcept
      : ctx_(&c), q_(&q), op_(&op), token_(&token), observed_(observed) {}
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    op_->continuation = h;
    return ctx_->wait(*q_, *op_, observed_, *token_, reg_);
  }
  void await_resume() noexcept {}

 private:
  socket_context* ctx_;
  op_queue* q_;
  pending_op* op_;
  const cancellation_token* token_;
  std::uint32_t observed_;
  cancellation_registration reg_;
};

}  // namespace tpl::net::detail
