// tpl/cancellation.hpp — cooperative cancellation (.NET CancellationTokenSource,
// CancellationToken, CancellationTokenRegistration).
//
// Provides cancellation_token_source (owns the right to cancel), cancellation_token (observes it,
// cheap to copy), cancellation_registration (RAII: a callback to run on cancellation), linked
// sources, and when_cancelled(token) / co_await token.
//
//   tpl::cancellation_token_source cts;
//   tpl::cancellation_token token = cts.token();
//   {
//     auto reg = token.register_callback([] { std::puts("canceled"); });
//     cts.cancel();                        // runs the callback here, on this thread
//   }                                      // reg unregisters (a no-op now)
//   token.throw_if_cancellation_requested();  // throws tpl::operation_canceled
//
//   auto linked = tpl::cancellation_token_source::create_linked(a.token(), b.token());
//   co_await linked.token();               // resumes once a, b or linked is canceled
//
// Semantics (as .NET): registering on a canceled token runs the callback synchronously;
// cancel() runs callbacks on the canceling thread, newest registration first, collecting their
// exceptions into one aggregate_exception (or stopping at the first with
// cancel(throw_on_first_exception)); destroying a registration while its callback runs on another
// thread waits for the callback, and from inside the callback itself it does not wait.
// A linked source unregisters from its parents when it is destroyed, so short-lived linked sources
// never accumulate registrations on a long-lived parent.
//
// Thread safety: every member of cancellation_token and cancellation_registration, and cancel(),
// may be called from any thread. A source itself (moving it, destroying it, try_reset()) belongs
// to one owner.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "tpl/detail/frame_pool.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/task.hpp"

namespace tpl {

class cancellation_token;
class cancellation_registration;
class cancellation_token_source;
class time_provider;
time_provider& system_time_provider() noexcept;

namespace detail {
struct timer_impl;

class cancellation_state;

/// A registered callback. Allocated from the frame pool, owned by its cancellation_registration.
struct cancel_callback_node {
  cancel_callback_node* prev = nullptr;
  cancel_callback_node* next = nullptr;
  cancellation_state* owner = nullptr;
  bool linked = false;  // in owner's list (guarded by the owner's lock)
  void (*invoke)(cancel_callback_node*) = nullptr;
  void (*destroy)(cancel_callback_node*) noexcept = nullptr;
};

template <class F>
struct cancel_callback_node_of final : cancel_callback_node {
  explicit cancel_callback_node_of(F&& f) : fn(std::move(f)) {
    invoke = [](cancel_callback_node* n) { static_cast<cancel_callback_node_of*>(n)->fn(); };
    destroy = [](cancel_callback_node* n) noexcept { delete static_cast<cancel_callback_node_of*>(n); };
  }
  static void* operator new(std::size_t n) { return frame_alloc(n); }
  static void operator delete(void* p, std::size_t n) noexcept { frame_free(p, n); }
  F fn;
};

cancellation_state* new_cancellation_state();
void add_ref(cancellation_state* s) noexcept;
void release(cancellation_state* s) noexcept;
bool is_canceled(const cancellation_state* s) noexcept;
/// Links n into s; returns false (n not linked) if s is canceled or being canceled.
bool try_link(cancellation_state* s, cancel_callback_node* n) noexcept;
/// Unlinks n, or waits for its callback if it is running on another thread.
void unlink_or_wait(cancel_callback_node* n) noexcept;
/// Runs the callbacks; returns false if s was already canceled.
bool cancel(cancellation_state* s, bool throw_on_first_exception);
bool try_reset(cancellation_state* s) noexcept;

}  // namespace detail

/// A callback registered on a token. Destroying (or reset()ing) it unregisters the callback; if the
/// callback is running on another thread, waits for it to finish first. A callback may reset its
/// own registration, but that destroys the callback object (its captures) while it runs, as with
/// std::stop_callback: copy what you still need into locals before the reset.
class [[nodiscard]] cancellation_registration {
 public:
  cancellation_registration() noexcept = default;
  explicit cancellation_registration(detail::cancel_callback_node* n) noexcept : node_(n) {}
  cancellation_registration(cancellation_registration&& o) noexcept : node_(std::exchange(o.node_, nullptr)) {}
  cancellation_registration& operator=(cancellation_registration&& o) noexcept {
    if (this != &o) {
      reset();
      node_ = std::exchange(o.node_, nullptr);
    }
    return *this;
  }
  cancellation_registration(const cancellation_registration&) = delete;
  cancellation_registration& operator=(const cancellation_registration&) = delete;
  ~cancellation_registration() {
    if (node_ != nullptr) reset();  // inline check: most registrations held by awaiters are empty
  }

  /// Unregisters now (.NET Dispose / Unregister). Idempotent.
  void reset() noexcept;
  /// True while this object holds a registration (false for one made on a canceled or
  /// uncancelable token, whose callback already ran or never will).
  bool active() const noexcept { return node_ != nullptr; }

 private:
  detail::cancel_callback_node* node_ = nullptr;
};

/// Observes a cancellation_token_source. Copyable; a default-constructed token (or none()) can
/// never be canceled.
class cancellation_token {
 public:
  cancellation_token() noexcept = default;
  explicit cancellation_token(detail::cancellation_state* s) noexcept : s_(s) {
    if (s_ != nullptr) detail::add_ref(s_);
  }
  cancellation_token(const cancellation_token& o) noexcept : cancellation_token(o.s_) {}
  cancellation_token(cancellation_token&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  cancellation_token& operator=(cancellation_token o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~cancellation_token() {
    if (s_ != nullptr) detail::release(s_);
  }

  /// The token that is never canceled (.NET CancellationToken.None).
  static cancellation_token none() noexcept { return {}; }

  bool can_be_canceled() const noexcept { return s_ != nullptr; }
  bool is_cancellation_requested() const noexcept { return s_ != nullptr && detail::is_canceled(s_); }
  void throw_if_cancellation_requested() const {
    if (is_cancellation_requested()) throw operation_canceled();
  }

  /// Registers fn to run when cancellation is requested; runs it now, on this thread, if it
  /// already was. On a token that can never be canceled, does nothing.
  template <class F>
    requires std::is_invocable_v<std::decay_t<F>&>
  cancellation_registration register_callback(F&& fn) const {
    if (s_ == nullptr) return {};
    auto* n = new detail::cancel_callback_node_of<std::decay_t<F>>(static_cast<F&&>(fn));
    n->owner = s_;
    if (detail::try_link(s_, n)) return cancellation_registration(n);
    // Already canceled: run it here; the node is ours to free (also if fn throws).
    struct freer {
      detail::cancel_callback_node* n;
      ~freer() { n->destroy(n); }
    } guard{n};
    n->invoke(n);
    return {};
  }

  friend bool operator==(const cancellation_token& a, const cancellation_token& b) noexcept {
    return a.s_ == b.s_;
  }

  detail::cancellation_state* state_for_tpl_internal() const noexcept { return s_; }

  /// co_await token: resumes once cancellation is requested (does not throw).
  auto operator co_await() const;

 private:
  detail::cancellation_state* s_ = nullptr;
};

/// Owns the right to cancel. Move-only: the source is the one owner (tokens are the copies).
class cancellation_token_source {
 public:
  cancellation_token_source() : s_(detail::new_cancellation_state()) {}
  /// A source that cancels itself after `delay` (.NET CancellationTokenSource(TimeSpan)). A zero
  /// delay gives a source already canceled when the constructor returns, with no timer, as in
  /// .NET; infinite_timeout never cancels; another negative delay throws std::invalid_argument.
  explicit cancellation_token_source(std::chrono::nanoseconds delay,
                                     time_provider& provider = system_time_provider())
      : cancellation_token_source() {
    if (delay.count() == 0)
      cancel();  // nobody can have registered a callback yet: this runs none and cannot throw
    else
      cancel_after(delay, provider);
  }
  cancellation_token_source(cancellation_token_source&& o) noexcept
      : s_(std::exchange(o.s_, nullptr)), parents_(std::move(o.parents_)), timer_(std::move(o.timer_)) {}
  cancellation_token_source& operator=(cancellation_token_source&& o) noexcept {
    if (this != &o) {
      destroy();
      s_ = std::exchange(o.s_, nullptr);
      parents_ = std::move(o.parents_);
      timer_ = std::move(o.timer_);
    }
    return *this;
  }
  cancellation_token_source(const cancellation_token_source&) = delete;
  cancellation_token_source& operator=(const cancellation_token_source&) = delete;
  /// Unregisters a linked source from its parents. Tokens already handed out stay valid (and
  /// keep their state: canceled or not).
  ~cancellation_token_source() { destroy(); }

  cancellation_token token() const { return cancellation_token(checked()); }
  bool is_cancellation_requested() const { return detail::is_canceled(checked()); }

  /// Requests cancellation: runs the registered callbacks on this thread, newest first. Every
  /// exception they throw is collected and rethrown as one aggregate_exception after all ran.
  /// A second call does nothing.
  void cancel() { detail::cancel(checked(), false); }
  /// As cancel(); with throw_on_first_exception the first callback exception propagates at once
  /// and the remaining callbacks are not run.
  void cancel(bool throw_on_first_exception) { detail::cancel(checked(), throw_on_first_exception); }

  /// Cancels after `delay` measured by `provider` (a later call re-arms; infinite_timeout
  /// disarms; another negative delay throws std::invalid_argument; nothing happens once
  /// canceled). .NET CancelAfter. A zero delay arms the timer due at once, as .NET's CancelAfter(0)
  /// does: the cancellation runs on the timer's thread (the next advance() for fake time), not
  /// inside this call; call cancel() to cancel here and now.
  void cancel_after(std::chrono::nanoseconds delay, time_provider& provider = system_time_provider());

  /// Makes the source reusable for an unrelated operation: succeeds (true) only if cancellation was
  /// not requested; stops a pending cancel_after and drops every registration (they will not
  /// run). .NET TryReset.
  bool try_reset();

  /// A source canceled when any of the tokens is (or when canceled itself). Throws
  /// std::invalid_argument for an empty set of tokens (.NET throws ArgumentException).
  static cancellation_token_source create_linked(std::span<const cancellation_token> tokens);
  static cancellation_token_source create_linked(std::initializer_list<cancellation_token> tokens) {
    return create_linked(std::span<const cancellation_token>(tokens.begin(), tokens.size()));
  }
  template <class... Tokens>
    requires(sizeof...(Tokens) >= 1 && (std::is_convertible_v<Tokens, cancellation_token> && ...))
  static cancellation_token_source create_linked(const Tokens&... tokens) {
    return create_linked({cancellation_token(tokens)...});
  }

 private:
  detail::cancellation_state* checked() const;
  void destroy() noexcept;

  detail::cancellation_state* s_;
  std::vector<cancellation_registration> parents_;  // linked sources: our callbacks on parents
  std::shared_ptr<detail::timer_impl> timer_;       // cancel_after
};

/// A task that completes (successfully) once cancellation is requested on token. Throws
/// std::invalid_argument for a token that can never be canceled (the task would never complete).
/// If every handle to the task is dropped first, its registration is removed.
task<> when_cancelled(const cancellation_token& token);

inline auto cancellation_token::operator co_await() const {
  return when_cancelled(*this).operator co_await();
}

}  // namespace tpl
