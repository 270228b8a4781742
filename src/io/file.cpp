// tpl::io::file: open (the FileMode/FileAccess mapping and its errors), the positional and
// sequential operations (each one transfer() on the file's handle), size, set_size, close.
//
// Invariants: a file owns one reference to its io_handle while open (handle_ != nullptr); the
// sequential position belongs to the file object, and an operation advances it only once it has
// completed (FileStream's rule: one sequential operation at a time).
#include "tpl/io/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine.hpp"
#include "operation.hpp"

namespace tpl::io {

namespace {

int open_flags(file_mode mode, file_access access) {
  const bool can_write = (static_cast<unsigned>(access) & static_cast<unsigned>(file_access::write)) != 0;
  const bool can_read = (static_cast<unsigned>(access) & static_cast<unsigned>(file_access::read)) != 0;
  if (!can_read && !can_write) throw std::invalid_argument("tpl::io::file::open: access must be read, write or read_write");
  if ((mode == file_mode::truncate || mode == file_mode::append) && !can_write)
    throw std::invalid_argument("tpl::io::file::open: truncate and append need write access");
  if ((mode == file_mode::create || mode == file_mode::create_new) && !can_write)
    throw std::invalid_argument("tpl::io::file::open: create and create_new need write access");
  int flags = O_CLOEXEC | (can_read && can_write ? O_RDWR : can_write ? O_WRONLY : O_RDONLY);
  switch (mode) {
    case file_mode::create_new: flags |= O_CREAT | O_EXCL; break;
    case file_mode::create: flags |= O_CREAT | O_TRUNC; break;
    case file_mode::open: break;
    case file_mode::open_or_create: flags |= O_CREAT; break;
    case file_mode::truncate: flags |= O_TRUNC; break;
    case file_mode::append: flags |= O_CREAT; break;
    default: throw std::invalid_argument("tpl::io::file::open: unknown file_mode");
  }
  return flags;
}

}  // namespace

file file::open(const std::filesystem::path& path, file_mode mode, file_access access, unsigned permissions) {
  const int flags = open_flags(mode, access);
  detail::engine& eng = detail::current_engine();  // a bad TPL_IO_ENGINE throws here, before open
  int fd = -1;
  do {
    fd = ::open(path.c_str(), flags, static_cast<mode_t>(permissions));
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) detail::throw_io_error(errno, "tpl::io::file::open: cannot open \"" + path.string() + "\"");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    const int error = S_ISDIR(st.st_mode) ? EISDIR : errno;
    ::close(fd);
    detail::throw_io_error(error, "tpl::io::file::open: cannot open \"" + path.string() + "\" as a file");
  }
  auto* h = new (std::nothrow) detail::io_handle(fd, detail::handle_kind::file, &eng);
  if (h == nullptr) {
    ::close(fd);
    throw std::bad_alloc();
  }
  const std::uint64_t position = mode == file_mode::append ? static_cast<std::uint64_t>(st.st_size) : 0;
  return file(h, position);
}

file::file(file&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), position_(std::exchange(other.position_, 0)) {}

file& file::operator=(file&& other) noexcept {
  if (this != &other) {
    close();
    handle_ = std::exchange(other.handle_, nullptr);
    position_ = std::exchange(other.position_, 0);
  }
  return *this;
}

void file::close() noexcept {
  if (detail::io_handle* h = std::exchange(handle_, nullptr)) h->close_and_release();
}

int file::native_handle() const noexcept { return handle_ != nullptr ? handle_->fd : -1; }

detail::io_handle* file::checked(const char* operation) const {
  if (handle_ == nullptr) throw invalid_operation(std::string("tpl::io::file::") + operation + ": the file is not open");
  return handle_;
}

value_task<std::size_t> file::read_at_async(std::uint64_t offset, std::span<std::byte> buffer,
                                            cancellation_token token) {
  detail::io_handle* h = checked("read_at_async");
  if (buffer.empty()) return value_task<std::size_t>(std::size_t{0});
  return detail::transfer(h, {detail::op_code::read, offset, buffer.data(), buffer.size(), false, true},
                          std::move(token));
}

value_task<std::size_t> file::write_at_async(std::uint64_t offset, std::span<const std::byte> buffer,
                                             cancellation_token token) {
  detail::io_handle* h = checked("write_at_async");
  if (buffer.empty()) return value_task<std::size_t>(std::size_t{0});
  // The engine only reads from a write's buffer; the request type is shared with reads.
  auto* data = const_cast<std::byte*>(buffer.data());
  return detail::transfer(h, {detail::op_code::write, offset, data, buffer.size(), true, true}, std::move(token));
}

value_task<std::size_t> file::read_async(std::span<std::byte> buffer, cancellation_token token) {
  checked("read_async");
  const std::size_t n = co_await read_at_async(position_, buffer, std::move(token));
  position_ += n;
  co_return n;
}

value_task<std::size_t> file::write_async(std::span<const std::byte> buffer, cancellation_token token) {
  checked("write_async");
  const std::size_t n = co_await write_at_async(position_, buffer, std::move(token));
  position_ += n;
  co_return n;
}

value_task<> file::flush_async(flush_mode mode, cancellation_token token) {
  detail::io_handle* h = checked("flush_async");
  const auto code = mode == flush_mode::data ? detail::op_code::fdatasync : detail::op_code::fsync;
  co_await detail::transfer(h, {code, 0, nullptr, 0, false, true}, std::move(token));
}

std::uint64_t file::size() const {
  detail::io_handle* h = checked("size");
  struct stat st {};
  if (::fstat(h->fd, &st) != 0) detail::throw_io_error(errno, "tpl::io::file::size: fstat failed");
  return static_cast<std::uint64_t>(st.st_size);
}

void file::set_size(std::uint64_t size) {
  detail::io_handle* h = checked("set_size");
  int r = 0;
  do {
    r = ::ftruncate(h->fd, static_cast<off_t>(size));
  } while (r != 0 && errno == EINTR);
  if (r != 0) detail::throw_io_error(errno, "tpl::io::file::set_size: ftruncate failed");
}

}  // namespace tpl::io
