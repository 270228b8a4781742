// socket_base: ownership of a socket_context, close, options; throw_op_error.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "operations.hpp"
#include "socket_context.hpp"
#include "tpl/net/socket_base.hpp"
#include "tpl/net/socket_error.hpp"

namespace tpl::net {

namespace detail {

void throw_op_error(int error, const char* what) {
  switch (error) {
    case kAborted:
      throw socket_error(std::make_error_code(std::errc::operation_canceled),
                         std::string("tpl::net: ") + what + " aborted: the socket was closed");
    case kCanceled: throw operation_canceled();
    case kBusy:
      throw invalid_operation(std::string("tpl::net: another ") + what +
                              " (or an operation of the same direction) is already pending on this socket");
    default: throw socket_error(error, std::string("tpl::net: ") + what + " failed");
  }
}

}  // namespace detail

socket_base& socket_base::operator=(socket_base&& o) noexcept {
  if (this != &o) {
    if (ctx_ != nullptr) {
      ctx_->close();
      ctx_->release();
    }
    ctx_ = o.ctx_;
    o.ctx_ = nullptr;
  }
  return *this;
}

socket_base::~socket_base() {
  if (ctx_ != nullptr) {
    ctx_->close();
    ctx_->release();
  }
}

bool socket_base::is_open() const noexcept { return ctx_ != nullptr && !ctx_->is_closed(); }

void socket_base::close() noexcept {
  if (ctx_ != nullptr) ctx_->close();
}

int socket_base::native_handle() const noexcept { return is_open() ? ctx_->fd() : -1; }

detail::socket_context& socket_base::context(const char* what) const {
  if (ctx_ == nullptr) throw invalid_operation(std::string("tpl::net: ") + what + " on a socket that is not open");
  return *ctx_;
}

void socket_base::adopt(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    const int e = errno;
    ::close(fd);
    throw socket_error(e, "tpl::net: cannot make the socket non-blocking");
  }
  detail::socket_context* c = detail::socket_context::create(fd);
  if (ctx_ != nullptr) {
    ctx_->close();
    ctx_->release();
  }
  ctx_ = c;
}

void socket_base::set_option(int level, int name, const void* value, unsigned size, const char* what) {
  detail::socket_context& c = context(what);
  if (!c.fd_acquire()) detail::throw_op_error(detail::kAborted, what);
  const int r = ::setsockopt(c.fd(), level, name, value, size);
  const int e = errno;
  c.fd_release();
  if (r != 0) throw socket_error(e, std::string("tpl::net: ") + what + " failed");
}

void socket_base::get_option(int level, int name, void* value, unsigned* size, const char* what) const {
  detail::socket_context& c = context(what);
  if (!c.fd_acquire()) detail::throw_op_error(detail::kAborted, what);
  socklen_t len = *size;
  const int r = ::getsockopt(c.fd(), level, name, value, &len);
  const int e = errno;
  c.fd_release();
  *size = len;
  if (r != 0) throw socket_error(e, std::string("tpl::net: ") + what + " failed");
}

}  // namespace tpl::net
