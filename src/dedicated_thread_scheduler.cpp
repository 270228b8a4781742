// tpl::dedicated_thread_scheduler: n threads over one mutex-protected FIFO.
#include "tpl/dedicated_thread_scheduler.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#if defined(__linux__)
#include <pthread.h>
#endif

#include "tpl/detail/trampoline.hpp"

namespace tpl {

namespace {
thread_local const dedicated_thread_scheduler* t_owner = nullptr;
}

dedicated_thread_scheduler::dedicated_thread_scheduler(unsigned n, std::string name) : name_(std::move(name)) {
  if (n == 0) throw std::invalid_argument("dedicated_thread_scheduler: thread count must be at least 1");
  threads_.reserve(n);
  for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this, i] { loop(i); });
}

dedicated_thread_scheduler::~dedicated_thread_scheduler() {
  if (owns_current_thread()) {
    std::fputs("tpl: dedicated_thread_scheduler destroyed from one of its own threads\n", stderr);
    std::abort();
  }
  {
    std::lock_guard g(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  // Anything queued after the threads left (by work that was still running elsewhere).
  std::unique_lock g(mutex_);
  stopped_ = true;
  while (!queue_.empty()) {
    auto h = queue_.front();
    queue_.pop_front();
    g.unlock();
    run(h);
    g.lock();
  }
}

void dedicated_thread_scheduler::schedule(std::coroutine_handle<> h) {
  std::unique_lock g(mutex_);
  if (stopped_) {
    g.unlock();
    detail::resume_inline(h);
    return;
  }
  queue_.push_back(h);
  g.unlock();
  cv_.notify_one();
}

bool dedicated_thread_scheduler::owns_current_thread() const noexcept { return t_owner == this; }

std::size_t dedicated_thread_scheduler::queued() const {
  std::lock_guard g(mutex_);
  return queue_.size();
}

void dedicated_thread_scheduler::loop(unsigned index) {
#if defined(__linux__)
  const std::string n = name_.substr(0, 12) + "-" + std::to_string(index);
  pthread_setname_np(pthread_self(), n.substr(0, 15).c_str());
#else
  (void)index;
#endif
  t_owner = this;
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping and drained
    auto h = queue_.front();
    queue_.pop_front();
    lock.unlock();
    run(h);
    lock.lock();
  }
  t_owner = nullptr;
}

}  // namespace tpl
