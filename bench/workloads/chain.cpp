// Seed 001's chain: 1,000,000 links, each awaits the previous one and adds 1; the first is
// completed from a task_completion_source once the whole chain is built. Also seed 001's
// recursive async count (with deferral through the pool) and skynet (1,000,000 leaves).
#include <coroutine>
#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include <tpl/tpl.hpp>

#include "alloc_counter_impl.hpp"
#include "workload.hpp"

namespace {

// ---- The floor: a minimal single-thread lazy coroutine chain ---------------------------------
// No reference counting, no thread safety, no pool: just frames and symmetric transfer (which
// g++ -O2 turns into tail calls, so the 1,000,000-deep resume chain does not overflow here; tpl
// itself never relies on that).
struct lazy {
  struct promise_type {
    int value = 0;
    std::coroutine_handle<> continuation;
    lazy get_return_object() { return lazy{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct final_awaiter {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        auto c = h.promise().continuation;
        return c ? c : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    final_awaiter final_suspend() noexcept { return {}; }
    void return_value(int v) { value = v; }
    void unhandled_exception() { std::terminate(); }
  };
  explicit lazy(std::coroutine_handle<promise_type> h) : h(h) {}
  lazy(lazy&& o) noexcept : h(std::exchange(o.h, {})) {}
  lazy& operator=(lazy&& o) noexcept {
    std::swap(h, o.h);
    return *this;
  }
  ~lazy() {
    if (h) h.destroy();
  }
  bool await_ready() { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> c) {
    h.promise().continuation = c;
    return h;
  }
  int await_resume() { return h.promise().value; }
  std::coroutine_handle<promise_type> h;
};

lazy lazy_source() { co_return -1; }
lazy lazy_link(lazy& in) { co_return 1 + co_await in; }

long long floor_chain(int n) {
  // The links are owned by a vector (not by each other), so destruction is not recursive either.
  std::vector<lazy> links;
  links.reserve(static_cast<std::size_t>(n) + 1);
  links.push_back(lazy_source());
  for (int i = 0; i < n; ++i) links.push_back(lazy_link(links.back()));
  links.back().h.resume();
  return links.back().h.promise().value;
}

// ---- tpl ----------------------------------------------------------------------------------
tpl::task<int> link(tpl::task<int> in) { co_return 1 + co_await in; }

long long tpl_chain(int n) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> right = link(tcs.get_task());
  for (int i = 1; i < n; ++i) right = link(std::move(right));
  tcs.set_result(-1);
  return right.get() + 1;  // n links on -1 give n - 1; +1 so every method reports n
}

long long tpl_chain_on_pool(int n) {
  return tpl::sync_wait(tpl::run([n] { return tpl_chain(n); }));
}

tpl::task<int> link_yield(tpl::task<int> in) {
  int v = co_await in;
  co_await tpl::yield();
  co_return 1 + v;
}

long long tpl_chain_yield(int n) {
  tpl::task_completion_source<int> tcs;
  tpl::task<int> right = link_yield(tcs.get_task());
  for (int i = 1; i < n; ++i) right = link_yield(std::move(right));
  tcs.set_result(-1);
  return tpl::sync_wait(std::move(right)) + 1;
}

// ---- recursive async count (seed 001), deferred through the pool ----------------------------
tpl::task<int> count(int n) {
  if (n == 0) co_return 0;
  co_return 1 + co_await tpl::run([n] { return count(n - 1); });
}

// ---- skynet: 1,000,000 leaves, fan-out 10 -----------------------------------------------------
tpl::task<std::int64_t> skynet(std::int64_t num, std::int64_t size) {
  if (size == 1) co_return num;
  const std::int64_t sub = size / 10;
  std::vector<tpl::task<std::int64_t>> children;
  children.reserve(10);
  for (std::int64_t i = 0; i < 10; ++i)
    children.push_back(tpl::run([num, i, sub] { return skynet(num + i * sub, sub); }));
  std::int64_t sum = 0;
  for (auto v : co_await tpl::when_all(std::move(children))) sum += v;
  co_return sum;
}

// The same with tpl::spawn, the idiom docs/tasks.md teaches for fork-join: nine children spawned
// (one frame each), the tenth run inline, the spawned ones awaited newest first.
tpl::task<std::int64_t> skynet_spawn(std::int64_t num, std::int64_t size) {
  if (size == 1) co_return num;
  const std::int64_t sub = size / 10;
  tpl::task<std::int64_t> children[9];
  for (std::int64_t i = 0; i < 9; ++i)
    children[i] = tpl::spawn([=] { return skynet_spawn(num + i * sub, sub); });
  std::int64_t sum = co_await skynet_spawn(num + 9 * sub, sub);
  for (int i = 8; i >= 0; --i) sum += co_await children[i];
  co_return sum;
}

// ---- tpl::parallel::invoke: fork-join of plain calls (the idiom docs/tasks.md teaches first) ----
std::int64_t skynet_invoke(std::int64_t num, std::int64_t size) {
  if (size == 1) return num;
  const std::int64_t sub = size / 10;
  std::int64_t r[10];
  auto child = [&r, num, sub](int i) { return [&r, num, sub, i] { r[i] = skynet_invoke(num + i * sub, sub); }; };
  tpl::parallel::invoke(child(0), child(1), child(2), child(3), child(4), child(5), child(6), child(7), child(8),
                        child(9));
  std::int64_t sum = 0;
  for (std::int64_t v : r) sum += v;
  return sum;
}

long long fib_invoke(int n) {
  if (n < 2) return n;
  long long a = 0, b = 0;
  tpl::parallel::invoke([&] { a = fib_invoke(n - 1); }, [&] { b = fib_invoke(n - 2); });
  return a + b;
}

long long invoke_on_pool(long long (*f)(int), int n) {
  return tpl::run([f, n] { return f(n); }).get();
}

// ---- fib: binary fork-join ----------------------------------------------------------------------
tpl::task<long long> fib_spawn(int n) {
  if (n < 2) co_return n;
  tpl::task<long long> left = tpl::spawn([n] { return fib_spawn(n - 1); });
  const long long right = co_await fib_spawn(n - 2);
  co_return co_await left + right;
}

tpl::task<long long> fib_run(int n) {
  if (n < 2) co_return n;
  std::vector<tpl::task<long long>> children;
  children.reserve(2);
  children.push_back(tpl::run([n] { return fib_run(n - 1); }));
  children.push_back(tpl::run([n] { return fib_run(n - 2); }));
  long long sum = 0;
  for (auto v : co_await tpl::when_all(std::move(children))) sum += v;
  co_return sum;
}

long long on_pool(tpl::task<long long> (*f)(int), int n) {
  return tpl::run([f, n] { return f(n); }).get();
}

constexpr int kLinks = 1'000'000;
constexpr int kQuickLinks = 100'000;

}  // namespace

int main(int argc, char** argv) {
  auto n = [](bool quick) { return quick ? kQuickLinks : kLinks; };
  std::vector<tpl_bench::method> methods = {
      {"chain", "floor: lazy coroutines, 1 thread", [&](bool q) { return floor_chain(n(q)) + 1; }, kLinks, kQuickLinks},
      {"chain", "tpl task chain (set_result on main)", [&](bool q) { return tpl_chain(n(q)); }, kLinks, kQuickLinks},
      {"chain", "tpl task chain (on a pool thread)", [&](bool q) { return tpl_chain_on_pool(n(q)); }, kLinks, kQuickLinks},
      {"chain", "tpl task chain + yield per link", [&](bool q) { return tpl_chain_yield(n(q)); }, kLinks, kQuickLinks},
      {"recursive_count", "tpl count via tpl::run", [&](bool q) { return tpl::sync_wait(count(n(q))); }, kLinks, kQuickLinks},
      {"skynet", "tpl run + when_all", [](bool q) { return static_cast<long long>(tpl::sync_wait(skynet(0, q ? 100'000 : 1'000'000))); },
       499999500000LL, 4999950000LL},
      {"skynet", "tpl spawn (one frame per child)", [](bool q) { return static_cast<long long>(tpl::sync_wait(skynet_spawn(0, q ? 100'000 : 1'000'000))); },
       499999500000LL, 4999950000LL},
      {"skynet", "tpl parallel::invoke", [](bool q) { return static_cast<long long>(tpl::run([q] { return skynet_invoke(0, q ? 100'000 : 1'000'000); }).get()); },
       499999500000LL, 4999950000LL},
      {"fib30", "tpl parallel::invoke", [](bool q) { return invoke_on_pool(fib_invoke, q ? 25 : 30); }, 832040LL, 75025LL},
      {"fib30", "tpl spawn + inline last child", [](bool q) { return on_pool(fib_spawn, q ? 25 : 30); }, 832040LL, 75025LL},
      {"fib30", "tpl run + when_all", [](bool q) { return on_pool(fib_run, q ? 25 : 30); }, 832040LL, 75025LL},
      {"fib35", "tpl parallel::invoke", [](bool q) { return invoke_on_pool(fib_invoke, q ? 30 : 35); }, 9227465LL, 832040LL},
      {"fib35", "tpl spawn + inline last child", [](bool q) { return on_pool(fib_spawn, q ? 30 : 35); }, 9227465LL, 832040LL},
  };
  return tpl_bench::workload_main(argc, argv, methods);
}
