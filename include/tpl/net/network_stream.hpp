// tpl/net/network_stream.hpp — tpl::net::network_stream: buffered reading and writing over a
// stream socket (.NET NetworkStream wrapped in a buffered reader/writer), so protocol code reads
// lines and exact counts without its own parsing loop.
//
//   tpl::net::network_stream stream(conn);                  // conn: a tcp_socket / unix_socket
//   while (auto line = co_await stream.read_line_async(token)) {   // nullopt at the end
//     if (line->empty()) break;                             // "\r\n" or "\n" stripped
//     co_await stream.write_async(*line);                   // buffered
//   }
//   co_await stream.flush_async(token);                     // sends what is buffered
//
// Semantics:
//   1. A line is returned without its "\n" (and a "\r" before it). The string_view points into
//      the stream's buffer and stays valid until the next read call. A line longer than
//      max_line_bytes throws std::length_error; the end of the stream before a "\n" returns the
//      partial line, then nullopt.
//   2. Reads are served from the buffer first; a read that the buffer satisfies completes
//      synchronously and allocates nothing. buffered() says how many received bytes wait there
//      (a server answering pipelined requests flushes only when it reaches 0).
//   3. write_async copies into the write buffer and sends only when it is full (or the data is
//      larger than the buffer); flush_async sends the rest. Destroying the stream does not flush.
//   4. The stream does not own the socket and must not outlive it. One reader and one writer at
//      a time, as on the socket.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "tpl/cancellation.hpp"
#include "tpl/net/stream_socket.hpp"
#include "tpl/value_task.hpp"

namespace tpl::net {

struct network_stream_options {
  std::size_t read_buffer_bytes = 8192;
  std::size_t write_buffer_bytes = 8192;
  /// The longest line read_line_async accepts (its buffer grows up to this).
  std::size_t max_line_bytes = 64 * 1024;
};

class network_stream {
 public:
  explicit network_stream(stream_socket& socket, const network_stream_options& options = {});
  network_stream(const network_stream&) = delete;
  network_stream& operator=(const network_stream&) = delete;

  /// Up to buffer.size() bytes (at least one), 0 at the end of the stream.
  value_task<std::size_t> read_async(std::span<std::byte> buffer, const cancellation_token& token = {});
  /// Exactly buffer.size() bytes; throws end_of_stream if the stream ends first.
  value_task<> read_exactly_async(std::span<std::byte> buffer, const cancellation_token& token = {});
  /// The next line (see 1.), or nullopt at the end of the stream.
  value_task<std::optional<std::string_view>> read_line_async(const cancellation_token& token = {});

  value_task<> write_async(std::span<const std::byte> data, const cancellation_token& token = {});
  value_task<> write_async(std::string_view data, const cancellation_token& token = {}) {
    return write_async(std::as_bytes(std::span<const char>(data.data(), data.size())), token);
  }
  value_task<> flush_async(const cancellation_token& token = {});

  /// Received bytes not yet read.
  std::size_t buffered() const noexcept { return read_end_ - read_begin_; }
  /// Written bytes not yet sent.
  std::size_t pending_write() const noexcept { return write_buffer_.size(); }

 private:
  std::optional<std::string_view> take_line_from_buffer() noexcept;
  void compact() noexcept;
  value_task<std::optional<std::string_view>> read_line_slow(cancellation_token token);
  value_task<std::size_t> read_slow(std::span<std::byte> buffer, cancellation_token token);
  value_task<> write_slow(std::span<const std::byte> data, cancellation_token token);

  stream_socket* socket_;
  network_stream_options options_;
  std::vector<std::byte> read_buffer_;
  std::size_t read_begin_ = 0, read_end_ = 0;
  std::size_t scanned_ = 0;  // bytes after read_begin_ already searched for '\n'
  bool at_end_ = false;
  std::vector<std::byte> write_buffer_;  // capacity reserved once; size() is what waits
};

}  // namespace tpl::net
