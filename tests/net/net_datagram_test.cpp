// A udp_socket's receive_from that waits does so in the socket's reusable operation
// (src/net/op_source.hpp, datagram_sources): many waiting receives on one socket, completed,
// canceled, aborted by close() or by the socket's destruction, a second receive while one waits,
// one dropped unawaited, and cancel racing a datagram. Each datagram is received once, with its
// sender, and a canceled receive takes none. Loopback only, bounded counts.
#include <sys/ioctl.h>

#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "net_test_support.hpp"

namespace net_datagram_test_cpp {

namespace {

using net_test::failure_of;
using net_test::rethrown_as;

std::array<std::byte, 4> datagram(int i) {
  std::array<std::byte, 4> d;
  std::memcpy(d.data(), &i, sizeof i);
  return d;
}

int value_of(std::span<const std::byte> d) {
  int i = -1;
  if (d.size() == sizeof i) std::memcpy(&i, d.data(), sizeof i);
  return i;
}

struct udp_pair {
  tpl::net::udp_socket server{net_test::loopback_any_port()};
  tpl::net::udp_socket client{net_test::loopback_any_port()};
  void send(int i) { tpl::sync_wait(client.send_to_async(datagram(i), server.local_endpoint())); }
};

}  // namespace

TEST(net_datagram, waiting_receives_complete_or_cancel_one_after_another_and_take_each_datagram_once) {
  udp_pair p;
  int next_to_send = 0, next_expected = 0, canceled = 0;
  for (int i = 0; i < 300; ++i) {
    std::array<std::byte, 16> buf{};
    tpl::cancellation_token_source cts;
    auto pending = p.server.receive_from_async(buf, cts.token());
    ASSERT_FALSE(pending.is_completed());  // nothing was sent: it waits
    if (i % 3 == 2) {
      cts.cancel();
      EXPECT_THROW(tpl::sync_wait(std::move(pending)), tpl::operation_canceled);
      ++canceled;
      continue;
    }
    p.send(next_to_send++);
    const auto r = tpl::sync_wait(std::move(pending));
    ASSERT_EQ(r.bytes, 4u) << "iteration " << i;
    EXPECT_EQ(value_of(std::span(buf).first(r.bytes)), next_expected++) << "iteration " << i;
    EXPECT_EQ(r.remote, p.client.local_endpoint());
  }
  EXPECT_EQ(canceled, 100);
  EXPECT_EQ(next_expected, next_to_send);
}

TEST(net_datagram, a_second_receive_while_one_waits_is_invalid_and_the_first_still_completes) {
  udp_pair p;
  std::array<std::byte, 16> first{}, second{};
  auto waiting = p.server.receive_from_async(first);
  ASSERT_FALSE(waiting.is_completed());
  EXPECT_THROW(tpl::sync_wait(p.server.receive_from_async(second)), tpl::invalid_operation);
  p.send(7);
  const auto r = tpl::sync_wait(std::move(waiting));
  EXPECT_EQ(value_of(std::span(first).first(r.bytes)), 7);
}

TEST(net_datagram, closing_or_destroying_the_socket_aborts_a_waiting_receive) {
  for (int i = 0; i < 20; ++i) {
    std::array<std::byte, 16> buf{};
    std::optional<tpl::net::udp_socket> s(std::in_place, net_test::loopback_any_port());
    auto pending = s->receive_from_async(buf);
    ASSERT_FALSE(pending.is_completed());
    if (i % 2 == 0) {
      s->close();
    } else {
      s.reset();  // the waiting receive outlives its socket object
    }
    const auto e = rethrown_as<tpl::net::socket_error>(failure_of(std::move(pending)));
    EXPECT_EQ(e.code(), std::errc::operation_canceled) << "iteration " << i;
  }
}

TEST(net_datagram, cancel_racing_a_datagram_either_cancels_with_nothing_taken_or_completes) {
  udp_pair p;
  int canceled = 0, completed = 0;
  for (int i = 0; i < 300; ++i) {
    std::array<std::byte, 16> buf{};
    tpl::cancellation_token_source cts;
    auto pending = p.server.receive_from_async(buf, cts.token());
    std::thread canceler([&] { cts.cancel(); });
    p.send(i);
    canceler.join();
    std::size_t got = 0;
    try {
      got = tpl::sync_wait(std::move(pending)).bytes;
      ++completed;
    } catch (const tpl::operation_canceled&) {
      ++canceled;
      // The canceled receive took nothing: the datagram is there for the next one.
      got = tpl::sync_wait(p.server.receive_from_async(buf)).bytes;
    }
    ASSERT_EQ(got, 4u) << "iteration " << i;
    ASSERT_EQ(value_of(std::span(buf).first(got)), i) << "iteration " << i;
  }
  EXPECT_EQ(canceled + completed, 300);
}

// A receive_from dropped unawaited is awaited by a task of its own (value_task_source::
// on_abandoned): it takes the next datagram, then gives the reusable operation back, and the
// receives after it work. close() ends one that is still waiting.
TEST(net_datagram, a_dropped_receive_takes_one_datagram_and_the_next_receives_work) {
  // A dropped receive writes its buffer, which must outlive it; one buffer per receive. Nothing
  // orders one round's dropped receive after the last one's write but the kernel's queue (the
  // FIONREAD check below), which the sanitizers cannot see: the previous one may still hold the
  // operation, and then this one waits in a frame of its own, unordered with it.
  constexpr int rounds = 50;
  static std::array<std::array<std::byte, 16>, rounds + 1> dropped_buffers{};
  udp_pair p;
  for (int i = 0; i < rounds; ++i) {
    { auto dropped = p.server.receive_from_async(dropped_buffers[i]); }
    p.send(2 * i);  // for the dropped receive
    // The dropped receive has taken it once the kernel holds no datagram for the socket (FIONREAD),
    // as nothing else receives meanwhile; until its task has given the operation back, a second
    // receive may still be refused, and is retried (up to a hang bound).
    ASSERT_TRUE(net_test::eventually([&] {
      int pending = -1;
      return ::ioctl(p.server.native_handle(), FIONREAD, &pending) == 0 && pending == 0;
    })) << "round " << i << ": the dropped receive never took its datagram";
    std::array<std::byte, 16> buf{};
    const auto hang_bound = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      ASSERT_LT(std::chrono::steady_clock::now(), hang_bound) << "round " << i << ": the operation never came back";
      auto next = p.server.receive_from_async(buf);
      if (next.is_completed()) {
        std::exception_ptr failed = failure_of(std::move(next));
        ASSERT_NE(failed, nullptr) << "round " << i << ": a receive completed with no datagram sent";
        (void)rethrown_as<tpl::invalid_operation>(failed);
        std::this_thread::yield();
        continue;
      }
      p.send(2 * i + 1);
      const auto r = tpl::sync_wait(std::move(next));
      ASSERT_EQ(value_of(std::span(buf).first(r.bytes)), 2 * i + 1) << "round " << i;
      break;
    }
  }
  { auto dropped = p.server.receive_from_async(dropped_buffers[rounds]); }
  p.server.close();  // ends the dropped receive still waiting: nothing hangs, nothing leaks
}

}  // namespace net_datagram_test_cpp
