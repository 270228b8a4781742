// A TCP echo server on tpl::net: one task per connection, sends back what it receives.
//
//   build/release/examples/example_echo_server 9000      # listens on 127.0.0.1:9000 until killed
//   printf 'hello\n' | nc -q1 127.0.0.1 9000
//
// TPL_SOCKETS_INLINE_COMPLETIONS=1 runs the continuations on the engine thread (docs/io.md).
#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <tpl/net.hpp>
#include <tpl/tpl.hpp>

namespace {

tpl::task<> echo(tpl::net::tcp_socket conn) {
  try {
    conn.set_no_delay(true);
    std::array<std::byte, 4096> buf;
    for (;;) {
      const std::size_t n = co_await conn.receive_async(buf);
      if (n == 0) co_return;  // the client closed its side
      co_await conn.send_async(std::span<const std::byte>(buf.data(), n));
    }
  } catch (const std::exception&) {
    // A reset by the client ends this connection only.
  }
}

tpl::task<> serve(tpl::net::tcp_listener& listener) {
  for (;;) {
    tpl::net::tcp_socket conn = co_await listener.accept_async();
    (void)echo(std::move(conn));  // runs on its own; the task handle is not needed
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
    std::printf("echo server on %s\n", listener.local_endpoint().to_string().c_str());
    std::fflush(stdout);
    tpl::sync_wait(serve(listener));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "echo_server: %s\n", e.what());
    return 1;
  }
}
