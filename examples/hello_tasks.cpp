// A first tour of tpl: hot tasks, awaiting, when_all, a task_completion_source, faults.
//
//   build/release/examples/example_hello_tasks
#include <cstdio>
#include <stdexcept>
#include <string>

#include <tpl/tpl.hpp>

namespace {

tpl::task<int> square_later(int x) {
  co_await tpl::yield();  // continue on the thread pool
  co_return x * x;
}

tpl::task<std::string> greet(tpl::task<std::string> name) {
  co_return "hello, " + co_await name;  // suspends until the name is known
}

tpl::task<int> fails() {
  co_await tpl::yield();
  throw std::runtime_error("something broke");
}

tpl::task<> tour() {
  // when_all: results in order.
  auto [a, b, c] = co_await tpl::when_all(square_later(2), square_later(3), square_later(4));
  std::printf("squares: %d %d %d\n", a, b, c);

  // A task completed by hand.
  tpl::task_completion_source<std::string> name;
  tpl::task<std::string> greeting = greet(name.get_task());
  name.set_result("tpl");  // greet() continues right here, on this thread
  std::printf("%s\n", (co_await greeting).c_str());

  // Faults: co_await rethrows the original exception.
  try {
    co_await fails();
  } catch (const std::runtime_error& e) {
    std::printf("caught: %s\n", e.what());
  }

  // tpl::run: a function on the pool; a returned task is unwrapped.
  int on_pool = co_await tpl::run([] { return square_later(5); });
  std::printf("from the pool: %d\n", on_pool);
}

}  // namespace

int main() {
  tpl::sync_wait(tour());

  // wait()/get() report every fault as an aggregate_exception.
  try {
    fails().get();
  } catch (const tpl::aggregate_exception& e) {
    std::printf("aggregate of %zu: %s\n", e.size(), e.what());
  }
  return 0;
}
