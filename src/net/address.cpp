// ip_address, endpoint, unix_endpoint: parsing, printing, and the kernel's socket addresses.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

#include "sockaddr.hpp"
#include "tpl/net/ip_address.hpp"
#include "tpl/net/socket_error.hpp"

namespace tpl::net {

namespace {
/// The longest path sockaddr_un holds with its terminating NUL.
constexpr std::size_t kMaxUnixPathBytes = sizeof(sockaddr_un::sun_path) - 1;
}  // namespace

ip_address ip_address::v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) noexcept {
  ip_address r;
  r.bytes_[0] = a, r.bytes_[1] = b, r.bytes_[2] = c, r.bytes_[3] = d;
  return r;
}

ip_address ip_address::v6(const std::array<std::uint8_t, 16>& bytes, std::uint32_t scope_id) noexcept {
  ip_address r;
  r.family_ = address_family::ipv6;
  r.bytes_ = bytes;
  r.scope_id_ = scope_id;
  return r;
}

ip_address ip_address::ipv6_loopback() noexcept {
  std::array<std::uint8_t, 16> b{};
  b[15] = 1;
  return v6(b);
}

ip_address ip_address::ipv6_any() noexcept { return v6({}); }

bool ip_address::is_loopback() const noexcept {
  if (is_v4()) return bytes_[0] == 127;
  return *this == ipv6_loopback();
}

std::optional<ip_address> ip_address::try_parse(std::string_view text) noexcept {
  char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
  if (text.empty() || text.size() >= sizeof buf) return std::nullopt;
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  ip_address r;
  if (text.find(':') == std::string_view::npos) {
    if (::inet_pton(AF_INET, buf, r.bytes_.data()) != 1) return std::nullopt;
    return r;
  }
  r.family_ = address_family::ipv6;
  if (char* zone = std::strchr(buf, '%')) {
    *zone++ = '\0';
    if (*zone == '\0') return std::nullopt;
    std::uint32_t id = 0;
    const char* end = zone + std::strlen(zone);
    const auto [p, ec] = std::from_chars(zone, end, id);
    if (ec == std::errc() && p == end)
      r.scope_id_ = id;
    else if ((r.scope_id_ = ::if_nametoindex(zone)) == 0)
      return std::nullopt;
  }
  if (::inet_pton(AF_INET6, buf, r.bytes_.data()) != 1) return std::nullopt;
  return r;
}

ip_address ip_address::parse(std::string_view text) {
  if (auto r = try_parse(text)) return *r;
  throw std::invalid_argument("tpl::net: \"" + std::string(text) + "\" is not an IPv4 or IPv6 address");
}

std::string ip_address::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  ::inet_ntop(is_v4() ? AF_INET : AF_INET6, bytes_.data(), buf, sizeof buf);
  std::string s(buf);
  if (is_v6() && scope_id_ != 0) s += "%" + std::to_string(scope_id_);
  return s;
}

endpoint::endpoint(const ip_address& address, int port) : address_(address) {
  if (port < 0 || port > 65535)
    throw std::invalid_argument("tpl::net: port " + std::to_string(port) + " is out of range 0..65535");
  port_ = static_cast<std::uint16_t>(port);
}

endpoint endpoint::parse(std::string_view text) {
  const auto fail = [&](const char* why) -> endpoint {
    throw std::invalid_argument("tpl::net: \"" + std::string(text) + "\" is not an endpoint: " + why);
  };
  std::string_view host, port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return fail("no ']' after an IPv6 address");
    host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':') return fail("expected ':port' after ']'");
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail("expected address:port");
    host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos) return fail("an IPv6 address needs brackets: [addr]:port");
    port_text = text.substr(colon + 1);
  }
  if (port_text.empty()) return fail("the port is missing");
  unsigned long port = 0;
  const auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && port > 65535))
    return fail("the port is out of range 0..65535");
  if (ec != std::errc() || p != port_text.data() + port_text.size()) return fail("the port is not a number");
  const auto address = ip_address::try_parse(host);
  if (!address) return fail("the address is not a numeric IPv4 or IPv6 address");
  return endpoint(*address, static_cast<int>(port));
}

std::string endpoint::to_string() const {
  const std::string p = ":" + std::to_string(port_);
  return address_.is_v6() ? "[" + address_.to_string() + "]" + p : address_.to_string() + p;
}

unix_endpoint::unix_endpoint(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw std::invalid_argument("tpl::net: a Unix socket path must not be empty");
  if (path_.size() > kMaxUnixPathBytes)
    throw std::invalid_argument("tpl::net: the Unix socket path \"" + path_ + "\" is longer than " +
                                std::to_string(kMaxUnixPathBytes) + " bytes");
}

namespace detail {

socket_address to_socket_address(const endpoint& ep) noexcept {
  socket_address a;
  if (ep.address().is_v4()) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(ep.port());
    std::memcpy(&in->sin_addr, ep.address().bytes().data(), 4);
    a.length = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(ep.port());
    std::memcpy(&in6->sin6_addr, ep.address().bytes().data(), 16);
    in6->sin6_scope_id = ep.address().scope_id();
    a.length = sizeof(sockaddr_in6);
  }
  return a;
}

socket_address to_socket_address(const unix_endpoint& ep) noexcept {
  socket_address a;
  auto* un = reinterpret_cast<sockaddr_un*>(&a.storage);
  un->sun_family = AF_UNIX;
  std::memcpy(un->sun_path, ep.path().data(), ep.path().size());  // the constructor checked the size
  a.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + ep.path().size() + 1);
  return a;
}

endpoint to_endpoint(const sockaddr* sa, socklen_t length) {
  if (sa->sa_family == AF_INET && length >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    const auto* b = reinterpret_cast<const std::uint8_t*>(&in->sin_addr);
    return endpoint(ip_address::v4(b[0], b[1], b[2], b[3]), ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6 && length >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    std::array<std::uint8_t, 16> b;
    std::memcpy(b.data(), &in6->sin6_addr, 16);
    return endpoint(ip_address::v6(b, in6->sin6_scope_id), ntohs(in6->sin6_port));
  }
  throw socket_error(EAFNOSUPPORT, "tpl::net: not an IPv4 or IPv6 socket address");
}

int to_native_family(address_family f) noexcept { return f == address_family::ipv4 ? AF_INET : AF_INET6; }

}  // namespace detail

}  // namespace tpl::net
