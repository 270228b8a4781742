// tpl/io/io_error.hpp — the errors tpl's files and pipes report, and the choice of I/O engine.
//
// Provides:
//   tpl::io::io_error           (.NET IOException): any failed I/O system call; code() is the
//                               std::error_code (std::system_category, the errno value)
//   tpl::io::file_not_found     (.NET FileNotFoundException / DirectoryNotFoundException):
//                               ENOENT, ENOTDIR
//   tpl::io::access_denied      (.NET UnauthorizedAccessException): EACCES, EPERM, EROFS, and
//                               opening a directory as a file (EISDIR)
//   tpl::io::operation_aborted  (.NET OperationAbortedException / ObjectDisposedException while
//                               an operation was pending): the file or pipe was closed, or the
//                               I/O engine shut down, before the operation completed (ECANCELED)
//   tpl::io::io_canceled        a tpl::operation_canceled that carries how many bytes an
//                               operation moved before its token canceled it
//   tpl::io::io_engine, active_io_engine(): which engine serves files and pipes
//
// The split follows tpl's hierarchy (tpl/exceptions.hpp): failures met at run time derive from
// std::runtime_error, here through std::system_error so that every one carries its error code;
// cancellation stays a tpl::operation_canceled, so that `catch (const tpl::operation_canceled&)`
// sees I/O cancellations as it sees every other.
//
//   try {
//     auto f = tpl::io::file::open("config.ini", tpl::io::file_mode::open);
//   } catch (const tpl::io::file_not_found& e) {
//     std::println("{} ({})", e.what(), e.code().message());
//   } catch (const tpl::io::io_error& e) { ... }  // any other I/O failure
#pragma once

#include <cstddef>
#include <string>
#include <system_error>

#include "tpl/exceptions.hpp"

namespace tpl::io {

/// A failed I/O system call (.NET IOException). code() holds the errno value in
/// std::system_category().
class io_error : public std::system_error {
 public:
  io_error(std::error_code code, const std::string& what) : std::system_error(code, what) {}
};

/// The path, or a directory on it, does not exist (ENOENT, ENOTDIR).
class file_not_found : public io_error {
 public:
  using io_error::io_error;
};

/// The caller may not open the path this way: permission denied (EACCES, EPERM), a read-only file
/// system (EROFS), or the path is a directory (EISDIR).
class access_denied : public io_error {
 public:
  using io_error::io_error;
};

/// The operation was pending when its file or pipe was closed (or the I/O engine shut down): it
/// did not complete. code() is std::errc::operation_canceled.
class operation_aborted : public io_error {
 public:
  using io_error::io_error;
};

/// A cancellation that moved some bytes first: a write_async / write_at_async that writes all of
/// its buffer in several system calls and whose token was canceled between them. An operation
/// canceled before it moved anything throws a plain tpl::operation_canceled.
class io_canceled : public tpl::operation_canceled {
 public:
  explicit io_canceled(std::size_t bytes_transferred)
      : tpl::operation_canceled("The operation was canceled after " + std::to_string(bytes_transferred) +
                                " bytes were transferred."),
        bytes_transferred_(bytes_transferred) {}
  std::size_t bytes_transferred() const noexcept { return bytes_transferred_; }

 private:
  std::size_t bytes_transferred_;
};

/// The engine that runs file and pipe operations, chosen once per process from TPL_IO_ENGINE.
enum class io_engine : unsigned char {
  /// Each operation's system call runs on a thread pool worker inside a blocking_scope (.NET's
  /// Unix FileStream strategy). TPL_IO_ENGINE=epoll selects it: for files and pipes "epoll" means
  /// this engine (sockets use epoll proper).
  pool,
  /// Operations are submitted to one io_uring; a completion thread resumes each awaiting coroutine
  /// on the pool. TPL_IO_ENGINE=io_uring selects it.
  io_uring,
};

const char* to_string(io_engine e) noexcept;

/// The engine that files and pipes use in this process: TPL_IO_ENGINE (strictly parsed: "epoll"
/// or "io_uring"; anything else throws std::invalid_argument naming the variable), else the
/// default (the pool engine). io_uring falls back to the pool engine when tpl was built without
/// liburing or the kernel refuses io_uring_queue_init (seccomp, io_uring_disabled, ENOSYS);
/// io_engine_fallback_reason() then says why.
io_engine active_io_engine();
/// Empty when the requested engine is the one in use; otherwise why io_uring was not used.
std::string io_engine_fallback_reason();

}  // namespace tpl::io
