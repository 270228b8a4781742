// network_stream: lines (CRLF and LF, split across receives, at the end, too long), exact reads,
// buffered writes and flush; reads that wait for the network (the slow paths await the socket's
// receive directly): canceled, aborted by close, or completed by data that arrives later.
#include <string>

#include "net_test_support.hpp"

namespace net_stream_test_cpp {

namespace {

using namespace std::string_literals;

tpl::task<std::vector<std::string>> read_lines(tpl::net::network_stream& s) {
  std::vector<std::string> lines;
  for (;;) {
    auto line = co_await s.read_line_async();
    if (!line) co_return lines;
    lines.emplace_back(*line);
  }
}

TEST(net_stream, lines_split_across_receives_come_out_whole) {
  auto p = net_test::connected_pair();
  tpl::net::network_stream in(p.server, {.read_buffer_bytes = 16});
  auto lines = read_lines(in);
  tpl::sync_wait(p.client.send_async("GET / HTTP/1.1\r\nHost: x"s));
  tpl::sync_wait(p.client.send_async("\r\n\r\nlast line without end"s));
  p.client.shutdown_send();
  const auto got = tpl::sync_wait(std::move(lines));
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], "GET / HTTP/1.1");
  EXPECT_EQ(got[1], "Host: x");
  EXPECT_EQ(got[2], "");
  EXPECT_EQ(got[3], "last line without end");
}

TEST(net_stream, a_line_longer_than_the_limit_is_an_error) {
  auto p = net_test::connected_pair();
  tpl::net::network_stream in(p.server, {.read_buffer_bytes = 16, .max_line_bytes = 64});
  // Built in place: g++ 12 reports a false -Warray-bounds on `std::string(100, 'x') + "\n"` when
  // it inlines the concatenation differently (seen with precompiled headers).
  std::string line(100, 'x');
  line.push_back('\n');
  tpl::sync_wait(p.client.send_async(line));
  EXPECT_THROW(tpl::sync_wait(in.read_line_async()), std::length_error);
}

TEST(net_stream, exact_reads_mix_with_lines_and_report_the_end) {
  auto p = net_test::connected_pair();
  tpl::net::network_stream in(p.server);
  tpl::sync_wait(p.client.send_async("len 5\nhelloabc"s));
  p.client.shutdown_send();
  auto line = tpl::sync_wait(in.read_line_async());
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "len 5");
  std::array<std::byte, 5> body;
  tpl::sync_wait(in.read_exactly_async(body));
  EXPECT_EQ(net_test::string_of(body), "hello");
  std::array<std::byte, 5> more;
  try {
    tpl::sync_wait(in.read_exactly_async(more));
    FAIL() << "read past the end";
  } catch (const tpl::net::end_of_stream& e) {
    EXPECT_EQ(e.received(), 3u);
  }
}

TEST(net_stream, a_waiting_line_read_completes_when_the_rest_of_the_line_arrives) {
  auto p = net_test::connected_pair();
  tpl::net::network_stream in(p.server, {.read_buffer_bytes = 16});
  tpl::sync_wait(p.client.send_async("first\nsec"s));
  auto first = tpl::sync_wait(in.read_line_async());
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, "first");
  // "sec" is buffered without its end: the read waits in the kernel's receive.
  auto second = in.read_line_async().as_task();
  EXPECT_FALSE(second.is_completed());
  tpl::sync_wait(p.client.send_async("ond line, longer than the buffer\n"s));
  const auto line = tpl::sync_wait(std::move(second));
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "second line, longer than the buffer");
}

TEST(net_stream, canceling_a_waiting_line_read_loses_no_byte) {
  auto p = net_test::connected_pair();
  tpl::net::network_stream in(p.server);
  tpl::cancellation_token_source cts;
  auto pending = in.read_line_async(cts.token()).as_task();
  EXPECT_FALSE(pending.is_completed());
  cts.cancel();
  EXPECT_THROW(tpl::sync_wait(std::move(pending)), tpl::operation_canceled);
  tpl::sync_wait(p.client.send_async("kept\n"s));
  const auto line = tpl::sync_wait(in.read_line_async());
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "kept");
}

TEST(net_stream, a_canceled_token_reads_nothing_even_with_data_waiting) {
  auto p = net_test::connected_pair();
  tpl::net::network_stream in(p.server);
  tpl::sync_wait(p.client.send_async("data\n"s));
  tpl::cancellation_token_source cts;
  cts.cancel();
  EXPECT_THROW(tpl::sync_wait(in.read_line_async(cts.token())), tpl::operation_canceled);
  std::array<std::byte, 4> buf;
  EXPECT_THROW(tpl::sync_wait(in.read_async(buf, cts.token())), tpl::operation_canceled);
  const auto line = tpl::sync_wait(in.read_line_async());
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "data");
}

TEST(net_stream, closing_the_socket_aborts_a_waiting_read) {
  auto expect_aborted = [](tpl::task<> t) {
    try {
      tpl::sync_wait(std::move(t));
      FAIL() << "the read completed";
    } catch (const tpl::net::socket_error& e) {
      EXPECT_EQ(e.code(), std::errc::operation_canceled);
    }
  };
  {
    auto p = net_test::connected_pair();
    tpl::net::network_stream in(p.server, {.read_buffer_bytes = 16});
    auto line = [](tpl::net::network_stream& s) -> tpl::task<> { (void)co_await s.read_line_async(); }(in);
    EXPECT_FALSE(line.is_completed());
    p.server.close();
    expect_aborted(std::move(line));
  }
  {
    auto p = net_test::connected_pair();
    tpl::net::network_stream in(p.server, {.read_buffer_bytes = 16});
    std::array<std::byte, 64> big;  // at least the buffer: read straight into the caller's memory
    auto direct = [](tpl::net::network_stream& s, std::span<std::byte> b) -> tpl::task<> {
      (void)co_await s.read_async(b);
    }(in, big);
    EXPECT_FALSE(direct.is_completed());
    p.server.close();
    expect_aborted(std::move(direct));
  }
}

TEST(net_stream, a_waiting_read_returns_what_arrives_and_keeps_the_rest) {
  auto p = net_test::connected_pair();
  tpl::net::network_stream in(p.server, {.read_buffer_bytes = 16});
  std::array<std::byte, 4> small;
  auto pending = in.read_async(small).as_task();
  EXPECT_FALSE(pending.is_completed());
  tpl::sync_wait(p.client.send_async("abcdefgh\n"s));
  EXPECT_EQ(tpl::sync_wait(std::move(pending)), 4u);
  EXPECT_EQ(net_test::string_of(small), "abcd");
  const auto rest = tpl::sync_wait(in.read_line_async());
  ASSERT_TRUE(rest);
  EXPECT_EQ(*rest, "efgh");
}

TEST(net_stream, writes_wait_in_the_buffer_until_flush) {
  auto p = net_test::connected_pair();
  tpl::net::network_stream out(p.client, {.write_buffer_bytes = 64});
  tpl::sync_wait(out.write_async("one "s));
  tpl::sync_wait(out.write_async("two"s));
  EXPECT_EQ(out.pending_write(), 7u);
  tpl::sync_wait(out.flush_async());
  EXPECT_EQ(out.pending_write(), 0u);
  tpl::sync_wait(out.write_async(std::string(200, 'z')));  // larger than the buffer: sent at once
  p.client.shutdown_send();
  tpl::net::network_stream in(p.server);
  auto line = tpl::sync_wait(in.read_line_async());
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "one two" + std::string(200, 'z'));
}

}  // namespace

}  // namespace net_stream_test_cpp
