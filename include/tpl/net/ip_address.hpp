// tpl/net/ip_address.hpp — tpl::net::ip_address: an IPv4 or IPv6 address (.NET IPAddress).
//
//   auto a = tpl::net::ip_address::parse("127.0.0.1");        // throws std::invalid_argument
//   auto b = tpl::net::ip_address::try_parse("fe80::1%eth0");   // std::optional, no exception
//   auto any6 = tpl::net::ip_address::ipv6_any();
//   std::string s = a.to_string();                              // "127.0.0.1"
//
// Only numeric addresses: names go through resolve_async (tpl/net/resolve.hpp). An IPv6 address
// may carry a zone (scope id) after '%', as a number or an interface name.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tpl::net {

enum class address_family : std::uint8_t { ipv4, ipv6 };

class ip_address {
 public:
  /// 0.0.0.0.
  ip_address() noexcept = default;
  /// From four bytes in network order (a.b.c.d).
  static ip_address v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) noexcept;
  /// From sixteen bytes in network order, with an optional zone (scope id).
  static ip_address v6(const std::array<std::uint8_t, 16>& bytes, std::uint32_t scope_id = 0) noexcept;

  static ip_address ipv4_loopback() noexcept { return v4(127, 0, 0, 1); }  ///< 127.0.0.1
  static ip_address ipv4_any() noexcept { return {}; }                      ///< 0.0.0.0
  static ip_address ipv6_loopback() noexcept;                               ///< ::1
  static ip_address ipv6_any() noexcept;                                    ///< ::

  /// Parses a dotted IPv4 address or an IPv6 address (no brackets, no port). Throws
  /// std::invalid_argument naming the string when it is neither.
  static ip_address parse(std::string_view text);
  static std::optional<ip_address> try_parse(std::string_view text) noexcept;

  address_family family() const noexcept { return family_; }
  bool is_v4() const noexcept { return family_ == address_family::ipv4; }
  bool is_v6() const noexcept { return family_ == address_family::ipv6; }
  bool is_loopback() const noexcept;
  /// 4 (IPv4) or 16 (IPv6) bytes in network order, at the front of the array.
  const std::array<std::uint8_t, 16>& bytes() const noexcept { return bytes_; }
  std::uint32_t scope_id() const noexcept { return scope_id_; }

  /// The canonical text ("127.0.0.1", "::1", "fe80::1%2").
  std::string to_string() const;

  friend bool operator==(const ip_address&, const ip_address&) noexcept = default;

 private:
  std::array<std::uint8_t, 16> bytes_{};
  std::uint32_t scope_id_ = 0;
  address_family family_ = address_family::ipv4;
};

}  // namespace tpl::net
