// Where a socket engine's readiness comes from (internal): epoll (epoll_source.cpp, the default)
// or io_uring multishot polls (uring_source.cpp, TPL_IO_ENGINE=io_uring). The engine
// (socket_engine.cpp) owns one source and knows nothing of epoll or io_uring: it calls wait() (or,
// an inline engine busy polling, poll()) for a batch, hands the batch on (inline or to the pool)
// and then calls end_batch().
//
// Invariants every source keeps:
//   1. Both report edges: a change of a socket's readiness is reported at least once after it
//      happens (more reports are harmless: socket_context's handshake treats a report as "try the
//      system call again", socket_context.hpp).
//   2. attach() takes a reference to the target; the source drops it only after detach() and
//      after the last batch that can name the target has been handed on (inside end_batch()), so
//      every event of a batch finds its target alive until end_batch().
//   3. attach() and detach() may be called from any thread, concurrently with wait(); wait(),
//      poll() and end_batch() are called by one thread at a time: the engine thread, or (a source
//      whose lendable() is true) the batch item that holds the engine's lent poll duty, which
//      it receives and gives back with an acquire/release pair (socket_engine.cpp).
//   4. wait(), poll() and end_batch() allocate nothing: a batch is at most kMaxBatch events, in a
//      vector the engine reserved for that many.
#pragma once

#include <sys/epoll.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "socket_engine.hpp"

namespace tpl::net::detail {

struct ready_event {
  readiness_target* target;
  std::uint32_t bits;
};

class readiness_source {
 public:
  /// Events taken from the kernel per wait (.NET's EventBufferCount is 1024 too).
  static constexpr std::size_t kMaxBatch = 1024;

  readiness_source() = default;
  readiness_source(const readiness_source&) = delete;
  readiness_source& operator=(const readiness_source&) = delete;
  virtual ~readiness_source() = default;

  /// Watches fd (readable, writable, peer hang-up) for t and takes a reference to t. Throws
  /// socket_error if the kernel refuses at once.
  virtual void attach(int fd, readiness_target* t) = 0;
  /// Stops watching fd (call before closing it); returns once the kernel holds nothing of the
  /// socket's for this source, so that closing fd closes the socket (io_uring: a round trip to the
  /// engine thread). The reference goes once no batch can name t.
  virtual void detach(int fd, readiness_target* t) noexcept = 0;
  /// Blocks until the kernel reports something, then appends the socket events (at most kMaxBatch;
  /// `batch` is empty on entry and has room for that many). May return with none (a wake-up that
  /// only retired a target).
  virtual void wait(std::vector<ready_event>& batch) noexcept = 0;
  /// As wait(), without blocking: appends what the kernel reports now, possibly nothing. Engine
  /// thread only, like wait(); each call is a batch of its own (end_batch() follows it).
  virtual void poll(std::vector<ready_event>& batch) noexcept = 0;
  /// After the batch was handed on (each event with its own reference): drops the references of
  /// targets detached before it.
  virtual void end_batch() noexcept = 0;
  /// Whether wait(), poll() and end_batch() may run on a thread other than the engine's (one at
  /// a time, handed over with acquire/release): true for epoll; false for io_uring, whose polls
  /// belong to the thread that submitted them.
  virtual bool lendable() const noexcept { return false; }
};

/// Translates poll/epoll flags (the same values for both) into readiness bits.
inline std::uint32_t readiness_from_poll_bits(std::uint32_t poll_bits) noexcept {
  std::uint32_t bits = 0;
  if (poll_bits & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) bits |= readable;
  if (poll_bits & (EPOLLOUT | EPOLLHUP | EPOLLERR)) bits |= writable;
  return bits;
}

/// An epoll instance with its wake-up eventfd. Throws socket_error if either cannot be created.
std::unique_ptr<readiness_source> make_epoll_source();

/// io_uring_queue_init_params' role, so that tests can stand in a refusal (-EPERM, -ENOSYS).
using uring_init_fn = int (*)(unsigned entries, void* ring, void* params);

/// An io_uring ring for multishot polls, or nullptr with *why filled in when tpl was built without
/// liburing or the ring is refused (`init`: io_uring_queue_init_params by default).
std::unique_ptr<readiness_source> make_uring_source(std::string* why, uring_init_fn init = nullptr);

}  // namespace tpl::net::detail
