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

#include <coroutine>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "tpl/cancellation.hpp"
#include "tpl/detail/async_generator_promise.hpp"
#include "tpl/detail/promise.hpp"
#include "tpl/exceptions.hpp"

namespace tpl {

template <class T>
class async_generator;

// tpl::this_generator::get_cancellation_token() is declared in tpl/detail/async_generator_promise.hpp
// (the promise's await_transform takes its query type).

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
