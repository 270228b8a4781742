// A TCP server whose handler blocks a thread now and then (sync-over-async inside a request, seed
// 002's scenario). A request is a 64-byte message, echoed back; for one whose first byte is 'B'
// the handler first waits, synchronously, for a task that completes 100 ms later:
// tpl::delay(100 ms).wait(). task::wait() tells the pool that its thread blocks (it holds a
// tpl::blocking_scope), so the pool adds a thread and the other connections keep being answered.
//
//   build/release/examples/example_sync_over_async_server 9000   # 127.0.0.1:9000 until killed
//
// bench/run.py's sync_over_async_server group drives it with bench/loadgen (`-blocking B`).
// With TPL_SOCKETS_INLINE_COMPLETIONS=1 the handler runs on the engine thread, and one blocked
// handler stalls every connection of that engine: the inline mode's caveat (docs/io.md).
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <tpl/net.hpp>
#include <tpl/tpl.hpp>

namespace {

constexpr std::size_t kMessageSize = 64;
constexpr std::chrono::milliseconds kBlockingWait{100};

tpl::task<> serve_connection(tpl::net::tcp_socket conn) {
  try {
    conn.set_no_delay(true);
    std::array<std::byte, kMessageSize> message;
    for (;;) {
      co_await conn.receive_exactly_async(message);  // end_of_stream once the client closes
      if (message[0] == std::byte{'B'}) tpl::delay(kBlockingWait).wait();
      co_await conn.send_async(message);
    }
  } catch (const std::exception&) {
    // The end of the stream or a reset ends this connection only.
  }
}

tpl::task<> serve(tpl::net::tcp_listener& listener) {
  for (;;) {
    tpl::net::tcp_socket conn = co_await listener.accept_async();
    (void)serve_connection(std::move(conn));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PORT\n", argv[0]);
    return 2;
  }
  try {
    const tpl::net::endpoint ep(tpl::net::ip_address::ipv4_loopback(), std::stoi(argv[1]));
    tpl::net::tcp_listener listener(ep, {.backlog = 4096});
    std::printf("sync-over-async server on %s\n", listener.local_endpoint().to_string().c_str());
    std::fflush(stdout);
    tpl::sync_wait(serve(listener));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sync_over_async_server: %s\n", e.what());
    return 1;
  }
}
