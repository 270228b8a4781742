// The unobserved-task-exception event (tpl/unobserved_task_exception.hpp): a mutex-guarded list of
// handlers, and a count read without the lock so that a fault with no subscriber costs one load.
//
// A handler is removed through its call_gate (call_gate.hpp), guarded by the registry's mutex: a
// report copies the list, then counts each call in just before it and out just after it, and
// unsubscribe() takes the node out of the list and waits out the calls under way on other
// threads. A handler unsubscribed before a report reaches it is skipped.
#include "tpl/unobserved_task_exception.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "call_gate.hpp"
#include "tpl/detail/task_state.hpp"

namespace tpl {

namespace {
using handler_ptr = std::shared_ptr<const unobserved_task_exception_handler>;

struct node {
  explicit node(handler_ptr h) noexcept : handler(std::move(h)) {}
  handler_ptr handler;
  detail::call_gate gate;  // under registry::mutex
};

struct registry {
  std::mutex mutex;
  std::condition_variable done;  // a call counted out of a node's gate
  std::vector<std::shared_ptr<node>> handlers;  // in subscription order
  std::atomic<std::size_t> count{0};
};

registry& the_registry() {
  // Never destroyed: tasks may be released while static objects are being destroyed.
  static registry* r = new registry;
  return *r;
}
}  // namespace

unobserved_task_exception_subscription on_unobserved_task_exception(unobserved_task_exception_handler handler) {
  if (!handler) throw std::invalid_argument("on_unobserved_task_exception: empty handler");
  auto h = std::make_shared<const unobserved_task_exception_handler>(std::move(handler));
  auto n = std::make_shared<node>(h);
  registry& r = the_registry();
  std::lock_guard g(r.mutex);
  r.handlers.push_back(std::move(n));
  // relaxed: the count is only a hint that the locked list is worth reading (see the report).
  r.count.store(r.handlers.size(), std::memory_order_relaxed);
  return unobserved_task_exception_subscription(std::move(h));
}

void unobserved_task_exception_subscription::unsubscribe() noexcept {
  if (handler_ == nullptr) return;
  registry& r = the_registry();
  {
    std::unique_lock g(r.mutex);
    auto it = std::find_if(r.handlers.begin(), r.handlers.end(),
                           [&](const std::shared_ptr<node>& n) { return n->handler == handler_; });
    if (it != r.handlers.end()) {
      const std::shared_ptr<node> n = *it;
      r.handlers.erase(it);
      // relaxed: as in on_unobserved_task_exception.
      r.count.store(r.handlers.size(), std::memory_order_relaxed);
      n->gate.close_and_wait(g, r.done);
    }
  }
  handler_.reset();
}

namespace detail {

void report_unobserved_task_exception(const std::exception_ptr& error) noexcept {
  registry& r = the_registry();
  // relaxed: a subscription made concurrently with this release may or may not see this fault,
  // as with .NET's event; one made before it (happens-before) is seen, through the lock below or
  // the subscriber's own ordering with the release.
  if (r.count.load(std::memory_order_relaxed) == 0) return;
  std::vector<std::shared_ptr<node>> handlers;
  try {
    {
      std::lock_guard g(r.mutex);
      handlers = r.handlers;
    }
    if (handlers.empty()) return;
    std::vector<std::exception_ptr> inner;
    try {
      std::rethrow_exception(error);
    } catch (const aggregate_exception& a) {
      inner = a.inner_exceptions();
    } catch (...) {
      inner.push_back(error);
    }
    unobserved_task_exception_event_args args{aggregate_exception(std::move(inner))};
    for (const std::shared_ptr<node>& n : handlers) {
      {
        std::lock_guard g(r.mutex);
        if (!n->gate.try_enter()) continue;  // unsubscribed since the copy
      }
      try {
        const detail::call_scope here(n->gate);
        (*n->handler)(args);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tpl: an unobserved-task-exception handler threw: %s\n", e.what());
      } catch (...) {
        std::fputs("tpl: an unobserved-task-exception handler threw a non-std exception\n", stderr);
      }
      std::lock_guard g(r.mutex);
      n->gate.leave();
      r.done.notify_all();
    }
  } catch (...) {
    std::fputs("tpl: out of memory while reporting an unobserved task exception\n", stderr);
  }
}

}  // namespace detail
}  // namespace tpl
