// Scheduling workloads run side by side with the peers (bench/peers/):
//
//   yield_storm: 1,000 tasks on the pool, each does `co_await tpl::yield()` 1,000 times
//                (quick: 100 tasks). Checksum: the number of yields done.
//   ping_pong:   two tasks hand a counter back and forth 100,000 round trips (quick: 10,000)
//                through a fresh task_completion_source per hop. Checksum: the round trips.
//                With run_continuations_asynchronously every hop goes through the pool (the
//                latency between two tasks); without it set_result() resumes the other side
//                inline (the .NET default, the cheap case).
#include <atomic>
#include <cstdint>
#include <vector>

#include <tpl/tpl.hpp>

#include "alloc_counter_impl.hpp"
#include "workload.hpp"

namespace {

constexpr int kYieldTasks = 1'000;
constexpr int kQuickYieldTasks = 100;
constexpr int kYieldsPerTask = 1'000;
constexpr int kRoundTrips = 100'000;
constexpr int kQuickRoundTrips = 10'000;

// ---- yield_storm --------------------------------------------------------------------------
tpl::task<std::int64_t> yielder(int yields) {
  std::int64_t done = 0;
  for (int i = 0; i < yields; ++i) {
    co_await tpl::yield();
    ++done;
  }
  co_return done;
}

long long yield_storm(int tasks) {
  std::vector<tpl::task<std::int64_t>> all;
  all.reserve(static_cast<std::size_t>(tasks));
  for (int i = 0; i < tasks; ++i) all.push_back(tpl::run([] { return yielder(kYieldsPerTask); }));
  std::int64_t sum = 0;
  for (auto v : tpl::sync_wait(tpl::when_all(std::move(all)))) sum += v;
  return sum;
}

// ---- ping_pong ----------------------------------------------------------------------------
// The court holds the next hop's source for each side. A side installs its own reply source
// before it completes the other side's, so the other side always finds it in place.
struct court {
  tpl::task_creation_options opts;
  tpl::task_completion_source<int> to_pong{opts};
  tpl::task_completion_source<int> to_ping{opts};
};

tpl::task<int> ping(court& c, int rounds) {
  int ball = 0;
  for (int i = 0; i < rounds; ++i) {
    c.to_ping = tpl::task_completion_source<int>(c.opts);
    tpl::task<int> back = c.to_ping.get_task();
    // Copy: setting the result may resume pong inline, which replaces c.to_pong.
    tpl::task_completion_source<int> serve = c.to_pong;
    serve.set_result(ball);
    ball = co_await back;
  }
  co_return ball;
}

tpl::task<int> pong(court& c, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    tpl::task<int> in = c.to_pong.get_task();
    const int ball = co_await in;
    c.to_pong = tpl::task_completion_source<int>(c.opts);
    // Copy: setting the result may resume ping inline, which replaces c.to_ping.
    tpl::task_completion_source<int> reply = c.to_ping;
    reply.set_result(ball + 1);
  }
  co_return 0;
}

long long ping_pong(int rounds, tpl::task_creation_options opts) {
  court c{opts};
  tpl::task<int> b = tpl::run([&c, rounds] { return pong(c, rounds); });
  tpl::task<int> a = tpl::run([&c, rounds] { return ping(c, rounds); });
  const int balls = tpl::sync_wait(std::move(a));
  tpl::sync_wait(std::move(b));
  return balls;
}

}  // namespace

int main(int argc, char** argv) {
  auto tasks = [](bool q) { return q ? kQuickYieldTasks : kYieldTasks; };
  auto rounds = [](bool q) { return q ? kQuickRoundTrips : kRoundTrips; };
  constexpr long long kYields = 1LL * kYieldTasks * kYieldsPerTask;
  constexpr long long kQuickYields = 1LL * kQuickYieldTasks * kYieldsPerTask;
  std::vector<tpl_bench::method> methods = {
      {"yield_storm", "tpl run + yield()", [&](bool q) { return yield_storm(tasks(q)); }, kYields, kQuickYields},
      {"ping_pong", "tpl tcs, run_continuations_asynchronously",
       [&](bool q) { return ping_pong(rounds(q), tpl::task_creation_options::run_continuations_asynchronously); },
       kRoundTrips, kQuickRoundTrips},
      {"ping_pong", "tpl tcs, continuations inline",
       [&](bool q) { return ping_pong(rounds(q), tpl::task_creation_options::none); }, kRoundTrips,
       kQuickRoundTrips},
  };
  return tpl_bench::workload_main(argc, argv, methods);
}
