// tpl/detail/detached.hpp — a fire-and-forget coroutine type for tpl's own internal work items
// (deferred completion firing, timer callbacks). Its frame comes from the frame pool and frees
// itself at the end; the body must not throw (it terminates, like any noexcept callback).
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>

#include "tpl/detail/frame_pool.hpp"

namespace tpl::detail {

struct detached {
  struct promise_type {
    detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
    static void* operator new(std::size_t n) { return frame_alloc(n); }
    static void operator delete(void* p, std::size_t n) noexcept { frame_free(p, n); }
  };
};

}  // namespace tpl::detail
