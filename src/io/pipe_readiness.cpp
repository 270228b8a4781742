// Pipes on the socket engine's readiness (pipe_readiness.hpp): a pipe end's socket_context runs
// the same readiness handshake as a socket (src/net/socket_context.hpp, model-checked in
// tests/net/net_model_readiness_test.cpp): an operation tries its system call, and on EAGAIN
// registers in its direction's waiting slot unless an edge came meanwhile; the engine's handler
// retries it. Only the system calls differ: preadv2/pwritev2 with RWF_NOWAIT instead of
// recv/send, because the descriptors stay blocking for the children they are given to.
//
// Invariants (beyond the header's):
//   - An operation lives in its transfer coroutine's frame; that frame holds a handle_ref, and
//     the handle holds the context's owner reference until its last release, so the context
//     outlives every operation on it (the engine holds its own reference while attached).
//   - A read consumes nothing unless it completes: a canceled or aborted read has made no
//     successful system call, so what the pipe holds stays for the next read. A write keeps its
//     progress across waits and reports it when canceled (io_canceled).
//   - The waiting count goes up before an operation's first registration and down after its
//     resumption, so a test that sees it rise knows the operation has found the pipe empty (or
//     full) and is about to wait or already waits.
#include "pipe_readiness.hpp"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <new>
#include <string>
#include <system_error>

#include "../net/raw_syscall.hpp"
#include "../net/socket_context.hpp"
#include "tpl/exceptions.hpp"

namespace tpl::io::detail {

namespace {

using tpl::net::detail::attempt_result;
using tpl::net::detail::pending_op;
using tpl::net::detail::socket_context;

/// One read (the bytes available, 0 at end of stream) or one whole write (what fits now, then
/// waits for room, until every byte is in the pipe; `moved` keeps the progress across waits).
struct pipe_op : pending_op {
  std::byte* buffer;
  std::size_t length;
  std::size_t moved = 0;
  pipe_op(bool write, std::byte* b, std::size_t n) noexcept : buffer(b), length(n) {
    attempt = write ? &run_write : &run_read;
  }
  static attempt_result run_read(pending_op* p, int fd) noexcept {
    auto* self = static_cast<pipe_op*>(p);
    iovec iov{self->buffer, self->length};
    for (;;) {
      const ssize_t n = tpl::net::detail::sys_preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
      if (n >= 0) {
        self->moved = static_cast<std::size_t>(n);
        return attempt_result::done;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return attempt_result::would_block;
      self->error = errno;
      return attempt_result::done;
    }
  }
  static attempt_result run_write(pending_op* p, int fd) noexcept {
    auto* self = static_cast<pipe_op*>(p);
    while (self->moved < self->length) {
      iovec iov{self->buffer + self->moved, self->length - self->moved};
      const ssize_t n = tpl::net::detail::sys_pwritev2(fd, &iov, 1, -1, RWF_NOWAIT);
      if (n >= 0) {
        self->moved += static_cast<std::size_t>(n);
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return attempt_result::would_block;
      self->error = errno;
      return attempt_result::done;
    }
    return attempt_result::done;
  }
};

// Relaxed: a count for tests' handshakes; it orders nothing.
std::atomic<std::size_t> g_waiting{0};

struct waiting_scope {
  waiting_scope() noexcept { g_waiting.fetch_add(1, std::memory_order_relaxed); }  // as above
  ~waiting_scope() { g_waiting.fetch_sub(1, std::memory_order_relaxed); }
  waiting_scope(const waiting_scope&) = delete;
  waiting_scope& operator=(const waiting_scope&) = delete;
};

bool probe_nowait_pipes() noexcept {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  std::byte b{};
  iovec iov{&b, 1};
  // An empty pipe must answer EAGAIN at once, and a write of one byte must go in.
  const bool read_ok = ::preadv2(fds[0], &iov, 1, -1, RWF_NOWAIT) < 0 && errno == EAGAIN;
  const bool write_ok = read_ok && ::pwritev2(fds[1], &iov, 1, -1, RWF_NOWAIT) == 1;
  ::close(fds[0]);
  ::close(fds[1]);
  return write_ok;
}

[[noreturn]] void throw_failed(int error, bool write, std::size_t moved) {
  using tpl::net::detail::kAborted;
  using tpl::net::detail::kBusy;
  using tpl::net::detail::kCanceled;
  const char* what = write ? "write" : "read";
  if (error == kCanceled) {
    if (moved > 0) throw io_canceled(moved);
    throw operation_canceled();
  }
  if (error == kAborted)
    throw operation_aborted(std::make_error_code(std::errc::operation_canceled),
                            std::string("tpl::io: ") + what + " aborted: the pipe stream was closed");
  if (error == kBusy)
    throw invalid_operation(std::string("tpl::io::pipe_stream: another ") + what +
                            " is already pending on this stream (one read and one write at a time)");
  throw_io_error(error, std::string("tpl::io: ") + what + " failed");
}

}  // namespace

namespace {
// Acquire/release: a test stores it on one thread and creates pipes after a handshake.
std::atomic<bool> g_enabled_for_testing{true};
}  // namespace

bool readiness_pipes_enabled() noexcept {
  static const bool supported = probe_nowait_pipes();  // once per process (header)
  return g_enabled_for_testing.load(std::memory_order_acquire) && supported;
}

void set_readiness_pipes_for_testing(bool enabled) noexcept {
  g_enabled_for_testing.store(enabled, std::memory_order_release);
}

io_handle* make_readiness_pipe_handle(int fd, engine& eng) {
  socket_context* c = nullptr;
  try {
    c = socket_context::create(fd);  // owns fd from here on (closed on failure)
  } catch (const std::system_error& e) {
    throw_io_error(e.code().value(), "tpl::io::create_pipe: the socket engine could not watch the pipe");
  }
  auto* h = new (std::nothrow) io_handle(fd, handle_kind::stream, &eng);
  if (h == nullptr) {
    c->close();
    c->release();
    throw std::bad_alloc();
  }
  h->readiness = c;
  return h;
}

void readiness_close(io_handle& h) noexcept { h.readiness->close(); }

void readiness_release(io_handle& h) noexcept {
  h.readiness->close();  // idempotent; closes the descriptor once no system call uses it
  h.readiness->release();
}

value_task<std::size_t> readiness_transfer(io_handle* h, bool write, std::byte* buffer, std::size_t length,
                                           cancellation_token token) {
  const handle_ref ref(h);
  socket_context& c = *h->readiness;
  if (token.is_cancellation_requested()) throw operation_canceled();
  pipe_op op(write, buffer, length);  // a write only reads from buffer (pipe.cpp)
  tpl::net::detail::op_queue& q = write ? c.writes() : c.reads();
  const std::uint32_t observed = q.observe();  // before the attempt (socket_context.hpp)
  if (c.attempt(op) == attempt_result::would_block) {
    const waiting_scope counted;
    co_await tpl::net::detail::op_awaiter(c, q, op, observed, token);
  }
  if (op.error != 0) throw_failed(op.error, write, op.moved);
  co_return op.moved;
}

std::size_t readiness_pipe_operations_waiting() noexcept { return g_waiting.load(std::memory_order_relaxed); }

}  // namespace tpl::io::detail
