// Channels: a three-stage pipeline (generate -> square -> sum) joined by bounded channels, a
// fan-in of jobs through an unbounded channel, and Go's unbuffered rendezvous.
//
//   build/release/examples/example_channel_pipeline
#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include <tpl/tpl.hpp>

namespace {

tpl::task<> generate(tpl::channel_writer<int> out, int n) {
  for (int i = 1; i <= n; ++i) co_await out.write_async(i);  // waits while the channel is full
  out.complete();                                            // readers finish after draining
}

tpl::task<> square(tpl::channel_reader<int> in, tpl::channel_writer<long long> out) {
  for (;;) {
    std::optional<int> v = co_await in.next_async();  // std::nullopt: completed and drained
    if (!v) break;
    co_await out.write_async(static_cast<long long>(*v) * *v);
  }
  out.complete();
}

tpl::task<long long> sum(tpl::channel_reader<long long> in) {
  long long total = 0;
  co_await in.read_all([&total](long long v) { total += v; });
  co_return total;
}

tpl::task<> job(tpl::channel_writer<int> results, int id, int delay_ms) {
  co_await tpl::delay(std::chrono::milliseconds(delay_ms));  // simulated I/O
  co_await results.write_async(id);
}

tpl::task<> tour() {
  // A pipeline: the bounds (16, 16) are the back-pressure between the stages.
  auto numbers = tpl::make_bounded_channel<int>(16);
  auto squares = tpl::make_bounded_channel<long long>(16);
  auto g = generate(numbers.writer(), 1000);
  auto s = square(numbers.reader(), squares.writer());
  const long long total = co_await sum(squares.reader());
  co_await g;
  co_await s;
  std::printf("sum of the first 1000 squares: %lld\n", total);

  // Fan-in: every job starts at once; results arrive in completion order.
  auto results = tpl::make_unbounded_channel<int>();
  std::vector<tpl::task<>> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back(job(results.writer(), i, 50 - 10 * i));
  auto done = tpl::when_all(std::move(jobs)).continue_with([w = results.writer()] { w.complete(); });
  std::printf("jobs finished in this order:");
  co_await results.reader().read_all([](int id) { std::printf(" %d", id); });
  std::printf("\n");
  co_await done;

  // Unbuffered: a write completes only when a reader takes the item (Go's make(chan int)).
  auto handoff = tpl::make_bounded_channel<int>(0);
  auto writer = [](tpl::channel_writer<int> w) -> tpl::task<> { co_await w.write_async(42); }(handoff.writer());
  std::printf("writer done before the read: %s\n", writer.is_completed() ? "yes" : "no");
  const int v = co_await handoff.reader().read_async();
  co_await writer;
  std::printf("received %d through a rendezvous channel\n", v);
}

}  // namespace

int main() { tpl::sync_wait(tour()); }
