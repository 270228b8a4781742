// tpl/detail/wait_guards.hpp — the timer and the token registration of a wait that ends one of
// several ways (delay, task::wait_async, async_semaphore::wait_async) (internal).
//
// Whoever decides the wait calls clean_up(): the timer and the registration are handed over under
// a small lock and disposed outside it. Disposing waits for a callback running on another thread
// (the loser's, which only finds the wait decided) and does not wait from inside its own callback.
// The code that arms them stores each one with set_*(), then checks whether the wait was decided
// in the meantime and, if so, calls clean_up() itself: every armed object is taken down exactly
// once.
#pragma once

#include <mutex>
#include <utility>

#include "tpl/cancellation.hpp"
#include "tpl/detail/short_lock.hpp"
#include "tpl/time_provider.hpp"

namespace tpl::detail {

class wait_guards {
 public:
  void set_timer(timer t) {
    std::lock_guard g(lock_);
    clock_ = std::move(t);
  }
  void set_registration(cancellation_registration r) {
    std::lock_guard g(lock_);
    registration_ = std::move(r);
  }
  void clean_up() noexcept {
    timer t;
    cancellation_registration r;
    {
      std::lock_guard g(lock_);
      t = std::move(clock_);
      r = std::move(registration_);
    }
    // t and r are disposed here, outside the lock.
  }

 private:
  short_lock lock_;
  timer clock_;
  cancellation_registration registration_;
};

}  // namespace tpl::detail
