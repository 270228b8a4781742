// Fork-join with tpl::parallel::invoke (.NET Parallel.Invoke): a parallel merge sort of
// 4,000,000 integers and a parallel fib(32), each checked against the sequential answer.
//
// invoke runs its first function on the calling thread and queues the others on the calling
// worker's deque, where idle workers steal them; whatever nobody stole, the caller runs itself as
// a plain call when the first returns. So the recursion below costs little more than the
// sequential one where no worker is idle, and spreads over every worker where they are.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include <tpl/tpl.hpp>

namespace {

// Sorts v[lo, hi) using tmp[lo, hi) as scratch space.
void merge_sort(std::vector<int>& v, std::vector<int>& tmp, std::size_t lo, std::size_t hi) {
  if (hi - lo <= 4096) {  // small ranges: sequential (a fork would cost more than it saves)
    std::sort(v.begin() + static_cast<std::ptrdiff_t>(lo), v.begin() + static_cast<std::ptrdiff_t>(hi));
    return;
  }
  const std::size_t mid = lo + (hi - lo) / 2;
  tpl::parallel::invoke([&] { merge_sort(v, tmp, lo, mid); },   // here
                        [&] { merge_sort(v, tmp, mid, hi); });  // queued: may be stolen
  std::merge(v.begin() + static_cast<std::ptrdiff_t>(lo), v.begin() + static_cast<std::ptrdiff_t>(mid),
             v.begin() + static_cast<std::ptrdiff_t>(mid), v.begin() + static_cast<std::ptrdiff_t>(hi),
             tmp.begin() + static_cast<std::ptrdiff_t>(lo));
  std::copy(tmp.begin() + static_cast<std::ptrdiff_t>(lo), tmp.begin() + static_cast<std::ptrdiff_t>(hi),
            v.begin() + static_cast<std::ptrdiff_t>(lo));
}

long fib(int n) {
  if (n < 2) return n;
  long a = 0, b = 0;
  tpl::parallel::invoke([&] { a = fib(n - 1); }, [&] { b = fib(n - 2); });
  return a + b;
}

long fib_sequential(int n) { return n < 2 ? n : fib_sequential(n - 1) + fib_sequential(n - 2); }

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  std::vector<int> v(4'000'000);
  std::mt19937 rng(42);
  for (int& x : v) x = static_cast<int>(rng());
  std::vector<int> expected = v;
  std::sort(expected.begin(), expected.end());

  std::vector<int> tmp(v.size());
  auto t0 = std::chrono::steady_clock::now();
  // On the pool: invoke from a pool worker queues on that worker's deque.
  tpl::run([&] { merge_sort(v, tmp, 0, v.size()); }).get();
  std::printf("merge sort of %zu ints: %.1f ms, %s\n", v.size(), ms_since(t0), v == expected ? "sorted" : "WRONG");

  t0 = std::chrono::steady_clock::now();
  const long f = tpl::run([] { return fib(32); }).get();
  std::printf("fib(32) = %ld: %.1f ms, %s\n", f, ms_since(t0), f == fib_sequential(32) ? "correct" : "WRONG");
  return v == expected && f == fib_sequential(32) ? 0 : 1;
}
