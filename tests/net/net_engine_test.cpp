// The engine's hand-off: a continuation that blocks until another socket's event is handled does
// not stall that event (each batch item queues a helper before it handles its first event), and
// the engine's configuration is parsed strictly.
#include <latch>
#include <string>

#include "../../src/net/socket_engine.hpp"
#include "net_test_support.hpp"

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

class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
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

TEST(net_engine, configuration_is_parsed_strictly) {
  using tpl::net::detail::engine_config_from_environment;
  {
    scoped_env count("TPL_SOCKETS_ENGINE_COUNT", "3");
    scoped_env inl("TPL_SOCKETS_INLINE_COMPLETIONS", "true");
    const auto c = engine_config_from_environment();
    EXPECT_EQ(c.engine_count, 3u);
    EXPECT_TRUE(c.inline_completions);
  }
  for (const char* bad : {"", "0", "-1", "2x", " 2", "1025", "99999999999999999999"}) {
    scoped_env count("TPL_SOCKETS_ENGINE_COUNT", bad);
    try {
      (void)engine_config_from_environment();
      ADD_FAILURE() << "accepted TPL_SOCKETS_ENGINE_COUNT=\"" << bad << "\"";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("TPL_SOCKETS_ENGINE_COUNT"), std::string::npos);
    }
  }
  for (const char* bad : {"", "2", "yes", "TRUE", "on"}) {
    scoped_env inl("TPL_SOCKETS_INLINE_COMPLETIONS", bad);
    EXPECT_THROW((void)engine_config_from_environment(), std::invalid_argument) << bad;
  }
}

}  // namespace
