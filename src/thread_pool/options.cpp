// thread_pool_options::from_environment and the to_string functions of the pool's public enums.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "tpl/detail/pool_policy.hpp"
#include "tpl/thread_pool.hpp"
#include "../env_parse.hpp"

namespace tpl {

namespace {

}  // namespace

thread_pool_options thread_pool_options::from_environment() { return from_environment(thread_pool_options{}); }

thread_pool_options thread_pool_options::from_environment(thread_pool_options o) {
  if (const char* v = std::getenv("TPL_THREADPOOL_MIN_THREADS"))
    o.thread_count = static_cast<unsigned>(
        detail::parse_environment_unsigned("TPL_THREADPOOL_MIN_THREADS", v, 1, detail::kMaxPoolThreads, "an integer in 1..32767"));
  if (const char* v = std::getenv("TPL_THREADPOOL_MAX_THREADS"))
    o.max_threads = static_cast<unsigned>(
        detail::parse_environment_unsigned("TPL_THREADPOOL_MAX_THREADS", v, 1, detail::kMaxPoolThreads, "an integer in 1..32767"));
  if (const char* v = std::getenv("TPL_THREADPOOL_HILL_CLIMBING"))
    o.hill_climbing = detail::parse_environment_bool("TPL_THREADPOOL_HILL_CLIMBING", v);
  if (const char* v = std::getenv("TPL_THREADPOOL_COOPERATIVE_BLOCKING"))
    o.cooperative_blocking = detail::parse_environment_bool("TPL_THREADPOOL_COOPERATIVE_BLOCKING", v);
  if (const char* v = std::getenv("TPL_THREADPOOL_INJECTION"))
    o.injection = detail::parse_environment_word("TPL_THREADPOOL_INJECTION", v, {"adaptive", "eager"}) == 0
                      ? injection_policy::adaptive
                      : injection_policy::eager;
  if (const char* v = std::getenv("TPL_THREADPOOL_IDLE_TIMEOUT_MS"))
    o.idle_timeout = std::chrono::milliseconds(detail::parse_environment_unsigned(
        "TPL_THREADPOOL_IDLE_TIMEOUT_MS", v, 1, 24ull * 3600 * 1000, "milliseconds in 1..86400000"));
  if (const char* v = std::getenv("TPL_THREADPOOL_GLOBAL_QUEUES"))
    o.extra_global_queues = static_cast<unsigned>(
        detail::parse_environment_unsigned("TPL_THREADPOOL_GLOBAL_QUEUES", v, 0, 4096, "an integer in 0..4096"));
  const unsigned min = o.thread_count, max = o.max_threads;
  if (min != 0 && max != 0 && min > max)
    throw std::invalid_argument("tpl: TPL_THREADPOOL_MIN_THREADS (" + std::to_string(min) +
                                ") is above TPL_THREADPOOL_MAX_THREADS (" + std::to_string(max) + ")");
  return o;
}

const char* to_string(thread_pool_reason r) noexcept {
  switch (r) {
    case thread_pool_reason::startup: return "startup";
    case thread_pool_reason::demand: return "demand";
    case thread_pool_reason::starvation: return "starvation";
    case thread_pool_reason::blocking: return "blocking";
    case thread_pool_reason::hill_climbing: return "hill_climbing";
    case thread_pool_reason::eager: return "eager";
    case thread_pool_reason::idle_timeout: return "idle_timeout";
    case thread_pool_reason::unblocked: return "unblocked";
    case thread_pool_reason::configuration: return "configuration";
    case thread_pool_reason::io: return "io";
  }
  return "?";
}

const char* to_string(thread_pool_event_kind k) noexcept {
  switch (k) {
    case thread_pool_event_kind::thread_injected: return "thread_injected";
    case thread_pool_event_kind::thread_retired: return "thread_retired";
    case thread_pool_event_kind::goal_changed: return "goal_changed";
    case thread_pool_event_kind::io_summary: return "io_summary";
  }
  return "?";
}

const char* to_string(hill_climbing_state s) noexcept {
  switch (s) {
    case hill_climbing_state::warmup: return "warmup";
    case hill_climbing_state::initializing: return "initializing";
    case hill_climbing_state::random_move: return "random_move";
    case hill_climbing_state::climbing_move: return "climbing_move";
    case hill_climbing_state::change_point: return "change_point";
    case hill_climbing_state::stabilizing: return "stabilizing";
    case hill_climbing_state::starvation: return "starvation";
    case hill_climbing_state::thread_timed_out: return "thread_timed_out";
  }
  return "?";
}

namespace {

// " name=[completions=.. wakeups=.. events=.. largest_batch=.. batches=1:..,2-3:..]", the batch
// buckets that are not empty.
void append_engine(std::string& out, const char* name, const io_engine_stats& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, " %s=[completions=%llu wakeups=%llu events=%llu largest_batch=%llu batches=", name,
                static_cast<unsigned long long>(s.completions), static_cast<unsigned long long>(s.wakeups),
                static_cast<unsigned long long>(s.events), static_cast<unsigned long long>(s.largest_batch));
  out += buf;
  bool first = true;
  for (std::size_t i = 0; i < io_batch_buckets; ++i) {
    if (s.batch_sizes[i] == 0) continue;
    const unsigned long long lo = 1ull << i, hi = (1ull << (i + 1)) - 1;
    if (i + 1 == io_batch_buckets)
      std::snprintf(buf, sizeof buf, "%s%llu+:%llu", first ? "" : ",", lo, static_cast<unsigned long long>(s.batch_sizes[i]));
    else if (lo == hi)
      std::snprintf(buf, sizeof buf, "%s%llu:%llu", first ? "" : ",", lo, static_cast<unsigned long long>(s.batch_sizes[i]));
    else
      std::snprintf(buf, sizeof buf, "%s%llu-%llu:%llu", first ? "" : ",", lo, hi,
                    static_cast<unsigned long long>(s.batch_sizes[i]));
    out += buf;
    first = false;
  }
  if (first) out += '-';
  out += ']';
}

}  // namespace

std::string to_string(const thread_pool_event& e) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(e.time.time_since_epoch()).count();
  char buf[256];
  if (e.kind == thread_pool_event_kind::io_summary) {
    std::snprintf(buf, sizeof buf, "tpl-pool t=%lld.%06lld io_summary threads=%u goal=%u blocked=%u completions=%llu",
                  static_cast<long long>(us / 1000000), static_cast<long long>(us % 1000000), e.existing_threads, e.goal,
                  e.blocked_threads, static_cast<unsigned long long>(e.io.completions()));
    std::string line = buf;
    append_engine(line, "sockets", e.io.sockets);
    append_engine(line, "io_uring", e.io.uring);
    std::snprintf(buf, sizeof buf, " pool_engine=[completions=%llu]",
                  static_cast<unsigned long long>(e.io.pool_engine_completions));
    line += buf;
    return line;
  }
  std::snprintf(buf, sizeof buf, "tpl-pool t=%lld.%06lld %s reason=%s threads=%u goal=%u%s%s blocked=%u",
                static_cast<long long>(us / 1000000), static_cast<long long>(us % 1000000), to_string(e.kind),
                to_string(e.reason), e.existing_threads, e.goal,
                e.kind == thread_pool_event_kind::goal_changed ? " previous_goal=" : "",
                e.kind == thread_pool_event_kind::goal_changed ? std::to_string(e.previous_goal).c_str() : "",
                e.blocked_threads);
  return buf;
}

}  // namespace tpl
