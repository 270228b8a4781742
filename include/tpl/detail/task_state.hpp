// tpl/detail/task_state.hpp — the shared state behind task<T>: task_state_base (completion, waiters,
// reference count, error) plus the typed result, and how a holder takes the result out (internal).
//
// Invariants: a task_state<T> holds a constructed T exactly when its status is ran_to_completion,
// and a constructed exception_ptr exactly when it has an error (the two share one slot); a result
// is moved out only by the sole owner (take_or_copy), so no other handle ever reads a moved-from
// value.
#pragma once

#include <cstddef>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>

#include "tpl/detail/config.hpp"
#include "tpl/detail/frame_pool.hpp"
#include "tpl/detail/task_state_base.hpp"
#include "tpl/exceptions.hpp"

namespace tpl::detail {

/// std::is_copy_constructible is true for a container of move-only elements (its copy
/// constructor is declared, and fails only when instantiated); look through value_type.
template <class T>
struct is_really_copyable : std::bool_constant<std::is_copy_constructible_v<T>> {};
template <class T>
  requires requires { typename T::value_type; } && (!std::is_same_v<typename T::value_type, T>)
struct is_really_copyable<T>
    : std::bool_constant<std::is_copy_constructible_v<T> &&
                         is_really_copyable<std::remove_cv_t<typename T::value_type>>::value> {};

/// Moves or copies a result out of a shared state: moving is only allowed when the caller holds
/// the only reference (asked of `owner` only when it matters: a trivially copyable result is
/// copied either way).
template <class T>
T take_or_copy(T& value, const task_state_base& owner) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    (void)owner;
    return value;
  } else {
    if constexpr (std::is_move_constructible_v<T>) {
      if (owner.sole_owner()) return std::move(value);
    }
    if constexpr (is_really_copyable<T>::value) {
      return value;
    } else {
      throw invalid_operation(
          "the result of a task<T> with a move-only T can only be taken by its sole owner: "
          "co_await / get() an rvalue task that no other handle shares");
    }
  }
}

template <class T>
class task_state : public task_state_base {
  static_assert(!std::is_reference_v<T>, "task<T&> is not supported: use task<T*> or "
                                         "task<std::reference_wrapper<T>>");
  // The error's storage follows the base, aligned as T: it must lie within set_error_offset()'s
  // reach.
  static_assert((sizeof(task_state_base) + alignof(T) - 1) / alignof(T) * alignof(T) <= kMaxErrorOffset,
                "task<T> supports results aligned to at most 256 bytes");

 public:
  // Both leave the result uninitialised: it is constructed by set_value().
  task_state(std::uint32_t handle_refs, bool running, destroy_fn destroy) noexcept
      : task_state_base(handle_refs, running, destroy) {
    set_error_offset(&error_storage_);
  }
  explicit task_state(std::uint32_t handle_refs) noexcept : task_state_base(handle_refs) {
    set_error_offset(&error_storage_);
  }

  template <class... A>
  void set_value(A&&... a) noexcept(std::is_nothrow_constructible_v<T, A...>) {
    ::new (static_cast<void*>(&value_)) T(std::forward<A>(a)...);
    set_succeeded();
  }

  /// The result; the task must be completed.
  T& value_ref() {
    if (TPL_UNLIKELY(!succeeded())) throw_for_await();
    return value_;
  }
  T& value_ref_for_wait() {
    if (TPL_UNLIKELY(!succeeded())) throw_for_wait();
    return value_;
  }

 protected:
  ~task_state() {
    if constexpr (!std::is_trivially_destructible_v<T>) {
      if (succeeded()) {
        value_.~T();
        return;
      }
    }
    destroy_error();  // nothing when the task has no error (it succeeded, or never completed)
  }

 private:
  // A task ends either with a value (status ran_to_completion) or with an error (has_error_), never
  // both, so the two share their storage.
  union {
    T value_;
    alignas(std::exception_ptr) unsigned char error_storage_[sizeof(std::exception_ptr)];
  };
};

template <>
class task_state<void> : public task_state_base {
 public:
  task_state(std::uint32_t handle_refs, bool running, destroy_fn destroy) noexcept
      : task_state_base(handle_refs, running, destroy) {
    set_error_offset(&error_storage_);
  }
  explicit task_state(std::uint32_t handle_refs) noexcept : task_state_base(handle_refs) {
    set_error_offset(&error_storage_);
  }
  void set_value() noexcept { set_succeeded(); }
  void value_ref() {
    if (TPL_UNLIKELY(!succeeded())) throw_for_await();
  }
  void value_ref_for_wait() {
    if (TPL_UNLIKELY(!succeeded())) throw_for_wait();
  }

 protected:
  ~task_state() { destroy_error(); }

 private:
  alignas(std::exception_ptr) unsigned char error_storage_[sizeof(std::exception_ptr)];
};

/// Base for states that are not coroutine frames (task_completion_source, task_from_result,
/// when_all...): they come from the frame pool too, so creating one allocates nothing after warm-up.
struct pooled_allocation {
  static void* operator new(std::size_t n) { return frame_alloc(n); }
  static void operator delete(void* p, std::size_t n) noexcept { frame_free(p, n); }
};

/// A state that deletes itself as Derived on the last release.
template <class Derived>
void delete_as(task_state_base* s) noexcept {
  delete static_cast<Derived*>(s);
}

}  // namespace tpl::detail
