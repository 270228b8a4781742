// The socket engine on the thread pool: echo round trips move the default pool's I/O counters
// (thread_pool_stats::io.sockets) by at least what they must; the io_summary event reaches a
// listener and TPL_THREADPOOL_TRACE's output; and a server whose request handler blocks
// synchronously (sync over async, inside a blocking_scope) on a task that only a later request of
// another connection completes keeps answering that other connection, the pool adding threads.
//
// ctest also runs net_sync_over_async.* with TPL_THREADPOOL_MIN_THREADS=2 (a two-worker default
// pool, which the blocked handlers fill), where the test also checks that the pool injected.
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net_test_support.hpp"

namespace net_pool_io_test_cpp {

namespace {

using namespace std::string_literals;
using net_test::string_of;

std::uint64_t batch_total(const tpl::io_engine_stats& s) {
  std::uint64_t n = 0;
  for (std::uint64_t b : s.batch_sizes) n += b;
  return n;
}

tpl::task<> echo_exactly(tpl::net::tcp_socket& s, int messages) {
  std::array<std::byte, 4> buf;
  for (int i = 0; i < messages; ++i) {
    co_await s.receive_exactly_async(buf);
    co_await s.send_async(buf);
  }
}

// One round trip whose reply certainly waits for the engine: the client's receive is started
// (and finds nothing) before the request that makes the server answer is sent.
void round_trip(net_test::tcp_pair& p) {
  std::array<std::byte, 4> reply;
  auto pending = p.client.receive_exactly_async(reply).as_task();
  tpl::sync_wait(p.client.send_async("ping"s));
  tpl::sync_wait(std::move(pending));
  EXPECT_EQ(string_of(reply), "ping");
}

TEST(net_pool_io, echo_round_trips_move_the_default_pools_socket_counters) {
  constexpr int kRoundTrips = 20;
  tpl::thread_pool& pool = tpl::thread_pool::default_pool();
  auto p = net_test::connected_pair();
  const tpl::thread_pool_io_stats before = pool.stats().io;
  auto server = echo_exactly(p.server, kRoundTrips);
  for (int i = 0; i < kRoundTrips; ++i) round_trip(p);
  tpl::sync_wait(server);
  const tpl::thread_pool_io_stats after = pool.stats().io;
  // Each reply waited: the engine completed it after a wake-up that came after its request, so
  // no two round trips share a wake-up. (The server's receives may or may not have waited.)
  EXPECT_GE(after.sockets.completions - before.sockets.completions, std::uint64_t{kRoundTrips});
  EXPECT_GE(after.sockets.wakeups - before.sockets.wakeups, std::uint64_t{kRoundTrips});
  EXPECT_GE(after.sockets.events - before.sockets.events, std::uint64_t{kRoundTrips});
  EXPECT_GE(batch_total(after.sockets) - batch_total(before.sockets), std::uint64_t{kRoundTrips});
  EXPECT_GE(after.sockets.largest_batch, 1u);
  EXPECT_GE(after.sockets.mean_batch(), 1.0);
  EXPECT_GE(after.completions() - before.completions(), std::uint64_t{kRoundTrips});
  // socket_stats() reads the same engine counters (taken later, so at least as far).
  const auto sockets = tpl::net::socket_stats();
  EXPECT_GE(sockets.engine_wakeups, after.sockets.wakeups);
  EXPECT_GE(sockets.events, after.sockets.events);
  EXPECT_GE(sockets.largest_batch, after.sockets.largest_batch);
}

TEST(net_pool_io, the_io_summary_event_reaches_the_listener_and_the_trace) {
  // The listener's state outlives the test: a call already in flight when the listener is removed
  // may still finish on another thread.
  struct seen_t {
    std::mutex m;
    bool seen = false;
    tpl::thread_pool_event first{};
  };
  auto seen = std::make_shared<seen_t>();
  tpl::thread_pool& pool = tpl::thread_pool::default_pool();
  auto p = net_test::connected_pair();
  testing::internal::CaptureStderr();
  pool.set_trace(true);
  pool.set_event_listener([seen](const tpl::thread_pool_event& e) {
    if (e.kind != tpl::thread_pool_event_kind::io_summary) return;
    std::lock_guard g(seen->m);
    if (!seen->seen) seen->first = e;
    seen->seen = true;
  });
  // At most one io_summary a second: keep the sockets busy until one comes (the bound is a hang
  // guard, not a timing assertion).
  int round_trips = 0;
  const bool arrived = net_test::eventually([&] {
    auto server = echo_exactly(p.server, 1);
    round_trip(p);
    tpl::sync_wait(server);
    ++round_trips;
    std::lock_guard g(seen->m);
    return seen->seen;
  });
  pool.set_event_listener({});
  pool.set_trace([] {  // back to what TPL_THREADPOOL_TRACE asked for
    const char* t = std::getenv("TPL_THREADPOOL_TRACE");
    return t != nullptr && (std::strcmp(t, "1") == 0 || std::strcmp(t, "true") == 0);
  }());
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(arrived) << "no io_summary after " << round_trips << " round trips";
  tpl::thread_pool_event e;
  {
    std::lock_guard g(seen->m);
    e = seen->first;
  }
  EXPECT_EQ(e.reason, tpl::thread_pool_reason::io);
  EXPECT_GE(e.io.completions() + e.io.sockets.wakeups + e.io.uring.wakeups, 1u) << "a summary reports a change";
  EXPECT_GE(e.io.sockets.events, e.io.sockets.wakeups);
  // The listener saw it, so the trace printed it first (publish() prints, then calls listeners).
  EXPECT_NE(err.find(" io_summary threads="), std::string::npos) << err;
  EXPECT_NE(err.find(" sockets=[completions="), std::string::npos) << err;
  EXPECT_NE(err.find(" pool_engine=[completions="), std::string::npos) << err;
  EXPECT_NE(tpl::to_string(e).find("io_summary"), std::string::npos);
}

// --- sync over async in a request handler ----------------------------------------------------

// Requests and replies are 8 bytes: "wait    " blocks until the release, then answers
// "released"; "ping    " answers "pong    "; "release " completes what the waiters wait for,
// then answers "ok      ".
struct server_state {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::latch blocking;     // counted down by each handler once inside its blocking_scope
  std::atomic<int> accepted{0};

  explicit server_state(int waiters) : blocking(waiters) {}
};

tpl::task<> handle(tpl::net::tcp_socket conn, server_state& st) {
  std::array<std::byte, 8> request;
  for (;;) {
    try {
      co_await conn.receive_exactly_async(request);
    } catch (const tpl::net::end_of_stream&) {
      co_return;
    }
    const std::string r = string_of(request);
    std::string reply;
    if (r == "wait    ") {
      // Sync over async: this pool thread waits for a result that only another connection's
      // request produces. The wait is one tpl cannot see (a std::future), so the handler tells
      // the pool with a blocking_scope; the pool may then add a thread.
      tpl::blocking_scope blocking("a request handler waiting for another request");
      st.blocking.count_down();
      st.released.wait();
      reply = "released";
    } else if (r == "ping    ") {
      reply = "pong    ";
    } else if (r == "release ") {
      st.release.set_value();
      reply = "ok      ";
    } else {
      reply = "what?   ";
    }
    co_await conn.send_async(reply);
  }
}

tpl::task<> serve(tpl::net::tcp_listener& listener, int connections, server_state& st) {
  std::vector<tpl::task<>> handlers;
  for (int i = 0; i < connections; ++i) {
    handlers.push_back(handle(co_await listener.accept_async(), st));
    st.accepted.fetch_add(1);
  }
  for (auto& h : handlers) co_await h;
}

std::string exchange(tpl::net::tcp_socket& s, const std::string& request) {
  tpl::sync_wait(s.send_async(request));
  std::array<std::byte, 8> reply;
  tpl::sync_wait(s.receive_exactly_async(reply));
  return string_of(reply);
}

TEST(net_sync_over_async, a_handler_blocked_on_a_later_request_of_another_connection_does_not_stop_the_server) {
  if (tpl::net::socket_stats().inline_completions || std::getenv("TPL_SOCKETS_INLINE_COMPLETIONS") != nullptr)
    GTEST_SKIP() << "inline completions: a handler that blocks stalls its engine (the documented caveat)";
  // Two waiters: in a two-worker pool they hold every worker, so the other connection is served
  // only by a thread the pool adds for the blocked ones.
  constexpr int kWaiters = 2;
  constexpr int kPings = 5;
  tpl::thread_pool& pool = tpl::thread_pool::default_pool();
  if (pool.max_threads() < unsigned{kWaiters} + 1)
    GTEST_SKIP() << "the pool may have at most " << pool.max_threads() << " threads (TPL_THREADPOOL_MAX_THREADS): "
                 << "with every one blocked, nothing can answer the other connection (starvation, as in .NET)";
  const bool two_workers = [] {
    const char* v = std::getenv("TPL_THREADPOOL_MIN_THREADS");
    return v != nullptr && std::strcmp(v, "2") == 0;
  }();
  server_state st(kWaiters);
  tpl::net::tcp_listener listener(net_test::loopback_any_port());
  auto server = serve(listener, kWaiters + 1, st);
  std::vector<tpl::net::tcp_socket> waiters(kWaiters);
  for (auto& w : waiters) tpl::sync_wait(w.connect_async(listener.local_endpoint()));
  tpl::net::tcp_socket other;
  tpl::sync_wait(other.connect_async(listener.local_endpoint()));
  // Every handler waits for its first request before any is sent, so no handler blocks inside
  // the accept loop's own run.
  ASSERT_TRUE(net_test::eventually([&] { return st.accepted.load() == kWaiters + 1; }));

  for (auto& w : waiters) tpl::sync_wait(w.send_async("wait    "s));
  st.blocking.wait();  // both handlers hold a pool thread, inside their blocking_scope
  EXPECT_GE(pool.stats().blocked_threads, unsigned{kWaiters});

  for (int i = 0; i < kPings; ++i) EXPECT_EQ(exchange(other, "ping    "), "pong    ") << "ping " << i;
  EXPECT_EQ(exchange(other, "release "), "ok      ");
  for (auto& w : waiters) {
    std::array<std::byte, 8> reply;
    tpl::sync_wait(w.receive_exactly_async(reply));
    EXPECT_EQ(string_of(reply), "released");
  }
  for (auto& w : waiters) w.close();
  other.close();
  tpl::sync_wait(server);

  if (two_workers) {
    // The pool started with two workers; three ran at once (two blocked, one answering), so at
    // least one was added, and every thread's work here happens before this read (the replies).
    // The blocking_scopes raised the goal, so the first thread added was for blocking, at once
    // (the starvation gate, which needs no scope, would have taken half a second).
    const tpl::thread_pool_stats s = pool.stats();
    EXPECT_GE(s.threads_injected_by_blocking + s.threads_injected_by_starvation + s.threads_injected_by_hill_climbing +
                  s.threads_injected_by_eager + s.threads_injected_by_demand,
              1u);
    if (std::getenv("TPL_THREADPOOL_COOPERATIVE_BLOCKING") == nullptr && std::getenv("TPL_THREADPOOL_INJECTION") == nullptr) {
      EXPECT_GE(s.threads_injected_by_blocking, 1u);
    }
  }
}

}  // namespace

}  // namespace net_pool_io_test_cpp
