// tpl/async_local.hpp — tpl::async_local<T> (.NET AsyncLocal<T>), tpl::execution_context
// (.NET ExecutionContext: capture / run) and tpl::suppress_flow() (.NET ExecutionContext.SuppressFlow).
//
// An async_local's value flows with the logical flow of execution: into the tasks a coroutine
// starts (tpl::run, task_factory::start_new, continue_with, its own co_awaited calls), across every
// co_await whatever thread resumes it, into timer callbacks created while it is set; and never
// back out: a value set inside a coroutine is not seen by its caller after the call returns.
//
//   tpl::async_local<std::string> request_id;
//
//   tpl::task<> handle(std::string id) {
//     request_id.set(id);
//     co_await tpl::yield();                 // another pool thread, same value
//     co_await log_something();              // sees it too
//   }                                        // the caller's value is untouched
//
//   tpl::task<> log_something() { std::printf("[%s]\n", request_id.value().c_str()); co_return; }
//
// Capturing is a pointer copy; set() copies the small context array (copy on write). Pool threads
// return to the default (empty) context after each item. On hot paths that need no flow,
// `auto s = tpl::suppress_flow();` makes tasks started in its scope begin in the default context.
#pragma once

#include <new>
#include <type_traits>
#include <utility>

#include "tpl/detail/flow.hpp"

namespace tpl {

template <class T>
class async_local {
  static_assert(std::is_copy_constructible_v<T>, "async_local<T>: T must be copy constructible");

 public:
  async_local() = default;
  async_local(const async_local&) = delete;
  async_local& operator=(const async_local&) = delete;

  /// The value in the calling thread's current context, or T{} if it was never set there.
  T value() const {
    const detail::context_data* c = detail::flow_tls().current;
    const detail::context_entry* e = c != nullptr ? c->find(this) : nullptr;
    if (e == nullptr) return T{};
    if constexpr (detail::stored_inline_v<T>) {
      T v;
      std::memcpy(static_cast<void*>(&v), e->bytes, sizeof(T));
      return v;
    } else {
      return static_cast<const detail::boxed_value_of<T>*>(e->boxed)->value;
    }
  }

  /// Whether a value was set in the current context (reset() removes it).
  bool has_value() const noexcept {
    const detail::context_data* c = detail::flow_tls().current;
    return c != nullptr && c->find(this) != nullptr;
  }

  /// Sets the value in a new current context (the old one, captured elsewhere, is unchanged).
  template <class U = T>
    requires std::is_constructible_v<T, U&&>
  void set(U&& v) {
    const detail::context_data* cur = detail::flow_tls().current;
    detail::context_data* next = detail::context_data::copy_with_room(cur);
    detail::context_entry* slot = nullptr;
    for (std::uint32_t i = 0; i < next->count; ++i)
      if (next->entries()[i].key == this) slot = &next->entries()[i];
    try {
      if constexpr (detail::stored_inline_v<T>) {
        const T tmp(static_cast<U&&>(v));
        if (slot == nullptr) slot = append(next);
        drop_boxed(slot);
        std::memcpy(slot->bytes, static_cast<const void*>(&tmp), sizeof(T));
      } else {
        auto* b = new detail::boxed_value_of<T>(static_cast<U&&>(v));
        if (slot == nullptr) slot = append(next);
        drop_boxed(slot);
        slot->boxed = b;
      }
    } catch (...) {
      detail::release(next);
      throw;
    }
    detail::set_current_context(next);
  }

  /// Removes the value from the current context (value() then gives T{}).
  void reset() {
    const detail::context_data* cur = detail::flow_tls().current;
    if (cur == nullptr || cur->find(this) == nullptr) return;
    detail::context_data* next = detail::context_data::copy_with_room(cur);
    for (std::uint32_t i = 0; i < next->count; ++i) {
      if (next->entries()[i].key != this) continue;
      drop_boxed(&next->entries()[i]);
      next->entries()[i] = next->entries()[next->count - 1];
      --next->count;
      break;
    }
    detail::set_current_context(next->count == 0 ? (detail::release(next), nullptr) : next);
  }

 private:
  detail::context_entry* append(detail::context_data* d) const noexcept {
    detail::context_entry* e = &d->entries()[d->count++];
    e->key = this;
    e->boxed = nullptr;
    return e;
  }
  static void drop_boxed(detail::context_entry* e) noexcept {
    // acq_rel: see detail::release.
    if (e->boxed != nullptr && e->boxed->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete e->boxed;
    e->boxed = nullptr;
  }
};

/// A captured execution context: the async_local values current when it was captured.
class execution_context {
 public:
  execution_context() noexcept = default;  // the default (empty) context
  execution_context(const execution_context& o) noexcept : d_(o.d_) { detail::add_ref(d_); }
  execution_context(execution_context&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  execution_context& operator=(execution_context o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  ~execution_context() { detail::release(d_); }

  /// The calling thread's current context (the default one while flow is suppressed).
  static execution_context capture() noexcept {
    const detail::flow_state& f = detail::flow_tls();
    execution_context c;
    if (!f.suppressed) {
      c.d_ = f.current;
      detail::add_ref(c.d_);
    }
    return c;
  }

  /// Runs fn with `ctx` as the current context, then restores the caller's (whatever fn set).
  template <class F>
  static decltype(auto) run(const execution_context& ctx, F&& fn) {
    struct restore {
      detail::context_data* saved;
      ~restore() { detail::set_current_context(saved); }
    } r{detail::flow_tls().current};
    detail::flow_tls().current = nullptr;  // ownership moved to r
    detail::add_ref(ctx.d_);
    detail::set_current_context(ctx.d_);
    return static_cast<F&&>(fn)();
  }

  /// Whether this is the default (empty) context.
  bool is_default() const noexcept { return d_ == nullptr; }
  friend bool operator==(const execution_context& a, const execution_context& b) noexcept { return a.d_ == b.d_; }

 private:
  detail::context_data* d_ = nullptr;
};

/// While the returned object lives, work started on this thread (tasks, timers, captures) does not
/// take the current context: it starts in the default one (.NET ExecutionContext.SuppressFlow).
/// The current code keeps its own values. Restore with the destructor or undo(); nesting is allowed.
class [[nodiscard]] flow_suppression {
 public:
  flow_suppression() noexcept : previous_(detail::flow_tls().suppressed) { detail::flow_tls().suppressed = true; }
  ~flow_suppression() { undo(); }
  flow_suppression(const flow_suppression&) = delete;
  flow_suppression& operator=(const flow_suppression&) = delete;
  void undo() noexcept {
    if (active_) {
      detail::flow_tls().suppressed = previous_;
      active_ = false;
    }
  }

 private:
  bool previous_;
  bool active_ = true;
};

[[nodiscard]] inline flow_suppression suppress_flow() noexcept { return {}; }

namespace detail {
/// fn wrapped to run in the context current now (timer callbacks); fn itself when that is the
/// default context, so code that uses no async_local pays nothing.
template <class F>
F with_captured_context(F fn) {
  execution_context ctx = execution_context::capture();
  if (ctx.is_default()) return fn;
  return F([ctx = std::move(ctx), fn = std::move(fn)]() mutable { return execution_context::run(ctx, fn); });
}
}  // namespace detail

}  // namespace tpl
