// tpl/detail/task_awaiter.hpp — how a coroutine awaits a task (internal; tpl/task.hpp's co_await,
// configure(), when_ready(), continue_with).
//
// task_awaiter registers itself as the task's waiter (one CAS on the state word, task_state.hpp)
// and resumes the awaiting coroutine from the completing thread (the first waiter) or through the
// pool. Awaited from a tpl coroutine it is wrapped as a flowing_task_awaiter, which also does the
// promise's suspension bookkeeping (what marking_awaiter, promise.hpp, does for other awaiters)
// without a word of its own. configured_awaiter is the run-time configured form.
//
// Invariants: an awaiter's members are all written before the CAS that publishes it (after which
// the coroutine may resume on another thread and destroy it); a flowing awaiter's context handover
// is undone in await_resume exactly when await_suspend did it, whether or not it suspended.
#pragma once

#include <coroutine>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tpl/detail/config.hpp"
#include "tpl/detail/task_state.hpp"
#include "tpl/detail/trampoline.hpp"
#include "tpl/detail/waiter_firing.hpp"

namespace tpl::detail {

[[noreturn]] void throw_empty_task(const char* operation);

/// A spawned task (started_deferred) whose coroutine is still queued on this thread pool worker's
/// own deque, on top, is taken back and run here now. True if it was: it ran until it completed or
/// suspended (or, past the trampoline's depth, was queued to run next on this worker).
bool run_deferred_inline(task_state_base& s) noexcept;

/// The awaiters' first step: true when s was spawned, taken back here by run_deferred_inline, and
/// completed while it ran, so the await continues without suspending.
inline bool took_back_to_completion(task_state_base& s) noexcept {
  return s.started_deferred() && run_deferred_inline(s) && s.is_completed();
}

/// Awaits a task_state. Owning: holds a reference (awaiting an rvalue task) and may move the
/// result out when it is the sole owner. Suppress: never throws, yields void. ForceYield: always
/// continues on the pool. AlwaysInline: continues on the completing thread even when it is not
/// the first waiter (continue_with's execute_synchronously).
///
/// The awaiting coroutine is one word, the resume word: its frame address, or, awaited from a tpl
/// coroutine (flowing_task_awaiter, below), the awaiting promise's address tagged
/// waiter::kPromise, since the promise is what the suspension bookkeeping needs. Both carry
/// waiter::kContinuation. The default form (neither ForceYield nor AlwaysInline) keeps it in the
/// waiter's action word, which completion resumes directly (fire_waiter, waiter_firing.hpp): 24
/// bytes in every awaiting coroutine's frame. The other two keep it in a word of their own and register a
/// callback that applies their rule: 32 bytes.
template <class T, bool Owning, bool Suppress, bool ForceYield = false, bool AlwaysInline = false>
class task_awaiter : private waiter {
  static constexpr bool kCompact = !ForceYield && !AlwaysInline;
  struct no_word {};

 public:
  // The waiter's link is written by add_waiter(), the only path that registers; the resume word
  // starts at 0 (await_resume reads it to know whether await_suspend ran through suspend_flowing).
  explicit task_awaiter(task_state<T>* s) noexcept : waiter(uninitialized_t{}), state_(s) { set_resume_word(0); }
  task_awaiter(task_awaiter&& o) noexcept : waiter(uninitialized_t{}), state_(std::exchange(o.state_, nullptr)) {
    set_resume_word(0);
  }
  task_awaiter(const task_awaiter&) = delete;
  task_awaiter& operator=(const task_awaiter&) = delete;
  task_awaiter& operator=(task_awaiter&&) = delete;
  ~task_awaiter() {
    if constexpr (Owning) {
      if (state_ != nullptr) state_->release();
    }
  }

  bool await_ready() const {
    if (TPL_UNLIKELY(state_ == nullptr)) throw_empty_task("co_await");
    return !ForceYield && state_->is_completed();
  }

  bool await_suspend(std::coroutine_handle<> h) noexcept {
    if constexpr (!ForceYield) {
      // A spawned task still queued on this worker runs here first (.NET's task inlining).
      if (took_back_to_completion(*state_)) return false;
    }
    set_resume_word(continuation_word(h));
    return register_waiter();
  }

  decltype(auto) await_resume() {
    if constexpr (Suppress) {
      return;
    } else if constexpr (std::is_void_v<T>) {
      state_->value_ref();
    } else if constexpr (Owning) {
      return take_or_copy<T>(state_->value_ref(), *state_);
    } else {
      return static_cast<const T&>(state_->value_ref());
    }
  }

 protected:
  /// flowing_task_awaiter's await_suspend: `self` is the awaiting tpl coroutine's promise, whose
  /// flow suspend() already ran.
  bool suspend_flowing(task_state_base& self) noexcept {
    // Set first: await_resume gives the context back whether or not the await suspends.
    set_resume_word(promise_continuation_word(self));
    if constexpr (!ForceYield) {
      if (took_back_to_completion(*state_)) return false;
    }
    return register_waiter();
  }
  /// The awaiting tpl promise, if await_suspend ran through suspend_flowing(); else null.
  task_state_base* flowing_promise() const noexcept {
    const std::uintptr_t w = resume_word();
    return (w & kPromise) != 0 ? reinterpret_cast<task_state_base*>(w & ~kTagBits) : nullptr;
  }

 private:
  static_assert(alignof(task_state_base) > kTagBits, "the tag bits must be free in a promise's address");

  std::uintptr_t resume_word() const noexcept {
    if constexpr (kCompact)
      return action;
    else
      return resume_;
  }
  void set_resume_word(std::uintptr_t w) noexcept {
    if constexpr (kCompact)
      action = w;
    else
      resume_ = w;
  }

  bool register_waiter() noexcept {
    // The compact form's action is its resume word, already set.
    if constexpr (!kCompact) set_callback(waiter_callback_for<&fire>);
    if (state_->add_waiter(this)) return true;  // from here on, *this may already be resumed
    if constexpr (ForceYield) {
      dispatch(continuation());
      return true;
    }
    return false;
  }

  std::coroutine_handle<> continuation() const noexcept { return continuation_of(resume_word()); }

  /// The callback of the ForceYield and AlwaysInline forms.
  static void fire(waiter* w, fire_mode mode) noexcept {
    auto* self = static_cast<task_awaiter*>(w);
    if (!ForceYield &&
        (mode == fire_mode::first_inline || (AlwaysInline && mode == fire_mode::later)))
      resume_inline(self->continuation());
    else
      dispatch_wakeup(self->continuation());
  }

  task_state<T>* state_;
  [[no_unique_address]] std::conditional_t<kCompact, no_word, std::uintptr_t> resume_;
};

static_assert(sizeof(task_awaiter<int, false, false>) == 3 * sizeof(void*),
              "the default awaiter is three words in the awaiting frame");
static_assert(sizeof(task_awaiter<int, true, false, true>) == 4 * sizeof(void*));

template <class A>
struct is_task_awaiter : std::false_type {};
template <class T, bool O, bool S, bool F, bool I>
struct is_task_awaiter<task_awaiter<T, O, S, F, I>> : std::true_type {};

/// A task_awaiter awaited from a tpl coroutine: marks the suspension and hands the execution
/// context over itself (what marking_awaiter does for any other awaiter), without a word of its
/// own. Adds no member: 24 bytes in the frame where a marking_awaiter would take 40.
template <class Base>
class flowing_task_awaiter : public Base {
 public:
  explicit flowing_task_awaiter(Base&& b) noexcept : Base(std::move(b)) {}

  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    // As marking_awaiter: everything before the hand-off, after which h may run elsewhere.
    TPL_PUBLISH_AWAITER(this);
    P& p = h.promise();
    p.mark_suspended();
    p.flow().suspend();
    return this->suspend_flowing(p);  // false: the flow's resume() comes in await_resume
  }
  decltype(auto) await_resume() {
    if (task_state_base* p = this->flowing_promise()) p->flow().resume();
    return Base::await_resume();
  }
};

/// The run-time configured await (task::configure(await_options)).
template <class T>
class configured_awaiter : private waiter {
 public:
  configured_awaiter(task_state<T>* s, bool force_yield, bool suppress) noexcept
      : state_(s), force_yield_(force_yield), suppress_(suppress) {}

  bool await_ready() const {
    if (TPL_UNLIKELY(state_ == nullptr)) throw_empty_task("co_await");
    return !force_yield_ && state_->is_completed();
  }
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    if (!force_yield_ && took_back_to_completion(*state_)) return false;
    continuation_ = h;
    set_callback(waiter_callback_for<&fire>);
    if (state_->add_waiter(this)) return true;
    if (force_yield_) {
      dispatch(h);
      return true;
    }
    return false;
  }
  decltype(auto) await_resume() {
    if constexpr (std::is_void_v<T>) {
      if (!suppress_) state_->value_ref();
    } else {
      return static_cast<const T&>(state_->value_ref());
    }
  }

 private:
  static void fire(waiter* w, fire_mode mode) noexcept {
    auto* self = static_cast<configured_awaiter*>(w);
    if (mode == fire_mode::first_inline && !self->force_yield_)
      resume_inline(self->continuation_);
    else
      dispatch_wakeup(self->continuation_);
  }

  task_state<T>* state_;
  std::coroutine_handle<> continuation_;
  bool force_yield_;
  bool suppress_;
};

}  // namespace tpl::detail
