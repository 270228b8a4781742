// tpl/io/pipe.hpp — anonymous pipes with asynchronous reads and writes (.NET
// AnonymousPipeServerStream / AnonymousPipeClientStream; the use case: a child process's stdout).
//
//   auto [reader, writer] = tpl::io::create_pipe();
//   // give writer.native_handle() to a child as its stdout (posix_spawn_file_actions_adddup2),
//   // then close our copy so that the child's exit ends the stream:
//   writer.close();
//   std::string out;
//   std::array<std::byte, 4096> buf;
//   while (std::size_t n = co_await reader.read_async(buf, token))   // 0: every writer closed
//     out.append(reinterpret_cast<const char*>(buf.data()), n);
//
// Semantics:
//   1. read_async returns the bytes available (at least 1, at most buffer.size()) once there are
//      some, or 0 at end of stream (every write end closed). write_async writes the whole buffer,
//      waiting for room as the reader drains the pipe, and returns its size. A write to a pipe
//      whose read ends are all closed throws io_error (EPIPE). SIGPIPE never ends the process: as
//      .NET's runtime does at startup, the first create_pipe() sets SIGPIPE to ignored if it
//      still has its default action (a handler the program installed is left alone).
//   2. A pending read or write is cancelable at any time: its token throws operation_canceled
//      (write: io_canceled with the bytes already written, if any). What the pipe holds stays
//      there for the next read.
//   3. close() (and the destructor) ends every pending operation with operation_aborted and
//      returns without waiting for them; the descriptor is closed once the last one has left.
//   4. One read and one write may be pending at a time on a stream (as .NET's PipeStream): a
//      second one throws invalid_operation and takes nothing, with every engine. A write_async
//      is pending until its whole buffer is written.
//   5. Both descriptors are blocking and close-on-exec, so a child given one (dup2 clears
//      close-on-exec on the copy) sees an ordinary pipe.
//   Engines: with the pool engine (the default) a read or write that must wait registers with the
//   socket engine's epoll readiness, as a socket receive does, and holds no thread while it waits;
//   its system calls are preadv2/pwritev2 with RWF_NOWAIT, so the descriptors stay blocking (a
//   kernel without RWF_NOWAIT on pipes gets the older path: the operation waits in poll(2) on the
//   pipe and a wake-up eventfd, inside a blocking_scope on a pool worker). With io_uring the read
//   or write is an io_uring operation (the kernel arms its own poll), canceled with
//   IORING_OP_ASYNC_CANCEL.
#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include "tpl/cancellation.hpp"
#include "tpl/io/io_error.hpp"
#include "tpl/value_task.hpp"

namespace tpl::io {

namespace detail {
struct io_handle;
}

class pipe_stream;

/// One end of a pipe. Move-only; closing is RAII.
class pipe_stream {
 public:
  pipe_stream() noexcept = default;
  pipe_stream(pipe_stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  pipe_stream& operator=(pipe_stream&& other) noexcept;
  pipe_stream(const pipe_stream&) = delete;
  pipe_stream& operator=(const pipe_stream&) = delete;
  ~pipe_stream() { close(); }

  bool is_open() const noexcept { return handle_ != nullptr; }

  /// The bytes available (1..buffer.size()) once there are some; 0 at end of stream. An empty
  /// buffer returns 0 at once.
  value_task<std::size_t> read_async(std::span<std::byte> buffer, cancellation_token token = {});
  /// Writes the whole buffer; returns buffer.size().
  value_task<std::size_t> write_async(std::span<const std::byte> buffer, cancellation_token token = {});

  /// Ends pending operations with operation_aborted (rule 3). Idempotent.
  void close() noexcept;
  /// The file descriptor, or -1 when closed. Stays owned by the stream.
  int native_handle() const noexcept;

 private:
  friend std::pair<pipe_stream, pipe_stream> create_pipe();
  explicit pipe_stream(detail::io_handle* handle) noexcept : handle_(handle) {}
  detail::io_handle* checked(const char* operation) const;

  detail::io_handle* handle_ = nullptr;
};

/// pipe2(O_CLOEXEC): {read end, write end}. Throws io_error (EMFILE, ENFILE).
std::pair<pipe_stream, pipe_stream> create_pipe();

}  // namespace tpl::io
