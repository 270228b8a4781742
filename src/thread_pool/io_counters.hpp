// The I/O counters behind thread_pool_stats::io and the io_summary event (internal; the public
// view is in tpl/thread_pool.hpp, docs/io.md explains the figures).
//
// Who counts what, each counter having exactly one writing thread:
//   - An engine thread (a socket engine's epoll thread, an io_uring completion thread) owns one
//     io_engine_counters block: its wake-ups, their batch sizes, and the completions it makes on
//     its own thread (io_uring resumptions; socket events handled inline). A socket engine that
//     lends its polling to the pool's batch items (src/net/poll_duty.hpp) lets the item holding
//     the duty record the wake-ups it finds: still one writer at a time, each hand-over of the
//     duty a release/acquire pair, which is all bump_owned needs.
//   - A completion made on a pool worker (a socket event handled by the engine's batch item, a
//     system call the pool engine ran) goes to that worker's own counters (worker::io_completions
//     in pool_impl.hpp), read by its pool's stats().
//   - count_io_completion() chooses between the two for the calling thread; a completion on any
//     other thread (the pool engine's fallback when the default pool cannot be created) goes to
//     a shared counter with an atomic increment, the only read-modify-write, on a cold path.
// The blocks live in a registry (an intrusive list under a mutex, taken only to register, to
// unregister and by stats()); a destroyed block's totals are kept, so counts never go back.
//
//   tpl::detail::io_engine_counters io_{tpl::detail::io_kind::socket};   // in the engine
//   io_.bind_to_current_thread();                                       // on the engine thread
//   io_.record_wakeup(batch);  ...  tpl::detail::io_summary_tick();
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tpl/thread_pool.hpp"

namespace tpl::detail {

/// The source of a completion.
enum class io_kind : std::uint8_t { socket, pool_engine, uring };
inline constexpr std::size_t kIoKinds = 3;

/// Adds n to a counter that only the calling thread writes.
inline void bump_owned(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
  // relaxed load and store, no read-modify-write: this thread is the only writer, so no update is
  // lost, and a reader (stats(), on any thread) needs only an untorn value. Aligned 64-bit loads
  // and stores are single-copy atomic on ARMv8 (LDR/STR) as on x86-64 (MOV); nothing is published
  // through the counter, so no ordering is needed, and a reader that synchronised with this thread
  // after the store (a completed operation it awaited) sees it by coherence.
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

/// One engine thread's counters; registers itself for stats() while it lives.
class alignas(64) io_engine_counters {
 public:
  /// kind: io_kind::socket or io_kind::uring.
  explicit io_engine_counters(io_kind kind) noexcept;
  /// Keeps the totals (stats() goes on reporting them) and unregisters. The engine thread must be
  /// joined or otherwise done writing.
  ~io_engine_counters();
  io_engine_counters(const io_engine_counters&) = delete;
  io_engine_counters& operator=(const io_engine_counters&) = delete;

  /// On the engine thread, before it counts anything: completions counted on this thread with
  /// count_io_completion(kind()) land here.
  void bind_to_current_thread() noexcept;

  /// The rest: by the engine thread, or whoever holds its socket engine's poll duty (one writer at a time).
  void record_wakeup(std::uint64_t batch) noexcept {
    bump_owned(wakeups_);
    bump_owned(events_, batch);
    bump_owned(batch_sizes_[io_batch_bucket(batch)]);
    // relaxed: single writer, as in bump_owned.
    if (batch > largest_.load(std::memory_order_relaxed)) largest_.store(batch, std::memory_order_relaxed);
  }
  void record_completion() noexcept { bump_owned(completions_); }

  io_kind kind() const noexcept { return kind_; }

  /// Adds this block's counters to s (under the registry's lock).
  void add_to(io_engine_stats& s) const noexcept;

 private:
  friend struct io_registry;
  const io_kind kind_;
  std::atomic<std::uint64_t> completions_{0}, wakeups_{0}, events_{0}, largest_{0};
  std::array<std::atomic<std::uint64_t>, io_batch_buckets> batch_sizes_{};
  io_engine_counters* prev_ = nullptr;  // the registry's list, under its lock
  io_engine_counters* next_ = nullptr;
};

/// Counts one completed I/O operation of kind k for the calling thread (see the file header),
/// and lets its pool send an io_summary event if one is due.
void count_io_completion(io_kind k) noexcept;

/// After an engine thread's wake-up: lets the default pool send an io_summary event if one is due
/// (a relaxed load or two while nobody listens; nothing if the default pool does not exist yet).
void io_summary_tick() noexcept;

/// The totals of every engine block of kind k (live and destroyed), plus completions of kind k
/// counted on threads that are neither workers nor engine threads.
io_engine_stats engine_io_totals(io_kind k) noexcept;

}  // namespace tpl::detail
