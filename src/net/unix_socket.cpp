// unix_socket (connect) and unix_listener (bind, listen, accept): Unix domain stream sockets.
#include <sys/socket.h>

#include <cerrno>
#include <stdexcept>

#include "accept.hpp"
#include "operations.hpp"
#include "socket_context.hpp"
#include "tpl/net/socket_error.hpp"
#include "tpl/net/unix_socket.hpp"

namespace tpl::net {

namespace detail {
value_task<> connect_on(socket_context& c, const socket_address& addr, const cancellation_token& token);
int open_socket(int family, int type);
}  // namespace detail

value_task<> unix_socket::connect_async(const unix_endpoint& remote, const cancellation_token& token) {
  if (is_open()) throw invalid_operation("tpl::net: connect_async on a socket that is already open");
  adopt(detail::open_socket(AF_UNIX, SOCK_STREAM));
  return detail::connect_on(*ctx_, detail::to_socket_address(remote), token);
}

unix_listener::unix_listener(const unix_endpoint& local, int backlog) {
  if (backlog <= 0) throw std::invalid_argument("tpl::net: a listen backlog must be positive");
  adopt(detail::open_socket(AF_UNIX, SOCK_STREAM));
  const detail::socket_address a = detail::to_socket_address(local);
  if (::bind(ctx_->fd(), a.get(), a.length) != 0)
    throw socket_error(errno, "tpl::net: bind to " + local.path() + " failed");
  if (::listen(ctx_->fd(), backlog) != 0) throw socket_error(errno, "tpl::net: listen failed");
}

value_task<unix_socket> unix_listener::accept_async(const cancellation_token& token) {
  return detail::accept_on<unix_socket>(context("accept_async"), token, [](int fd) {
    return unix_socket(detail::socket_context::create(fd));
  });
}

}  // namespace tpl::net
