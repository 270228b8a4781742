// tpl/net/socket_stats.hpp — tpl::net::socket_stats(): counters of the socket engine. Its
// wake-ups, events and batch sizes are also in thread_pool::default_pool().stats().io.sockets,
// with the completions and a batch-size histogram (docs/io.md, "Statistics, events and tracing").
//
//   auto s = tpl::net::socket_stats();
//   std::printf("%llu events in %llu wake-ups, %llu batch items\n", s.events, s.engine_wakeups,
//               s.batch_items);
//
// The counters are read with relaxed loads: a snapshot for display, not a consistent cut.
// TPL_THREADPOOL_TRACE=1 prints the pool's io_summary line (sockets included) at most once a
// second while I/O moves.
#pragma once

#include <cstdint>
#include <string>

namespace tpl::net {

struct socket_engine_stats {
  unsigned engine_count = 0;        ///< engines started (0 before the first socket)
  bool inline_completions = false;  ///< TPL_SOCKETS_INLINE_COMPLETIONS
  bool io_uring = false;            ///< the engines learn readiness from io_uring (TPL_IO_ENGINE=io_uring), not epoll
  unsigned poll_window_us = 0;      ///< TPL_SOCKETS_POLL_WINDOW_US: how long a batch item polls with the lent duty (0: never lent)
  std::uint64_t engine_wakeups = 0; ///< waits (epoll_wait, io_uring) that returned at least one socket event
  std::uint64_t events = 0;         ///< socket readiness events those waits returned (each handled once)
  std::uint64_t batch_items = 0;    ///< pool work items that handled events (first and helpers)
  std::uint64_t largest_batch = 0;  ///< most socket events one wait returned
  std::uint64_t accept_backoffs = 0;///< accepts that waited for lack of descriptors or memory
  std::uint64_t busy_poll_batches = 0; ///< inline engines: batches found by polling without blocking after a busy one
  std::uint64_t lent_poll_batches = 0; ///< pool mode: batches a batch item found polling with the engine's lent poll duty
  std::uint64_t duty_reclaims = 0;     ///< pool mode: times an engine took its lent poll duty back, nobody having taken it
};

socket_engine_stats socket_stats() noexcept;

/// Why TPL_IO_ENGINE=io_uring was asked for and the socket engines use epoll (tpl built without
/// liburing, or the ring refused: EPERM under seccomp or kernel.io_uring_disabled, ENOSYS, ENOMEM);
/// empty when nothing fell back. Starts the engines if no socket has yet.
std::string socket_engine_fallback_reason();

/// One line, as the trace prints it.
std::string to_string(const socket_engine_stats& s);

}  // namespace tpl::net
