// The engine's hand-off: a continuation that blocks until another socket's event is handled does
// not stall that event (each batch item queues a helper before it handles its first event); the
// engine's configuration is parsed strictly; the readiness source asked for (TPL_IO_ENGINE) serves,
// or says why not; an io_uring setup that an older kernel refuses is retried without its newest
// flags; each source's poll() (an inline engine's busy poll) reports without blocking; and sockets
// attached and detached in quick succession, with operations pending, are all released (the
// sanitizer builds' leak check sees a target a source forgot).
#include <linux/io_uring.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "../../src/net/readiness_source.hpp"
#include "../../src/net/socket_engine.hpp"
#include "net_test_support.hpp"

namespace net_engine_test_cpp {

namespace {

using namespace std::string_literals;

TEST(net_engine, a_continuation_blocked_on_another_sockets_event_does_not_stall_it) {
  if (tpl::net::socket_stats().inline_completions || std::getenv("TPL_SOCKETS_INLINE_COMPLETIONS") != nullptr)
    GTEST_SKIP() << "inline completions: this is the documented deadlock of that mode";
  auto a = net_test::connected_pair();
  auto b = net_test::connected_pair();
  std::latch b_handled(1);
  std::array<std::byte, 1> buf_a, buf_b;
  auto waits_for_b = [](tpl::net::tcp_socket& s, std::span<std::byte> buf, std::latch& other) -> tpl::task<> {
    co_await s.receive_async(buf);
    tpl::blocking_scope blocking("waiting for the other socket's continuation");
    other.wait();  // blocks this pool thread until B's continuation has run
  }(a.server, buf_a, b_handled);
  auto signals = [](tpl::net::tcp_socket& s, std::span<std::byte> buf, std::latch& done) -> tpl::task<> {
    co_await s.receive_async(buf);
    done.count_down();
  }(b.server, buf_b, b_handled);
  // Both edges arrive together, usually in one epoll_wait batch.
  tpl::sync_wait(a.client.send_async("a"s));
  tpl::sync_wait(b.client.send_async("b"s));
  tpl::sync_wait(signals);
  tpl::sync_wait(waits_for_b);
}

/// Sets (value null: unsets) an environment variable for its scope.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~scoped_env() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// `name`=`bad` must make the configuration throw std::invalid_argument naming the variable.
void expect_rejected_by_name(const char* name, const char* bad) {
  scoped_env env(name, bad);
  try {
    (void)tpl::net::detail::engine_config_from_environment();
    ADD_FAILURE() << "accepted " << name << "=\"" << bad << "\"";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(net_engine, configuration_is_parsed_strictly) {
  using tpl::net::detail::engine_config_from_environment;
  {
    scoped_env count("TPL_SOCKETS_ENGINE_COUNT", "3");
    scoped_env inl("TPL_SOCKETS_INLINE_COMPLETIONS", "true");
    const auto c = engine_config_from_environment();
    EXPECT_EQ(c.engine_count, 3u);
    EXPECT_TRUE(c.inline_completions);
  }
  for (const char* bad : {"", "0", "-1", "2x", " 2", "1025", "99999999999999999999"})
    expect_rejected_by_name("TPL_SOCKETS_ENGINE_COUNT", bad);
  for (const char* bad : {"", "2", "yes", "TRUE", "on"}) {
    scoped_env inl("TPL_SOCKETS_INLINE_COMPLETIONS", bad);
    EXPECT_THROW((void)engine_config_from_environment(), std::invalid_argument) << bad;
  }
  {
    scoped_env engine("TPL_IO_ENGINE", "io_uring");
    EXPECT_TRUE(engine_config_from_environment().io_uring);
  }
  {
    scoped_env engine("TPL_IO_ENGINE", "epoll");
    EXPECT_FALSE(engine_config_from_environment().io_uring);
  }
  for (const char* bad : {"", "uring", "IO_URING", "epoll ", "pool"}) expect_rejected_by_name("TPL_IO_ENGINE", bad);
  {
    scoped_env unset("TPL_SOCKETS_POLL_WINDOW_US", nullptr);
    EXPECT_EQ(engine_config_from_environment().poll_window_us, 50u);  // the default
  }
  for (const char* good : {"0", "150", "1000"}) {
    scoped_env window("TPL_SOCKETS_POLL_WINDOW_US", good);
    EXPECT_EQ(engine_config_from_environment().poll_window_us, static_cast<unsigned>(std::stoul(good)));
  }
  for (const char* bad : {"", "-1", "1001", "50us", " 50", "99999999999999999999"})
    expect_rejected_by_name("TPL_SOCKETS_POLL_WINDOW_US", bad);
}

// Run under ctest both with and without TPL_IO_ENGINE=io_uring (tpl_net_tests_io_uring).
TEST(net_engine, the_requested_readiness_source_serves_or_says_why_not) {
  auto pair = net_test::connected_pair();  // starts the engines
  tpl::sync_wait(pair.client.send_async("x"s));
  std::array<std::byte, 1> buf;
  EXPECT_EQ(tpl::sync_wait(pair.server.receive_async(buf)), 1u);
  const auto stats = tpl::net::socket_stats();
  const std::string reason = tpl::net::socket_engine_fallback_reason();
  const char* requested = std::getenv("TPL_IO_ENGINE");
  const std::string line = tpl::net::to_string(stats);
  if (requested != nullptr && std::string(requested) == "io_uring") {
    EXPECT_NE(stats.io_uring, !reason.empty()) << "io_uring=" << stats.io_uring << " reason=" << reason;
    EXPECT_NE(line.find(stats.io_uring ? "source=io_uring" : "source=epoll"), std::string::npos) << line;
    if (!stats.io_uring) std::printf("io_uring refused for sockets, epoll serves: %s\n", reason.c_str());
  } else {
    EXPECT_FALSE(stats.io_uring);
    EXPECT_TRUE(reason.empty()) << reason;
    EXPECT_NE(line.find("source=epoll"), std::string::npos) << line;
  }
}

int refuse_ring(unsigned, void*, void*) { return -EPERM; }

TEST(net_engine, a_refused_ring_gives_no_source_and_the_reason) {
  std::string why;
  EXPECT_EQ(tpl::net::detail::make_uring_source(&why, &refuse_ring), nullptr);
  if (why.find("without liburing") == std::string::npos) {
    EXPECT_NE(why.find(std::strerror(EPERM)), std::string::npos) << why;
  }
}

// An older kernel refuses the newest setup flags with EINVAL: DEFER_TASKRUN (6.1), then the
// single-issuer pair (6.0). Each refusal drops the newest flag and tries again.
std::vector<unsigned> g_setup_flags_tried;
int refuse_new_flags(unsigned, void*, void* params) {
  const unsigned flags = static_cast<io_uring_params*>(params)->flags;
  g_setup_flags_tried.push_back(flags);
  if (flags & (IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER)) return -EINVAL;
  return -EPERM;  // ends the test without a ring
}

TEST(net_engine, a_kernel_without_the_newest_setup_flags_is_asked_again_without_them) {
  std::string why;
  g_setup_flags_tried.clear();
  EXPECT_EQ(tpl::net::detail::make_uring_source(&why, &refuse_new_flags), nullptr);
  if (why.find("without liburing") != std::string::npos) GTEST_SKIP() << why;
  ASSERT_EQ(g_setup_flags_tried.size(), 3u);
  constexpr unsigned kNew = IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED;
  EXPECT_EQ(g_setup_flags_tried[0] & kNew, kNew);
  EXPECT_EQ(g_setup_flags_tried[1] & kNew, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED);
  EXPECT_EQ(g_setup_flags_tried[2] & kNew, 0u);
  EXPECT_NE(why.find(std::strerror(EPERM)), std::string::npos) << why;
}

// A source's poll() (an inline engine's busy poll): it reports a ready socket without blocking,
// reports nothing when nothing changed, and a detached target is still released after polls alone.
struct counting_target final : tpl::net::detail::readiness_target {
  explicit counting_target(std::atomic<bool>* g) : gone(g) {}
  ~counting_target() override { gone->store(true); }
  void on_readiness(std::uint32_t) noexcept override {}
  std::atomic<bool>* gone;
};

void poll_reports_without_blocking(tpl::net::detail::readiness_source& src) {
  using tpl::net::detail::ready_event;
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  std::atomic<bool> gone{false};
  auto* t = new counting_target(&gone);
  src.attach(sv[0], t);
  std::vector<ready_event> batch;
  batch.reserve(tpl::net::detail::readiness_source::kMaxBatch);
  // Each call returns at once; the bound only stops a broken source. io_uring: the first poll
  // submits the arm, whose completion reports the socket writable.
  const auto poll_until = [&](std::uint32_t bits) {
    for (int i = 0; i < 1000; ++i) {
      batch.clear();
      src.poll(batch);
      bool seen = false;
      for (const ready_event& e : batch) seen |= e.target == t && (e.bits & bits) != 0;
      src.end_batch();
      if (seen) return true;
    }
    return false;
  };
  EXPECT_TRUE(poll_until(tpl::net::detail::writable));
  batch.clear();
  src.poll(batch);  // nothing changed since: no event (edges only)
  EXPECT_TRUE(batch.empty());
  src.end_batch();
  ASSERT_EQ(::write(sv[1], "x", 1), 1);
  EXPECT_TRUE(poll_until(tpl::net::detail::readable));
  src.detach(sv[0], t);  // on this thread, the "engine thread", the io_uring source does not wait
  t->release();
  for (int i = 0; i < 1000 && !gone.load(); ++i) {
    batch.clear();
    src.poll(batch);
    src.end_batch();
  }
  EXPECT_TRUE(gone.load());
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(net_engine, the_epoll_sources_poll_reports_without_blocking) {
  auto src = tpl::net::detail::make_epoll_source();
  poll_reports_without_blocking(*src);
}

TEST(net_engine, the_io_uring_sources_poll_reports_without_blocking) {
  std::string why;
  auto src = tpl::net::detail::make_uring_source(&why);
  if (src == nullptr) GTEST_SKIP() << why;
  // Run on a thread of its own: the ring's submitter is the first thread that polls it, and the
  // kernel ends that thread's requests when it exits, before the source goes.
  std::thread([&] { poll_reports_without_blocking(*src); }).join();
}

// Sockets attached and detached before the engine thread saw either request, closed with an
// operation pending, and closed after traffic: each must complete or abort, and each context be
// released (a leak here is a target the source never let go, which the leak checker reports).
TEST(net_engine, sockets_attached_and_detached_in_quick_succession_are_all_released) {
  constexpr int kRounds = 100;
  for (int i = 0; i < kRounds; ++i) {
    { tpl::net::tcp_listener unused(net_test::loopback_any_port()); }  // attached, then detached at once
    auto pair = net_test::connected_pair();
    // Closed with a reset, so that no connection waits in TIME_WAIT: thousands of those (runs
    // repeated in one CI job) slow the kernel's choice of a free port for bind() to a crawl.
    pair.client.set_linger(std::chrono::seconds(0));
    pair.server.set_linger(std::chrono::seconds(0));
    std::array<std::byte, 4> buf;
    auto pending = pair.server.receive_async(buf);
    if (i % 2 == 0) {
      tpl::sync_wait(pair.client.send_async("ping"s));
      EXPECT_EQ(tpl::sync_wait(std::move(pending)), 4u);
    } else {
      pair.server.close();
      EXPECT_THROW(tpl::sync_wait(std::move(pending)), tpl::net::socket_error);
    }
  }
}

}  // namespace

}  // namespace net_engine_test_cpp
