// Async-stream workloads run side by side with the peers (bench/peers/):
//
//   async_generator: an async_generator<int> yields 0..n-1 (n = 1,000,000; quick: 100,000) and
//                    the consumer sums them (.NET: `await foreach` over an `async
//                    IAsyncEnumerable<int>` method with `yield return`). The body yields without
//                    waiting, so every next() completes synchronously on the consumer's thread:
//                    the workload measures the per-item cost of the stream machinery itself.
//                    Checksum: the sum, n (n - 1) / 2.
#include <cstdint>
#include <vector>

#include <tpl/tpl.hpp>

#include "alloc_counter_impl.hpp"
#include "workload.hpp"

namespace {

constexpr int kItems = 1'000'000;
constexpr int kQuickItems = 100'000;

tpl::async_generator<int> ints(int n) {
  for (int i = 0; i < n; ++i) co_yield i;
}

tpl::task<long long> sum_with_next(int n) {
  auto gen = ints(n);
  long long sum = 0;
  while (int* item = co_await gen.next()) sum += *item;
  co_return sum;
}

tpl::task<long long> sum_with_iterator(int n) {
  auto gen = ints(n);
  long long sum = 0;
  for (auto it = co_await gen.begin(); it != gen.end(); co_await ++it) sum += *it;
  co_return sum;
}

}  // namespace

int main(int argc, char** argv) {
  auto items = [](bool q) { return q ? kQuickItems : kItems; };
  constexpr long long kSum = 1LL * kItems * (kItems - 1) / 2;
  constexpr long long kQuickSum = 1LL * kQuickItems * (kQuickItems - 1) / 2;
  std::vector<tpl_bench::method> methods = {
      {"async_generator", "tpl async_generator<int>, co_await next()",
       [&](bool q) { return tpl::sync_wait(sum_with_next(items(q))); }, kSum, kQuickSum},
      {"async_generator", "tpl async_generator<int>, begin() / co_await ++it",
       [&](bool q) { return tpl::sync_wait(sum_with_iterator(items(q))); }, kSum, kQuickSum},
  };
  return tpl_bench::workload_main(argc, argv, methods);
}
