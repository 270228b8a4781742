// The pool engine: every operation's system call runs on a thread pool worker inside a
// blocking_scope, as .NET's FileStream does on Unix (it queues the synchronous call to the pool).
//
// Invariants:
//   - The system call runs only on a pool worker, inside a blocking_scope, so the pool counts the
//     worker as blocked and may inject a thread while it waits (a slow disk or an empty pipe never
//     starves other work). A file operation started on a worker runs there at once (no hop, and
//     a synchronous completion); one started elsewhere, and every pipe operation (it may wait for
//     what its own caller does next), is queued to the default pool first. The one exception: a
//     file read started elsewhere whose bytes are all in the page cache completes on the calling
//     thread with preadv2(RWF_NOWAIT), which cannot block (nowait_call.hpp).
//   - Closed and canceled are checked just before the system call: before it, they win; once a
//     file's system call runs it completes (regular files cannot be interrupted anyway).
//   - A stream operation never blocks in read/write: it waits in poll() on the pipe and on the
//     handle's wake-up eventfd, which close() and the operation's token callback write to, so a
//     pending read or write ends promptly on cancel or close. After poll() reports the pipe ready
//     it reads what is there (a pipe that polls readable has data or is at EOF, so read returns at
//     once for the one reader a stream allows) or writes at most PIPE_BUF bytes (POLLOUT promises
//     that much room to the one writer); write-all loops in operation.cpp.
//   - A wake-up may be stale (a cancel that came after its operation ended): the loop drains the
//     eventfd and looks at `closed` and the token again, so a stale one costs one extra poll().
//   - Every system call that ran is counted as a completion (thread_pool_stats::io
//     .pool_engine_completions) on the worker that ran it, before the coroutine goes on.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>

#include "engine.hpp"
#include "nowait_call.hpp"
#include "../net/raw_syscall.hpp"
#include "pipe_readiness.hpp"
#include "../thread_pool/io_counters.hpp"
#include "tpl/thread_pool.hpp"

namespace tpl::io::detail {

namespace {

// pread/pwrite move at most this much per call on Linux; larger requests are split by the
// callers' loops (reads return short, writes loop).
constexpr std::size_t kMaxBytesPerCall = 0x7ffff000;

bool stopped_before_start(io_op& op) noexcept {
  if (op.handle->is_closed()) {
    op.reason.store(cancel_reason::aborted, std::memory_order_relaxed);  // same thread reads it
    op.result = -ECANCELED;
    return true;
  }
  if (op.token->is_cancellation_requested()) {
    op.reason.store(cancel_reason::token, std::memory_order_relaxed);  // same thread reads it
    op.result = -ECANCELED;
    return true;
  }
  return false;
}

std::int64_t run_file_call(const io_op& op) noexcept {
  const int fd = op.handle->fd;
  const std::size_t n = std::min(op.length, kMaxBytesPerCall);
  for (;;) {
    ssize_t r = 0;
    switch (op.code) {
      case op_code::read: r = tpl::net::detail::sys_pread(fd, op.buffer, n, static_cast<off_t>(op.offset)); break;
      case op_code::write: r = tpl::net::detail::sys_pwrite(fd, op.buffer, n, static_cast<off_t>(op.offset)); break;
      case op_code::fsync: r = ::fsync(fd); break;
      case op_code::fdatasync: r = ::fdatasync(fd); break;
    }
    if (r >= 0) return r;
    if (errno != EINTR) return -errno;
  }
}

void drain_wake_fd(int wake_fd) noexcept {
  std::uint64_t count = 0;
  // Non-blocking eventfd: reads the counter and resets it, or EAGAIN if it is 0.
  [[maybe_unused]] const auto got = ::read(wake_fd, &count, sizeof count);
}

void signal_wake_fd(int wake_fd) noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto written = ::write(wake_fd, &one, sizeof one);
}

// Stream operations inside run_stream_call (tests wait for a read to be pending).
std::atomic<std::size_t> g_streams_waiting{0};

std::int64_t run_stream_call(io_op& op) noexcept {
  // Relaxed: a count for tests' polling handshakes; it orders nothing.
  g_streams_waiting.fetch_add(1, std::memory_order_relaxed);
  struct leave {
    ~leave() { g_streams_waiting.fetch_sub(1, std::memory_order_relaxed); }  // as above
  } on_exit;
  const bool reading = op.code == op_code::read;
  // Lets a cancel interrupt poll(); the handle (and so wake_fd) outlives the operation.
  const cancellation_registration wake_on_cancel =
      op.token->register_callback([fd = op.handle->wake_fd] { signal_wake_fd(fd); });
  pollfd fds[2] = {{op.handle->fd, static_cast<short>(reading ? POLLIN : POLLOUT), 0},
                   {op.handle->wake_fd, POLLIN, 0}};
  for (;;) {
    if (stopped_before_start(op)) return op.result;
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (fds[1].revents != 0) {
      drain_wake_fd(op.handle->wake_fd);
      continue;  // closed, canceled, or stale: the loop's top decides
    }
    if (fds[0].revents == 0) continue;
    const ssize_t r = reading ? ::read(op.handle->fd, op.buffer, op.length)
                              : ::write(op.handle->fd, op.buffer, std::min<std::size_t>(op.length, PIPE_BUF));
    if (r >= 0) return r;
    if (errno != EINTR && errno != EAGAIN) return -errno;
  }
}

class pool_engine_impl final : public engine {
 public:
  io_engine kind() const noexcept override { return io_engine::pool; }

  bool ready(io_op& op) noexcept override {
    // A file call on a worker runs here at once. A pipe operation may wait for the other end,
    // which the caller itself may be about to serve (start a read, then write what it answers):
    // it always goes to a worker of its own, so the call returns a pending operation.
    if (op.handle->kind != handle_kind::file) return false;
    if (thread_pool::current() != nullptr) return true;
    // Elsewhere (a thread of the program's, an engine thread): a read the page cache serves
    // completes here without the hop (nowait_call.hpp); anything else goes to a worker.
    return op.code == op_code::read &&
           try_nowait_file_call(op, nowait_reads_, tpl::detail::io_kind::pool_engine, kMaxBytesPerCall);
  }

  bool suspend(io_op&, std::coroutine_handle<> continuation) noexcept override {
    try {
      thread_pool::default_pool().schedule(continuation);
      return true;
    } catch (...) {
      // The default pool could not be created (a bad TPL_THREADPOOL_* variable, no memory): run
      // the call on this thread instead, which complete() does when the coroutine goes on.
      return false;
    }
  }

  void complete(io_op& op) noexcept override {
    if (op.completed_in_ready) return;  // served from the page cache in ready()
    if (stopped_before_start(op)) return;
    try {
      const blocking_scope blocking("tpl::io operation");
      op.result = op.handle->kind == handle_kind::file ? run_file_call(op) : run_stream_call(op);
      tpl::detail::count_io_completion(tpl::detail::io_kind::pool_engine);
    } catch (...) {
      // Only blocking_scope's constructor or the token registration can throw (a scheduler that
      // refuses blocking, or no memory for the registration): report it as the call failing.
      op.result = -EDEADLK;
    }
  }

  void cancel(io_op&, cancel_reason) noexcept override {
    // Nothing is kept pending here: close() and tokens reach a waiting stream through wake_fd.
  }

  std::size_t operations_waiting() const noexcept override {
    // Relaxed: see g_streams_waiting. Pipes served by readiness count theirs apart.
    return g_streams_waiting.load(std::memory_order_relaxed) + readiness_pipe_operations_waiting();
  }

 private:
  // Whether this kernel and file system take RWF_NOWAIT reads (nowait_call.hpp).
  std::atomic<bool> nowait_reads_{true};
};

}  // namespace

engine& pool_engine() noexcept {
  static pool_engine_impl the_engine;
  return the_engine;
}

}  // namespace tpl::io::detail
