// The unobserved-task-exception event (tpl/unobserved_task_exception.hpp): a mutex-guarded list of
// handlers, and a count read without the lock so that a fault with no subscriber costs one load.
//
// Invariants (all under registry::mutex, a plain monitor: no lock-free hand-off):
//   - A report copies the list and counts itself into each copied node's `running` in the same
//     critical section; it counts itself out of a node (after calling it, or skipping it once it
//     is inactive) under the lock again, and wakes the waiters of that node.
//   - unsubscribe() marks the node inactive and takes it out of the list; from then on no report
//     copies it, so its `running` only falls. It then waits until `running` is down to the counts
//     held by reports on its own thread's stack (t_reports: a handler that unsubscribes itself, or
//     another handler of the report it runs in, must not wait for itself). When it returns, no
//     other thread is inside the handler or will enter it.
#include "tpl/unobserved_task_exception.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "tpl/detail/task_state.hpp"

namespace tpl {

namespace {
using handler_ptr = std::shared_ptr<const unobserved_task_exception_handler>;

struct node {
  explicit node(handler_ptr h) noexcept : handler(std::move(h)) {}
  handler_ptr handler;
  std::size_t running = 0;  // reports that copied this node and have not counted out; under the mutex
  // Written under the mutex; read by a report before it calls the handler without the lock:
  // relaxed, because a stale `true` only means the call happens, and unsubscribe() then waits
  // for it through `running`.
  std::atomic<bool> active{true};
};

struct registry {
  std::mutex mutex;
  std::condition_variable done;  // a report counted out of a node
  std::vector<std::shared_ptr<node>> handlers;  // in subscription order
  std::atomic<std::size_t> count{0};
};

registry& the_registry() {
  // Never destroyed: tasks may be released while static objects are being destroyed.
  static registry* r = new registry;
  return *r;
}

/// A report under way on this thread: its copy of the list, of which [*next, end) is still
/// counted in. Reports nest (a handler may drop a faulted task), so they form a chain.
struct report_frame {
  const std::vector<std::shared_ptr<node>>* handlers;
  const std::size_t* next;
  report_frame* outer;
};
thread_local report_frame* t_reports = nullptr;  // trivially destructible: usable at thread exit

/// How many of n's counts the reports on this thread's stack hold.
std::size_t held_here(const node* n) noexcept {
  std::size_t held = 0;
  for (const report_frame* f = t_reports; f != nullptr; f = f->outer)
    for (std::size_t i = *f->next; i < f->handlers->size(); ++i)
      if ((*f->handlers)[i].get() == n) ++held;
  return held;
}

/// A report is done with n (called it or skipped it): counts out and wakes unsubscribe()s.
void count_out(registry& r, node& n) noexcept {
  std::lock_guard g(r.mutex);
  --n.running;
  r.done.notify_all();
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
      n->active.store(false, std::memory_order_relaxed);  // see node::active
      r.handlers.erase(it);
      // relaxed: as in on_unobserved_task_exception.
      r.count.store(r.handlers.size(), std::memory_order_relaxed);
      const std::size_t own = held_here(n.get());
      r.done.wait(g, [&] { return n->running == own; });
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
    std::lock_guard g(r.mutex);
    handlers = r.handlers;  // may throw: before anything is counted in
    for (const auto& n : handlers) ++n->running;
  } catch (...) {
    std::fputs("tpl: out of memory while reporting an unobserved task exception\n", stderr);
    return;
  }
  if (handlers.empty()) return;
  std::size_t next = 0;  // handlers[next..] are still counted in
  report_frame frame{&handlers, &next, t_reports};
  t_reports = &frame;
  struct pop_frame {
    report_frame* outer;
    ~pop_frame() { t_reports = outer; }
  } pop{frame.outer};
  try {
    std::vector<std::exception_ptr> inner;
    try {
      std::rethrow_exception(error);
    } catch (const aggregate_exception& a) {
      inner = a.inner_exceptions();
    } catch (...) {
      inner.push_back(error);
    }
    unobserved_task_exception_event_args args{aggregate_exception(std::move(inner))};
    for (; next < handlers.size(); ++next) {
      node& n = *handlers[next];
      if (n.active.load(std::memory_order_relaxed)) {  // see node::active
        try {
          (*n.handler)(args);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "tpl: an unobserved-task-exception handler threw: %s\n", e.what());
        } catch (...) {
          std::fputs("tpl: an unobserved-task-exception handler threw a non-std exception\n", stderr);
        }
      }
      count_out(r, n);
    }
  } catch (...) {
    std::fputs("tpl: out of memory while reporting an unobserved task exception\n", stderr);
    for (; next < handlers.size(); ++next) count_out(r, *handlers[next]);
  }
}

}  // namespace detail
}  // namespace tpl
