// The socket operations (internal): each is a pending_op whose attempt() makes one system call
// (retrying EINTR) and says whether it is done or must wait for readiness. They live on the stack
// of a fast path that finishes at once, in a direction's reusable op_source (a stream socket's
// receive or send, a datagram socket's receive_from, that waits), or in a slow path's coroutine
// frame (accept, connect, send_to, and an operation that finds its source taken).
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <span>

#include "pending_op.hpp"
#include "raw_syscall.hpp"
#include "sockaddr.hpp"

namespace tpl::net::detail {

inline bool would_block(int e) noexcept { return e == EAGAIN || e == EWOULDBLOCK; }

struct receive_op : pending_op {
  std::span<std::byte> buffer;
  std::size_t received = 0;
  receive_op() noexcept : receive_op(std::span<std::byte>{}) {}
  explicit receive_op(std::span<std::byte> b) noexcept : buffer(b) { attempt = &run; }
  static attempt_result run(pending_op* p, int fd) noexcept {
    auto* self = static_cast<receive_op*>(p);
    for (;;) {
      const ssize_t n = sys_recv(fd, self->buffer.data(), self->buffer.size(), 0);
      if (n >= 0) {
        self->received = static_cast<std::size_t>(n);
        return attempt_result::done;
      }
      if (errno == EINTR) continue;
      if (would_block(errno)) return attempt_result::would_block;
      self->error = errno;
      return attempt_result::done;
    }
  }
};

/// Sends until all of data is out; progress (sent) survives across waits.
struct send_op : pending_op {
  std::span<const std::byte> data;
  std::size_t sent = 0;
  send_op() noexcept : send_op(std::span<const std::byte>{}) {}
  explicit send_op(std::span<const std::byte> d) noexcept : data(d) { attempt = &run; }
  static attempt_result run(pending_op* p, int fd) noexcept {
    auto* self = static_cast<send_op*>(p);
    while (self->sent < self->data.size()) {
      const ssize_t n =
          sys_send(fd, self->data.data() + self->sent, self->data.size() - self->sent, MSG_NOSIGNAL);
      if (n >= 0) {
        self->sent += static_cast<std::size_t>(n);
        continue;
      }
      if (errno == EINTR) continue;
      if (would_block(errno)) return attempt_result::would_block;
      self->error = errno;
      return attempt_result::done;
    }
    return attempt_result::done;
  }
};

/// Accepts one connection; a connection the peer aborted before it was accepted is skipped.
struct accept_op : pending_op {
  int accepted = -1;
  accept_op() noexcept { attempt = &run; }
  static attempt_result run(pending_op* p, int fd) noexcept {
    auto* self = static_cast<accept_op*>(p);
    for (;;) {
      const int s = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (s >= 0) {
        self->accepted = s;
        return attempt_result::done;
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (would_block(errno)) return attempt_result::would_block;
      self->error = errno;
      return attempt_result::done;
    }
  }
};

/// A connect in progress: done once the socket is writable or failed (poll, then SO_ERROR); a
/// spurious edge polls "not yet" and waits again.
struct connect_op : pending_op {
  connect_op() noexcept { attempt = &run; }
  static attempt_result run(pending_op* p, int fd) noexcept {
    pollfd pfd{fd, POLLOUT, 0};
    int r;
    while ((r = ::poll(&pfd, 1, 0)) < 0 && errno == EINTR) {
    }
    if (r < 0) {
      p->error = errno;
      return attempt_result::done;
    }
    if (r == 0) return attempt_result::would_block;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    p->error = err;
    return attempt_result::done;
  }
};

struct send_to_op : pending_op {
  std::span<const std::byte> datagram;
  socket_address to;
  std::size_t sent = 0;
  send_to_op(std::span<const std::byte> d, const socket_address& a) noexcept : datagram(d), to(a) { attempt = &run; }
  static attempt_result run(pending_op* p, int fd) noexcept {
    auto* self = static_cast<send_to_op*>(p);
    for (;;) {
      const ssize_t n = sys_sendto(fd, self->datagram.data(), self->datagram.size(), MSG_NOSIGNAL,
                                 self->to.get(), self->to.length);
      if (n >= 0) {
        self->sent = static_cast<std::size_t>(n);
        return attempt_result::done;
      }
      if (errno == EINTR) continue;
      if (would_block(errno)) return attempt_result::would_block;
      self->error = errno;
      return attempt_result::done;
    }
  }
};

struct receive_from_op : pending_op {
  std::span<std::byte> buffer;
  socket_address from;
  std::size_t received = 0;
  receive_from_op() noexcept : receive_from_op(std::span<std::byte>{}) {}
  explicit receive_from_op(std::span<std::byte> b) noexcept : buffer(b) { attempt = &run; }
  static attempt_result run(pending_op* p, int fd) noexcept {
    auto* self = static_cast<receive_from_op*>(p);
    for (;;) {
      self->from.length = sizeof self->from.storage;
      const ssize_t n =
          sys_recvfrom(fd, self->buffer.data(), self->buffer.size(), 0, self->from.get(), &self->from.length);
      if (n >= 0) {
        self->received = static_cast<std::size_t>(n);
        return attempt_result::done;
      }
      if (errno == EINTR) continue;
      if (would_block(errno)) return attempt_result::would_block;
      self->error = errno;
      return attempt_result::done;
    }
  }
};

/// Throws what op.error means: socket_error for an errno or "aborted", operation_canceled for a
/// canceled wait, invalid_operation for a second pending operation of the same direction. `what`
/// names the operation ("receive", "accept", ...).
[[noreturn]] void throw_op_error(int error, const char* what);

/// Accept's errors that mean "no descriptor or memory now": the listener backs off and retries.
inline bool is_accept_resource_error(int e) noexcept {
  return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

}  // namespace tpl::net::detail
