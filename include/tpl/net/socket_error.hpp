// tpl/net/socket_error.hpp — the errors tpl::net reports.
//
// Provides:
//   tpl::net::socket_error    (.NET SocketException): a failed socket call, carrying its
//                             std::error_code (connection refused, reset, unreachable, ...).
//                             An operation still pending when its socket is closed or destroyed
//                             fails with code() == std::errc::operation_canceled and a message
//                             saying the socket was closed (.NET SocketError.OperationAborted).
//   tpl::net::send_canceled   a send_async canceled through its token after part of the data
//                             went out: an operation_canceled that says how much (bytes_sent()).
//   tpl::net::end_of_stream   (.NET EndOfStreamException): receive_exactly / read_exactly_async
//                             met the end of the stream before the requested count.
// Bad arguments (an address string that does not parse, a port out of range, a Unix socket path
// too long) are std::invalid_argument, as everywhere in tpl.
//
//   try { co_await sock.connect_async(tpl::net::endpoint::parse("127.0.0.1:1"), token); }
//   catch (const tpl::net::socket_error& e) {
//     if (e.code() == std::errc::connection_refused) retry_later();
//   }
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>

#include "tpl/exceptions.hpp"

namespace tpl::net {

/// A socket call failed. A std::system_error (so a std::runtime_error, tpl's family for run-time
/// conditions) whose code() is the errno of the call in std::system_category(), or
/// std::errc::operation_canceled for an operation aborted by close().
class socket_error : public std::system_error {
 public:
  socket_error(std::error_code code, const std::string& what) : std::system_error(code, what) {}
  /// From an errno value, in the system category.
  socket_error(int error_number, const std::string& what)
      : std::system_error(error_number, std::system_category(), what) {}
};

/// A send canceled by its token. bytes_sent() bytes of the buffer went out before it stopped
/// (those are with the peer or in the kernel's send buffer; the rest was not sent).
class send_canceled : public operation_canceled {
 public:
  explicit send_canceled(std::size_t bytes_sent)
      : operation_canceled("The send was canceled after " + std::to_string(bytes_sent) + " bytes."),
        bytes_sent_(bytes_sent) {}
  std::size_t bytes_sent() const noexcept { return bytes_sent_; }

 private:
  std::size_t bytes_sent_;
};

/// The stream ended before an exact read was satisfied. received() bytes had arrived.
class end_of_stream : public std::runtime_error {
 public:
  explicit end_of_stream(std::size_t received)
      : std::runtime_error("The stream ended after " + std::to_string(received) +
                           " bytes, before the requested count."),
        received_(received) {}
  std::size_t received() const noexcept { return received_; }

 private:
  std::size_t received_;
};

}  // namespace tpl::net
