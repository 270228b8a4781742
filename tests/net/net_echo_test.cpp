// Round trips over loopback: TCP, IPv6, Unix domain, UDP; many concurrent connections.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include <array>
#include <atomic>
#include <cstdio>
#include <string>

#include "net_test_support.hpp"

namespace net_echo_test_cpp {

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

/// The client half of the 10,000-connection test, in a forked child so that each process holds
/// only one end of every connection (the hard descriptor limit may be near 20,000). The child of a
/// multi-threaded process may only make async-signal-safe calls: plain socket system calls on
/// memory allocated before the fork. Returns the exit status: 0 when every connection echoed.
[[noreturn]] void echo_clients_in_child(std::uint16_t port, std::vector<int>& fds, int result_fd) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int status = 0;
  for (int& fd : fds) {  // all connections open at once
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      status = 1;
      break;
    }
  }
  char out[64] = {42}, in[64];
  for (std::size_t i = 0; status == 0 && i < fds.size(); ++i) {
    if (::send(fds[i], out, sizeof out, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof out)) status = 2;
    std::size_t got = 0;
    while (status == 0 && got < sizeof in) {
      const ssize_t n = ::recv(fds[i], in + got, sizeof in - got, 0);
      if (n <= 0) status = 3;
      got += n > 0 ? static_cast<std::size_t>(n) : 0;
    }
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  const char byte = static_cast<char>(status);
  [[maybe_unused]] ssize_t w = ::write(result_fd, &byte, 1);
  ::_exit(status);
}

TEST(net_echo, ten_thousand_concurrent_connections_with_raised_descriptor_limit) {
#if defined(TPL_TEST_LIGHT)
  GTEST_SKIP() << "10,000 connections run in Release only (the sanitizer builds run the 1,000 of the "
                  "test above at their light count)";
#endif
  constexpr int kConnections = 10'000;
  constexpr rlim_t kNeeded = kConnections + 256;  // this process holds the server ends
  rlimit original{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &original), 0);
  if (original.rlim_max < kNeeded)
    GTEST_SKIP() << "the hard descriptor limit (" << original.rlim_max << ") is below the " << kNeeded
                 << " that 10,000 connections need";
  rlimit raised = original;
  raised.rlim_cur = std::max(original.rlim_cur, kNeeded);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &raised), 0);

  tpl::net::tcp_listener listener(net_test::loopback_any_port(), {.backlog = 4096});
  std::atomic<int> served{0};
  tpl::cancellation_token_source give_up;  // if the child fails, the missing accepts never come
  auto acceptor = [](tpl::net::tcp_listener& l, std::atomic<int>& n, int count,
                     tpl::cancellation_token token) -> tpl::task<> {
    std::vector<tpl::task<>> sessions;
    sessions.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      auto conn = std::make_shared<tpl::net::tcp_socket>(co_await l.accept_async(token));
      sessions.push_back([](std::shared_ptr<tpl::net::tcp_socket> c, std::atomic<int>& done) -> tpl::task<> {
        co_await echo_until_end(*c);
        done.fetch_add(1);
      }(conn, n));
    }
    for (auto& s : sessions) co_await s;
  }(listener, served, kConnections, give_up.token());

  std::vector<int> fds(kConnections, -1);
  int result[2];
  ASSERT_EQ(::pipe2(result, O_CLOEXEC), 0);
  const std::uint16_t port = listener.local_endpoint().port();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) echo_clients_in_child(port, fds, result[1]);
  ::close(result[1]);
  char status = -1;
  EXPECT_EQ(::read(result[0], &status, 1), 1);  // the child has echoed on every connection
  ::close(result[0]);
  if (status != 0) give_up.cancel();
  try {
    tpl::sync_wait(acceptor);  // every session ended: the child closed all of them
  } catch (const tpl::operation_canceled&) {
    ADD_FAILURE() << "the child failed (status " << int(status) << ") after " << served.load() << " sessions";
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "child status " << int(status);
  EXPECT_EQ(served.load(), kConnections);
  ::setrlimit(RLIMIT_NOFILE, &original);
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
    // Handled on the pool: by a batch item the engine queued, or found by an item already
    // running (one of an earlier test's, say) while it polled with the engine's lent duty.
    EXPECT_GT(after.batch_items + after.lent_poll_batches, before.batch_items + before.lent_poll_batches);
  }
  EXPECT_NE(tpl::net::to_string(after).find("events="), std::string::npos);
}

}  // namespace

}  // namespace net_echo_test_cpp
