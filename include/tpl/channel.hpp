// tpl/channel.hpp — asynchronous producer/consumer queues (.NET System.Threading.Channels, Go's
// chan).
//
// Provides make_unbounded_channel<T>, make_bounded_channel<T> (a capacity, or options with a full
// mode and an item-dropped callback; capacity 0 is Go's unbuffered rendezvous channel), and the
// handles channel<T>, channel_reader<T>, channel_writer<T>.
//
//   auto ch = tpl::make_bounded_channel<int>(100);
//   tpl::task<> produce(tpl::channel_writer<int> out) {
//     for (int i = 0; i < 1000; ++i) co_await out.write_async(i);   // waits while full
//     out.complete();                                                // no more items
//   }
//   tpl::task<> consume(tpl::channel_reader<int> in) {
//     co_await in.read_all([](int v) { std::printf("%d\n", v); });  // until completed and drained
//   }
//   auto p = produce(ch.writer());
//   auto c = consume(ch.reader());
//
// Semantics (as .NET, see docs/channels.md):
//  - A write into an empty channel with a waiting reader hands the item straight to that reader.
//    Blocked readers are served first come, first served; so are blocked writers.
//  - complete(error) ends the writer side: blocked writers and wait_to_write_async fail at once;
//    readers drain what is buffered, then read_async throws channel_closed (inner_exception() is
//    the error), wait_to_read_async returns false (or throws the error), completion() finishes
//    (or faults with the error).
//  - An operation canceled by its token throws operation_canceled and loses no item: a canceled
//    read took nothing, a canceled write put nothing in the channel. An operation that completed
//    before the cancellation took effect reports its result.
//  - wait_to_read_async() returning true is not a reservation: with several readers, another one
//    may take the item first, so follow it with try_read() in a loop.
//  - Continuations run asynchronously (queued to the current scheduler, or the default pool)
//    unless the channel was made with allow_synchronous_continuations, in which case the thread
//    that makes an operation complete resumes it inline (through tpl's bounded-depth trampoline).
//  - single_reader / single_writer promise one reading / writing operation at a time. tpl does not
//    take a faster path on them, but reports a broken promise: a second operation that would wait
//    while another is pending throws invalid_operation (.NET silently misbehaves).
//  - Operations are awaitables that start when awaited. The waiting node lives inside the
//    awaiter (in the awaiting coroutine's frame): a read or write allocates nothing, whether it
//    completes at once or waits. Call as_task() to get a task<> (one frame) for when_any and co.
//  - Handles are reference counted. When the last handle goes, operations still waiting fail with
//    channel_closed ("destroyed") and buffered items are destroyed. A coroutine that waits on a
//    channel while holding a handle to it keeps it alive: complete the channel to release such
//    coroutines (a goroutine blocked forever on a channel leaks in Go too).
//  - T must be move constructible without throwing (std::string, std::unique_ptr, int, ...).
#pragma once

#include <concepts>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include "tpl/async_generator.hpp"
#include "tpl/cancellation.hpp"
#include "tpl/detail/channel_core.hpp"
#include "tpl/detail/channel_operation.hpp"
#include "tpl/scheduler.hpp"
#include "tpl/exceptions.hpp"
#include "tpl/task.hpp"

namespace tpl {

/// Options of make_unbounded_channel (.NET UnboundedChannelOptions).
struct unbounded_channel_options {
  bool single_reader = false;
  bool single_writer = false;
  bool allow_synchronous_continuations = false;
};

/// Options of make_bounded_channel (.NET BoundedChannelOptions). capacity 0 makes an unbuffered
/// (rendezvous) channel: a write completes when a reader takes the item (only with full_mode wait).
struct bounded_channel_options {
  std::ptrdiff_t capacity = 0;
  bounded_channel_full_mode full_mode = bounded_channel_full_mode::wait;
  bool single_reader = false;
  bool single_writer = false;
  bool allow_synchronous_continuations = false;
};

template <class T>
class channel;
template <class T>
class channel_reader;
template <class T>
class channel_writer;

namespace detail {

template <class T>
struct channel_handle_access;

}  // namespace detail

/// The reading end of a channel (.NET ChannelReader<T>). Cheap to copy: copies share the channel.
/// Thread safety: every member may be called from any thread.
template <class T>
class channel_reader {
 public:
  channel_reader() noexcept = default;

  /// Takes the oldest item into out (move-assigned). False if there is none right now.
  bool try_read(T& out) const {
    std::optional<T> v;
    if (!h_.checked().try_read(v)) return false;
    out = std::move(*v);
    return true;
  }
  /// The oldest item, or nullopt if there is none right now.
  std::optional<T> try_read() const {
    std::optional<T> v;
    h_.checked().try_read(v);
    return v;
  }
  /// A copy of the oldest buffered item without taking it (.NET TryPeek).
  std::optional<T> try_peek() const
    requires std::copy_constructible<T>
  {
    std::optional<T> v;
    h_.checked().peek([&v](const T& item) { v.emplace(item); });
    return v;
  }
  /// Whether try_peek is available (.NET CanPeek): for copyable items.
  static constexpr bool can_peek() noexcept { return std::copy_constructible<T>; }

  /// co_await: the next item, waiting for one. Throws channel_closed once the channel is completed
  /// and drained (inner_exception(): the completion error), operation_canceled if token fires first.
  channel_read_operation<T> read_async(cancellation_token token = {}) const {
    return channel_read_operation<T>(&h_.checked(), std::move(token));
  }

  /// co_await: the next item, or std::nullopt once the channel is completed and drained (rethrows
  /// the completion error instead if there was one). The loop form:
  ///   for (;;) { std::optional<int> v = co_await reader.next_async(); if (!v) break; use(*v); }
  channel_next_operation<T> next_async(cancellation_token token = {}) const {
    return channel_next_operation<T>(&h_.checked(), std::move(token));
  }

  /// co_await: true when an item is available, false once the channel is completed and drained
  /// (throws the completion error instead if there was one). Not a reservation: follow with
  /// try_read, which may fail if another reader was faster.
  channel_wait_to_read_operation<T> wait_to_read_async(cancellation_token token = {}) const {
    return channel_wait_to_read_operation<T>(&h_.checked(), std::move(token));
  }

  /// Calls fn(item) for every item until the channel is completed and drained; fn may return a
  /// task (or any awaitable), which is awaited before the next item. Faults with the completion
  /// error, or with what fn throws (the rest stays in the channel). .NET ReadAllAsync.
  template <class F>
    requires std::invocable<F&, T&&>
  task<> read_all(F fn, cancellation_token token = {}) const {
    return read_all_impl(*this, std::move(fn), std::move(token));
  }

  /// The items as an async_generator, until the channel is completed and drained (.NET
  /// ReadAllAsync):
  ///   auto items = reader.read_all_async(token);
  ///   while (T* item = co_await items.next()) use(std::move(*item));
  /// A completion with an error rethrows it from the next() after the last item. token (and a
  /// token given with with_cancellation(), linked with it) cancels a wait for an item: that
  /// next() throws operation_canceled. Items buffered when the token is canceled are still
  /// delivered; the wait after them is the one that throws. Each item is moved out of the channel
  /// into the generator's frame; the consumer may move it on.
  async_generator<T> read_all_async(cancellation_token token = {}) const {
    h_.checked();
    return read_all_async_impl(*this, std::move(token));
  }

  /// Items buffered right now (items held by writers blocked on a full or rendezvous channel are
  /// not counted). Every tpl channel can count (.NET: not a single-reader unbounded one).
  std::size_t count() const { return h_.checked().count(); }
  static constexpr bool can_count() noexcept { return true; }

  /// Finishes once the channel is completed and drained; faulted with the completion error
  /// (canceled if that error is operation_canceled).
  task<> completion() const { return h_.checked().completion(); }

  bool valid() const noexcept { return h_.get() != nullptr; }

 private:
  friend struct detail::channel_handle_access<T>;
  explicit channel_reader(detail::channel_handle<T> h) noexcept : h_(std::move(h)) {}

  template <class F>
  static task<> read_all_impl(channel_reader self, F fn, cancellation_token token) {
    for (;;) {
      const bool more = co_await self.wait_to_read_async(token);
      if (!more) co_return;
      for (;;) {
        std::optional<T> item = self.try_read();
        if (!item) break;
        using R = std::invoke_result_t<F&, T&&>;
        if constexpr (std::is_void_v<R>) {
          fn(std::move(*item));
        } else {
          co_await fn(std::move(*item));
        }
      }
    }
  }

  static async_generator<T> read_all_async_impl(channel_reader self, cancellation_token token) {
    const detail::generator_cancellation cancellation(
        std::move(token), co_await this_generator::get_cancellation_token());
    for (;;) {
      const bool more = co_await self.wait_to_read_async(cancellation.token());
      if (!more) co_return;
      for (std::optional<T> item = self.try_read(); item; item = self.try_read())
        co_yield std::move(*item);
    }
  }

  detail::channel_handle<T> h_;
};

/// The writing end of a channel (.NET ChannelWriter<T>). Cheap to copy: copies share the channel.
/// Thread safety: every member may be called from any thread.
template <class T>
class channel_writer {
 public:
  channel_writer() noexcept = default;

  /// Writes item if the channel can take it now: true if written (or dropped by a drop full mode);
  /// false if full (wait mode), for a rendezvous channel if no reader is waiting, or once the
  /// channel is completed (as .NET's TryWrite: it never throws channel_closed; write_async and
  /// wait_to_write_async report the completion). item is moved from only when true is returned.
  bool try_write(T&& item) const { return h_.checked().try_write(item); }
  bool try_write(const T& item) const
    requires std::copy_constructible<T>
  {
    T copy(item);
    return h_.checked().try_write(copy);
  }

  /// co_await: writes item, waiting for room (or, for a rendezvous channel, for a reader to take
  /// it). Throws channel_closed if the channel is (or gets) completed first, operation_canceled if
  /// token fires first; either way the item is not in the channel.
  channel_write_operation<T> write_async(T item, cancellation_token token = {}) const {
    return channel_write_operation<T>(&h_.checked(), std::move(token), std::move(item));
  }

  /// co_await: true when a write can go through (room, a drop full mode, or for a rendezvous
  /// channel a waiting reader), false once the channel is completed (throws the completion error
  /// instead if there was one). Not a reservation.
  channel_wait_to_write_operation<T> wait_to_write_async(cancellation_token token = {}) const {
    return channel_wait_to_write_operation<T>(&h_.checked(), std::move(token));
  }

  /// Ends the writer side (.NET TryComplete). error (optional) is what readers see once they have
  /// drained the channel. False if it was already completed.
  bool try_complete(std::exception_ptr error = nullptr) const { return h_.checked().try_complete(std::move(error)); }
  /// As try_complete, but completing twice throws channel_closed (.NET Complete).
  void complete(std::exception_ptr error = nullptr) const {
    if (!try_complete(std::move(error))) std::rethrow_exception(detail::make_channel_complete_twice());
  }

  bool valid() const noexcept { return h_.get() != nullptr; }

 private:
  friend struct detail::channel_handle_access<T>;
  explicit channel_writer(detail::channel_handle<T> h) noexcept : h_(std::move(h)) {}

  detail::channel_handle<T> h_;
};

/// A channel: a reader and a writer sharing one queue (.NET Channel<T>). Copies share the channel.
template <class T>
class channel {
 public:
  channel() noexcept = default;

  channel_reader<T> reader() const { return detail::channel_handle_access<T>::reader(h_); }
  channel_writer<T> writer() const { return detail::channel_handle_access<T>::writer(h_); }

  bool valid() const noexcept { return h_.get() != nullptr; }

 private:
  friend struct detail::channel_handle_access<T>;
  explicit channel(detail::channel_handle<T> h) noexcept : h_(std::move(h)) {}

  detail::channel_handle<T> h_;
};

namespace detail {

template <class T>
struct channel_handle_access {
  static channel<T> make(channel_settings s, std::function<void(T)> item_dropped) {
    static_assert(std::is_nothrow_move_constructible_v<T>,
                  "tpl::channel<T>: T must be nothrow move constructible");
    static_assert(!std::is_reference_v<T> && !std::is_void_v<T>, "tpl::channel<T>: T must be an object type");
    return channel<T>(channel_handle<T>(new channel_core<T>(s, std::move(item_dropped))));
  }
  static channel_reader<T> reader(const channel_handle<T>& h) {
    h.checked();
    return channel_reader<T>(h);
  }
  static channel_writer<T> writer(const channel_handle<T>& h) {
    h.checked();
    return channel_writer<T>(h);
  }
  static const channel_core<T>& core(const channel_reader<T>& r) { return r.h_.checked(); }
  static const channel_core<T>& core(const channel_writer<T>& w) { return w.h_.checked(); }
};

}  // namespace detail

/// An unbounded channel (.NET Channel.CreateUnbounded). Writes never wait.
template <class T>
channel<T> make_unbounded_channel(unbounded_channel_options options = {}) {
  detail::channel_settings s;
  s.capacity = detail::kUnboundedChannelCapacity;
  s.single_reader = options.single_reader;
  s.single_writer = options.single_writer;
  s.synchronous_continuations = options.allow_synchronous_continuations;
  return detail::channel_handle_access<T>::make(s, {});
}

/// A bounded channel (.NET Channel.CreateBounded(options, itemDropped)). Throws
/// std::invalid_argument for a negative capacity, or capacity 0 with a drop full mode.
/// item_dropped (optional) receives every item a drop full mode discards, outside the channel's
/// lock, on the writing thread.
template <class T>
channel<T> make_bounded_channel(bounded_channel_options options, std::function<void(T)> item_dropped = {}) {
  detail::check_channel_capacity(options.capacity, options.full_mode);
  detail::channel_settings s;
  s.capacity = static_cast<std::size_t>(options.capacity);
  s.full_mode = options.full_mode;
  s.single_reader = options.single_reader;
  s.single_writer = options.single_writer;
  s.synchronous_continuations = options.allow_synchronous_continuations;
  return detail::channel_handle_access<T>::make(s, std::move(item_dropped));
}

/// A bounded channel with full mode wait (.NET Channel.CreateBounded(capacity)). capacity 0 is an
/// unbuffered rendezvous channel (Go's make(chan T)). Throws std::invalid_argument if negative.
template <class T>
channel<T> make_bounded_channel(std::ptrdiff_t capacity) {
  bounded_channel_options options;
  options.capacity = capacity;
  return make_bounded_channel<T>(options);
}

}  // namespace tpl
