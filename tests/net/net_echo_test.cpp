// Round trips over loopback: TCP, IPv6, Unix domain, UDP; many concurrent connections.
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <string>

#include "net_test_support.hpp"

namespace {

using namespace std::string_literals;
using net_test::bytes_of;
using net_test::string_of;

tpl::task<> echo_until_end(tpl::net::stream_socket& s) {
  std::array<std::byte, 256> buf;
  for (;;) {
    const std::size_t n = co_await s.receive_async(buf);
    if (n == 0) co_return;
    co_await s.send_async(std::span<const std::byte>(buf.data(), n));
  }
}

TEST(net_echo, tcp_round_trip_returns_what_was_sent) {
  auto p = net_test::connected_pair();
  auto server = echo_until_end(p.server);
  const auto msg = bytes_of("hello, tpl");
  tpl::sync_wait(p.client.send_async(msg));
  std::vector<std::byte> back(msg.size());
  tpl::sync_wait(p.client.receive_exactly_async(back));
  EXPECT_EQ(string_of(back), "hello, tpl");
  p.client.shutdown_send();
  tpl::sync_wait(server);
}

TEST(net_echo, ipv6_loopback_round_trip) {
  std::optional<tpl::net::tcp_listener> listener;
  try {
    listener.emplace(tpl::net::endpoint(tpl::net::ip_address::ipv6_loopback(), 0));
  } catch (const tpl::net::socket_error& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
  auto accepted = listener->accept_async().as_task();
  tpl::net::tcp_socket client;
  tpl::sync_wait(client.connect_async(listener->local_endpoint()));
  tpl::net::tcp_socket server = tpl::sync_wait(std::move(accepted));
  EXPECT_TRUE(server.remote_endpoint().address().is_v6());
  tpl::sync_wait(client.send_async("six"s));
  std::array<std::byte, 3> got;
  tpl::sync_wait(server.receive_exactly_async(got));
  EXPECT_EQ(string_of(got), "six");
}

TEST(net_echo, unix_domain_round_trip) {
  const std::string path = "/tmp/tpl_net_test_" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  tpl::net::unix_listener listener{tpl::net::unix_endpoint(path)};
  auto accepted = listener.accept_async().as_task();
  tpl::net::unix_socket client;
  tpl::sync_wait(client.connect_async(tpl::net::unix_endpoint(path)));
  tpl::net::unix_socket server = tpl::sync_wait(std::move(accepted));
  auto echo = echo_until_end(server);
  tpl::sync_wait(client.send_async("over a path"s));
  std::array<std::byte, 11> got;
  tpl::sync_wait(client.receive_exactly_async(got));
  EXPECT_EQ(string_of(got), "over a path");
  client.close();
  tpl::sync_wait(echo);
  ::unlink(path.c_str());
}

TEST(net_echo, udp_datagram_carries_its_sender) {
  tpl::net::udp_socket server(net_test::loopback_any_port());
  tpl::net::udp_socket client(net_test::loopback_any_port());
  auto received = [](tpl::net::udp_socket& s) -> tpl::task<tpl::net::received_from> {
    std::array<std::byte, 64> buf;
    auto r = co_await s.receive_from_async(buf);
    EXPECT_EQ(string_of(std::span(buf).first(r.bytes)), "datagram");
    co_return r;
  }(server);
  const auto msg = bytes_of("datagram");
  EXPECT_EQ(tpl::sync_wait(client.send_to_async(msg, server.local_endpoint())), msg.size());
  const auto r = tpl::sync_wait(received);
  EXPECT_EQ(r.bytes, msg.size());
  EXPECT_EQ(r.remote, client.local_endpoint());
}

TEST(net_echo, large_transfer_crosses_many_waits_both_ways) {
  auto p = net_test::connected_pair();
  // Far above what loopback's socket buffers hold, so sends wait for room and receives for data.
  // (Shrinking the buffers after the connection is up is no shortcut: TCP then stalls in
  // zero-window probes with exponential back-off.)
  constexpr std::size_t kBytes = 16u << 20;
  std::vector<std::byte> data(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) data[i] = static_cast<std::byte>(i * 131 % 251);
  auto sender = [](tpl::net::tcp_socket& s, const std::vector<std::byte>& d) -> tpl::task<> {
    co_await s.send_async(d);
    s.shutdown_send();
  }(p.client, data);
  std::vector<std::byte> got;
  got.reserve(kBytes);
  tpl::sync_wait([](tpl::net::tcp_socket& s, std::vector<std::byte>& out) -> tpl::task<> {
    std::array<std::byte, 1500> buf;
    for (;;) {
      const std::size_t n = co_await s.receive_async(buf);
      if (n == 0) co_return;
      out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    }
  }(p.server, got));
  tpl::sync_wait(sender);
  ASSERT_EQ(got.size(), kBytes);
  EXPECT_TRUE(got == data);
}

/// C clients, each R round trips through one echo server.
void run_concurrent_echo(int connections, int round_trips) {
  tpl::net::tcp_listener listener(net_test::loopback_any_port(), {.backlog = 4096});
  tpl::cancellation_token_source stop;
  std::atomic<int> served{0};
  // Coroutine lambdas take what they use as parameters: captures would live in the lambda object,
  // a temporary gone before the coroutine resumes.
  auto acceptor = [](tpl::net::tcp_listener& listener, tpl::cancellation_token_source& stop,
                     std::atomic<int>& served, int connections) -> tpl::task<> {
    std::vector<tpl::task<>> sessions;
    for (int i = 0; i < connections; ++i) {
      auto conn = std::make_shared<tpl::net::tcp_socket>(co_await listener.accept_async(stop.token()));
      sessions.push_back([](std::shared_ptr<tpl::net::tcp_socket> c, std::atomic<int>& n) -> tpl::task<> {
        co_await echo_until_end(*c);
        n.fetch_add(1);
      }(conn, served));
    }
    for (auto& s : sessions) co_await s;
  }(listener, stop, served, connections);
  const auto client = [](tpl::net::endpoint server, int id, int round_trips) -> tpl::task<> {
    tpl::net::tcp_socket s;
    co_await s.connect_async(server);
    std::array<std::byte, 64> out, in;
    for (int r = 0; r < round_trips; ++r) {
      out.fill(static_cast<std::byte>((id + r) & 0xff));
      co_await s.send_async(out);
      co_await s.receive_exactly_async(in);
      if (in != out) throw std::runtime_error("echo mismatch");
    }
    s.shutdown_send();
  };
  std::vector<tpl::task<>> clients;
  const tpl::net::endpoint server = listener.local_endpoint();
  for (int i = 0; i < connections; ++i)
    clients.push_back(tpl::run([=] { return client(server, i, round_trips); }));
  for (auto& c : clients) tpl::sync_wait(c);
  tpl::sync_wait(acceptor);
  EXPECT_EQ(served.load(), connections);
}

TEST(net_echo, thousand_concurrent_connections_each_echo) {
  run_concurrent_echo(tpl_test::scaled(1000, 200), tpl_test::scaled(20, 5));
}

TEST(net_echo, ten_thousand_concurrent_connections_with_raised_descriptor_limit) {
  constexpr int kConnections = 10'000;
  constexpr rlim_t kNeeded = 2 * kConnections + 256;  // both ends live in this process
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < kNeeded) {
    if (lim.rlim_max < kNeeded)
      GTEST_SKIP() << "the hard descriptor limit (" << lim.rlim_max << ") is below the " << kNeeded
                   << " this test needs (both ends of 10,000 connections in one process)";
    rlimit raised = lim;
    raised.rlim_cur = kNeeded;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &raised), 0);
  }
  run_concurrent_echo(kConnections, 2);
  ::setrlimit(RLIMIT_NOFILE, &lim);
}

}  // namespace

namespace {

TEST(net_stats, round_trips_that_wait_are_counted_as_engine_events) {
  const auto before = tpl::net::socket_stats();
  auto p = net_test::connected_pair();
  std::array<std::byte, 4> buf;
  for (int i = 0; i < 10; ++i) {
    auto pending = p.server.receive_async(buf).as_task();  // nothing yet: waits for the engine
    tpl::sync_wait(p.client.send_async("ping"s));
    EXPECT_EQ(tpl::sync_wait(pending), 4u);
  }
  const auto after = tpl::net::socket_stats();
  EXPECT_GE(after.engine_count, 1u);
  EXPECT_GT(after.events, before.events);
  EXPECT_GT(after.engine_wakeups, before.engine_wakeups);
  EXPECT_GE(after.largest_batch, 1u);
  if (!after.inline_completions) {
    EXPECT_GT(after.batch_items, before.batch_items);
  }
  EXPECT_NE(tpl::net::to_string(after).find("events="), std::string::npos);
}

}  // namespace
