// socket_context and op_queue: the readiness handshake described in socket_context.hpp.
#include "socket_context.hpp"

#include <unistd.h>

#include <cerrno>

#include "tpl/detail/trampoline.hpp"
#include "../thread_pool/io_counters.hpp"

namespace tpl::net::detail {

op_queue::registration op_queue::try_register(pending_op* op, std::uint32_t observed) noexcept {
  std::lock_guard g(lock_);
  if (closed_) return registration::closed;
  // relaxed: the cancel callback stores it before it takes lock_, which orders it before us.
  if (op->cancel_requested.load(std::memory_order_relaxed)) return registration::canceled;
  // relaxed: sequence_ only changes under lock_, which we hold.
  if (sequence_.load(std::memory_order_relaxed) != observed) return registration::retry;
  if (waiting_ != nullptr) return registration::busy;
  waiting_ = op;
  return registration::waiting;
}

pending_op* op_queue::on_ready() noexcept {
  std::lock_guard g(lock_);
  // release: pairs with observe()'s acquire (an operation that reads the new number and then
  // makes its syscall); the lock orders it against try_register.
  sequence_.fetch_add(1, std::memory_order_release);
  pending_op* op = waiting_;
  waiting_ = nullptr;
  return op;
}

pending_op* op_queue::close() noexcept {
  std::lock_guard g(lock_);
  closed_ = true;
  pending_op* op = waiting_;
  waiting_ = nullptr;
  return op;
}

bool op_queue::cancel(pending_op* op) noexcept {
  std::lock_guard g(lock_);
  if (waiting_ != op) return false;
  waiting_ = nullptr;
  return true;
}

socket_context* socket_context::create(int fd) {
  auto* c = new (std::nothrow) socket_context(fd);
  if (c == nullptr) {
    ::close(fd);
    throw std::bad_alloc();
  }
  try {
    c->engine_ = &engine_for_new_socket();
    engine_attach(*c->engine_, fd, c);
  } catch (...) {
    c->engine_ = nullptr;
    c->release();  // closes fd in the destructor
    throw;
  }
  return c;
}

socket_context::~socket_context() {
  // relaxed: the last reference is gone, nobody else can touch the state.
  if ((fd_state_.load(std::memory_order_relaxed) & kFdClosed) == 0) ::close(fd_);
}

bool socket_context::fd_acquire() noexcept {
  // acquire: a use that starts must see the descriptor as open (pairs with close()'s release
  // through the bit); the count keeps close() from closing the number under this use.
  const std::uint32_t s = fd_state_.fetch_add(1, std::memory_order_acquire);
  if ((s & kFdClosed) == 0) return true;
  fd_release();  // closed: undo the count (this may be the use that ends last, see close_fd_once)
  return false;
}

void socket_context::fd_release() noexcept {
  // acq_rel: the last user after close() must see close()'s bit and every other use finished
  // before it closes the descriptor; its own syscall must be done before the decrement.
  const std::uint32_t s = fd_state_.fetch_sub(1, std::memory_order_acq_rel);
  if ((s & ~kFdReleased) == (kFdClosed | 1u)) close_fd_once();
}

void socket_context::close_fd_once() noexcept {
  // acq_rel: the count reached 0 with the closed bit set, possibly more than once (a use that
  // found the socket closed adds and removes 1 after close() itself closed it); the released bit
  // makes exactly one of them close the number.
  if ((fd_state_.fetch_or(kFdReleased, std::memory_order_acq_rel) & kFdReleased) == 0) ::close(fd_);
}

bool socket_context::is_closed() const noexcept {
  // acquire: callers report "closed" only after close()'s effects; a stale false just leads to the
  // guarded attempt, which decides.
  return (fd_state_.load(std::memory_order_acquire) & kFdClosed) != 0;
}

attempt_result socket_context::attempt(pending_op& op) noexcept {
  if (!fd_acquire()) {
    op.error = kAborted;
    return attempt_result::done;
  }
  const attempt_result r = op.attempt(&op, fd_);
  fd_release();
  return r;
}

bool socket_context::wait(op_queue& q, pending_op& op, std::uint32_t observed, const cancellation_token& token,
                          cancellation_registration& reg) {
  if (token.can_be_canceled()) {
    reg = token.register_callback([&q, &op] {
      // relaxed: try_register reads it under q's lock, which this thread takes next.
      op.cancel_requested.store(true, std::memory_order_relaxed);
      if (q.cancel(&op)) {
        op.error = kCanceled;
        finish(op, /*queued=*/true);  // never inside cancel(): the canceler's stack
      }
    });
  }
  for (;;) {
    switch (q.try_register(&op, observed)) {
      case op_queue::registration::waiting: return true;
      case op_queue::registration::retry: break;
      case op_queue::registration::closed: op.error = kAborted; return false;
      case op_queue::registration::canceled: op.error = kCanceled; return false;
      case op_queue::registration::busy: op.error = kBusy; return false;
    }
    observed = q.observe();
    if (attempt(op) == attempt_result::done) return false;
  }
}

void socket_context::drive(op_queue& q) noexcept {
  pending_op* op = q.on_ready();
  if (op == nullptr) return;
  for (;;) {
    const std::uint32_t observed = q.observe();
    if (attempt(*op) == attempt_result::done) break;
    const op_queue::registration r = q.try_register(op, observed);
    if (r == op_queue::registration::waiting) return;
    if (r == op_queue::registration::retry) continue;
    op->error = r == op_queue::registration::canceled ? kCanceled
                : r == op_queue::registration::busy   ? kBusy  // another one took the slot meanwhile
                                                      : kAborted;
    break;
  }
  // Counted before the continuation runs: whoever awaits the operation sees it counted.
  tpl::detail::count_io_completion(tpl::detail::io_kind::socket);
  finish(*op, /*queued=*/false);
}

void socket_context::on_readiness(std::uint32_t bits) noexcept {
  if (bits & readable) drive(reads_);
  if (bits & writable) drive(writes_);
}

void socket_context::close() noexcept {
  // acq_rel: exactly one closer goes on; a later one sees the first one's work begun.
  if (close_started_.exchange(true, std::memory_order_acq_rel)) return;
  pending_op* r = reads_.close();
  pending_op* w = writes_.close();
  // The descriptor is certainly open here: only a use that ends after the closed bit (set below,
  // by this call alone) may close it. So the detach cannot hit a reused number.
  if (engine_ != nullptr) engine_detach(*engine_, fd_, this);
  // acq_rel: publishes the above to fd_acquire's acquire; reads the users to decide who closes.
  const std::uint32_t before = fd_state_.fetch_or(kFdClosed, std::memory_order_acq_rel);
  if (before == 0) close_fd_once();
  for (pending_op* op : {r, w}) {
    if (op == nullptr) continue;
    op->error = kAborted;
    finish(*op, /*queued=*/true);  // never inside close(): it may be a destructor
  }
}

}  // namespace tpl::net::detail
