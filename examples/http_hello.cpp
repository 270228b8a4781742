// A minimal HTTP/1.1 server for TechEmpower's plaintext test: GET /plaintext answers
// "Hello, World!", connections are kept alive, pipelined requests are answered in order and the
// answers to one batch go out in one send.
//
//   build/release/examples/example_http_hello 8080     # listens on 127.0.0.1:8080 until killed
//   curl http://127.0.0.1:8080/plaintext
//   wrk -t1 -c64 -d5s http://127.0.0.1:8080/plaintext
//
// Only what the benchmark needs: the request line and headers are read with network_stream's
// read_line_async; bodies (Content-Length) are skipped; any other path is a 404.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include <tpl/net.hpp>
#include <tpl/tpl.hpp>

namespace {

constexpr std::string_view kHello =
    "HTTP/1.1 200 OK\r\nServer: tpl\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";
constexpr std::string_view kNotFound =
    "HTTP/1.1 404 Not Found\r\nServer: tpl\r\nContent-Length: 0\r\n\r\n";

bool starts_with_ignoring_case(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if ((s[i] | 0x20) != (prefix[i] | 0x20)) return false;
  return true;
}

tpl::task<> serve_connection(tpl::net::tcp_socket conn) {
  try {
    conn.set_no_delay(true);
    tpl::net::network_stream stream(conn);
    for (;;) {
      auto request_line = co_await stream.read_line_async();
      if (!request_line) break;                 // the client closed the connection
      if (request_line->empty()) continue;      // stray CRLF between requests
      const bool hello = request_line->starts_with("GET /plaintext ");
      std::size_t body = 0;
      bool close = false;
      for (;;) {                                // headers up to the empty line
        auto header = co_await stream.read_line_async();
        if (!header) co_return;
        if (header->empty()) break;
        if (starts_with_ignoring_case(*header, "content-length:"))
          body = std::strtoul(std::string(header->substr(15)).c_str(), nullptr, 10);
        else if (starts_with_ignoring_case(*header, "connection: close"))
          close = true;
      }
      if (body > 0) {
        std::string discard(body, '\0');
        co_await stream.read_exactly_async(std::as_writable_bytes(std::span<char>(discard)));
      }
      co_await stream.write_async(hello ? kHello : kNotFound);
      if (close) break;
      // Pipelining: answer everything already received before sending.
      if (stream.buffered() == 0) co_await stream.flush_async();
    }
    co_await stream.flush_async();
  } catch (const std::exception&) {
    // A reset or a malformed request ends this connection only.
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
    std::printf("http_hello on http://%s/plaintext\n", listener.local_endpoint().to_string().c_str());
    std::fflush(stdout);
    tpl::sync_wait(serve(listener));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_hello: %s\n", e.what());
    return 1;
  }
}
