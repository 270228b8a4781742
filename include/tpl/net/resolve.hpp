// tpl/net/resolve.hpp — tpl::net::resolve_async: host name lookup (.NET Dns.GetHostAddressesAsync).
//
//   std::vector<tpl::net::endpoint> eps = co_await tpl::net::resolve_async("localhost", 8080, token);
//   co_await sock.connect_async(eps.front(), token);
//
// getaddrinfo blocks, and glibc has no asynchronous form worth the name, so the lookup runs on a
// pool thread inside a tpl::blocking_scope: the pool counts the thread as blocked and may add one,
// so lookups never starve other work (.NET on Unix does the same). A numeric address is answered
// without a lookup. Cancellation is observed before and after the lookup (a running getaddrinfo
// cannot be stopped). Errors: socket_error whose code() is in resolve_category() (the EAI_ value,
// message from gai_strerror); std::invalid_argument for a port out of 0..65535.
#pragma once

#include <string>
#include <system_error>
#include <vector>

#include "tpl/cancellation.hpp"
#include "tpl/net/endpoint.hpp"
#include "tpl/task.hpp"

namespace tpl::net {

/// The error category of getaddrinfo's EAI_ codes.
const std::error_category& resolve_category() noexcept;

/// Every address of host (IPv4 and IPv6, in getaddrinfo's order) with the port. Never empty.
task<std::vector<endpoint>> resolve_async(std::string host, int port, cancellation_token token = {});

}  // namespace tpl::net
