// tpl::io::pipe_stream and create_pipe: a pipe's two ends as io_handles of kind stream, served by
// the socket engine's readiness (pipe_readiness.hpp) with the pool engine, else by the engine:
// io_uring's ring, or the pool engine's poll() beside a wake-up eventfd where the kernel has no
// RWF_NOWAIT for pipes.
//
// Invariants: both descriptors are created blocking and close-on-exec (pipe.hpp, rule 5); a
// stream owns one reference to its handle while open; SIGPIPE's default action is replaced by
// "ignore" once, before the first pipe exists, so no write to a closed pipe can end the process.
#include "tpl/io/pipe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "engine.hpp"
#include "operation.hpp"
#include "pipe_readiness.hpp"

namespace tpl::io {

namespace {

void ignore_sigpipe_once() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      ::sigemptyset(&ignore.sa_mask);
      ::sigaction(SIGPIPE, &ignore, nullptr);
    }
  });
}

// Takes ownership of fd (closes it on failure). With the pool engine, a pipe waits on the socket
// engine's readiness where the kernel allows it (pipe_readiness.hpp); otherwise the engine serves
// it: io_uring's ring (faster for pipes than io_uring polls as the sockets' readiness source), or
// the pool engine's poll(2) beside the eventfd (no RWF_NOWAIT on pipes).
detail::io_handle* make_stream_handle(int fd, detail::engine& eng) {
  if (&eng == &detail::pool_engine() && detail::readiness_pipes_enabled())
    return detail::make_readiness_pipe_handle(fd, eng);
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    const int error = errno;
    ::close(fd);
    detail::throw_io_error(error, "tpl::io::create_pipe: eventfd failed");
  }
  auto* h = new (std::nothrow) detail::io_handle(fd, detail::handle_kind::stream, &eng);
  if (h == nullptr) {
    ::close(fd);
    ::close(wake);
    throw std::bad_alloc();
  }
  h->wake_fd = wake;
  return h;
}

}  // namespace

std::pair<pipe_stream, pipe_stream> create_pipe() {
  detail::engine& eng = detail::current_engine();
  ignore_sigpipe_once();
  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC) != 0) detail::throw_io_error(errno, "tpl::io::create_pipe: pipe2 failed");
  pipe_stream reader;
  try {
    reader = pipe_stream(make_stream_handle(fds[0], eng));
  } catch (...) {
    ::close(fds[1]);
    throw;
  }
  pipe_stream writer(make_stream_handle(fds[1], eng));
  return {std::move(reader), std::move(writer)};
}

pipe_stream& pipe_stream::operator=(pipe_stream&& other) noexcept {
  if (this != &other) {
    close();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void pipe_stream::close() noexcept {
  if (detail::io_handle* h = std::exchange(handle_, nullptr)) h->close_and_release();
}

int pipe_stream::native_handle() const noexcept { return handle_ != nullptr ? handle_->fd : -1; }

detail::io_handle* pipe_stream::checked(const char* operation) const {
  if (handle_ == nullptr)
    throw invalid_operation(std::string("tpl::io::pipe_stream::") + operation + ": the stream is not open");
  return handle_;
}

value_task<std::size_t> pipe_stream::read_async(std::span<std::byte> buffer, cancellation_token token) {
  detail::io_handle* h = checked("read_async");
  if (buffer.empty()) return value_task<std::size_t>(std::size_t{0});
  if (h->readiness != nullptr) return detail::readiness_transfer(h, false, buffer.data(), buffer.size(), std::move(token));
  return detail::transfer(h, {detail::op_code::read, 0, buffer.data(), buffer.size(), false, false}, std::move(token));
}

value_task<std::size_t> pipe_stream::write_async(std::span<const std::byte> buffer, cancellation_token token) {
  detail::io_handle* h = checked("write_async");
  if (buffer.empty()) return value_task<std::size_t>(std::size_t{0});
  // The engine only reads from a write's buffer; the request type is shared with reads.
  auto* data = const_cast<std::byte*>(buffer.data());
  if (h->readiness != nullptr) return detail::readiness_transfer(h, true, data, buffer.size(), std::move(token));
  return detail::transfer(h, {detail::op_code::write, 0, data, buffer.size(), true, false}, std::move(token));
}

}  // namespace tpl::io
