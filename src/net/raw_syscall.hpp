// The socket system calls of the hot path, made with syscall(2) instead of through glibc's
// wrappers (internal).
//
// recv, send, recvfrom, sendto and epoll_wait are POSIX cancellation points. In a process with more
// than one thread, glibc brackets each call with two atomic read-modify-writes of the calling
// thread's cancellation state (enable, then disable, asynchronous cancellation), whatever the
// program does with pthread_cancel. tpl's operations end through their cancellation tokens and
// close(), never through thread cancellation, so the bracket is pure cost on every call: about 3%
// of a plaintext server's CPU samples here (docs/io.md). A thread canceled with pthread_cancel
// therefore does not act on it inside these calls (it does at its next cancellation point).
//
// Each returns what the wrapper returns (-1 with errno set on failure). Under ThreadSanitizer and
// AddressSanitizer they are the wrappers themselves: the sanitizers intercept them to check the
// buffers read and written, and TSan sees a send and the receive that gets its bytes as one
// happens-before edge, which tests that hand data from a plain thread to a socket operation rely on.
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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
#endif

}  // namespace tpl::net::detail
