// Socket and pipe operations that wait, in one process over loopback: a round trip starts a
// receive that finds nothing (so it waits: in the socket's reusable operation,
// src/net/op_source.hpp, or, for a pipe, in its transfer coroutine), sends one small message from
// the other end, and awaits the receive, which the engine's readiness hand-off completes (the
// coroutine then goes on on a pool worker). One iteration is 10,000 round trips in
// one task; the time is wall-clock (the loop hops between threads), items/s counts round trips.
// bytes_per_op, per round trip, should be 0: a socket receive that waits takes no frame and
// allocates nothing (a pipe read's frame comes from the frame pool). The kernel's loopback path dominates: the figure compares tpl's versions, not peers.
#include <benchmark/benchmark.h>

#include <array>
#include <cstddef>
#include <span>

#include <tpl/io.hpp>
#include <tpl/net.hpp>
#include <tpl/tpl.hpp>

#include "micro_support.hpp"

namespace {

constexpr int kRoundTrips = 10'000;

tpl::net::endpoint loopback() { return {tpl::net::ip_address::ipv4_loopback(), 0}; }

void per_round_trip(benchmark::State& state, const tpl_bench::alloc_probe& probe) {
  state.SetItemsProcessed(state.iterations() * kRoundTrips);
  probe.finish(state);
  state.counters["bytes_per_op"] = state.counters["bytes_per_op"] / kRoundTrips;
}

void net_udp_receive_that_waits(benchmark::State& state) {
  tpl::net::udp_socket server(loopback());
  tpl::net::udp_socket client(loopback());
  const tpl::net::endpoint to = server.local_endpoint();
  std::array<std::byte, 64> in{}, out{};
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    tpl::sync_wait([&]() -> tpl::task<> {
      for (int i = 0; i < kRoundTrips; ++i) {
        auto received = server.receive_from_async(in);  // waits: nothing was sent yet
        co_await client.send_to_async(out, to);
        benchmark::DoNotOptimize((co_await std::move(received)).bytes);
      }
    }());
  }
  per_round_trip(state, probe);
}
BENCHMARK(net_udp_receive_that_waits)
    ->Name("net/udp receive_from that waits + send_to, 10,000 round trips")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The stream round trip both stream benchmarks time: a read that waits (nothing was written yet),
// then a write from the other end; `read(span)` and `write(span)` start the two operations.
template <class Read, class Write>
void stream_round_trips(benchmark::State& state, Read read, Write write) {
  std::array<std::byte, 64> in{}, out{};
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    tpl::sync_wait([&]() -> tpl::task<> {
      for (int i = 0; i < kRoundTrips; ++i) {
        auto received = read(std::span(in));  // waits: nothing was written yet
        co_await write(std::span<const std::byte>(out));
        std::size_t got = co_await std::move(received);
        while (got < out.size()) got += co_await read(std::span(in).subspan(got));
        benchmark::DoNotOptimize(got);
      }
    }());
  }
  per_round_trip(state, probe);
}

void net_tcp_receive_that_waits(benchmark::State& state) {
  tpl::net::tcp_listener listener(loopback());
  auto accepted = listener.accept_async().as_task();
  tpl::net::tcp_socket client;
  tpl::sync_wait(client.connect_async(listener.local_endpoint()));
  tpl::net::tcp_socket server = tpl::sync_wait(std::move(accepted));
  client.set_no_delay(true);
  stream_round_trips(
      state, [&](std::span<std::byte> b) { return server.receive_async(b); },
      [&](std::span<const std::byte> b) { return client.send_async(b); });
}
BENCHMARK(net_tcp_receive_that_waits)
    ->Name("net/tcp receive that waits + send, 10,000 round trips")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void net_pipe_read_that_waits(benchmark::State& state) {
  auto [reader, writer] = tpl::io::create_pipe();
  stream_round_trips(
      state, [&reader = reader](std::span<std::byte> b) { return reader.read_async(b); },
      [&writer = writer](std::span<const std::byte> b) { return writer.write_async(b); });
}
BENCHMARK(net_pipe_read_that_waits)
    ->Name("net/pipe read that waits + write, 10,000 round trips")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
