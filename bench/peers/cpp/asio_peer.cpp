// Asio peer of tpl's benchmark workloads: C++20 coroutines on asio::awaitable, co_spawn and
// asio::experimental::channel, as an Asio user writes them: one io_context run by one thread
// (Asio's usual scaling is an io_context per thread; its plain channels are not thread-safe).
// The servers of the server groups (--serve) are a coroutine per connection on one io_context, run
// by one thread or by one thread per core.
#include <asio.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/channel.hpp>

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "peer_main.hpp"

namespace {

using asio::awaitable;
using asio::use_awaitable;
using chan = asio::experimental::channel<void(asio::error_code, long long)>;

template <class F>
long long on_io_context(F make) {
  asio::io_context io(1);
  long long result = 0;
  asio::co_spawn(io, make(io.get_executor()), [&](std::exception_ptr e, long long v) {
    if (e) std::rethrow_exception(e);
    result = v;
  });
  io.run();
  return result;
}

// ---- chain_channels: seed 001's program -------------------------------------------------------
awaitable<void> link(std::shared_ptr<chan> out, std::shared_ptr<chan> in) {
  const long long v = co_await in->async_receive(use_awaitable);
  co_await out->async_send(asio::error_code{}, v + 1, use_awaitable);
}

awaitable<long long> chain_channels(asio::any_io_executor ex, int n) {
  auto final_output = std::make_shared<chan>(ex, 0);
  auto right = final_output;
  for (int i = 0; i < n; ++i) {
    auto left = right;
    right = std::make_shared<chan>(ex, 0);
    asio::co_spawn(ex, link(left, right), asio::detached);
  }
  co_await right->async_send(asio::error_code{}, 0, use_awaitable);
  co_return co_await final_output->async_receive(use_awaitable);
}

// ---- skynet ---------------------------------------------------------------------------------------
awaitable<long long> skynet(asio::any_io_executor ex, long long num, long long size) {
  if (size == 1) co_return num;
  const long long sub = size / 10;
  auto results = std::make_shared<chan>(ex, 10);
  for (long long i = 0; i < 10; ++i) {
    asio::co_spawn(ex, skynet(ex, num + i * sub, sub), [results](std::exception_ptr, long long v) {
      results->try_send(asio::error_code{}, v);
    });
  }
  long long sum = 0;
  for (int i = 0; i < 10; ++i) sum += co_await results->async_receive(use_awaitable);
  co_return sum;
}

// recursive_count is not here: `co_return 1 + co_await co_spawn(ex, count(n - 1), use_awaitable)`
// crashes (SIGSEGV, stack overflow) already at 100,000 levels, because each co_spawn's completion
// resumes its awaiter inline, nested.

// ---- yield_storm ----------------------------------------------------------------------------------
awaitable<long long> yield_storm(asio::any_io_executor ex, int tasks, int yields) {
  auto done = std::make_shared<chan>(ex, static_cast<std::size_t>(tasks));
  for (int t = 0; t < tasks; ++t) {
    asio::co_spawn(ex, [ex, yields, done]() -> awaitable<void> {
      long long n = 0;
      for (int i = 0; i < yields; ++i) {
        co_await asio::post(ex, use_awaitable);
        ++n;
      }
      done->try_send(asio::error_code{}, n);
    }, asio::detached);
  }
  long long sum = 0;
  for (int t = 0; t < tasks; ++t) sum += co_await done->async_receive(use_awaitable);
  co_return sum;
}

// ---- ping_pong ------------------------------------------------------------------------------------
awaitable<long long> ping_pong(asio::any_io_executor ex, int rounds) {
  auto to_pong = std::make_shared<chan>(ex, 0), to_ping = std::make_shared<chan>(ex, 0);
  asio::co_spawn(ex, [=]() -> awaitable<void> {
    for (int i = 0; i < rounds; ++i) {
      const long long v = co_await to_pong->async_receive(use_awaitable);
      co_await to_ping->async_send(asio::error_code{}, v + 1, use_awaitable);
    }
  }, asio::detached);
  long long ball = 0;
  for (int i = 0; i < rounds; ++i) {
    co_await to_pong->async_send(asio::error_code{}, ball, use_awaitable);
    ball = co_await to_ping->async_receive(use_awaitable);
  }
  co_return ball;
}

// ---- jobs_100 (seed 004): a steady_timer per job, channel fan-in ---------------------------------
awaitable<long long> jobs(asio::any_io_executor ex, int n) {
  auto ch = std::make_shared<chan>(ex, static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    asio::co_spawn(ex, [ex, ch, i]() -> awaitable<void> {
      asio::steady_timer t(ex, std::chrono::milliseconds(10 + (i * 37) % 41));  // simulated I/O
      co_await t.async_wait(use_awaitable);
      co_await ch->async_send(asio::error_code{}, i, use_awaitable);
    }, asio::detached);
  }
  long long sum = 0;
  for (int i = 0; i < n; ++i) sum += co_await ch->async_receive(use_awaitable);
  co_return sum;
}

// ---- bounded channels: producers and consumers as coroutines on the one thread -------------------
awaitable<long long> channel_run(asio::any_io_executor ex, long long n, int producers, int consumers) {
  auto ch = std::make_shared<chan>(ex, 1024);
  auto sums = std::make_shared<chan>(ex, static_cast<std::size_t>(consumers));
  auto live = std::make_shared<int>(producers);
  for (int p = 0; p < producers; ++p) {
    const long long lo = n * p / producers, hi = n * (p + 1) / producers;
    asio::co_spawn(ex, [ch, lo, hi, live]() -> awaitable<void> {
      for (long long i = lo; i < hi; ++i) co_await ch->async_send(asio::error_code{}, i, use_awaitable);
      if (--*live == 0) ch->close();
    }, asio::detached);
  }
  for (int c = 0; c < consumers; ++c) {
    asio::co_spawn(ex, [ch, sums]() -> awaitable<void> {
      long long sum = 0;
      for (;;) {
        auto [ec, v] = co_await ch->async_receive(asio::experimental::as_tuple(use_awaitable));
        if (ec) break;
        sum += v;
      }
      sums->try_send(asio::error_code{}, sum);
    }, asio::detached);
  }
  long long total = 0;
  for (int c = 0; c < consumers; ++c) total += co_await sums->async_receive(use_awaitable);
  co_return total;
}

// ---- servers of the server groups (--serve): a coroutine per connection ---------------------------
using asio::ip::tcp;

awaitable<void> echo_session(tcp::socket socket) {
  try {
    socket.set_option(tcp::no_delay(true));
    std::array<char, 4096> buf;
    for (;;) {
      const std::size_t n = co_await socket.async_read_some(asio::buffer(buf), use_awaitable);
      co_await asio::async_write(socket, asio::buffer(buf, n), use_awaitable);
    }
  } catch (const std::exception&) {
    // end of stream or a reset: this connection only
  }
}

// HTTP/1.1 for the plaintext group with a minimal parser: every request ends at its empty line
// (GET, no body); the answers to what one read brought in go out in one write (pipelining).
constexpr std::string_view kHello =
    "HTTP/1.1 200 OK\r\nServer: asio\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";

awaitable<void> http_session(tcp::socket socket) {
  try {
    socket.set_option(tcp::no_delay(true));
    std::array<char, 4096> buf;
    std::string in, out;
    for (;;) {
      const std::size_t n = co_await socket.async_read_some(asio::buffer(buf), use_awaitable);
      in.append(buf.data(), n);
      std::size_t begin = 0;
      for (std::size_t end; (end = in.find("\r\n\r\n", begin)) != std::string::npos; begin = end + 4)
        out += kHello;
      in.erase(0, begin);
      if (!out.empty()) {
        co_await asio::async_write(socket, asio::buffer(out), use_awaitable);
        out.clear();
      }
    }
  } catch (const std::exception&) {
  }
}

template <class Session>
awaitable<void> accept_loop(tcp::acceptor& acceptor, Session session) {
  for (;;) {
    tcp::socket socket = co_await acceptor.async_accept(use_awaitable);
    asio::co_spawn(acceptor.get_executor(), session(std::move(socket)), asio::detached);
  }
}

// One io_context run by `threads` threads: each connection's coroutine runs on one of them at a
// time, so a session needs no strand.
template <class Session>
int serve(int threads, Session session) {
  asio::io_context io(threads);
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  std::printf("listening on 127.0.0.1:%u\n", static_cast<unsigned>(acceptor.local_endpoint().port()));
  std::fflush(stdout);
  asio::co_spawn(io, accept_loop(acceptor, session), asio::detached);
  std::vector<std::thread> more;
  for (int i = 1; i < threads; ++i) more.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : more) t.join();
  return 0;
}

int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

}  // namespace

int main(int argc, char** argv) {
  using peer::pick;
  std::vector<peer::method> methods = {
      {"chain_channels", "co_spawn + channel per link (1 thread)",
       [](bool q, peer::recorder&) { return on_io_context([&](auto ex) { return chain_channels(ex, pick(q, 1'000'000, 100'000)); }); }},
      {"skynet", "co_spawn + channel (1 thread)",
       [](bool q, peer::recorder&) { return on_io_context([&](auto ex) { return skynet(ex, 0, pick(q, 1'000'000, 100'000)); }); }},
      {"yield_storm", "co_spawn + post (1 thread)",
       [](bool q, peer::recorder&) { return on_io_context([&](auto ex) { return yield_storm(ex, pick(q, 1000, 100), 1000); }); }},
      {"ping_pong", "2 coroutines, 2 channels (1 thread)",
       [](bool q, peer::recorder&) { return on_io_context([&](auto ex) { return ping_pong(ex, pick(q, 100'000, 10'000)); }); }},
      {"jobs_100", "steady_timer per job, channel fan-in (1 thread)",
       [](bool q, peer::recorder&) { return on_io_context([&](auto ex) { return jobs(ex, pick(q, 100, 20)); }); }},
      {"channel_spsc_bounded", "channel(1024) (1 thread)",
       [](bool q, peer::recorder&) { return on_io_context([&](auto ex) { return channel_run(ex, pick(q, 10'000'000, 1'000'000), 1, 1); }); }},
      {"channel_mpmc_bounded", "channel(1024), 2x2 coroutines (1 thread)",
       [](bool q, peer::recorder&) { return on_io_context([&](auto ex) { return channel_run(ex, pick(q, 10'000'000, 1'000'000), 2, 2); }); }},
  };
  std::vector<peer::server> servers = {
      {"echo", "coroutine per connection (1 thread)", [] { return serve(1, echo_session); }},
      {"echo", "coroutine per connection (io_context on cores threads)", [] { return serve(cores(), echo_session); }},
      {"plaintext", "coroutine per connection, minimal parser (1 thread)", [] { return serve(1, http_session); }},
      {"plaintext", "coroutine per connection, minimal parser (io_context on cores threads)",
       [] { return serve(cores(), http_session); }},
  };
  return peer::main(argc, argv, methods, servers);
}
