// network_stream: lines (CRLF and LF, split across receives, at the end, too long), exact reads,
// buffered writes and flush.
#include <string>

#include "net_test_support.hpp"

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
