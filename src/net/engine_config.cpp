// The socket engine's configuration from the environment, parsed as strictly as the pool's
// variables (src/thread_pool/options.cpp): a whole number in range, an exact boolean word, or
// (TPL_IO_ENGINE, read as files and pipes read it, src/io/handle.cpp) "epoll" or "io_uring";
// anything else throws std::invalid_argument naming the variable and what was expected.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "socket_engine.hpp"
#include "../env_parse.hpp"
#include "../io/engine.hpp"

namespace tpl::net::detail {

namespace {

/// More engines than this would be a misconfiguration: each is a thread blocked in epoll_wait.
constexpr unsigned long long kMaxEngineCount = 1024;
/// A poll window longer than a millisecond would be a worker spinning on an idle socket.
constexpr unsigned long long kMaxPollWindowUs = 1000;

}  // namespace

engine_config engine_config_from_environment() {
  engine_config c;
  if (const char* v = std::getenv("TPL_SOCKETS_ENGINE_COUNT"))
    c.engine_count = static_cast<unsigned>(
        tpl::detail::parse_environment_unsigned("TPL_SOCKETS_ENGINE_COUNT", v, 1, kMaxEngineCount, "an integer in 1..1024"));
  if (const char* v = std::getenv("TPL_SOCKETS_INLINE_COMPLETIONS"))
    c.inline_completions = tpl::detail::parse_environment_bool("TPL_SOCKETS_INLINE_COMPLETIONS", v);
  if (const char* v = std::getenv("TPL_SOCKETS_POLL_WINDOW_US"))
    c.poll_window_us = static_cast<unsigned>(tpl::detail::parse_environment_unsigned(
        "TPL_SOCKETS_POLL_WINDOW_US", v, 0, kMaxPollWindowUs, "an integer in 0..1000 (microseconds)"));
  // The variable files and pipes read too, with the same words ("epoll" names the default of both).
  if (const char* v = std::getenv("TPL_IO_ENGINE"))
    c.io_uring = tpl::io::detail::parse_io_engine(v) == tpl::io::io_engine::io_uring;
  return c;
}

}  // namespace tpl::net::detail
