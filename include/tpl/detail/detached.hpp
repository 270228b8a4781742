// tpl/detail/detached.hpp — fire-and-forget coroutine types for tpl's own internal work items:
// detached starts at once (deferred completion firing, timer callbacks); suspended_item is
// created suspended and started by scheduling its handle (parallel loops' workers, a scheduler
// pair's processing items).
//
//   detail::suspended_item w = helper(args...);  // runs nothing yet
//   scheduler.schedule(w.handle);                // the body runs where the scheduler runs it
//
// Invariants: the frame comes from the frame pool and frees itself at the end (final_suspend
// never suspends); a body must not throw (it terminates, like any noexcept callback); a
// suspended_item that is never scheduled must be destroyed through its handle by its creator.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>

#include "tpl/detail/frame_pool.hpp"

namespace tpl::detail {

// What the two promise types share: the frame from the frame pool, freed at the end, and a body
// that must not throw.
struct fire_and_forget_promise {
  std::suspend_never final_suspend() noexcept { return {}; }
  void return_void() noexcept {}
  void unhandled_exception() noexcept { std::terminate(); }
  static void* operator new(std::size_t n) { return frame_alloc(n); }
  static void operator delete(void* p, std::size_t n) noexcept { frame_free(p, n); }
};

struct detached {
  struct promise_type : fire_and_forget_promise {
    detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
  };
};

struct suspended_item {
  struct promise_type : fire_and_forget_promise {
    suspended_item get_return_object() noexcept {
      return suspended_item{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
  };
  std::coroutine_handle<promise_type> handle;
};

}  // namespace tpl::detail
