// Out of descriptors on accept (EMFILE): the listener backs off and keeps serving its open
// connections, and accepts again once descriptors are free. A binary of its own: lowering
// RLIMIT_NOFILE affects the whole process.
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <string>

#include "../net_test_support.hpp"

namespace net_emfile_test_cpp {

namespace {

using namespace std::string_literals;

tpl::task<> echo_until_end(tpl::net::tcp_socket& s) {
  std::array<std::byte, 64> buf;
  for (;;) {
    const std::size_t n = co_await s.receive_async(buf);
    if (n == 0) co_return;
    co_await s.send_async(std::span<const std::byte>(buf.data(), n));
  }
}

/// The lowest descriptor number not in use: with RLIMIT_NOFILE set to it, no new one can open.
int lowest_free_descriptor() {
  const int fd = ::fcntl(0, F_DUPFD, 0);
  ::close(fd);
  return fd;
}

TEST(net_emfile, accept_backs_off_out_of_descriptors_and_keeps_serving) {
  auto p = net_test::connected_pair();
  auto echo = echo_until_end(p.server);
  tpl::net::tcp_socket waiting_client;  // connected before the limit drops: it waits in the backlog
  tpl::sync_wait(waiting_client.connect_async(p.listener.local_endpoint()));

  // The back-off waits on a timer. Under UndefinedBehaviorSanitizer, the first check of each
  // dynamic type opens a pipe to probe memory, which fails without descriptors and is reported as
  // an invalid vptr; one timer before the limit drops fills the sanitizer's cache of checked types.
  tpl::sync_wait(tpl::delay(std::chrono::milliseconds(1)));

  rlimit original{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &original), 0);
  rlimit lowered = original;
  lowered.rlim_cur = static_cast<rlim_t>(lowest_free_descriptor());
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  ASSERT_LT(::fcntl(0, F_DUPFD, 0), 0) << "the lowered limit still lets a descriptor open";

  const auto backoffs_before = tpl::net::socket_stats().accept_backoffs;
  auto accepted = p.listener.accept_async().as_task();
  ASSERT_TRUE(net_test::eventually([&] { return tpl::net::socket_stats().accept_backoffs > backoffs_before; }));
  EXPECT_FALSE(accepted.is_completed());

  // The open connection is still served while accept backs off.
  tpl::sync_wait(p.client.send_async("still served"s));
  std::array<std::byte, 12> back;
  tpl::sync_wait(p.client.receive_exactly_async(back));
  EXPECT_EQ(net_test::string_of(back), "still served");

  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &original), 0);
  tpl::net::tcp_socket server_side = tpl::sync_wait(std::move(accepted));  // a later retry succeeds
  tpl::sync_wait(waiting_client.send_async("late"s));
  std::array<std::byte, 4> got;
  tpl::sync_wait(server_side.receive_exactly_async(got));
  EXPECT_EQ(net_test::string_of(got), "late");

  p.client.shutdown_send();
  tpl::sync_wait(echo);
}

}  // namespace

}  // namespace net_emfile_test_cpp
