// The socket engine (internal): threads that turn readiness (from epoll, or from io_uring with
// TPL_IO_ENGINE=io_uring: readiness_source.hpp) into calls on readiness_targets, and the hand-off of
// each wake-up's batch of ready sockets to the thread pool.
//
// The seam (.NET's SocketAsyncEngine.Unix.cs / SocketAsyncContext.Unix.cs): the engine knows a
// socket only as a readiness_target (a descriptor, a reference count and on_readiness(bits)); it
// knows nothing of operations. A socket_context (socket_context.hpp) knows nothing of epoll: it is
// told "readable" / "writable" and runs its own pending operations. socket_engine.cpp explains the
// hand-off protocol and why no readiness is lost between the two.
//
// Invariants kept here:
//   1. A target is referenced by the engine from attach() until the engine thread has finished
//      the epoll_wait batch in progress after detach() (the "retired" list): an event already
//      returned by the kernel for a detached socket still finds it alive.
//   2. Each event handed to the pool holds its own reference to its target until handled.
#pragma once

#include <atomic>
#include <cstdint>

namespace tpl::net::detail {

/// Readiness bits as the engine reports them (the context never sees epoll's own flags).
enum readiness : std::uint32_t {
  readable = 1,  ///< data, a connection to accept, end of stream, an error or a hang-up
  writable = 2,  ///< room to send, a finished connect, an error or a hang-up
};

/// What the engine knows of a socket.
class readiness_target {
 public:
  readiness_target() = default;
  readiness_target(const readiness_target&) = delete;
  readiness_target& operator=(const readiness_target&) = delete;

  /// Called with readiness bits after an edge; on the engine thread (inline completions) or on a
  /// pool thread (one of the batch's work items); concurrently with the socket's own operations,
  /// and for the same target possibly on two threads at once (two consecutive batches).
  virtual void on_readiness(std::uint32_t bits) noexcept = 0;

  void add_ref() noexcept {
    // relaxed: a new reference is made from an existing one, which keeps the object alive.
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void release() noexcept {
    // acq_rel: the last releaser must see every other owner's writes before it deletes (acquire),
    // and each owner's writes must be published before its decrement (release).
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  /// The io_uring source's record of this target (uring_source.cpp; unused with epoll): the
  /// requests attach()/detach() queued for the engine thread (guarded by the source's request
  /// lock), the link of its request list (and later of its release list), the engine thread's own
  /// view (the descriptor it polls, whether detach() was seen), and `removed`, which the engine
  /// thread sets once no poll holds the socket's file any more (detach() waits for it).
  struct uring_record {
    std::uint8_t requests = 0;
    bool queued = false;
    bool detached = false;
    int fd = -1;
    readiness_target* next = nullptr;
    std::atomic<std::uint32_t> removed{0};
  } uring;

 protected:
  virtual ~readiness_target() = default;

 private:
  std::atomic<std::uint32_t> refs_{1};
};

/// Process-wide engine configuration, read once from the environment (TPL_SOCKETS_ENGINE_COUNT,
/// TPL_SOCKETS_INLINE_COMPLETIONS, TPL_SOCKETS_POLL_WINDOW_US, TPL_IO_ENGINE; a malformed value
/// throws std::invalid_argument naming it).
struct engine_config {
  unsigned engine_count = 1;
  bool inline_completions = false;
  bool io_uring = false;  ///< TPL_IO_ENGINE=io_uring: readiness from io_uring (epoll if refused)
  /// How long a batch item holding the lent poll duty polls without blocking before it gives the
  /// duty back; 0: the engine never lends its duty (every batch is a hand-off from its thread).
  unsigned poll_window_us = 50;
};
engine_config engine_config_from_environment();

class socket_engine;

/// The engine a new socket attaches to: round-robin over the configured engines, started on first
/// use (throws socket_error if epoll or the engine thread cannot be created).
socket_engine& engine_for_new_socket();

/// Registers fd (edge-triggered, readable and writable, peer hang-up) and takes a reference to t.
/// Throws socket_error if epoll refuses.
void engine_attach(socket_engine& e, int fd, readiness_target* t);
/// Stops events for fd (call before closing it) and drops the engine's reference once the batch in
/// progress is done with it.
void engine_detach(socket_engine& e, int fd, readiness_target* t) noexcept;


}  // namespace tpl::net::detail
