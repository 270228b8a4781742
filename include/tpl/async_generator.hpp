// tpl/async_generator.hpp — tpl::async_generator<T>: an asynchronous stream, a coroutine that both
// co_awaits and co_yields (.NET IAsyncEnumerable<T>: an async method with `yield return`,
// consumed with `await foreach`).
//
// Provides:
//   tpl::async_generator<T>                      the stream: next(), begin() / end(),
//                                                with_cancellation(token)
//   tpl::this_generator::get_cancellation_token() inside a generator's body: the consumer's token
//                                                (.NET [EnumeratorCancellation])
// Built on it: channel_reader<T>::read_all_async (tpl/channel.hpp) and tpl::when_each
// (tpl/when_each.hpp).
//
// Example:
//   tpl::async_generator<std::string> lines(connection& c) {
//     auto token = co_await tpl::this_generator::get_cancellation_token();
//     while (std::optional<std::string> line = co_await c.read_line_async(token))
//       co_yield std::move(*line);               // hands the consumer this object: no copy
//   }
//
//   tpl::task<> consume(connection& c, tpl::cancellation_token token) {
//     auto gen = lines(c).with_cancellation(token);
//     while (std::string* line = co_await gen.next())    // nullptr at the end
//       std::puts(line->c_str());
//     // or, the iterator form:
//     //   for (auto it = co_await gen.begin(); it != gen.end(); co_await ++it) use(*it);
//   }
//
// Semantics:
// 1. Lazy: calling the coroutine runs nothing; each next() runs the body, on the consumer's
//    thread, up to its next co_yield (or its end). A body that waits (a real suspension of one of
//    its co_awaits) suspends the consumer too; the consumer continues where the body resumed
//    (inline, through tpl's bounded-depth trampoline).
// 2. next() gives a T* to the yielded object, valid until the next call of next() (or the
//    generator's destruction); the consumer may modify it or move from it. nullptr: the body
//    finished. co_yield of an rvalue of T hands over that object (no copy); of an lvalue or of a
//    value convertible to T, a T made from it inside the coroutine frame (std::generator's rule).
// 3. An exception escaping the body is rethrown by the next() that would have had the next item.
// 4. One next() at a time. next() while a previous one is pending, next() after the end (nullptr)
//    or after the body's exception, awaiting one next() twice, next() or begin() on an empty
//    (default-constructed or moved-from) generator: invalid_operation.
// 5. Cancellation: gen.with_cancellation(token), before the first next(), hands the token to the
//    body, which reads it with co_await tpl::this_generator::get_cancellation_token() and passes
//    it to what it awaits. As in .NET, nothing else observes the token: a body that ignores it
//    runs on.
// 6. Destroying the generator destroys the coroutine frame, running the destructors of the body's
//    locals (a consumer that stops early leaks nothing); it must not happen while a next() is
//    pending (the body is running): that ends the program with std::terminate.
// 7. No allocation per item; the frame comes from tpl's per-thread frame pool. A body that yields
//    synchronously runs inside next() and returns from it, with no symmetric transfer: a million
//    synchronous items in a row take no more stack than one, at every optimisation level.
// 8. async_local values flow as into a called function: each step of the body (from a next() to
//    the co_yield that answers it) starts from the consumer's context; what the body sets does not
//    flow back to the consumer (.NET's rule for async iterators).
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iterator>
#include <optional>
#include <string>
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

/// An asynchronous stream of T (.NET IAsyncEnumerable<T> and its enumerator in one object). A
/// function returning async_generator<T> that contains co_yield (and usually co_await) is a lazy
/// coroutine; see the file comment for the semantics.
///
/// Comparison with task<T>: a task is hot, shared, and produces one result; a generator is lazy,
/// owned by one consumer (move-only), and produces any number of results one next() at a time.
/// Comparison with a channel: a channel decouples producers from consumers (buffering, several of
/// each, the producer runs ahead); a generator runs its body only when asked, in step with its
/// one consumer, and needs no buffer.
template <class T>
class [[nodiscard]] async_generator {
  static_assert(std::is_object_v<T> && !std::is_array_v<T>,
                "tpl::async_generator<T>: T must be an object type (yield T*, or a "
                "std::reference_wrapper, for references)");

 public:
  using value_type = std::remove_cv_t<T>;
  using reference = T&;
  using pointer = T*;
  using promise_type = detail::async_generator_promise<T>;

  class iterator;

  /// The awaitable of next(): co_await gives a T* to the next item, or nullptr at the end.
  class [[nodiscard]] next_operation : public detail::generator_step<T> {
   public:
    using detail::generator_step<T>::generator_step;
    T* await_resume() { return this->take(); }
  };

  /// The awaitable of begin(): co_await gives an iterator at the first item (or end()).
  class [[nodiscard]] begin_operation : public detail::generator_step<T> {
   public:
    using detail::generator_step<T>::generator_step;
    iterator await_resume() { return async_generator::make_iterator(this->promise(), this->take()); }
  };

  /// The awaitable of ++it: co_await advances it to the next item (or end()) and gives it back.
  class [[nodiscard]] advance_operation : public detail::generator_step<T> {
   public:
    advance_operation(detail::async_generator_promise<T>* p, iterator* it) noexcept
        : detail::generator_step<T>(p), it_(it) {}
    iterator& await_resume() {
      async_generator::set_item(*it_, this->take());
      return *it_;
    }

   private:
    iterator* it_;
  };

  /// Iterates the items. `co_await ++it` advances it; `it == gen.end()` after the last item. *it
  /// is valid until the iterator (or the generator) advances. Not a std::input_iterator: ++ gives
  /// an awaitable.
  class iterator {
   public:
    using value_type = async_generator::value_type;
    using reference = T&;
    using pointer = T*;

    iterator() noexcept = default;

    /// The current item. Not at end().
    T& operator*() const noexcept { return *item_; }
    T* operator->() const noexcept { return item_; }

    /// co_await ++it: the next item. At end() (or on a default-constructed iterator):
    /// invalid_operation.
    advance_operation operator++() {
      if (TPL_UNLIKELY(promise_ == nullptr || item_ == nullptr))
        detail::throw_generator_misuse("async_generator: ++ on an iterator at end()");
      return advance_operation(promise_, this);
    }

    friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept {
      return it.item_ == nullptr;
    }

   private:
    friend class async_generator;
    iterator(detail::async_generator_promise<T>* p, T* item) noexcept : promise_(p), item_(item) {}

    detail::async_generator_promise<T>* promise_ = nullptr;
    T* item_ = nullptr;
  };

  /// An empty generator: valid() is false; next() and begin() throw invalid_operation.
  async_generator() noexcept = default;
  explicit async_generator(std::coroutine_handle<promise_type> h) noexcept : h_(h) {}
  async_generator(async_generator&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  /// Destroys this generator's frame first (see ~async_generator).
  async_generator& operator=(async_generator&& o) noexcept {
    if (this != &o) {
      destroy();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  async_generator(const async_generator&) = delete;
  async_generator& operator=(const async_generator&) = delete;
  /// Destroys the coroutine frame and so the body's locals, wherever the body stands (not
  /// started, at a co_yield, finished). Precondition: no next() pending (std::terminate).
  ~async_generator() { destroy(); }

  /// False for a default-constructed or moved-from generator.
  bool valid() const noexcept { return static_cast<bool>(h_); }

  /// co_await gen.next(): a pointer to the next item (valid until the next next()), or nullptr
  /// once the body has finished. Runs the body until its next co_yield; rethrows what the body
  /// throws. Throws invalid_operation on misuse (file comment, point 4).
  next_operation next() { return next_operation(checked("next()")); }

  /// co_await gen.begin(): an iterator at the first item, or end() for an empty sequence. Starts
  /// the iteration: call it once (a second call advances, as next() does).
  begin_operation begin() { return begin_operation(checked("begin()")); }
  std::default_sentinel_t end() const noexcept { return std::default_sentinel; }

  /// Hands token to the body (this_generator::get_cancellation_token()). Before the first next()
  /// or begin(), else invalid_operation (.NET WithCancellation / GetAsyncEnumerator(token)).
  async_generator& with_cancellation(cancellation_token token) & {
    checked("with_cancellation()")->set_token(std::move(token));
    return *this;
  }
  async_generator with_cancellation(cancellation_token token) && {
    checked("with_cancellation()")->set_token(std::move(token));
    return std::move(*this);
  }

 private:
  static iterator make_iterator(promise_type* p, T* item) noexcept { return iterator(p, item); }
  static void set_item(iterator& it, T* item) noexcept { it.item_ = item; }

  promise_type* checked(const char* operation) const {
    if (TPL_UNLIKELY(!h_)) throw_empty(operation);
    return &h_.promise();
  }
  [[noreturn]] static void throw_empty(const char* operation) {
    throw invalid_operation(std::string("async_generator::") + operation +
                            " on an empty generator (default-constructed or moved-from)");
  }

  void destroy() noexcept {
    if (!h_) return;
    if (TPL_UNLIKELY(h_.promise().next_pending())) {
      // The body is running (or its consumer waits for it): its frame cannot go now.
      std::fputs("tpl: async_generator destroyed while a next() is pending\n", stderr);
      std::terminate();
    }
    std::exchange(h_, nullptr).destroy();
  }

  std::coroutine_handle<promise_type> h_;
};

namespace detail {

template <class T>
async_generator<T> async_generator_promise<T>::get_return_object() noexcept {
  return async_generator<T>(std::coroutine_handle<async_generator_promise>::from_promise(*this));
}

/// The token a generator observes when it takes a token parameter and may also be given one by
/// with_cancellation(): either, or both linked (what .NET's compiler does for a parameter marked
/// [EnumeratorCancellation]).
class generator_cancellation {
 public:
  generator_cancellation(cancellation_token parameter, cancellation_token from_consumer) {
    if (!from_consumer.can_be_canceled() || from_consumer == parameter) {
      token_ = std::move(parameter);
    } else if (!parameter.can_be_canceled()) {
      token_ = std::move(from_consumer);
    } else {
      linked_.emplace(cancellation_token_source::create_linked(parameter, from_consumer));
      token_ = linked_->token();
    }
  }
  const cancellation_token& token() const noexcept { return token_; }

 private:
  std::optional<cancellation_token_source> linked_;
  cancellation_token token_;
};

}  // namespace detail

}  // namespace tpl
