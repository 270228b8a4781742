// tpl/detail/async_generator_promise.hpp — the coroutine side of tpl::async_generator<T>: its
// promise, the awaiters of co_yield and of the body's end, and generator_step, the awaitable of
// next(), begin() and ++it (internal; the public face and the semantics are in
// tpl/async_generator.hpp).
//
//   tpl::async_generator<int> numbers() {  // its promise_type is async_generator_promise<int>
//     for (int i = 0; i < 3; ++i) co_yield i;
//   }
//
// Invariants: the consumer-producer handshake lives in one atomic byte (generator_state, below);
// exactly one side moves it out of running (the producer delivering, or the consumer suspending
// before it does), and the side that finds the other suspended resumes it; one next() is pending
// at a time; the yielded object lives in the producer's frame until the next step starts.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>

#include "tpl/cancellation.hpp"
#include "tpl/detail/promise.hpp"
#include "tpl/exceptions.hpp"

namespace tpl {

template <class T>
class async_generator;

namespace this_generator {
/// What get_cancellation_token() returns: awaitable only in an async_generator's body.
struct cancellation_token_query {
  explicit cancellation_token_query() = default;
};
/// co_await tpl::this_generator::get_cancellation_token() in an async_generator's body: the token
/// the consumer passed to with_cancellation() (a token that can never be canceled if none).
/// Does not suspend.
inline cancellation_token_query get_cancellation_token() noexcept { return cancellation_token_query{}; }
}  // namespace this_generator

namespace detail {

// The handshake between the consumer (next()) and the producer (the body), in one atomic byte.
// Each next() moves it idle -> running; the producer's co_yield or end moves it to delivered,
// either directly (the producer never suspended since next() resumed it: it is still inside
// next(), on the consumer's thread) or by an exchange that finds out whether the consumer has
// suspended meanwhile (consumer_waiting: the producer resumes it). The consumer takes the item
// and moves it back to idle, or to finished at the end.
enum class generator_state : std::uint8_t {
  idle,              // the body is suspended (not started, or at a co_yield); no next() pending
  running,           // a next() resumed the body; its consumer has not suspended
  consumer_waiting,  // a next() is pending and its consumer is suspended until the body delivers
  delivered,         // the body yielded or ended for the pending next(); its consumer goes on
  finished,          // the end (or the body's exception) was reported to the consumer
};

[[noreturn]] inline void throw_generator_misuse(const char* what) { throw invalid_operation(what); }

template <class T>
class async_generator_promise;

/// The awaiter of co_yield: publishes the item's address, then delivers.
template <class T>
struct generator_yield_awaiter {
  T* item;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<async_generator_promise<T>> h) const noexcept {
    h.promise().deliver(item);
  }
  void await_resume() const noexcept {}
};

/// The awaiter of co_yield of an lvalue or of a value of another type: the item is a T made in
/// the awaiter, which lives in the coroutine frame until the body resumes.
template <class T>
struct generator_yield_copy_awaiter {
  T item;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<async_generator_promise<T>> h) noexcept {
    h.promise().deliver(&item);
  }
  void await_resume() const noexcept {}
};

struct generator_final_awaiter {
  bool await_ready() const noexcept { return false; }
  template <class T>
  void await_suspend(std::coroutine_handle<async_generator_promise<T>> h) const noexcept {
    h.promise().deliver_end();
  }
  void await_resume() const noexcept {}
};

/// What co_await this_generator::get_cancellation_token() becomes: ready at once.
struct generator_token_awaiter {
  cancellation_token token;
  bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  cancellation_token await_resume() noexcept { return std::move(token); }
};

template <class T>
class async_generator_promise {
 public:
  async_generator_promise() noexcept = default;
  async_generator_promise(const async_generator_promise&) = delete;
  async_generator_promise& operator=(const async_generator_promise&) = delete;

  async_generator<T> get_return_object() noexcept;

  std::suspend_always initial_suspend() const noexcept { return {}; }
  generator_final_awaiter final_suspend() const noexcept { return {}; }
  void unhandled_exception() noexcept { exception_ = std::current_exception(); }
  void return_void() noexcept {}

  /// co_yield of an rvalue T: the consumer gets this very object (it lives until the body resumes).
  generator_yield_awaiter<T> yield_value(T&& item) noexcept { return {std::addressof(item)}; }
  /// co_yield of anything else a T can be made from (an lvalue: a copy, as std::generator).
  template <class U>
    requires std::is_constructible_v<T, U&&>
  generator_yield_copy_awaiter<T> yield_value(U&& v) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
    return {T(static_cast<U&&>(v))};
  }

  /// Every co_await of the body records that the body may have left the consumer's stack, and
  /// hands the execution context over as a task does (marking_awaiter, tpl/detail/promise.hpp).
  template <class A>
    requires(!std::is_same_v<std::remove_cvref_t<A>, this_generator::cancellation_token_query>)
  auto await_transform(A&& a) {
    using awaiter_t = decltype(get_awaiter(static_cast<A&&>(a)));
    return marking_awaiter<awaiter_t>{get_awaiter(static_cast<A&&>(a))};
  }
  generator_token_awaiter await_transform(this_generator::cancellation_token_query) const {
    return {token_};
  }

  // For marking_awaiter.
  void mark_suspended() noexcept { went_async_ = true; }
  coroutine_flow& flow() noexcept { return flow_; }

  static void* operator new(std::size_t n) { return frame_alloc(n); }
  static void operator delete(void* p, std::size_t n) noexcept { frame_free(p, n); }

  // ---- consumer side ------------------------------------------------------------------------

  /// Starts a next(): runs the body until it delivers or suspends. True if it delivered already.
  bool start_next() {
    generator_state expected = generator_state::idle;
    // acquire: pairs with the release in take_next(), so a next() made on another thread than the
    // previous one sees what that one did. relaxed on failure: the value only picks the message.
    if (TPL_UNLIKELY(!state_.compare_exchange_strong(expected, generator_state::running,
                                                     std::memory_order_acquire,
                                                     std::memory_order_relaxed)))
      throw_start_misuse(expected);
    started_ = true;
    went_async_ = false;
    flow_.start();
    std::coroutine_handle<async_generator_promise>::from_promise(*this).resume();
    // acquire: the body may have gone asynchronous and delivered on another thread; its exchange
    // in deliver_common() released the item. If it never left this thread, it stored `delivered`
    // itself, sequenced before this load.
    return state_.load(std::memory_order_acquire) == generator_state::delivered;
  }

  /// await_suspend of a next() whose body did not deliver inside start_next(). False: it has
  /// delivered meanwhile, the consumer goes on.
  bool suspend_consumer(std::coroutine_handle<> consumer) noexcept {
    consumer_ = consumer;
    generator_state expected = generator_state::running;
    // release: the producer that finds consumer_waiting reads consumer_ (its exchange acquires).
    // acquire on failure: the producer delivered first; its item is visible to take_next().
    return state_.compare_exchange_strong(expected, generator_state::consumer_waiting,
                                          std::memory_order_release, std::memory_order_acquire);
  }

  /// The delivered item (nullptr at the end); rethrows the body's exception.
  T* take_next() {
    if (TPL_UNLIKELY(ended_)) {
      // relaxed: only the misuse check of a later next() reads it (no data depends on it).
      state_.store(generator_state::finished, std::memory_order_relaxed);
      if (exception_) std::rethrow_exception(std::exchange(exception_, nullptr));
      return nullptr;
    }
    // release: pairs with the acquire of the next start_next() (see there).
    state_.store(generator_state::idle, std::memory_order_release);
    return item_;
  }

  /// with_cancellation(): only before the first next(), so the body sees one token throughout.
  void set_token(cancellation_token token) {
    if (started_)
      throw_generator_misuse(
          "async_generator::with_cancellation() after the iteration started: pass the token "
          "before the first next() / begin()");
    token_ = std::move(token);
  }

  /// For the generator's destructor: whether the body may be running (a next() is pending).
  bool next_pending() const noexcept {
    // acquire: if the last next() completed on another thread, we see its end (and must not
    // report a pending one); the consumer's own ordering makes this exact for a correct caller.
    const generator_state s = state_.load(std::memory_order_acquire);
    return s == generator_state::running || s == generator_state::consumer_waiting ||
           s == generator_state::delivered;
  }

  // ---- producer side ------------------------------------------------------------------------

  void deliver(T* item) noexcept {
    item_ = item;
    deliver_common();
  }
  void deliver_end() noexcept {
    item_ = nullptr;
    ended_ = true;
    deliver_common();
  }

 private:
  [[noreturn]] static void throw_start_misuse(generator_state s) {
    if (s == generator_state::finished)
      throw_generator_misuse(
          "async_generator::next() after the end of the sequence (next() returned nullptr or "
          "threw)");
    throw_generator_misuse("async_generator::next() while a previous next() is still pending");
  }

  /// At a co_yield or at the end: gives the thread back the consumer's (or resumer's) context,
  /// then hands the item to the consumer. The frame may be resumed or destroyed as soon as the
  /// consumer can go on: nothing here touches it afterwards.
  void deliver_common() noexcept {
    flow_.finish();
    if (!went_async_) {
      // Never suspended since start_next() resumed it: the body is still inside that call, on
      // the consumer's thread, and the consumer reads the state once resume() returns. relaxed:
      // same thread.
      state_.store(generator_state::delivered, std::memory_order_relaxed);
      return;
    }
    // acq_rel: release publishes item_ / ended_ / exception_ to the consumer (who acquires in
    // start_next() or suspend_consumer()); acquire pairs with suspend_consumer()'s release so
    // consumer_ is visible when we find consumer_waiting.
    if (state_.exchange(generator_state::delivered, std::memory_order_acq_rel) ==
        generator_state::consumer_waiting)
      resume_inline(consumer_);
  }

  std::atomic<generator_state> state_{generator_state::idle};
  bool went_async_ = false;  // producer: a co_await suspended since start_next() resumed the body
  bool ended_ = false;       // producer, then consumer: the body finished
  bool started_ = false;     // consumer: a next() was made
  T* item_ = nullptr;
  std::coroutine_handle<> consumer_;
  std::exception_ptr exception_;
  cancellation_token token_;
  coroutine_flow flow_;
};

/// The awaitable of next(), begin() and ++it: starts the step in await_ready (so an item the body
/// yields synchronously needs no suspension of the consumer), suspends only if the body waits.
template <class T>
class generator_step {
 public:
  explicit generator_step(async_generator_promise<T>* p) noexcept : promise_(p) {}

  bool await_ready() {
    if (TPL_UNLIKELY(awaited_))
      throw_generator_misuse("async_generator: a next() operation may be awaited once");
    awaited_ = true;
    return promise_->start_next();
  }
  bool await_suspend(std::coroutine_handle<> consumer) noexcept {
    return promise_->suspend_consumer(consumer);
  }

 protected:
  T* take() { return promise_->take_next(); }
  async_generator_promise<T>* promise() const noexcept { return promise_; }

 private:
  async_generator_promise<T>* promise_;
  bool awaited_ = false;
};

}  // namespace detail

}  // namespace tpl
