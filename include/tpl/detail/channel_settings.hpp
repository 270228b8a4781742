// tpl/detail/channel_settings.hpp — what a channel is made with: its capacity, full mode and
// promises (channel_settings), the public bounded_channel_full_mode, and the constants that size
// and tune every channel (internal, except the enum; the public face is tpl/channel.hpp).
//
//   tpl::bounded_channel_options o;  // tpl/channel.hpp turns options into channel_settings
//   o.capacity = 100;
//   o.full_mode = tpl::bounded_channel_full_mode::drop_oldest;
//
// Invariants: a channel's settings are fixed when it is made (channel_core packs them into one
// byte beside its capacity); the tuning constants are compile-time, except
// channel_fast_ring_warmup, which is read once per channel when it is made.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace tpl {

/// What a bounded channel does with a write when it is full (.NET BoundedChannelFullMode).
enum class bounded_channel_full_mode : std::uint8_t {
  wait,         ///< the write waits for room (try_write returns false)
  drop_newest,  ///< the newest item in the channel is dropped to make room
  drop_oldest,  ///< the oldest item in the channel is dropped to make room
  drop_write,   ///< the item being written is dropped (the write still reports success)
};

namespace detail {

/// Capacity of an unbounded channel.
inline constexpr std::size_t kUnboundedChannelCapacity = std::numeric_limits<std::size_t>::max();
/// Slots of the lock-free ring of a bounded channel at most (with a larger capacity, the items
/// beyond the ring wait in a locked overflow behind it).
inline constexpr std::size_t kChannelFastRingMaxSlots = 1024;
/// Slots of an unbounded channel's first ring (each ring it outgrows is followed by one twice
/// as large).
inline constexpr std::size_t kChannelFastRingFirstUnboundedSlots = 64;

/// Writes a channel takes under its lock before it switches to the lock-free ring (a channel that
/// carries a few items, like each link of a chain of a million channels, never allocates one).
/// Read when a channel is created; tests set it to 0 to run every channel on the ring from the
/// start (relaxed: a setting, not a synchronization).
inline std::atomic<std::uint32_t> channel_fast_ring_warmup{64};

/// How many times an operation that found the ring full (empty) looks again before it waits.
inline constexpr int kChannelSpinChecks = 32;

/// Rounds (kChannelSpinChecks looks, then a yield) an operation about to wait watches a ring slot
/// that another thread claimed and has not published (freed) yet, before it queues anyway.
inline constexpr int kChannelClaimWaits = 4;

/// Writes to unbounded channels that a pool worker completes at once before the writing coroutine
/// lets the worker's other work run (see unbounded_write_yields).
inline constexpr unsigned kChannelWriteBudget = 8192;

/// Counts a write_async to an unbounded channel that completed without waiting, on this thread;
/// true for every kChannelWriteBudget-th on a thread pool worker: the writer then yields (it
/// queues behind the worker's other work, as tpl::yield()). An unbounded channel's writer never
/// waits, so without this a producer keeps its worker to the end while the consumers it woke
/// wait behind it (a cooperative budget, as tokio's channels have).
bool unbounded_write_yields() noexcept;

void check_channel_capacity(std::ptrdiff_t capacity, bounded_channel_full_mode mode);

struct channel_settings {
  std::size_t capacity = kUnboundedChannelCapacity;  ///< 0: rendezvous (unbuffered)
  bounded_channel_full_mode full_mode = bounded_channel_full_mode::wait;
  bool single_reader = false;
  bool single_writer = false;
  bool synchronous_continuations = false;
};

}  // namespace detail
}  // namespace tpl
