// accept for tcp_listener and unix_listener (internal): the fast path, and the slow path that
// waits for readiness and backs off when the process is out of descriptors.
//
// Out of descriptors (EMFILE/ENFILE) or memory (ENOBUFS/ENOMEM), the connection stays in the
// kernel's backlog and, edge-triggered, no new edge will come for it. So the pending accept waits
// on a timer (kAcceptBackoffFirstMs, doubling to kAcceptBackoffMaxMs, Go's net/http values) and
// tries again; the listener's other work and every open connection go on meanwhile.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "operations.hpp"
#include "socket_context.hpp"
#include "tpl/time_provider.hpp"
#include "tpl/value_task.hpp"

namespace tpl::net::detail {

inline constexpr int kAcceptBackoffFirstMs = 5;
inline constexpr int kAcceptBackoffMaxMs = 1000;

/// Accepts that backed off for lack of descriptors or memory (relaxed: a statistic).
inline std::atomic<std::uint64_t> g_accept_backoffs{0};

template <class Socket, class Wrap>
value_task<Socket> accept_slow(context_ref ctx, cancellation_token token, std::uint32_t observed, int first_error,
                               Wrap wrap) {
  token.throw_if_cancellation_requested();
  int backoff_ms = kAcceptBackoffFirstMs;
  int error = first_error;
  for (;;) {
    if (error == 0) {
      accept_op op;
      co_await op_awaiter(*ctx, ctx->reads(), op, observed, token);
      if (op.error == 0) co_return wrap(op.accepted);
      error = op.error;
    }
    if (!is_accept_resource_error(error)) throw_op_error(error, "accept");
    g_accept_backoffs.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    co_await delay(std::chrono::milliseconds(backoff_ms), token);
    backoff_ms = std::min(backoff_ms * 2, kAcceptBackoffMaxMs);
    accept_op op;
    observed = ctx->reads().observe();
    if (ctx->attempt(op) == attempt_result::done) {
      if (op.error == 0) co_return wrap(op.accepted);
      error = op.error;
    } else {
      error = 0;
    }
  }
}

/// wrap(fd) makes the Socket (attaching fd to an engine; it closes fd if that fails).
template <class Socket, class Wrap>
value_task<Socket> accept_on(socket_context& c, const cancellation_token& token, Wrap wrap) {
  std::uint32_t observed = 0;
  int error = 0;
  if (!token.is_cancellation_requested()) {
    accept_op op;
    observed = c.reads().observe();
    if (c.attempt(op) == attempt_result::done) {
      if (op.error == 0) return value_task<Socket>(wrap(op.accepted));
      error = op.error;
    }
  }
  return accept_slow<Socket>(context_ref(&c), token, observed, error, wrap);
}

}  // namespace tpl::net::detail
