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

void net_tcp_receive_that_waits(benchmark::State& state) {
  tpl::net::tcp_listener listener(loopback());
  auto accepted = listener.accept_async().as_task();
  tpl::net::tcp_socket client;
  tpl::sync_wait(client.connect_async(listener.local_endpoint()));
  tpl::net::tcp_socket server = tpl::sync_wait(std::move(accepted));
  client.set_no_delay(true);
  std::array<std::byte, 64> in{}, out{};
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    tpl::sync_wait([&]() -> tpl::task<> {
      for (int i = 0; i < kRoundTrips; ++i) {
        auto received = server.receive_async(in);  // waits: nothing was sent yet
        co_await client.send_async(out);
        std::size_t got = co_await std::move(received);
        while (got < out.size()) got += co_await server.receive_async(std::span(in).subspan(got));
        benchmark::DoNotOptimize(got);
      }
    }());
  }
  per_round_trip(state, probe);
}
BENCHMARK(net_tcp_receive_that_waits)
    ->Name("net/tcp receive that waits + send, 10,000 round trips")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void net_pipe_read_that_waits(benchmark::State& state) {
  auto [reader, writer] = tpl::io::create_pipe();
  std::array<std::byte, 64> in{}, out{};
  tpl_bench::alloc_probe probe;
  for (auto _ : state) {
    tpl::sync_wait([&, &reader = reader, &writer = writer]() -> tpl::task<> {
      for (int i = 0; i < kRoundTrips; ++i) {
        auto received = reader.read_async(in);  // waits: nothing was written yet
        co_await writer.write_async(out);
        std::size_t got = co_await std::move(received);
        while (got < out.size()) got += co_await reader.read_async(std::span(in).subspan(got));
        benchmark::DoNotOptimize(got);
      }
    }());
  }
  per_round_trip(state, probe);
}
BENCHMARK(net_pipe_read_that_waits)
    ->Name("net/pipe read that waits + write, 10,000 round trips")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
