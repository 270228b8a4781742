// Seed 001's chain: a million tasks, each awaiting the previous one and adding 1, started from a
// task_completion_source. Completes in well under a second and never overflows the stack, at any
// optimisation level.
//
//   build/release/examples/example_chain [links]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <tpl/tpl.hpp>

namespace {
tpl::task<int> link(tpl::task<int> input) { co_return 1 + co_await input; }
}  // namespace

int main(int argc, char** argv) {
  const int links = argc > 1 ? std::atoi(argv[1]) : 1'000'000;
  const auto start = std::chrono::steady_clock::now();

  tpl::task_completion_source<int> first;
  tpl::task<int> last = link(first.get_task());
  for (int i = 1; i < links; ++i) last = link(std::move(last));
  first.set_result(-1);
  const int result = last.get();

  const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start);
  std::printf("Sending %d messages (tpl::task<int>): result %d, %.1f ms\n", links, result, ms.count());
  return result == links - 1 ? 0 : 1;
}
