// Conversions between tpl::net endpoints and the kernel's socket addresses (internal).
#pragma once

#include <sys/socket.h>

#include "tpl/net/endpoint.hpp"

namespace tpl::net::detail {

struct socket_address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  sockaddr* get() noexcept { return reinterpret_cast<sockaddr*>(&storage); }
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }
};

socket_address to_socket_address(const endpoint& ep) noexcept;
socket_address to_socket_address(const unix_endpoint& ep) noexcept;
/// Throws socket_error(EAFNOSUPPORT) for a family other than IPv4/IPv6.
endpoint to_endpoint(const sockaddr* sa, socklen_t length);
int to_native_family(address_family f) noexcept;

}  // namespace tpl::net::detail
