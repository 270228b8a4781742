// A callback's calls under way, so that removing the callback can wait them out (internal): what
// the unobserved-task-exception handlers and the thread pool's event listener share.
//
//   std::unique_lock g(mutex);                   // the owner's mutex guards every gate it owns
//   if (!node.gate.try_enter()) return;          // removed: skip the call
//   g.unlock();
//   { tpl::detail::call_scope here(node.gate); node.callback(e); }
//   g.lock();
//   node.gate.leave();
//   done.notify_all();                           // the owner's condition variable
//   ...
//   node.gate.close_and_wait(g, done);           // remover, with g held: returns once no other
//                                                // thread is inside the callback
//
// Invariants (a plain monitor: every gate field is read and written under the owner's mutex):
//   - A call counts itself in (try_enter) before it runs and out (leave) after it, under the lock;
//     once close_and_wait() has closed the gate, no call counts in, so `running_` only falls.
//   - close_and_wait() waits until `running_` is down to the calls on its own thread's stack
//     (call_scope's thread-local chain): a callback that removes itself, or a callback whose call
//     removes another callback that is running further down the same stack, must not wait for
//     itself. When it returns, no other thread is inside the callback or will enter it.
//   - The chain is a thread-local pointer to stack objects (trivially destructible), so calls made
//     while the thread exits still work.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace tpl::detail {

class call_gate;

/// Marks a call of `gate`'s callback under way on this thread, for the length of the scope.
class call_scope {
 public:
  explicit call_scope(const call_gate& gate) noexcept : gate_(&gate), outer_(top()) { top() = this; }
  call_scope(const call_scope&) = delete;
  call_scope& operator=(const call_scope&) = delete;
  ~call_scope() { top() = outer_; }

  /// How many calls of `gate` are under way on this thread's stack.
  static std::size_t on_this_thread(const call_gate& gate) noexcept {
    std::size_t n = 0;
    for (const call_scope* s = top(); s != nullptr; s = s->outer_)
      if (s->gate_ == &gate) ++n;
    return n;
  }

 private:
  static const call_scope*& top() noexcept {
    thread_local const call_scope* t_top = nullptr;
    return t_top;
  }
  const call_gate* gate_;
  const call_scope* outer_;
};

/// One callback's gate; every member is called with the owner's mutex held.
class call_gate {
 public:
  /// Counts a call in; false once the gate is closed (the caller skips the call).
  bool try_enter() noexcept {
    if (closed_) return false;
    ++running_;
    return true;
  }
  /// Counts a call out; the caller then notifies the owner's condition variable.
  void leave() noexcept { --running_; }
  /// Closes the gate and waits (releasing g meanwhile) until no call of another thread is under
  /// way; calls on this thread's stack are not waited for.
  void close_and_wait(std::unique_lock<std::mutex>& g, std::condition_variable& done) noexcept {
    closed_ = true;
    const std::size_t own = call_scope::on_this_thread(*this);
    done.wait(g, [&] { return running_ == own; });
  }

 private:
  std::size_t running_ = 0;
  bool closed_ = false;
};

}  // namespace tpl::detail
