// network_stream: a read buffer with line and exact reads, and a write buffer, over a socket.
// Its slow paths (a coroutine frame each, taken only when the buffer cannot serve the read) await
// the socket's receive_async, which waits in the socket's reusable receive source (op_source.hpp)
// when it has to, so a read that waits for the network costs that one frame.
#include "tpl/net/network_stream.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace tpl::net {

network_stream::network_stream(stream_socket& socket, const network_stream_options& options)
    : socket_(&socket), options_(options) {
  if (options_.read_buffer_bytes == 0 || options_.write_buffer_bytes == 0)
    throw std::invalid_argument("tpl::net::network_stream: buffer sizes must be positive");
  options_.max_line_bytes = std::max(options_.max_line_bytes, std::size_t{1});
  read_buffer_.resize(options_.read_buffer_bytes);
  write_buffer_.reserve(options_.write_buffer_bytes);
}

std::optional<std::string_view> network_stream::take_line_from_buffer() noexcept {
  const std::byte* begin = read_buffer_.data() + read_begin_;
  const std::size_t size = read_end_ - read_begin_;
  const void* nl = std::memchr(begin + scanned_, '\n', size - scanned_);
  if (nl == nullptr) {
    scanned_ = size;
    return std::nullopt;
  }
  std::size_t len = static_cast<std::size_t>(static_cast<const std::byte*>(nl) - begin);
  read_begin_ += len + 1;
  scanned_ = 0;
  if (len > 0 && begin[len - 1] == std::byte{'\r'}) --len;
  return std::string_view(reinterpret_cast<const char*>(begin), len);
}

void network_stream::compact() noexcept {
  if (read_begin_ == 0) return;
  std::memmove(read_buffer_.data(), read_buffer_.data() + read_begin_, read_end_ - read_begin_);
  read_end_ -= read_begin_;
  read_begin_ = 0;
}

value_task<std::optional<std::string_view>> network_stream::read_line_async(const cancellation_token& token) {
  if (auto line = take_line_from_buffer()) return value_task<std::optional<std::string_view>>(line);
  return read_line_slow(token);
}

value_task<std::optional<std::string_view>> network_stream::read_line_slow(cancellation_token token) {
  for (;;) {
    if (at_end_) {
      if (read_end_ == read_begin_) co_return std::nullopt;
      const std::string_view rest(reinterpret_cast<const char*>(read_buffer_.data() + read_begin_),
                                  read_end_ - read_begin_);
      read_begin_ = read_end_ = scanned_ = 0;
      co_return rest;  // the buffer keeps these bytes until the next read
    }
    compact();
    if (read_end_ == read_buffer_.size()) {
      if (read_buffer_.size() >= options_.max_line_bytes)
        throw std::length_error("tpl::net::network_stream: a line is longer than max_line_bytes");
      read_buffer_.resize(std::min(read_buffer_.size() * 2, options_.max_line_bytes));
    }
    const std::size_t n = co_await socket_->receive_async(
        std::span<std::byte>(read_buffer_.data() + read_end_, read_buffer_.size() - read_end_), token);
    if (n == 0) {
      at_end_ = true;
      continue;
    }
    read_end_ += n;
    if (auto line = take_line_from_buffer()) co_return line;
  }
}

value_task<std::size_t> network_stream::read_async(std::span<std::byte> buffer, const cancellation_token& token) {
  if (buffer.empty()) return value_task<std::size_t>(std::size_t{0});
  if (buffered() != 0) {
    const std::size_t n = std::min(buffer.size(), buffered());
    std::memcpy(buffer.data(), read_buffer_.data() + read_begin_, n);
    read_begin_ += n;
    scanned_ = 0;
    return value_task<std::size_t>(n);
  }
  if (at_end_) return value_task<std::size_t>(std::size_t{0});
  return read_slow(buffer, token);
}

value_task<std::size_t> network_stream::read_slow(std::span<std::byte> buffer, cancellation_token token) {
  read_begin_ = read_end_ = scanned_ = 0;
  if (buffer.size() >= read_buffer_.size()) {  // large reads go straight to the caller's memory
    const std::size_t n = co_await socket_->receive_async(buffer, token);
    if (n == 0) at_end_ = true;
    co_return n;
  }
  const std::size_t got =
      co_await socket_->receive_async(std::span<std::byte>(read_buffer_), token);
  if (got == 0) {
    at_end_ = true;
    co_return 0;
  }
  read_end_ = got;
  const std::size_t n = std::min(buffer.size(), got);
  std::memcpy(buffer.data(), read_buffer_.data(), n);
  read_begin_ = n;
  co_return n;
}

value_task<> network_stream::read_exactly_async(std::span<std::byte> buffer, const cancellation_token& token) {
  const std::size_t from_buffer = std::min(buffer.size(), buffered());
  std::memcpy(buffer.data(), read_buffer_.data() + read_begin_, from_buffer);
  read_begin_ += from_buffer;
  scanned_ = 0;
  if (from_buffer == buffer.size()) return value_task<>::completed();
  if (at_end_) throw end_of_stream(from_buffer);
  return [](network_stream& self, std::span<std::byte> rest, std::size_t done,
            cancellation_token tok) -> value_task<> {
    while (!rest.empty()) {
      const std::size_t n = co_await self.read_async(rest, tok);
      if (n == 0) throw end_of_stream(done);
      rest = rest.subspan(n);
      done += n;
    }
  }(*this, buffer.subspan(from_buffer), from_buffer, token);
}

value_task<> network_stream::write_async(std::span<const std::byte> data, const cancellation_token& token) {
  if (write_buffer_.size() + data.size() <= options_.write_buffer_bytes) {
    write_buffer_.insert(write_buffer_.end(), data.begin(), data.end());
    return value_task<>::completed();
  }
  return write_slow(data, token);
}

value_task<> network_stream::write_slow(std::span<const std::byte> data, cancellation_token token) {
  co_await flush_async(token);
  if (data.size() >= options_.write_buffer_bytes)
    co_await socket_->send_async(data, token);
  else
    write_buffer_.insert(write_buffer_.end(), data.begin(), data.end());
}

value_task<> network_stream::flush_async(const cancellation_token& token) {
  if (write_buffer_.empty()) return value_task<>::completed();
  value_task<> send = socket_->send_async(std::span<const std::byte>(write_buffer_), token);
  if (send.is_completed()) {  // the common case: no frame
    send.get();
    write_buffer_.clear();  // keeps the capacity
    return value_task<>::completed();
  }
  return [](network_stream& self, value_task<> pending) -> value_task<> {
    co_await std::move(pending);
    self.write_buffer_.clear();
  }(*this, std::move(send));
}

}  // namespace tpl::net
