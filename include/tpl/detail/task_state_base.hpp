// tpl/detail/task_state_base.hpp — the untyped half of the shared state behind task<T>: one atomic
// word that holds both completion and the waiters, a reference count, the flags and the error
// (internal; task_state.hpp adds the typed result).
//
// The head word is one of:
//   kEmpty                 not completed, nobody waiting
//   waiter*                not completed; an intrusive LIFO list of waiters (the first awaiter is
//                          stored without any allocation; more awaiters link through waiter::next)
//   waiter* | kLocked      a remover is unlinking a waiter from the middle of the list
//   kCompleted             completed; the outcome flags, the result and the error are published
// Adding a waiter is one CAS. Completing is one CAS that takes the list. Removing a waiter (a timed
// wait that gave up, when_any cleaning up its losers) locks the word, unlinks, and unlocks; so
// abandoned waits never accumulate on a long-lived task. Whoever finds the word locked watches it
// briefly and then sleeps on it (std::atomic::wait) until the remover unlocks it and notifies.
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "tpl/detail/config.hpp"
#include "tpl/detail/flow.hpp"
#include "tpl/detail/frame_pool.hpp"
#include "tpl/detail/task_waiter.hpp"
#include "tpl/exceptions.hpp"

namespace tpl::detail {

class task_state_base;

/// Raises tpl's unobserved-task-exception event (tpl/unobserved_task_exception.hpp) for a faulted
/// task being destroyed whose exception nobody observed; does nothing without a subscriber.
void report_unobserved_task_exception(const std::exception_ptr& error) noexcept;

struct destroy_stack {
  task_state_base* pending;
  bool active;
};
inline thread_local destroy_stack t_destroy_stack{};
TPL_TLS_ACCESSOR(destroy_stack, destroy_stack_tls, t_destroy_stack)

class task_state_base {
 public:
  using destroy_fn = void (*)(task_state_base*) noexcept;

  static constexpr std::uintptr_t kEmpty = 0;
  static constexpr std::uintptr_t kCompleted = 1;
  static constexpr std::uintptr_t kLocked = 2;

  /// Reference units: every handle (task, task_completion_source, an internal holder) counts
  /// kHandleRef; a coroutine that has suspended and not yet finished counts kRunningRef (one that
  /// runs to completion inside its call never needs it: nobody else can see it). Ownership questions
  /// ("is this the only handle?") ignore the running unit, so a handle that sees completion while
  /// the coroutine is still leaving final_suspend already counts as the sole owner.
  static constexpr std::uint32_t kHandleRef = 2;
  static constexpr std::uint32_t kRunningRef = 1;
  /// The count of an immortal state: far from any real count, so ownership tests fail on it.
  static constexpr std::uint32_t kImmortalRefs = 1u << 30;

  /// A state that is not a coroutine frame: `destroy` deletes it on the last release.
  task_state_base(std::uint32_t handle_refs, bool running, destroy_fn destroy) noexcept
      : refs_(handle_refs * kHandleRef + (running ? kRunningRef : 0)), destroy_(destroy) {}
  /// The promise of a coroutine: destroyed through its frame (set_frame_address() must run before
  /// the last release), and the word that would hold a destroy function holds the flow instead.
  /// Its running unit is added at the coroutine's first suspension (add_running_unshared()): one
  /// that completes without suspending never counts it.
  explicit task_state_base(std::uint32_t handle_refs) noexcept
      : refs_(handle_refs * kHandleRef), flow_() {}
  task_state_base(const task_state_base&) = delete;
  task_state_base& operator=(const task_state_base&) = delete;

  // ---- completion --------------------------------------------------------------------------

  bool is_completed() const noexcept {
    // acquire: pairs with the release in publish_completion(), so the outcome, the value and error_
    // written before completion are visible to whoever sees kCompleted.
    return head_.load(std::memory_order_acquire) == kCompleted;
  }

  task_status status() const noexcept { return is_completed() ? stored_status() : task_status::running; }

  /// Registers w. Returns false (and does not register) if the task already completed; the
  /// caller then continues synchronously and may read the result.
  bool add_waiter(waiter* w) noexcept {
    // acquire on every load: if we see kCompleted we go on to read the result.
    std::uintptr_t cur = head_.load(std::memory_order_acquire);
    for (;;) {
      if (cur == kCompleted) return false;
      if (TPL_UNLIKELY(cur & kLocked)) {
        cur = wait_unlocked(cur);
        continue;
      }
      w->next = reinterpret_cast<waiter*>(cur);
      // release: the completer (or a remover) that takes the list reads w's fields.
      if (head_.compare_exchange_weak(cur, reinterpret_cast<std::uintptr_t>(w),
                                      std::memory_order_release, std::memory_order_acquire))
        return true;
    }
  }

  /// Takes w back out. Returns true if it was removed before completion (it will never be
  /// called); false if completion already took it (it is being fired or has been: the caller
  /// must let it finish before freeing w). Rare path (timeouts, when_any clean-up): it locks.
  bool remove_waiter(waiter* w) noexcept {
    // acquire: we read the next fields of nodes other threads pushed (released by their CAS).
    std::uintptr_t cur = head_.load(std::memory_order_acquire);
    for (;;) {
      if (cur == kCompleted || cur == kEmpty) return false;
      if (cur & kLocked) {
        cur = wait_unlocked(cur);
        continue;
      }
      // Lock the word (pushers and the completer wait meanwhile), then unlink. Always locked,
      // even for the head: an unlocked CAS from w to a w->next read earlier could install a node
      // that another remover unlinked in between (the word would read w again: ABA).
      if (!head_.compare_exchange_weak(cur, cur | kLocked, std::memory_order_acquire,
                                       std::memory_order_acquire))
        continue;
      bool found = false;
      auto* first = reinterpret_cast<waiter*>(cur);
      if (first == w) {
        cur = reinterpret_cast<std::uintptr_t>(w->next);
        found = true;
      } else {
        for (waiter* p = first; p->next != nullptr; p = p->next) {
          if (p->next == w) {
            p->next = w->next;
            found = true;
            break;
          }
        }
      }
      // release: the unlinked list is what the next locker / completer reads.
      head_.store(cur, std::memory_order_release);
      // Whoever waits in wait_unlocked() past its spin sleeps on the word (we hold a reference
      // to the state: it is still there).
      head_.notify_all();
      return found;
    }
  }

  /// Marks the task completed (the outcome and the result must already be written) and returns the
  /// waiters in registration order. Exactly one caller may complete a task.
  waiter* publish_completion() noexcept {
    std::uintptr_t cur = head_.load(std::memory_order_relaxed);
    for (;;) {
      if (TPL_UNLIKELY(cur & kLocked)) {
        cur = wait_unlocked(cur);
        continue;
      }
      // acq_rel: release publishes the result to every reader that acquires kCompleted; acquire
      // makes the waiters' fields (released by add_waiter) visible to us.
      if (head_.compare_exchange_weak(cur, kCompleted, std::memory_order_acq_rel,
                                      std::memory_order_relaxed))
        break;
    }
    // The list is LIFO; reverse it so continuations run in registration order, as in .NET.
    waiter* fifo = nullptr;
    auto* w = reinterpret_cast<waiter*>(cur);
    while (w != nullptr) {
      waiter* next = w->next;
      w->next = fifo;
      fifo = w;
      w = next;
    }
    return fifo;
  }

  /// Completes a task that was never visible to another thread: no waiters can exist, so a store
  /// does what publish_completion() does.
  void publish_completion_unshared() noexcept {
    // release: the handle may later be passed to other threads, which acquire kCompleted.
    head_.store(kCompleted, std::memory_order_release);
  }

  // ---- reference count ---------------------------------------------------------------------

  void add_ref() noexcept {
    if (immortal_) return;
    // relaxed: a reference is only ever copied from one that is already held, which keeps the
    // object alive; ordering with the final release comes from the acq_rel decrement.
    refs_.fetch_add(kHandleRef, std::memory_order_relaxed);
  }

  /// Drops a handle reference.
  void release() noexcept {
    // A holder of the only reference cannot race with anyone (references are only copied from
    // held ones, and the running coroutine is gone when its unit is), so the load saves the
    // read-modify-write in the common single-owner case. acquire pairs with the release half of
    // other holders' decrements, so their writes happen before destruction. An immortal state's
    // count never reads kHandleRef (make_immortal), so it is checked only after the load.
    if (refs_.load(std::memory_order_acquire) == kHandleRef)
      destroy_without_recursion();
    else
      release_shared();
  }

  /// release() when other references may exist (or the state is immortal).
  TPL_NOINLINE void release_shared() noexcept {
    if (immortal_) return;
    // acq_rel: as release().
    if (refs_.fetch_sub(kHandleRef, std::memory_order_acq_rel) == kHandleRef) destroy_without_recursion();
  }

  /// Drops a handle reference known not to be the last one.
  void release_non_last() noexcept {
    // acq_rel like release(): our writes must happen before whoever destroys.
    refs_.fetch_sub(kHandleRef, std::memory_order_acq_rel);
  }

  /// Drops the running coroutine's unit (at final suspend).
  void release_running() noexcept {
    // acq_rel: same reasoning as release().
    if (refs_.fetch_sub(kRunningRef, std::memory_order_acq_rel) == kRunningRef)
      destroy_without_recursion();
  }

  /// Destroys this state now, or, if a destruction is already running on this thread, after it.
  /// A frame that holds the handle of the previous task of a chain destroys that one in its turn;
  /// done recursively, a 1,000,000-link chain would overflow the stack when its last handle goes.
  void destroy_without_recursion() noexcept {
    destroy_stack& d = destroy_stack_tls();
    if (d.active) {
      // The state is dead: its head word is free to link it into the pending list.
      head_.store(reinterpret_cast<std::uintptr_t>(d.pending), std::memory_order_relaxed);
      d.pending = this;
      return;
    }
    d.active = true;
    destroy_now();
    while (d.pending != nullptr) {
      task_state_base* next = d.pending;
      d.pending = reinterpret_cast<task_state_base*>(next->head_.load(std::memory_order_relaxed));
      next->destroy_now();
    }
    d.active = false;
  }

  /// Adds the running unit of a coroutine at its first suspension. Until then the handle has not
  /// left the calling thread (the ramp returns it only after this suspension), so no
  /// read-modify-write is needed.
  void add_running_unshared() noexcept {
    // relaxed: the handle has not left this thread yet; whoever receives it later is ordered
    // after this store by the hand-off that gives it to them.
    refs_.store(refs_.load(std::memory_order_relaxed) + kRunningRef, std::memory_order_relaxed);
  }

  /// Handle references (plus the running unit, for tests that compare counts).
  std::uint32_t ref_count_for_tests() const noexcept { return refs_.load(std::memory_order_acquire); }
  /// True when the caller's handle is the only one (a still-running coroutine does not count).
  bool sole_owner() const noexcept {
    // acquire: if we are the sole owner, the other holders' writes (and releases) are visible.
    // An immortal state's count (kImmortalRefs) never passes this test.
    return refs_.load(std::memory_order_acquire) / kHandleRef == 1;
  }

  // ---- faults ------------------------------------------------------------------------------

  void set_error(std::exception_ptr e, bool canceled) noexcept {
    set_error_ptr(std::move(e));
    set_failed(canceled);
  }
  /// Faults with several exceptions at once (when_all): co_await rethrows the first, wait() /
  /// get() throw all of them.
  void set_errors(std::vector<std::exception_ptr> errors) {
    if (errors.size() == 1) {
      set_error(std::move(errors.front()), false);
      return;
    }
    set_error_ptr(std::make_exception_ptr(aggregate_exception(std::move(errors))));
    error_is_aggregate_ = true;
    set_failed(false);
  }
  void set_canceled() noexcept { set_failed(true); }

  /// For co_await: rethrow the (first) exception, or operation_canceled.
  [[noreturn]] void throw_for_await() const;
  /// For wait() / get(): throw aggregate_exception with every exception (.NET Task.Wait).
  [[noreturn]] void throw_for_wait() const;
  /// Every exception of a faulted task in order; operation_canceled for a canceled one.
  std::vector<std::exception_ptr> exceptions() const;

  /// The outcome as set (meaningful once the task has completed: canceled before that).
  task_status stored_status() const noexcept {
    return succeeded_ ? task_status::ran_to_completion : faulted_ ? task_status::faulted : task_status::canceled;
  }
  bool succeeded() const noexcept { return succeeded_; }
  /// The value paths: a task ends once, so neither outcome bit was set before.
  void set_succeeded() noexcept { succeeded_ = true; }
  void set_failed(bool canceled) noexcept {
    succeeded_ = false;
    faulted_ = !canceled;
  }

  void set_run_continuations_asynchronously(bool v) noexcept { run_continuations_asynchronously_ = v; }
  /// True when every waiter must be resumed through the scheduler, never inline (.NET's
  /// TaskCreationOptions.RunContinuationsAsynchronously).
  bool continuations_forced_async() const noexcept { return run_continuations_asynchronously_; }

  /// The coroutine frame this state lives in (what a scheduler queues to resume it), or nullptr.
  void* frame_address() const noexcept {
    return frame_offset_units_ == 0
               ? nullptr
               : const_cast<char*>(reinterpret_cast<const char*>(this)) - frame_offset_units_ * kOffsetUnit;
  }
  /// Called once by a coroutine promise, before its handle is returned. Both compilers place
  /// the promise right after the frame's two function pointers (16 bytes in, more for an
  /// over-aligned result): an offset that does not fit (beyond 2,040 bytes) would leave the
  /// frame impossible to destroy, so it stops the process.
  void set_frame_address(void* frame) noexcept {
    const auto d = reinterpret_cast<const char*>(this) - static_cast<const char*>(frame);
    // A multiple of 8: the frame comes from an allocation and the promise is 8-byte aligned.
    if (TPL_UNLIKELY(d <= 0 || d > 255 * kOffsetUnit)) std::terminate();
    frame_offset_units_ = static_cast<std::uint8_t>(d / kOffsetUnit);
  }
  /// A coroutine's execution-context slot (flow.hpp); only for promises.
  coroutine_flow& flow() noexcept { return flow_; }
  /// A state that is never destroyed (the cached completed tasks): add_ref() and release() leave
  /// its count alone, so handles on many threads never share a written cache line. Called before
  /// the state is published to other threads.
  void make_immortal() noexcept {
    immortal_ = true;
    // relaxed: before publication (above); the count only has to read as no handle's.
    refs_.store(kImmortalRefs, std::memory_order_relaxed);
  }
  void mark_started_deferred() noexcept { started_deferred_ = true; }
  bool started_deferred() const noexcept { return started_deferred_; }

 private:
  static constexpr int kLockSpins = 64;

  void destroy_now() noexcept {
    if (frame_offset_units_ != 0)
      std::coroutine_handle<>::from_address(frame_address()).destroy();
    else
      destroy_(this);
  }

  /// cur: the word as last seen, locked by a remover walking the list. Watches it for a while,
  /// then sleeps until the remover stores it unlocked (remove_waiter notifies): the walk is
  /// O(waiters) and its thread may be descheduled, so nobody spins on it unboundedly. Returns the
  /// word, unlocked (acquire: as add_waiter's loads; the other callers need no more).
  TPL_NOINLINE std::uintptr_t wait_unlocked(std::uintptr_t cur) const noexcept {
    for (int i = 0; i < kLockSpins; ++i) {
      TPL_CPU_RELAX();
      cur = head_.load(std::memory_order_acquire);
      if ((cur & kLocked) == 0) return cur;
    }
    for (;;) {
      // Blocks while the word still reads cur (acquire: as above).
      head_.wait(cur, std::memory_order_acquire);
      cur = head_.load(std::memory_order_acquire);
      if ((cur & kLocked) == 0) return cur;
    }
  }

 protected:
  // The derived task_state<T> owns the error's storage (error_offset_units_ says where it is) and
  // calls destroy_error() from its destructor.
  ~task_state_base() {}  // the union member (flow_) is destroyed by the promise
  void destroy_error() noexcept {
    if (has_error_) {
      // relaxed: the last release (acq_rel) ordered every holder's marking before destruction.
      if (faulted_ && !error_observed_.load(std::memory_order_relaxed))
        report_unobserved_task_exception(error());
      error().~exception_ptr();
    }
  }
  /// A holder read the exception (await, wait, get, exceptions()): it is not unobserved.
  void mark_error_observed() const noexcept {
    // relaxed: only the destructor reads it, after the final release orders this store before it.
    error_observed_.store(true, std::memory_order_relaxed);
  }

  // The exception lives in raw storage, constructed only when the task faults: libstdc++'s
  // ~exception_ptr is an out-of-line call, which the synchronous fast path must not pay.
  void set_error_ptr(std::exception_ptr e) noexcept {
    if (has_error_)
      error() = std::move(e);
    else
      ::new (error_storage()) std::exception_ptr(std::move(e));
    has_error_ = true;
  }
  const std::exception_ptr& error() const noexcept {
    return const_cast<task_state_base*>(this)->error();
  }
  std::exception_ptr& error() noexcept {
    return *std::launder(reinterpret_cast<std::exception_ptr*>(error_storage()));
  }
  void* error_storage() noexcept { return reinterpret_cast<char*>(this) + error_offset_units_ * kOffsetUnit; }
  /// For task_state<T>'s constructors: where the error's storage lies in the derived object.
  void set_error_offset(const void* storage) noexcept {
    const auto d = static_cast<const char*>(storage) - reinterpret_cast<const char*>(this);
    // task_state<T> checks at compile time that its storage lies within reach.
    error_offset_units_ = static_cast<std::uint8_t>(d / kOffsetUnit);
  }
  /// The offsets above count in this unit (every frame and state is at least 8-byte aligned).
  static constexpr std::ptrdiff_t kOffsetUnit = 8;
  /// The farthest error storage set_error_offset() can record.
  static constexpr std::size_t kMaxErrorOffset = 63 * kOffsetUnit;

  std::atomic<std::uintptr_t> head_{kEmpty};
  std::atomic<std::uint32_t> refs_;
  // The flags are bit-fields in two bytes, split by who writes them, so that no byte is written
  // while another thread reads it (a bit-field store rewrites its whole byte): the state then takes
  // 24 bytes with the flow, and a coroutine frame 8 fewer.
  //
  // Written by the running side (the coroutine, or whoever completes the task) before completion
  // is published, and read by it or after completion (acquire), never concurrently. The outcome
  // is two bits, not an enum (stored_status()), so that the hot paths set and test one bit.
  bool succeeded_ : 1 = false;
  bool faulted_ : 1 = false;
  bool error_is_aggregate_ : 1 = false;
  bool has_error_ : 1 = false;
  bool suspended_once_ : 1 = false;  // coroutine tasks: did the body ever suspend (see promise)
  // Read at completion by the completer; set at creation, or by the body itself (task_factory).
  bool run_continuations_asynchronously_ : 1 = false;
  // Unused; initialised so that the constructor writes these bytes with one store instead of
  // keeping two indeterminate bits.
  std::uint8_t spare_bits_ : 2 = 0;
  // Written before the state is visible to another thread, read by any holder at any time (a
  // byte of their own: the zero-width field ends the byte above):
  std::uint8_t : 0;
  bool immortal_ : 1 = false;
  // Coroutine tasks: the start was queued (tpl::spawn, the stack guard), so an awaiter may find
  // the coroutine still queued on its own worker and run it inline. Written before the handle is
  // queued or returned, never again.
  bool started_deferred_ : 1 = false;
  // Set by task_state<T>'s constructor: where, from this object, the error's storage lies, in
  // units of kOffsetUnit.
  std::uint8_t error_offset_units_ : 6 = 0;
  mutable std::atomic<bool> error_observed_{false};  // see mark_error_observed()
  // Coroutine tasks: this object's distance from the start of its coroutine frame, in units of
  // kOffsetUnit (0: not a coroutine). Destroys the frame, and lets a blocking wait recognise the
  // task's own queued item.
  std::uint8_t frame_offset_units_ = 0;
  // A coroutine frame (frame_offset_units_ != 0) is destroyed through its handle, so this word holds
  // the coroutine's flow slot; any other state keeps the function that deletes it here.
  union {
    destroy_fn destroy_;
    coroutine_flow flow_;
  };
};

// Every task state, and so every task coroutine's promise, begins with these 24 bytes.
static_assert(sizeof(void*) != 8 || sizeof(task_state_base) == 24, "task_state_base grew");

/// True if e (not null) holds an operation_canceled: a task faulted with it ends canceled.
bool is_operation_canceled(const std::exception_ptr& e) noexcept;

/// Blocks the calling thread until the task completes.
void block_until_completed(task_state_base& s);
/// As block_until_completed, up to the deadline; true if completed.
bool block_until_completed(task_state_base& s, std::chrono::steady_clock::time_point deadline);

}  // namespace tpl::detail
