// tpl/net/stream_socket.hpp — tpl::net::stream_socket: the byte-stream operations TCP and Unix
// domain stream sockets share (.NET Socket's ReceiveAsync / SendAsync / Shutdown).
//
//   std::array<std::byte, 4096> buf;
//   std::size_t n = co_await sock.receive_async(buf, token);   // 0: the peer closed its side
//   co_await sock.send_async(std::span(buf).first(n), token);  // sends all of it
//   co_await sock.receive_exactly_async(header, token);         // end_of_stream if it ends first
//   sock.shutdown_send();                                       // FIN: the peer's receive gets 0
//
// Every operation first makes its system call; only if the kernel has no data (no room) does it
// wait for the socket engine. An operation that finds data or room at once completes
// synchronously and allocates nothing; one that waits allocates nothing either (a receive and a
// send each wait in an operation object the socket keeps and reuses, as .NET's Socket does) and
// runs its continuation on the thread pool (or the engine thread in inline mode, docs/io.md). As
// with .NET's ValueTask, await each returned value_task at most once, keeping the buffer alive
// until the operation ends; one dropped while it waits goes on by itself, its outcome dropped,
// and frees the socket's reusable operation when it ends. Errors are socket_error with the errno
// (connection reset, ...). SIGPIPE is never raised (MSG_NOSIGNAL). EINTR, short writes and
// spurious readiness are handled inside.
//
// Cancellation: a canceled receive has taken nothing from the kernel (the next receive gets those
// bytes) and throws tpl::operation_canceled; a canceled send throws send_canceled, whose
// bytes_sent() says how much went out.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "tpl/cancellation.hpp"
#include "tpl/net/socket_base.hpp"
#include "tpl/net/socket_error.hpp"
#include "tpl/value_task.hpp"

namespace tpl::net {

class stream_socket : public socket_base {
 public:
  /// Receives at least one byte (up to buffer.size()), or 0 at the end of the stream (or for an
  /// empty buffer).
  value_task<std::size_t> receive_async(std::span<std::byte> buffer, const cancellation_token& token = {});
  value_task<std::size_t> receive_async(std::span<char> buffer, const cancellation_token& token = {}) {
    return receive_async(std::as_writable_bytes(buffer), token);
  }
  /// Fills buffer completely; throws end_of_stream if the stream ends first.
  value_task<> receive_exactly_async(std::span<std::byte> buffer, const cancellation_token& token = {});
  /// Sends all of data (several system calls if the kernel takes it in parts).
  value_task<> send_async(std::span<const std::byte> data, const cancellation_token& token = {});
  value_task<> send_async(std::string_view data, const cancellation_token& token = {}) {
    return send_async(std::as_bytes(std::span<const char>(data.data(), data.size())), token);
  }
  /// Ends the sending direction (shutdown(SHUT_WR)): the peer reads the end of the stream after
  /// what was sent. Throws socket_error.
  void shutdown_send();

 protected:
  stream_socket() noexcept = default;
  using socket_base::socket_base;
};

}  // namespace tpl::net
