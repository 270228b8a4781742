// The unobserved-task-exception event (tpl/unobserved_task_exception.hpp): a mutex-guarded list of
// handlers, and a count read without the lock so that a fault with no subscriber costs one load.
#include "tpl/unobserved_task_exception.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "tpl/detail/task_state.hpp"

namespace tpl {

namespace {
using handler_ptr = std::shared_ptr<const unobserved_task_exception_handler>;

struct registry {
  std::mutex mutex;
  std::vector<handler_ptr> handlers;  // in subscription order
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
  registry& r = the_registry();
  std::lock_guard g(r.mutex);
  r.handlers.push_back(h);
  // relaxed: the count is only a hint that the locked list is worth reading (see the report).
  r.count.store(r.handlers.size(), std::memory_order_relaxed);
  return unobserved_task_exception_subscription(std::move(h));
}

void unobserved_task_exception_subscription::unsubscribe() noexcept {
  if (handler_ == nullptr) return;
  registry& r = the_registry();
  {
    std::lock_guard g(r.mutex);
    auto it = std::find(r.handlers.begin(), r.handlers.end(), handler_);
    if (it != r.handlers.end()) r.handlers.erase(it);
    // relaxed: as in on_unobserved_task_exception.
    r.count.store(r.handlers.size(), std::memory_order_relaxed);
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
  std::vector<handler_ptr> handlers;
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
    for (const handler_ptr& h : handlers) {
      try {
        (*h)(args);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tpl: an unobserved-task-exception handler threw: %s\n", e.what());
      } catch (...) {
        std::fputs("tpl: an unobserved-task-exception handler threw a non-std exception\n", stderr);
      }
    }
  } catch (...) {
    std::fputs("tpl: out of memory while reporting an unobserved task exception\n", stderr);
  }
}

}  // namespace detail
}  // namespace tpl
