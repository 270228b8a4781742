// tpl/value_task_source.hpp — reusable sources behind value_task<T> (.NET IValueTaskSource<T> and
// ManualResetValueTaskSourceCore<T>): an operation that completes later and allocates nothing,
// because the object it completes through is kept and reused for the next operation.
//
// A value_task<T> holds a result, a task, or a (value_task_source<T>*, token) pair. The source is
// any object implementing value_task_source<T>; manual_reset_value_task_source_core<T> does the
// work (result storage, the completion / await hand-off, the version check), so a source is mostly
// forwarding:
//
//   class receive_op final : public tpl::value_task_source<int> {
//    public:
//     tpl::value_task<int> start() { return tpl::value_task<int>(*this, core_.version()); }
//     void complete(int v) { core_.set_result(v); }              // from whatever produces v
//     tpl::task_status get_status(std::uint32_t t) const override { return core_.get_status(t); }
//     bool on_completed(std::coroutine_handle<> h, std::uint32_t t) override {
//       return core_.on_completed(h, t);
//     }
//     int get_result(std::uint32_t t) override {
//       int v = core_.get_result(t);   // throws what the operation failed with
//       core_.reset();                 // ready for the next start(); a stale value_task now throws
//       return v;
//     }
//    private:
//     tpl::manual_reset_value_task_source_core<int> core_;
//   };
//
//   int v = co_await op.start();       // no allocation: the frame waits in the core
//
// Semantics (as .NET's, with its token check made strict):
//   1. An operation is one version of the core: reset() ends it and starts the next (version()+1).
//      A value_task carries the version it was made for; every call with another token throws
//      invalid_operation, so awaiting a value_task after its source moved on is an error, never the
//      next operation's result.
//   2. An operation completes once (set_result / set_exception; a second completion throws
//      invalid_operation), accepts one continuation (a second on_completed throws), and gives its
//      result once (a second get_result throws: the value was moved out).
//   3. The continuation runs inline on the thread that completes the operation (through tpl's
//      bounded-depth trampoline), or, with set_run_continuations_asynchronously(true) (.NET's
//      RunContinuationsAsynchronously), is queued to the completing thread's scheduler or the pool,
//      as a task's asynchronous continuations are. An operation that completed before it was
//      awaited continues on the awaiting thread at once.
//   4. set_exception(operation_canceled) makes the operation canceled (get_status says so); any
//      other exception makes it faulted. get_result rethrows it.
//   5. The owner keeps the source alive, and calls reset() only once the operation is over or was
//      never awaited (reset() with an awaiter still waiting throws invalid_operation: the awaiter
//      would never resume). Completion and awaiting may race each other freely; reset() and a
//      second completer may not race anything (the owner serializes them, as in .NET).
//   6. A value_task destroyed without having been awaited (or converted with as_task()) tells its
//      source through on_abandoned(token), once; the default does nothing. .NET has no such call
//      (its collector reclaims what an unawaited ValueTask leaves behind); a source that recycles
//      itself in get_result needs it to recycle at all.
//
// The completion / await hand-off is one atomic word (the awaiter's handle, kNoContinuation or
// kCompleted); tests/model_value_task_source_test.cpp checks it exhaustively.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>

#include "tpl/detail/config.hpp"
#include "tpl/detail/task_state.hpp"
#include "tpl/detail/trampoline.hpp"
#include "tpl/exceptions.hpp"

namespace tpl {

/// The interface behind a source-backed value_task<T> (.NET IValueTaskSource<T>). value_task calls
/// get_status when awaited, on_completed if the operation is still running, and get_result once it
/// has completed, each with the token it was made with. Implementations usually forward to a
/// manual_reset_value_task_source_core<T>. value_task never destroys a source.
template <class T>
class value_task_source {
 public:
  /// The state of operation `token` (running until it completes). Throws invalid_operation if
  /// token is not the current operation's.
  virtual task_status get_status(std::uint32_t token) const = 0;
  /// Registers `continuation` to be resumed once operation `token` completes, and returns true; or
  /// returns false, registering nothing, if it has completed already (the caller goes on at once).
  /// Throws invalid_operation for a stale token or a second continuation.
  virtual bool on_completed(std::coroutine_handle<> continuation, std::uint32_t token) = 0;
  /// The result of operation `token`, which has completed; rethrows its exception if it failed.
  /// Called once per await.
  virtual T get_result(std::uint32_t token) = 0;
  /// Called once, on the destroying thread, when a value_task naming operation `token` is
  /// destroyed without having been awaited or converted (as_task()): nobody will call get_result
  /// for it. The operation may still be running or may have completed. The default does nothing
  /// (the owner deals with the operation, semantics 5 below); a source that recycles itself in
  /// get_result can recycle here instead, or finish the operation's cycle itself.
  virtual void on_abandoned(std::uint32_t token) noexcept { static_cast<void>(token); }

 protected:
  value_task_source() = default;
  value_task_source(const value_task_source&) = default;
  value_task_source& operator=(const value_task_source&) = default;
  ~value_task_source() = default;
};

namespace detail {
[[noreturn]] void throw_value_task_source_misuse(const char* what);
[[noreturn]] void throw_stale_value_task_token(std::uint32_t token, std::uint32_t version);
}  // namespace detail

/// The reusable core of a value_task_source (.NET ManualResetValueTaskSourceCore<T>): one operation
/// at a time, each a version; see the semantics at the top of this file. Not copyable or movable
/// (an awaiter may hold its address). Thread safety: completion (set_result / set_exception) may
/// race the awaiter's get_status / on_completed / get_result; reset() and the setters of the
/// options must not race anything.
template <class T>
class manual_reset_value_task_source_core {
  using stored_t = std::conditional_t<std::is_void_v<T>, char, T>;

 public:
  // User-provided: the result's storage starts out unconstructed.
  manual_reset_value_task_source_core() noexcept {}
  manual_reset_value_task_source_core(const manual_reset_value_task_source_core&) = delete;
  manual_reset_value_task_source_core& operator=(const manual_reset_value_task_source_core&) = delete;
  /// Precondition: no awaiter is waiting (it would never be resumed).
  ~manual_reset_value_task_source_core() { destroy_result(); }

  /// The current operation's token, what a value_task for it must carry.
  std::uint32_t version() const noexcept {
    // relaxed: only the owner changes the version (reset), and whoever is handed a value_task
    // learns of that reset through the same hand-off that gave it the value_task.
    return version_.load(std::memory_order_relaxed);
  }

  /// Whether the continuation is queued rather than run inline by the completing thread (.NET
  /// RunContinuationsAsynchronously). Default false.
  bool run_continuations_asynchronously() const noexcept { return run_asynchronously_; }
  void set_run_continuations_asynchronously(bool v) noexcept { run_asynchronously_ = v; }

  /// Ends the current operation and starts the next (version() + 1). Throws invalid_operation if an
  /// awaiter is still waiting for the current one.
  void reset() {
    // acquire: if the operation completed on another thread, its result's construction happens
    // before we destroy it below.
    const std::uintptr_t c = continuation_.load(std::memory_order_acquire);
    if (TPL_UNLIKELY(c != kNoContinuation && c != kCompleted))
      detail::throw_value_task_source_misuse("reset() while an awaiter waits for the operation");
    destroy_result();
    if (has_error_) {
      error_ = nullptr;
      has_error_ = false;
    }
    status_ = task_status::running;
    completion_signaled_ = false;
    result_taken_ = false;
    // relaxed (both): nobody may use the core during reset(); the next operation's value_task
    // reaches its awaiter through a hand-off of the owner's that orders these writes before it.
    version_.store(version_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    continuation_.store(kNoContinuation, std::memory_order_relaxed);
  }

  /// Completes the current operation with a result and resumes its awaiter, if any. Throws
  /// invalid_operation if it was completed already.
  template <class... A>
  void set_result(A&&... args) {
    if (TPL_UNLIKELY(completion_signaled_)) detail::throw_value_task_source_misuse("set_result on a completed operation");
    if constexpr (!std::is_void_v<T>) {
      ::new (static_cast<void*>(&value_)) T(std::forward<A>(args)...);
      has_value_ = true;
    } else {
      static_assert(sizeof...(A) == 0, "set_result() of a void operation takes no value");
    }
    status_ = task_status::ran_to_completion;
    signal_completion();
  }

  /// Completes the current operation with an exception (operation_canceled: canceled). Throws
  /// invalid_operation if it was completed already or e is null.
  void set_exception(std::exception_ptr e) {
    if (TPL_UNLIKELY(completion_signaled_)) detail::throw_value_task_source_misuse("set_exception on a completed operation");
    if (TPL_UNLIKELY(e == nullptr)) detail::throw_value_task_source_misuse("set_exception with a null exception_ptr");
    status_ = detail::is_operation_canceled(e) ? task_status::canceled : task_status::faulted;
    error_ = std::move(e);
    has_error_ = true;
    signal_completion();
  }

  /// value_task_source<T>::get_status for the current operation.
  task_status get_status(std::uint32_t token) const {
    validate(token);
    // acquire: pairs with signal_completion's release; seeing kCompleted, status_ is readable.
    return continuation_.load(std::memory_order_acquire) == kCompleted ? status_ : task_status::running;
  }

  /// value_task_source<T>::on_completed for the current operation.
  bool on_completed(std::coroutine_handle<> continuation, std::uint32_t token) {
    validate(token);
    std::uintptr_t expected = kNoContinuation;
    // release on success: the completer that takes the handle resumes our frame, whose writes up to
    // this suspension it must see. acquire on failure: seeing kCompleted, the caller reads the
    // result next.
    if (continuation_.compare_exchange_strong(expected, reinterpret_cast<std::uintptr_t>(continuation.address()),
                                              std::memory_order_release, std::memory_order_acquire))
      return true;
    if (expected == kCompleted) return false;
    detail::throw_value_task_source_misuse("a second continuation for one operation (awaited twice?)");
  }

  /// value_task_source<T>::get_result for the current operation: the result (moved out) or the
  /// operation's exception, once. Throws invalid_operation if it has not completed, or its result
  /// was taken already.
  T get_result(std::uint32_t token) {
    validate(token);
    // acquire: as get_status.
    if (TPL_UNLIKELY(continuation_.load(std::memory_order_acquire) != kCompleted))
      detail::throw_value_task_source_misuse("get_result before the operation completed");
    if (TPL_UNLIKELY(result_taken_)) detail::throw_value_task_source_misuse("the result of this operation was taken already (awaited twice?)");
    result_taken_ = true;
    if (TPL_UNLIKELY(status_ != task_status::ran_to_completion)) std::rethrow_exception(error_);
    if constexpr (!std::is_void_v<T>) return std::move(value_);
  }

 private:
  static constexpr std::uintptr_t kNoContinuation = 0;
  static constexpr std::uintptr_t kCompleted = 1;  // no coroutine frame lives at address 1

  void validate(std::uint32_t token) const {
    // relaxed: see version().
    const std::uint32_t v = version_.load(std::memory_order_relaxed);
    if (TPL_UNLIKELY(token != v)) detail::throw_stale_value_task_token(token, v);
  }

  void signal_completion() {
    completion_signaled_ = true;
    const bool queue_continuation = run_asynchronously_;  // read now: see below
    // acq_rel: release publishes the result and status_ to the awaiter that acquires kCompleted;
    // acquire pairs with on_completed's release, so the awaiter's frame is ours to resume.
    const std::uintptr_t c = continuation_.exchange(kCompleted, std::memory_order_acq_rel);
    if (c == kNoContinuation) return;
    // From here on *this may be reset and reused by the resumed awaiter: touch nothing of it.
    const auto h = std::coroutine_handle<>::from_address(reinterpret_cast<void*>(c));
    if (queue_continuation)
      detail::dispatch_wakeup(h);
    else
      detail::resume_inline(h);
  }

  void destroy_result() noexcept {
    if constexpr (!std::is_void_v<T>) {
      if (has_value_) {
        value_.~T();
        has_value_ = false;
      }
    }
  }

  std::atomic<std::uintptr_t> continuation_{kNoContinuation};
  std::atomic<std::uint32_t> version_{0};
  task_status status_ = task_status::running;  // written before kCompleted is published
  bool run_asynchronously_ = false;
  bool completion_signaled_ = false;  // the completer's own guard against a second completion
  bool result_taken_ = false;         // the awaiter's own guard against a second get_result
  bool has_value_ = false;
  bool has_error_ = false;
  std::exception_ptr error_;
  union {
    stored_t value_;
  };
};

}  // namespace tpl
