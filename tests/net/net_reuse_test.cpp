// A stream socket's receive and send that wait do so in a reusable operation per direction
// (src/net/op_source.hpp): these tests run many waiting operations on one socket, completed,
// canceled, aborted and blocked on, and race cancel against completion, checking that each result
// belongs to its own operation and that nothing is lost or left waiting. Bounded counts.
#include <sys/ioctl.h>

#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net_test_support.hpp"


namespace net_reuse_test_cpp {

namespace {

using namespace std::string_literals;

using net_test::failure_of;
using net_test::rethrown_as;

std::array<std::byte, 4> message(int i) {
  std::array<std::byte, 4> m;
  std::memcpy(m.data(), &i, sizeof i);
  return m;
}

/// Receives exactly n bytes on s (blocking the caller) and returns them.
std::vector<std::byte> drain(tpl::net::tcp_socket& s, std::size_t n) {
  std::vector<std::byte> all(n);
  if (n != 0) tpl::sync_wait(s.receive_exactly_async(all));
  return all;
}

}  // namespace

TEST(net_reuse, waiting_receives_complete_or_cancel_one_after_another_without_losing_a_byte) {
  auto p = net_test::connected_pair();
  int next_to_send = 0, next_expected = 0;
  for (int i = 0; i < 300; ++i) {
    std::array<std::byte, 4> buf{};
    tpl::cancellation_token_source cts;
    auto pending = p.server.receive_async(buf, cts.token());
    ASSERT_FALSE(pending.is_completed());  // nothing was sent: it waits
    if (i % 3 == 2) {
      cts.cancel();
      EXPECT_THROW(tpl::sync_wait(std::move(pending)), tpl::operation_canceled);
      // What the canceled receive did not take is the next receive's.
      const auto m = message(next_to_send++);
      tpl::sync_wait(p.client.send_async(m));
      EXPECT_EQ(drain(p.server, 4), std::vector<std::byte>(m.begin(), m.end()));
      ++next_expected;
      continue;
    }
    const auto m = message(next_to_send++);
    tpl::sync_wait(p.client.send_async(m));
    std::size_t got = tpl::sync_wait(std::move(pending));
    if (got < 4) got += tpl::sync_wait(p.server.receive_async(std::span(buf).subspan(got)));  // loopback may split
    ASSERT_EQ(got, 4u);
    EXPECT_EQ(buf, message(next_expected++));
  }
}

TEST(net_reuse, waiting_sends_complete_or_cancel_one_after_another_and_report_what_went_out) {
  auto p = net_test::connected_pair();
  // More than the socket buffers hold while nobody reads: each send waits.
  std::vector<std::byte> data(16u << 20);
  for (int i = 0; i < 6; ++i) {
    std::fill(data.begin(), data.end(), static_cast<std::byte>(i + 1));
    tpl::cancellation_token_source cts;
    auto pending = p.client.send_async(data, cts.token());
    ASSERT_FALSE(pending.is_completed());
    std::size_t sent = data.size();
    if (i % 2 == 1) {
      cts.cancel();
      const auto e = failure_of(std::move(pending));
      ASSERT_TRUE(e);
      sent = rethrown_as<tpl::net::send_canceled>(e).bytes_sent();
      EXPECT_GT(sent, 0u);
      EXPECT_LT(sent, data.size());
      EXPECT_EQ(drain(p.server, sent), std::vector<std::byte>(sent, static_cast<std::byte>(i + 1)));
    } else {
      std::vector<std::byte> got;
      std::thread reader([&] { got = drain(p.server, data.size()); });
      tpl::sync_wait(std::move(pending));
      reader.join();
      EXPECT_EQ(got, data);
    }
  }
}

TEST(net_reuse, a_waiting_receive_can_be_blocked_on_from_a_thread_of_its_own) {
  auto p = net_test::connected_pair();
  for (int i = 0; i < 50; ++i) {
    std::array<std::byte, 4> buf{};
    auto pending = p.server.receive_async(buf);
    std::thread sender([&] { tpl::sync_wait(p.client.send_async(message(i))); });
    std::size_t got = pending.get();
    sender.join();
    if (got < 4) got += tpl::sync_wait(p.server.receive_async(std::span(buf).subspan(got)));
    ASSERT_EQ(got, 4u);
    EXPECT_EQ(buf, message(i));
  }
}

TEST(net_reuse, destroying_the_socket_aborts_a_waiting_send_and_receive_which_outlive_it) {
  for (int i = 0; i < 20; ++i) {
    auto p = net_test::connected_pair();
    std::array<std::byte, 8> buf;
    std::vector<std::byte> data(16u << 20);
    std::optional<tpl::net::tcp_socket> s(std::move(p.client));
    auto receive = s->receive_async(buf);
    auto send = s->send_async(data);
    ASSERT_FALSE(receive.is_completed());
    ASSERT_FALSE(send.is_completed());
    s.reset();  // the operations keep what they wait in alive until they are awaited
    const auto r = failure_of(std::move(receive));
    const auto w = failure_of(std::move(send));
    ASSERT_TRUE(r);
    ASSERT_TRUE(w);
    EXPECT_EQ(rethrown_as<tpl::net::socket_error>(r).code(), std::errc::operation_canceled);
    EXPECT_EQ(rethrown_as<tpl::net::socket_error>(w).code(), std::errc::operation_canceled);
  }
}

TEST(net_reuse, a_second_receive_while_one_waits_is_invalid_and_the_first_still_completes) {
  auto p = net_test::connected_pair();
  for (int i = 0; i < 20; ++i) {
    std::array<std::byte, 4> a{}, b{};
    auto first = p.client.receive_async(a);
    ASSERT_FALSE(first.is_completed());
    EXPECT_THROW(tpl::sync_wait(p.client.receive_async(b)), tpl::invalid_operation);
    tpl::sync_wait(p.server.send_async(message(i)));
    std::size_t got = tpl::sync_wait(std::move(first));
    if (got < 4) got += tpl::sync_wait(p.client.receive_async(std::span(a).subspan(got)));
    EXPECT_EQ(a, message(i));
  }
}

TEST(net_reuse, cancel_racing_the_data_either_cancels_with_nothing_taken_or_completes) {
  auto p = net_test::connected_pair();
  int canceled = 0, completed = 0;
  for (int i = 0; i < 400; ++i) {
    std::array<std::byte, 4> buf{};
    tpl::cancellation_token_source cts;
    auto pending = p.server.receive_async(buf, cts.token());
    std::thread canceler([&] { cts.cancel(); });
    tpl::sync_wait(p.client.send_async(message(i)));
    canceler.join();
    std::size_t got = 0;
    try {
      got = tpl::sync_wait(std::move(pending));
      ++completed;
    } catch (const tpl::operation_canceled&) {
      ++canceled;
    }
    // Whatever the canceled (or short) receive did not take is still there, in order.
    while (got < 4) got += tpl::sync_wait(p.server.receive_async(std::span(buf).subspan(got)));
    ASSERT_EQ(buf, message(i)) << "iteration " << i;
  }
  EXPECT_EQ(canceled + completed, 400);
}

// A value_task dropped while its receive waits is awaited by a task of its own
// (value_task_source::on_abandoned): the dropped receive keeps its direction's slot while it
// waits (a second receive is told so), the send direction works meanwhile, and close() ends it
// without a hang. Its bookkeeping is freed then: the ASan build's leak checker would report the
// socket's context otherwise.
TEST(net_reuse, a_waiting_receive_dropped_unawaited_fails_nothing_else) {
  static std::array<std::byte, 4> dropped_buffer{};  // the dropped receive may write it: it must outlive it
  auto p = net_test::connected_pair();
  { auto dropped = p.client.receive_async(dropped_buffer); }
  std::array<std::byte, 4> buf{};
  EXPECT_THROW(tpl::sync_wait(p.client.receive_async(buf)), tpl::invalid_operation);
  for (int i = 0; i < 20; ++i) {
    const auto m = message(i);
    tpl::sync_wait(p.client.send_async(m));
    EXPECT_EQ(drain(p.server, 4), std::vector<std::byte>(m.begin(), m.end()));
  }
  p.client.close();  // aborts the dropped receive: nobody awaits it, nothing hangs
  EXPECT_THROW(tpl::sync_wait(p.client.receive_async(buf)), tpl::net::socket_error);  // aborted
}

// A dropped receive that data completes takes that data (into its buffer, which must outlive it,
// as for any receive) and then gives the socket's reusable receive back: the next receive is
// accepted and gets the next message. 50 rounds, the data racing the drop. The test knows the
// dropped receive took the first message when the kernel holds no byte for the client any more
// (FIONREAD), since nothing else receives meanwhile; until its coroutine has given the operation
// back, a second receive may still be refused, and is retried (up to a hang bound).
TEST(net_reuse, a_dropped_receive_completed_by_data_gives_its_operation_back) {
  // One buffer per dropped receive: only the kernel's queue (FIONREAD) orders a round after the
  // last one's write, and the sanitizers cannot see it (the last one may still hold the operation,
  // and then this one waits in a frame of its own, unordered with it).
  constexpr int rounds = 50;
  static std::array<std::array<std::byte, 4>, rounds> dropped_buffers{};
  auto p = net_test::connected_pair();
  for (int i = 0; i < rounds; ++i) {
    // The message for the dropped receive is sent from another thread, so that its completion
    // races the drop (the detached task's registration with the operation) in some rounds.
    std::thread sender([&] { tpl::sync_wait(p.server.send_async(message(2 * i))); });
    { auto dropped = p.client.receive_async(dropped_buffers[i]); }
    sender.join();
    ASSERT_TRUE(net_test::eventually([&] {
      int pending = -1;
      return ::ioctl(p.client.native_handle(), FIONREAD, &pending) == 0 && pending == 0;
    })) << "round " << i << ": the dropped receive never took its message";
    std::array<std::byte, 4> buf{};
    std::optional<tpl::value_task<std::size_t>> next;
    const auto hang_bound = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!next) {
      ASSERT_LT(std::chrono::steady_clock::now(), hang_bound)
          << "round " << i << ": the dropped receive never gave its operation back";
      auto attempt = p.client.receive_async(buf);
      if (!attempt.is_completed()) {
        next.emplace(std::move(attempt));  // waits: the slot was free
      } else {
        // Nothing is sent meanwhile, so a completed receive can only be the refused one.
        EXPECT_THROW(tpl::sync_wait(std::move(attempt)), tpl::invalid_operation) << "round " << i;
        std::this_thread::yield();
      }
    }
    tpl::sync_wait(p.server.send_async(message(2 * i + 1)));
    std::size_t got = tpl::sync_wait(std::move(*next));
    while (got < 4) got += tpl::sync_wait(p.client.receive_async(std::span(buf).subspan(got)));
    ASSERT_EQ(buf, message(2 * i + 1)) << "round " << i;
  }
}

}  // namespace net_reuse_test_cpp
