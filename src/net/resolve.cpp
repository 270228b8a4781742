// resolve_async: getaddrinfo on a pool thread inside a blocking_scope (the pool compensates).
#include <netdb.h>
#include <sys/socket.h>

#include <memory>
#include <string>

#include "sockaddr.hpp"
#include "tpl/net/resolve.hpp"
#include "tpl/net/socket_error.hpp"
#include "tpl/scheduler.hpp"
#include "tpl/thread_pool.hpp"

namespace tpl::net {

namespace {

class resolve_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tpl.net.resolve"; }
  std::string message(int code) const override { return ::gai_strerror(code); }
};

}  // namespace

const std::error_category& resolve_category() noexcept {
  static const resolve_category_impl category;
  return category;
}

task<std::vector<endpoint>> resolve_async(std::string host, int port, cancellation_token token) {
  const endpoint port_check(ip_address{}, port);  // throws std::invalid_argument when out of range
  (void)port_check;
  token.throw_if_cancellation_requested();
  if (auto numeric = ip_address::try_parse(host)) co_return std::vector<endpoint>{endpoint(*numeric, port)};
  co_await resume_on(thread_pool::default_pool());
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* list = nullptr;
  int rc;
  {
    blocking_scope blocking("tpl::net::resolve_async (getaddrinfo)");
    rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &list);
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(list, ::freeaddrinfo);
  if (rc != 0) {
    if (rc == EAI_SYSTEM) throw socket_error(errno, "tpl::net: resolving \"" + host + "\" failed");
    throw socket_error(std::error_code(rc, resolve_category()), "tpl::net: resolving \"" + host + "\" failed");
  }
  token.throw_if_cancellation_requested();
  std::vector<endpoint> result;
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    const endpoint ep(detail::to_endpoint(a->ai_addr, a->ai_addrlen).address(), port);
    bool seen_before = false;
    for (const endpoint& e : result) seen_before = seen_before || e == ep;
    if (!seen_before) result.push_back(ep);
  }
  if (result.empty())
    throw socket_error(std::error_code(EAI_NONAME, resolve_category()), "tpl::net: \"" + host + "\" has no address");
  co_return result;
}

}  // namespace tpl::net
