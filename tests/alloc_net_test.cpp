// tpl::net's "the hot path allocates nothing in steady state", counted with the global operator new
// of this binary (tests/alloc_hook.cpp): echo round trips over loopback, where the receives wait for
// the engine (so the slow path, the batch hand-off and the pool all take part), and sends and
// receives that complete at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <span>
#include <thread>
#include <vector>

#include <tpl/detail/frame_pool.hpp>
#include <tpl/net.hpp>
#include <tpl/tpl.hpp>

#include "alloc_hook.hpp"
#include "net/net_test_support.hpp"

namespace {

[[maybe_unused]] const bool quarantine_off = [] {
  tpl::detail::frame_pool_set_quarantine_for_testing(false);
  return true;
}();

tpl::task<> echo_server(tpl::net::tcp_socket& s) {
  std::array<std::byte, 64> buf;
  for (;;) {
    const std::size_t n = co_await s.receive_async(buf);
    if (n == 0) co_return;
    co_await s.send_async(std::span<const std::byte>(buf.data(), n));
  }
}

tpl::task<> round_trips(tpl::net::tcp_socket& s, int n) {
  std::array<std::byte, 64> out{}, in{};
  for (int i = 0; i < n; ++i) {
    co_await s.send_async(out);
    co_await s.receive_exactly_async(in);
  }
}

/// Runs the measurement on a pool thread, so starting and joining it is not counted.
tpl::task<long> measured_round_trips(tpl::net::tcp_socket& client, int warm_up, int measured) {
  co_await tpl::resume_on(tpl::thread_pool::default_pool());
  co_await round_trips(client, warm_up);
  const long before = tpl_alloc::allocations();
  co_await round_trips(client, measured);
  co_return tpl_alloc::allocations() - before;
}

}  // namespace

TEST(allocations, socket_echo_round_trips_allocate_nothing_in_steady_state) {
  tpl::net::tcp_listener listener(tpl::net::endpoint(tpl::net::ip_address::ipv4_loopback(), 0));
  auto accepted = listener.accept_async().as_task();
  tpl::net::tcp_socket client;
  tpl::sync_wait(client.connect_async(listener.local_endpoint()));
  tpl::net::tcp_socket server = tpl::sync_wait(std::move(accepted));
  auto echo = echo_server(server);
  const auto events_before = tpl::net::socket_stats().events;
  // The pool may start a worker during a measurement (on demand, in a slow sanitizer build), which
  // allocates for the thread, not for a round trip: the best of a few measurements must be 0. An
  // allocation per round trip would show in every one of them.
  long fewest = -1;
  for (int attempt = 0; attempt < 5 && fewest != 0; ++attempt) {
    const long n = tpl::sync_wait(measured_round_trips(client, attempt == 0 ? 2000 : 200, 2000));
    fewest = fewest < 0 ? n : std::min(fewest, n);
  }
  EXPECT_EQ(fewest, 0);
  EXPECT_GT(tpl::net::socket_stats().events, events_before);  // the waiting path took part
  client.shutdown_send();
  tpl::sync_wait(echo);
}

TEST(allocations, socket_operations_that_complete_at_once_allocate_nothing) {
  tpl::net::tcp_listener listener(tpl::net::endpoint(tpl::net::ip_address::ipv4_loopback(), 0));
  auto accepted = listener.accept_async().as_task();
  tpl::net::tcp_socket client;
  tpl::sync_wait(client.connect_async(listener.local_endpoint()));
  tpl::net::tcp_socket server = tpl::sync_wait(std::move(accepted));
  std::array<std::byte, 16> buf{};
  int at_once = 0;
  long fewest = -1;
  // Counted: iterations whose send and receive both completed at once (loopback has almost always
  // delivered by the time send returns). A receive that had to wait is left out, as is a round in
  // which the pool started a worker meanwhile (the best of a few rounds must be 0).
  for (int round = 0; round < 5 && fewest != 0; ++round) {
    long allocated = 0;
    for (int i = 0; i < 1000; ++i) {
      const long before = tpl_alloc::allocations();
      auto sent = client.send_async(buf);
      ASSERT_TRUE(sent.is_completed());  // an empty send buffer takes 16 bytes
      sent.get();
      auto got = server.receive_async(buf);
      const bool immediate = got.is_completed();
      const long delta = tpl_alloc::allocations() - before;
      ASSERT_EQ(got.get(), buf.size());
      if (immediate) {
        ++at_once;
        allocated += delta;
      }
    }
    fewest = fewest < 0 ? allocated : std::min(fewest, allocated);
  }
  EXPECT_EQ(fewest, 0);
  EXPECT_GT(at_once, 0);
}

// A receive and a send that wait take no coroutine frame: they wait in their socket's reusable
// operations (src/net/op_source.hpp). With this thread's frame cache and the shared transfer
// lists emptied, a frame would come from ::operator new and be counted.
TEST(allocations, a_receive_and_a_send_that_wait_take_no_frame) {
  auto quiet = net_test::connected_pair();  // nobody sends: the server's receive waits
  auto full = net_test::connected_pair();   // nobody reads: the client's big send waits
  std::array<std::byte, 64> in{};
  std::vector<std::byte> big(16u << 20, std::byte{1});
  // A worker the pool starts meanwhile allocates for its thread: the best of a few rounds must be 0.
  long fewest = -1;
  for (int round = 0; round < 5 && fewest != 0; ++round) {
    tpl::detail::frame_pool_release_caches_for_testing();
    const long before = tpl_alloc::allocations();
    auto receive = quiet.server.receive_async(in);
    auto send = full.client.send_async(big);
    const long allocated = tpl_alloc::allocations() - before;
    ASSERT_FALSE(receive.is_completed());
    ASSERT_FALSE(send.is_completed());
    fewest = fewest < 0 ? allocated : std::min(fewest, allocated);
    const std::array<std::byte, 1> one{std::byte{42}};  // not `in`: the pending receive writes there
    tpl::sync_wait(quiet.client.send_async(one));
    EXPECT_EQ(tpl::sync_wait(std::move(receive)), 1u);
    std::vector<std::byte> sink(big.size());
    std::thread reader([&] { tpl::sync_wait(full.server.receive_exactly_async(sink)); });
    tpl::sync_wait(std::move(send));
    reader.join();
  }
  EXPECT_EQ(fewest, 0);
}

// A send dropped unawaited while it waits (fire and forget) still ends in its socket's reusable
// operation, which a task of its own awaits (value_task_source::on_abandoned), and gives it back:
// once the peer has read everything, the next send that waits takes no frame either. Without the
// hook the dropped send kept the operation for good and every later waiting send took a frame.
TEST(allocations, a_dropped_waiting_send_gives_its_operation_back) {
  auto full = net_test::connected_pair();  // nobody reads until the test does
  std::vector<std::byte> big(16u << 20, std::byte{1});
  std::vector<std::byte> sink(big.size());
  long fewest = -1;
  for (int round = 0; round < 5 && fewest != 0; ++round) {
    {
      auto dropped = full.client.send_async(big);
      ASSERT_FALSE(dropped.is_completed());
    }
    tpl::sync_wait(full.server.receive_exactly_async(sink));  // the dropped send has sent it all
    // Its coroutine may still be giving the operation back: a few tries, the fewest must be 0.
    long allocated = -1;
    for (int attempt = 0; attempt < 100 && allocated != 0; ++attempt) {
      tpl::detail::frame_pool_release_caches_for_testing();
      const long before = tpl_alloc::allocations();
      auto send = full.client.send_async(big);
      allocated = tpl_alloc::allocations() - before;
      ASSERT_FALSE(send.is_completed());
      std::thread reader([&] { tpl::sync_wait(full.server.receive_exactly_async(sink)); });
      tpl::sync_wait(std::move(send));
      reader.join();
      if (allocated != 0) std::this_thread::yield();
    }
    fewest = fewest < 0 ? allocated : std::min(fewest, allocated);
  }
  EXPECT_EQ(fewest, 0);
}

// A receive_from that waits takes no frame either: it waits in the udp_socket's reusable operation
// (datagram_sources), allocated when the socket was built.
TEST(allocations, a_datagram_receive_that_waits_takes_no_frame) {
  tpl::net::udp_socket server(net_test::loopback_any_port());
  tpl::net::udp_socket client(net_test::loopback_any_port());
  std::array<std::byte, 64> in{};
  long fewest = -1;
  for (int round = 0; round < 5 && fewest != 0; ++round) {
    tpl::detail::frame_pool_release_caches_for_testing();
    const long before = tpl_alloc::allocations();
    auto receive = server.receive_from_async(in);
    const long allocated = tpl_alloc::allocations() - before;
    ASSERT_FALSE(receive.is_completed());
    fewest = fewest < 0 ? allocated : std::min(fewest, allocated);
    const std::array<std::byte, 1> one{std::byte{42}};
    tpl::sync_wait(client.send_to_async(one, server.local_endpoint()));
    EXPECT_EQ(tpl::sync_wait(std::move(receive)).bytes, 1u);
  }
  EXPECT_EQ(fewest, 0);
}
