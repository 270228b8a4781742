// src/io/nowait_call.hpp (private) — a file read or write tried on the calling thread with
// RWF_NOWAIT, which the kernel answers at once (EAGAIN instead of waiting for the disk or a lock):
// both engines use it to complete what the page cache can serve without a hop or a ring.
//
// Invariants:
//   - The attempt never blocks the calling thread, whatever the file system: RWF_NOWAIT is honoured
//     or refused (EOPNOTSUPP), never ignored.
//   - It completes the op (result set, completed_in_ready) only with an answer the slow path would
//     give too: a read with every byte it asked for (or 0 at or past the end of the file), a write
//     with what the kernel took. Anything else leaves the op untouched for the slow path, which
//     starts it again from its offset.
//   - It is skipped for a closed handle or a canceled token: the slow path reports those.
//   - `supported` is a hint per engine, cleared once on EOPNOTSUPP; a stale value only costs one
//     refused system call, so it is read and written relaxed.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>

#include "engine.hpp"
#include "../net/raw_syscall.hpp"
#include "../thread_pool/io_counters.hpp"

namespace tpl::io::detail {

/// True when op (a file read or write) completed on this thread; counted as a completion of
/// `kind` then.
inline bool try_nowait_file_call(io_op& op, std::atomic<bool>& supported, tpl::detail::io_kind kind,
                                 std::size_t max_bytes) noexcept {
  if (!supported.load(std::memory_order_relaxed)) return false;  // see the header
  if (op.handle->is_closed() || op.token->is_cancellation_requested()) return false;
  const bool reading = op.code == op_code::read;
  const std::size_t length = std::min(op.length, max_bytes);
  iovec iov{op.buffer, length};
  const auto offset = static_cast<off_t>(op.offset);
  ssize_t n;
  do {
    n = reading ? tpl::net::detail::sys_preadv2(op.handle->fd, &iov, 1, offset, RWF_NOWAIT)
                : tpl::net::detail::sys_pwritev2(op.handle->fd, &iov, 1, offset, RWF_NOWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EOPNOTSUPP) supported.store(false, std::memory_order_relaxed);  // see the header
    return false;
  }
  if (reading ? (n != 0 && static_cast<std::size_t>(n) != length) : (n == 0 && length != 0)) return false;
  op.result = n;
  op.completed_in_ready = true;
  tpl::detail::count_io_completion(kind);
  return true;
}

}  // namespace tpl::io::detail
