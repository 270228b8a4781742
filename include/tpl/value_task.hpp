// tpl/value_task.hpp — tpl::value_task<T>: the cheaper, single-await task (.NET ValueTask<T>).
//
// A value_task holds a result directly (no allocation at all), owns a running task, or names an
// operation of a reusable value_task_source (tpl/value_task_source.hpp: a pooled object that
// completes many operations in turn, each without allocating; the source checks the operation's
// token, so a stale value_task throws instead of returning another operation's result).
// It is move-only and may be awaited once: awaiting it again, or waiting on it after awaiting,
// throws invalid_operation (in every build, not only Debug). Convert with as_task() to share it.
// Destroying one that was never awaited is allowed: a running task goes on by itself, and a
// source is told (value_task_source::on_abandoned).
//
//   tpl::value_task<int> cached_or_load(int key) {       // not a coroutine: no frame
//     if (auto it = cache.find(key); it != cache.end()) return tpl::value_task<int>(it->second);
//     return tpl::value_task<int>(load(key));             // wraps a task<int>
//   }
//   tpl::value_task<int> twice(int x) { co_return 2 * x; } // a coroutine works too
//
//   int v = co_await cached_or_load(3);
//   tpl::value_task<int> receive() { return tpl::value_task<int>(my_source, my_core.version()); }  // pooled
#pragma once

#include <coroutine>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include "tpl/task.hpp"
#include "tpl/value_task_source.hpp"

namespace tpl {

template <class T = void>
class value_task;

namespace detail {
struct adopt_coroutine_t {
  explicit adopt_coroutine_t() = default;
};

/// A value_task coroutine's end (see value_task_promise). When the result went into the returned
/// value_task, await_ready says so and the coroutine does not suspend: it flows off its end, which
/// destroys the frame there and then (no call back into the coroutine to destroy it). Nothing
/// refers to the frame any more, and the ramp does not touch it again.
template <class P>
struct value_task_final_awaiter {
  P* promise;
  bool await_ready() const noexcept {
    if (!promise->complete_into_return_object()) return false;
    promise->flow().finish();  // as every coroutine's end, before its frame goes
    return true;
  }
  void await_suspend(std::coroutine_handle<P> h) const noexcept {
    final_awaiter{}.await_suspend(h);  // the end every other tpl coroutine has
  }
  void await_resume() const noexcept {}
};

/// The promise of a value_task coroutine. A body that completes with a value without ever
/// suspending (so inside its call: the ramp has not returned yet) moves the value into the
/// value_task that the call is about to return and destroys its frame at once, as .NET's async
/// ValueTask method returns a synchronous result without its state machine box: awaiting that
/// value_task is then the same as awaiting one made from a value. The value_task being returned
/// registers itself here when it is built and again whenever it is moved, so the pointer follows
/// it whatever the compiler does with the return object before the ramp returns. After the first
/// suspension the pointer is never read (the coroutine completes through its state, as task's).
template <class T>
class value_task_promise final : public value_promise<T, value_task_promise<T>> {
 public:
  value_task<T> get_return_object() noexcept;
  value_task_final_awaiter<value_task_promise> final_suspend() noexcept { return {this}; }

  /// At final suspend: true when the result went into the returned value_task (the frame can go).
  bool complete_into_return_object() noexcept;

  value_task<T>* return_object_ = nullptr;
};
[[noreturn]] void throw_value_task_consumed(const char* operation);
template <class T>
task<T> source_value_task_as_task(value_task<T> vt);
}  // namespace detail

template <class T>
class [[nodiscard]] value_task {
  using stored_t = std::conditional_t<std::is_void_v<T>, char, T>;

 public:
  using value_type = T;
  using promise_type = detail::value_task_promise<T>;

  /// An empty value_task (awaiting it throws invalid_operation).
  value_task() noexcept = default;
  /// Completed with a result: stores it inline, allocates nothing.
  template <class U = T>
    requires(!std::is_void_v<T> && std::is_constructible_v<T, U &&> &&
             !std::is_same_v<std::remove_cvref_t<U>, value_task> &&
             !std::is_same_v<std::remove_cvref_t<U>, task<T>>)
  explicit value_task(U&& v) : kind_(kind::value) {
    ::new (static_cast<void*>(&value_)) stored_t(static_cast<U&&>(v));
  }
  /// Wraps a task (takes one reference to it).
  explicit value_task(task<T> t) : kind_(kind::state) {
    state_ = detail::task_access::state(t);
    if (state_ == nullptr) detail::throw_empty_task("value_task(task)");
    state_->add_ref();
  }
  value_task(detail::adopt_state_t, detail::task_state<T>* s) noexcept : kind_(kind::state), state_(s) {}
  /// The value_task a value_task coroutine returns (value_task_promise): registers with it.
  value_task(detail::adopt_coroutine_t, detail::value_task_promise<T>* p) noexcept
      : kind_(kind::state), of_coroutine_(true), state_(p) {
    p->return_object_ = this;
  }
  /// Names operation `token` of a reusable source (.NET new ValueTask<T>(IValueTaskSource<T>,
  /// short)). The source must outlive the await; nothing is allocated.
  value_task(value_task_source<T>& source, std::uint32_t token) noexcept : kind_(kind::source), token_(token) {
    source_ = &source;
  }

  value_task(value_task&& o) noexcept(std::is_nothrow_move_constructible_v<stored_t>) {
    move_from(o);
  }
  value_task& operator=(value_task&& o) noexcept(std::is_nothrow_move_constructible_v<stored_t>) {
    if (this != &o) {
      reset();
      move_from(o);
    }
    return *this;
  }
  value_task(const value_task&) = delete;
  value_task& operator=(const value_task&) = delete;
  ~value_task() {
    // Awaited or empty (the usual end): nothing to release, and no call.
    if (kind_ == kind::consumed || kind_ == kind::empty) return;
    reset();
  }

  /// A completed value_task with no value (void).
  static value_task completed() requires std::is_void_v<T> {
    value_task v;
    v.kind_ = kind::value;
    return v;
  }

  bool valid() const noexcept { return kind_ != kind::empty && kind_ < kind::source_awaiting; }
  bool is_completed() const {
    check("is_completed()");
    if (TPL_UNLIKELY(kind_ == kind::source)) return source_->get_status(token_) != task_status::running;
    return kind_ == kind::value || state_->is_completed();
  }

  /// Blocks for the result and consumes the value_task. Throws the task's first exception.
  T get() {
    check("get()");
    if (TPL_UNLIKELY(kind_ == kind::source) && source_->get_status(token_) == task_status::running)
      *this = value_task(std::move(*this).as_task());  // a waiting source needs a coroutine to resume
    if (kind_ == kind::state && !state_->is_completed()) detail::block_until_completed(*state_);
    return take();
  }

  /// Converts to a shareable task (consumes this value_task).
  task<T> as_task() && {
    check("as_task()");
    if (TPL_UNLIKELY(kind_ == kind::source)) return detail::source_value_task_as_task<T>(std::move(*this));
    if (kind_ == kind::state) {
      task<T> t(detail::adopt_state, std::exchange(state_, nullptr));
      kind_ = kind::consumed;
      return t;
    }
    kind_ = kind::consumed;
    if constexpr (std::is_void_v<T>) {
      return completed_task();
    } else {
      task<T> t = task_from_result(std::move(value_));
      value_.~stored_t();
      state_ = nullptr;
      return t;
    }
  }

  auto operator co_await() & noexcept { return awaiter{this}; }
  auto operator co_await() && noexcept { return awaiter{this}; }

 private:
  // Ordered so that each question is one comparison: the two source kinds are adjacent
  // (is_source()), and the kinds from source_awaiting on can no longer be used (check()).
  enum class kind : unsigned char { empty, value, state, source, source_awaiting, awaiting, consumed };
  bool is_source() const noexcept {
    return static_cast<unsigned char>(static_cast<unsigned char>(kind_) - static_cast<unsigned char>(kind::source)) <= 1;
  }

  // Three words in the awaiting frame: the waiter's two (its action is the awaiting coroutine,
  // resumed as a task's awaiter resumes it) and the value_task.
  struct awaiter : detail::waiter {
    value_task* vt;
    explicit awaiter(value_task* v) noexcept : detail::waiter(uninitialized_t{}), vt(v) {}
    bool await_ready() {
      // The two common kinds first, each one comparison; the rest (empty, consumed, source) after.
      if (TPL_LIKELY(vt->kind_ == kind::value)) return true;
      if (TPL_LIKELY(vt->kind_ == kind::state)) {
        vt->kind_ = kind::awaiting;  // a second await before this one resumes is reported too
        return vt->state_->is_completed();
      }
      vt->check("co_await");  // throws for every kind but source now
      vt->kind_ = kind::source_awaiting;
      return vt->source_->get_status(vt->token_) != task_status::running;
    }
    bool await_suspend(std::coroutine_handle<> h) {
      if (TPL_UNLIKELY(vt->kind_ == kind::source_awaiting)) return vt->source_->on_completed(h, vt->token_);
      // A spawned coroutine still queued on this worker runs here first, as task<T>'s await does.
      if (detail::took_back_to_completion(*vt->state_)) return false;
      // Set before the awaiter registers, as every field of a waiter.
      action = continuation_word(h);
      return vt->state_->add_waiter(this);
    }
    T await_resume() { return vt->take(); }
  };

  void check(const char* op) const {
    if (kind_ >= kind::source_awaiting) detail::throw_value_task_consumed(op);
    if (kind_ == kind::empty) detail::throw_empty_task(op);
  }

  T take() {
    if (kind_ == kind::value) {
      kind_ = kind::consumed;
      if constexpr (std::is_void_v<T>) {
        return;
      } else {
        T v(std::move(value_));
        value_.~stored_t();
        state_ = nullptr;
        return v;
      }
    }
    if (TPL_UNLIKELY(is_source())) {
      value_task_source<T>* src = source_;
      state_ = nullptr;  // the empty and consumed kinds keep state_ null
      kind_ = kind::consumed;
      return src->get_result(token_);
    }
    detail::task_state<T>* s = std::exchange(state_, nullptr);
    kind_ = kind::consumed;
    struct releaser {
      detail::task_state<T>* s;
      ~releaser() { s->release(); }
    } guard{s};
    if constexpr (std::is_void_v<T>) {
      s->value_ref();
    } else {
      return detail::take_or_copy<T>(s->value_ref(), *s);
    }
  }

  void reset() noexcept {
    if (kind_ == kind::value) {
      if constexpr (!std::is_void_v<T>) value_.~stored_t();
      state_ = nullptr;
    } else if (TPL_UNLIKELY(is_source())) {
      // Never awaited: nobody will call get_result, so the source is told (semantics 6 of
      // value_task_source.hpp). An await under way (source_awaiting) registered its continuation
      // and is the source's business, as it would be for a task.
      if (kind_ == kind::source) source_->on_abandoned(token_);
      state_ = nullptr;
    } else if (state_ != nullptr) {
      state_->release();
      state_ = nullptr;
    }
    kind_ = kind::empty;
  }

  void move_from(value_task& o) {
    kind_ = o.kind_;
    if (o.kind_ == kind::value) {
      if constexpr (!std::is_void_v<T>) {
        ::new (static_cast<void*>(&value_)) stored_t(std::move(o.value_));
        o.value_.~stored_t();
      }
      o.state_ = nullptr;
    } else if (TPL_UNLIKELY(o.is_source())) {
      source_ = o.source_;
      token_ = o.token_;
      o.state_ = nullptr;
    } else {
      state_ = std::exchange(o.state_, nullptr);
      of_coroutine_ = o.of_coroutine_;
      // The coroutine may still be inside its call (this is the compiler moving the return
      // object): it must find us, not o. Once it has suspended it never reads the pointer, and
      // our reference keeps its frame alive, so the store is harmless then.
      if (of_coroutine_ && state_ != nullptr)
        static_cast<detail::value_task_promise<T>*>(state_)->return_object_ = this;
    }
    o.kind_ = kind::consumed;
  }

  friend class detail::value_task_promise<T>;

  /// value_task_promise, at the end of a body that never suspended: takes its result.
  template <class U>
  void complete_from_coroutine(U&& v) noexcept {
    if constexpr (!std::is_void_v<T>) ::new (static_cast<void*>(&value_)) stored_t(static_cast<U&&>(v));
    kind_ = kind::value;
  }
  void complete_from_coroutine() noexcept {
    state_ = nullptr;
    kind_ = kind::value;
  }

  kind kind_ = kind::empty;
  // kind::state only: state_ is a value_task_promise that points back here (see there).
  bool of_coroutine_ = false;
  // The source kinds' operation token, in kind_'s padding; set (and read) only for those kinds, so
  // the other kinds' constructors do not store it.
  std::uint32_t token_;
  union {
    stored_t value_;
    detail::task_state<T>* state_ = nullptr;
    value_task_source<T>* source_;
  };
};

namespace detail {
template <class T>
value_task<T> value_task_promise<T>::get_return_object() noexcept {
  // The frame's address lets an await take a spawned coroutine back from the worker's deque.
  this->set_frame_address(std::coroutine_handle<value_task_promise>::from_promise(*this).address());
  return value_task<T>(adopt_coroutine_t{}, this);
}

template <class T>
bool value_task_promise<T>::complete_into_return_object() noexcept {
  // Suspended once: the return object may have moved on and is not ours to touch (and the
  // handle may be awaited elsewhere). A fault keeps the state, which carries the exception.
  if (this->suspended_once() || return_object_ == nullptr || !this->succeeded())
    return false;
  if constexpr (std::is_void_v<T>) {
    return_object_->complete_from_coroutine();
    return true;
  } else if constexpr (std::is_nothrow_move_constructible_v<T>) {
    return_object_->complete_from_coroutine(std::move(this->value_ref()));
    return true;
  } else {
    return false;
  }
}

/// as_task() of a source-backed value_task: a coroutine awaits the operation (.NET AsTask()
/// allocates a Task the same way).
template <class T>
task<T> source_value_task_as_task(value_task<T> vt) {
  co_return co_await std::move(vt);
}
}  // namespace detail

}  // namespace tpl
