// src/io/pipe_readiness.hpp (private) — pipes on the socket engine's readiness: with the pool
// engine, a pipe's read or write that must wait registers with the socket engine (epoll) instead
// of blocking a pool worker in poll(2) (pipe_readiness.cpp). The io_uring engine keeps pipes on
// its ring, which is faster for them than io_uring polls as the sockets' readiness source.
//
// Invariants:
//   - A pipe end served this way has a socket_context (io_handle::readiness) that owns its
//     descriptor from creation on; the io_handle never closes that descriptor itself: close()
//     goes through the context, which closes it once no system call uses it.
//   - The descriptors stay blocking (pipe.hpp, rule 5: a child given one end sees an ordinary
//     pipe); every system call on them is preadv2/pwritev2 with RWF_NOWAIT, which answers EAGAIN
//     instead of blocking whatever the descriptor's mode. Kernels that refuse RWF_NOWAIT on a pipe
//     (EOPNOTSUPP on old kernels) keep the pool engine's poll(2) path: readiness_pipes_enabled()
//     probes that once.
#pragma once

#include <cstddef>

#include "engine.hpp"
#include "tpl/cancellation.hpp"
#include "tpl/value_task.hpp"

namespace tpl::io::detail {

/// Whether new pool-engine pipes are served by readiness: the kernel reads and writes pipes with
/// RWF_NOWAIT (probed once per process), and the path is not switched off for a test (the poll(2)
/// path is then tested on a kernel that has RWF_NOWAIT).
bool readiness_pipes_enabled() noexcept;
/// Testing hook: false makes new pool-engine pipes take the poll(2) path; true restores the default.
void set_readiness_pipes_for_testing(bool enabled) noexcept;

/// A pipe end's handle served by the socket engine's readiness: takes ownership of fd (closes it
/// on failure) and throws io_error (the engine could not watch it) or std::bad_alloc.
io_handle* make_readiness_pipe_handle(int fd, engine& eng);

/// io_handle's close and last release for a readiness pipe end (handle.cpp calls them).
void readiness_close(io_handle& h) noexcept;
void readiness_release(io_handle& h) noexcept;

/// One read (the bytes available, 0 at end of stream) or one whole write on a readiness pipe end.
value_task<std::size_t> readiness_transfer(io_handle* h, bool write, std::byte* buffer, std::size_t length,
                                           cancellation_token token);

/// Readiness pipe operations between their first EAGAIN and their end (tests' handshakes; the
/// pool engine's operations_waiting() adds it).
std::size_t readiness_pipe_operations_waiting() noexcept;

}  // namespace tpl::io::detail
