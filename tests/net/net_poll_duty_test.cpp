// The socket engine's lent poll duty (src/net/socket_engine.cpp, "Lent poll duty"; the protocol
// itself is model-checked in net_model_poll_duty_test.cpp). In the default mode, after handing a
// batch to the pool the engine thread lends its polling to the batch items and sleeps; these
// tests check what a user relies on: a handler that blocks while the duty is lent does not stop
// other sockets from being served, whether it blocks in a wait tpl knows about (the pool's
// blocking hook gives the duty back at once) or in one it does not (a plain sleep loop: the
// engine's watchdog takes the duty back, unless an item started for another edge polls first;
// with neither, the test hangs: its hang guard fails it); and many one-at-a-time round trips, which the items'
// polling serves without the engine thread, are all answered and counted.
//
// Inline completions: a blocked handler blocks the engine itself (the documented deadlock of that
// mode), so the blocking tests skip there. With io_uring, or TPL_SOCKETS_POLL_WINDOW_US=0 (ctest's
// tpl_net_tests_no_lending), the engine never lends; the tests still pass, as a plain check of the
// engine.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <latch>
#include <string>
#include <thread>

#include "net_test_support.hpp"

namespace net_poll_duty_test_cpp {

namespace {

using namespace std::string_literals;
using net_test::string_of;

bool inline_mode() {
  return tpl::net::socket_stats().inline_completions || std::getenv("TPL_SOCKETS_INLINE_COMPLETIONS") != nullptr;
}

// B's echo, awaited on this thread, while A's handler blocks in `block` until it is released.
template <class Block>
void other_socket_is_served_while_a_handler_blocks(Block block) {
  auto a = net_test::connected_pair();
  auto b = net_test::connected_pair();
  std::atomic<bool> a_blocking{false}, released{false};
  std::array<std::byte, 1> buf_a;
  auto blocker = [](tpl::net::tcp_socket& s, std::span<std::byte> buf, std::atomic<bool>& blocking,
                    std::atomic<bool>& release, Block blk) -> tpl::task<> {
    co_await s.receive_async(buf);  // resumed by a batch item of A's edge
    blocking.store(true);
    blk(release);                   // that item's handler blocks
  }(a.server, buf_a, a_blocking, released, block);
  auto echo_b = [](tpl::net::tcp_socket& s) -> tpl::task<> {
    std::array<std::byte, 4> buf;
    co_await s.receive_exactly_async(buf);
    co_await s.send_async(buf);
  }(b.server);
  tpl::sync_wait(a.client.send_async("a"s));
  ASSERT_TRUE(net_test::eventually([&] { return a_blocking.load(); }));
  // B's edge arrives while A's handler blocks: only a poll made by someone else can see it.
  std::array<std::byte, 4> reply;
  auto pending = b.client.receive_exactly_async(reply).as_task();
  tpl::sync_wait(b.client.send_async("ping"s));
  tpl::sync_wait(std::move(pending));
  EXPECT_EQ(string_of(reply), "ping");
  released.store(true);
  tpl::sync_wait(echo_b);
  tpl::sync_wait(blocker);
}

TEST(net_poll_duty, a_handler_blocked_in_a_wait_the_pool_knows_does_not_stall_another_socket) {
  if (inline_mode()) GTEST_SKIP() << "inline completions: this is the documented deadlock of that mode";
  other_socket_is_served_while_a_handler_blocks([](std::atomic<bool>& release) {
    // A wait of tpl's: the pool's blocking hook runs before it blocks.
    tpl::task_completion_source<void> done;
    std::thread([&release, &done] {
      while (!release.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
      done.set_result();
    }).detach();
    done.get_task().wait();
  });
}

TEST(net_poll_duty, a_handler_blocked_where_the_pool_cannot_see_does_not_stall_another_socket) {
  if (inline_mode()) GTEST_SKIP() << "inline completions: this is the documented deadlock of that mode";
  other_socket_is_served_while_a_handler_blocks([](std::atomic<bool>& release) {
    // No wait of tpl's: nothing tells the pool (or the engine) that this thread is blocked.
    const auto bound = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!release.load() && std::chrono::steady_clock::now() < bound)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  // Usually the engine's watchdog took the duty back to poll B's edge (duty_reclaims moves), but
  // not always: a batch item started for another edge (an ACK's EPOLLOUT on one of the clients,
  // say) may have taken the lent duty and polled it first. So only the service is asserted.
  std::printf("%s\n", to_string(tpl::net::socket_stats()).c_str());
}

TEST(net_poll_duty, one_at_a_time_round_trips_are_all_answered_and_counted) {
  constexpr int kRoundTrips = 2'000;
  auto p = net_test::connected_pair();
  const tpl::net::socket_engine_stats before = tpl::net::socket_stats();
  auto server = [](tpl::net::tcp_socket& s) -> tpl::task<> {
    std::array<std::byte, 4> buf;
    for (int i = 0; i < kRoundTrips; ++i) {
      co_await s.receive_exactly_async(buf);
      co_await s.send_async(buf);
    }
  }(p.server);
  auto client = [](tpl::net::tcp_socket& s) -> tpl::task<int> {
    std::array<std::byte, 4> buf;
    int answered = 0;
    for (int i = 0; i < kRoundTrips; ++i) {
      const std::string msg = std::to_string(1000 + i % 9000);
      co_await s.send_async(std::as_bytes(std::span<const char>(msg.data(), 4)));
      co_await s.receive_exactly_async(buf);
      answered += string_of(buf) == msg ? 1 : 0;
    }
    co_return answered;
  }(p.client);
  EXPECT_EQ(tpl::sync_wait(std::move(client)), kRoundTrips);
  tpl::sync_wait(server);
  const tpl::net::socket_engine_stats after = tpl::net::socket_stats();
  // Every batch found by an item's poll is also a wake-up with its events (the counters' rule).
  // Checked on whole snapshots: socket_stats() reads the lent count before the wake-ups, so one
  // snapshot is consistent, but a batch in flight while `before` was taken (its wake-up counted,
  // its lent count not yet) would make the differences of two snapshots disagree by one.
  EXPECT_GE(after.engine_wakeups, after.lent_poll_batches);
  EXPECT_GE(after.events, after.engine_wakeups);
  if (after.inline_completions || after.io_uring || after.poll_window_us == 0) {
    // Such engines never lend (TPL_SOCKETS_POLL_WINDOW_US=0: tpl_net_tests_no_lending).
    EXPECT_EQ(after.lent_poll_batches, before.lent_poll_batches);
    EXPECT_EQ(after.duty_reclaims, before.duty_reclaims);
  }
  std::printf("round trips: %s\n", to_string(after).c_str());
}

}  // namespace

}  // namespace net_poll_duty_test_cpp
