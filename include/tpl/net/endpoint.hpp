// tpl/net/endpoint.hpp — tpl::net::endpoint (an IP address and a port, .NET IPEndPoint) and
// tpl::net::unix_endpoint (a Unix domain socket path, .NET UnixDomainSocketEndPoint).
//
//   auto ep = tpl::net::endpoint::parse("127.0.0.1:8080");    // or "[::1]:8080"
//   tpl::net::endpoint any(tpl::net::ip_address::ipv4_any(), 0);  // port 0: the kernel picks one
//   tpl::net::unix_endpoint u("/tmp/app.sock");
//
// Errors: a port outside 0..65535, a string that is not "address:port" with a numeric address
// (IPv6 in brackets), or a Unix path that is empty or longer than the kernel's 107 bytes throw
// std::invalid_argument saying which.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tpl/net/ip_address.hpp"

namespace tpl::net {

class endpoint {
 public:
  /// 0.0.0.0:0.
  endpoint() noexcept = default;
  /// Throws std::invalid_argument if port is outside 0..65535.
  endpoint(const ip_address& address, int port);

  /// "a.b.c.d:port" or "[v6]:port". Throws std::invalid_argument naming the text and the reason.
  static endpoint parse(std::string_view text);

  const ip_address& address() const noexcept { return address_; }
  std::uint16_t port() const noexcept { return port_; }
  address_family family() const noexcept { return address_.family(); }

  /// "127.0.0.1:80", "[::1]:80".
  std::string to_string() const;

  friend bool operator==(const endpoint&, const endpoint&) noexcept = default;

 private:
  ip_address address_;
  std::uint16_t port_ = 0;
};

class unix_endpoint {
 public:
  /// Throws std::invalid_argument for an empty path or one longer than 107 bytes.
  explicit unix_endpoint(std::string path);
  const std::string& path() const noexcept { return path_; }
  friend bool operator==(const unix_endpoint&, const unix_endpoint&) noexcept = default;

 private:
  std::string path_;
};

}  // namespace tpl::net
