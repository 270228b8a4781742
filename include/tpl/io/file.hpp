// tpl/io/file.hpp — tpl::io::file: an open file with asynchronous positional and sequential I/O
// (.NET RandomAccess + FileStream, in one move-only RAII type).
//
//   using namespace tpl::io;
//   file f = file::open("data.bin", file_mode::open, file_access::read);
//   std::vector<std::byte> buf(64 * 1024);
//   std::size_t n = co_await f.read_at_async(4096, buf, token);   // pread: 0 at end of file
//   file out = file::open("copy.bin", file_mode::create, file_access::write);
//   co_await out.write_async(std::span(buf).first(n));             // writes all n bytes
//   co_await out.flush_async();                                    // fsync
//
// Semantics:
//   1. open() throws file_not_found, access_denied (also for a directory) or io_error, each
//      carrying the std::error_code, and std::invalid_argument for a mode/access pair that makes
//      no sense (truncate or append without write access; as .NET's ArgumentException).
//   2. read_at_async reads at most buffer.size() bytes at `offset` and returns how many it read:
//      fewer near the end of the file, 0 at or past it. write_at_async writes the whole buffer
//      (looping over short writes) and returns its size. Neither moves the sequential position.
//   3. read_async / write_async use and advance the file's position (0 after open, the file's
//      size with file_mode::append; seek() sets it). Like FileStream, a file supports one
//      sequential operation at a time: start the next once the previous completed.
//      Positional operations may run concurrently from any number of tasks.
//   4. Cancellation (as .NET): a token canceled before the operation starts cancels it
//      (tpl::operation_canceled); once the system call runs, it completes. A write that needs
//      several system calls checks the token between them and throws io_canceled with the bytes
//      already written.
//   5. close() (and the destructor) returns at once. Operations that have not started yet fail with
//      operation_aborted; ones already in their system call complete, and the descriptor is closed
//      when the last of them ends (a reference count, as .NET's SafeHandle), so a descriptor
//      number is never reused under a running call.
//   6. Where the awaiting coroutine resumes: with the pool engine, on a thread pool worker (an
//      operation started on a worker runs its system call there, inside a blocking_scope, and
//      completes synchronously; one started elsewhere hops to the default pool first). With
//      io_uring, on the default pool once the completion arrives. active_io_engine() says which.
//   Thread safety: distinct operations may be started concurrently from several threads (rule 3
//   aside); open/close/move/set_size/seek belong to the owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "tpl/cancellation.hpp"
#include "tpl/io/io_error.hpp"
#include "tpl/value_task.hpp"

namespace tpl::io {

namespace detail {
struct io_handle;
}

/// How open() treats an existing or missing file (.NET FileMode).
enum class file_mode : unsigned char {
  create_new,      ///< create; fail (io_error, EEXIST) if it exists
  create,          ///< create, or truncate an existing file
  open,            ///< open an existing file; file_not_found if missing
  open_or_create,  ///< open, creating it if missing
  truncate,        ///< open an existing file and cut it to 0 bytes (needs write access)
  append,          ///< open or create, position at the end (needs write access)
};

/// What the opened file may do (.NET FileAccess).
enum class file_access : unsigned char { read = 1, write = 2, read_write = 3 };

/// What flush_async makes durable.
enum class flush_mode : unsigned char {
  data_and_metadata,  ///< fsync (.NET Flush(flushToDisk: true))
  data,               ///< fdatasync: the data and the metadata needed to read it back
};

class file {
 public:
  /// A closed file (is_open() is false; every operation throws invalid_operation).
  file() noexcept = default;
  /// Opens `path`. `permissions` applies to a file created here (before the umask).
  static file open(const std::filesystem::path& path, file_mode mode,
                   file_access access = file_access::read_write, unsigned permissions = 0666);

  file(file&& other) noexcept;
  file& operator=(file&& other) noexcept;
  file(const file&) = delete;
  file& operator=(const file&) = delete;
  ~file() { close(); }

  bool is_open() const noexcept { return handle_ != nullptr; }

  /// pread at `offset`: the bytes read, 0 at or past the end of the file.
  value_task<std::size_t> read_at_async(std::uint64_t offset, std::span<std::byte> buffer,
                                        cancellation_token token = {});
  /// pwrite of the whole buffer at `offset`; returns buffer.size().
  value_task<std::size_t> write_at_async(std::uint64_t offset, std::span<const std::byte> buffer,
                                         cancellation_token token = {});
  /// Reads at the position and advances it by the bytes read (0 at the end of the file).
  value_task<std::size_t> read_async(std::span<std::byte> buffer, cancellation_token token = {});
  /// Writes the whole buffer at the position and advances it; returns buffer.size().
  value_task<std::size_t> write_async(std::span<const std::byte> buffer, cancellation_token token = {});
  /// fsync / fdatasync.
  value_task<> flush_async(flush_mode mode = flush_mode::data_and_metadata, cancellation_token token = {});

  /// The file's current size (fstat). Throws io_error.
  std::uint64_t size() const;
  /// ftruncate: cuts or extends (with zeros) the file. The position does not move.
  void set_size(std::uint64_t size);
  /// The position read_async / write_async use.
  std::uint64_t position() const noexcept { return position_; }
  void seek(std::uint64_t position) noexcept { position_ = position; }

  /// Closes the file (see rule 5 above). Idempotent.
  void close() noexcept;
  /// The file descriptor, or -1 when closed. Stays owned by the file.
  int native_handle() const noexcept;

 private:
  explicit file(detail::io_handle* handle, std::uint64_t position) noexcept
      : handle_(handle), position_(position) {}
  detail::io_handle* checked(const char* operation) const;

  detail::io_handle* handle_ = nullptr;
  std::uint64_t position_ = 0;
};

}  // namespace tpl::io
