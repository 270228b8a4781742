// The socket, pipe and file system calls of the hot path, made with syscall(2) instead of through
// glibc's wrappers (internal).
//
// recv, send, recvfrom, sendto, epoll_wait, pread, pwrite, preadv2 and pwritev2 are POSIX
// cancellation points. In a process with more than one thread, glibc brackets each call with two
// atomic read-modify-writes of the calling thread's cancellation state (enable, then disable,
// asynchronous cancellation), whatever the program does with pthread_cancel. tpl's operations end
// through their cancellation tokens and close(), never through thread cancellation, so the bracket
// is pure cost on every call: about 3% of a plaintext server's CPU samples here (docs/io.md). A
// thread canceled with pthread_cancel therefore does not act on it inside these calls (it does at
// its next cancellation point).
//
// Each returns what the wrapper returns (-1 with errno set on failure). Under ThreadSanitizer and
// AddressSanitizer they are the wrappers themselves: the sanitizers intercept them to check the
// buffers read and written, and TSan sees a send and the receive that gets its bytes as one
// happens-before edge, which tests that hand data from a plain thread to a socket operation rely on.
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstddef>

#include "tpl/detail/config.hpp"

namespace tpl::net::detail {

#if defined(TPL_TSAN) || defined(TPL_ASAN)
inline ssize_t sys_recv(int fd, void* buffer, std::size_t length, int flags) noexcept {
  return ::recv(fd, buffer, length, flags);
}
inline ssize_t sys_send(int fd, const void* data, std::size_t length, int flags) noexcept {
  return ::send(fd, data, length, flags);
}
inline ssize_t sys_recvfrom(int fd, void* buffer, std::size_t length, int flags, sockaddr* from,
                            socklen_t* from_length) noexcept {
  return ::recvfrom(fd, buffer, length, flags, from, from_length);
}
inline ssize_t sys_sendto(int fd, const void* data, std::size_t length, int flags, const sockaddr* to,
                          socklen_t to_length) noexcept {
  return ::sendto(fd, data, length, flags, to, to_length);
}
inline int sys_epoll_wait(int epoll_fd, epoll_event* events, int max_events, int timeout_ms) noexcept {
  return ::epoll_wait(epoll_fd, events, max_events, timeout_ms);
}
inline ssize_t sys_pread(int fd, void* buffer, std::size_t length, off_t offset) noexcept {
  return ::pread(fd, buffer, length, offset);
}
inline ssize_t sys_pwrite(int fd, const void* data, std::size_t length, off_t offset) noexcept {
  return ::pwrite(fd, data, length, offset);
}
inline ssize_t sys_preadv2(int fd, const iovec* iov, int count, off_t offset, int flags) noexcept {
  return ::preadv2(fd, iov, count, offset, flags);
}
inline ssize_t sys_pwritev2(int fd, const iovec* iov, int count, off_t offset, int flags) noexcept {
  return ::pwritev2(fd, iov, count, offset, flags);
}
#else

inline ssize_t sys_recv(int fd, void* buffer, std::size_t length, int flags) noexcept {
  return ::syscall(SYS_recvfrom, fd, buffer, length, flags, nullptr, nullptr);
}

inline ssize_t sys_send(int fd, const void* data, std::size_t length, int flags) noexcept {
  return ::syscall(SYS_sendto, fd, data, length, flags, nullptr, 0);
}

inline ssize_t sys_recvfrom(int fd, void* buffer, std::size_t length, int flags, sockaddr* from,
                            socklen_t* from_length) noexcept {
  return ::syscall(SYS_recvfrom, fd, buffer, length, flags, from, from_length);
}

inline ssize_t sys_sendto(int fd, const void* data, std::size_t length, int flags, const sockaddr* to,
                          socklen_t to_length) noexcept {
  return ::syscall(SYS_sendto, fd, data, length, flags, to, to_length);
}

/// epoll_wait, as epoll_pwait with no signal mask (the one both x86-64 and AArch64 have).
inline int sys_epoll_wait(int epoll_fd, epoll_event* events, int max_events, int timeout_ms) noexcept {
  return static_cast<int>(::syscall(SYS_epoll_pwait, epoll_fd, events, max_events, timeout_ms, nullptr, 0));
}

// The offsets below go in one register: tpl builds for 64-bit Linux (x86-64, AArch64), where
// the kernel's pread64 takes a 64-bit offset and preadv2/pwritev2 take it as (low, high) with
// the high word unused (glibc passes 0 there too).
static_assert(sizeof(long) == 8 && sizeof(off_t) == 8, "raw pread/preadv2 calls assume a 64-bit ABI");

inline ssize_t sys_pread(int fd, void* buffer, std::size_t length, off_t offset) noexcept {
  return ::syscall(SYS_pread64, fd, buffer, length, offset);
}

inline ssize_t sys_pwrite(int fd, const void* data, std::size_t length, off_t offset) noexcept {
  return ::syscall(SYS_pwrite64, fd, data, length, offset);
}

/// offset -1: the descriptor's own position (a pipe's only one).
inline ssize_t sys_preadv2(int fd, const iovec* iov, int count, off_t offset, int flags) noexcept {
  return ::syscall(SYS_preadv2, fd, iov, count, offset, 0L, flags);
}

inline ssize_t sys_pwritev2(int fd, const iovec* iov, int count, off_t offset, int flags) noexcept {
  return ::syscall(SYS_pwritev2, fd, iov, count, offset, 0L, flags);
}
#endif

}  // namespace tpl::net::detail
