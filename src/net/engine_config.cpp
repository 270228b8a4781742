// The socket engine's configuration from the environment, parsed as strictly as the pool's
// variables (src/thread_pool/options.cpp): a whole number in range or an exact boolean word, and
// anything else throws std::invalid_argument naming the variable and what was expected.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "socket_engine.hpp"
#include "../env_parse.hpp"

namespace tpl::net::detail {

namespace {

/// More engines than this would be a misconfiguration: each is a thread blocked in epoll_wait.
constexpr unsigned long long kMaxEngineCount = 1024;

}  // namespace

engine_config engine_config_from_environment() {
  engine_config c;
  if (const char* v = std::getenv("TPL_SOCKETS_ENGINE_COUNT"))
    c.engine_count = static_cast<unsigned>(
        tpl::detail::parse_environment_unsigned("TPL_SOCKETS_ENGINE_COUNT", v, 1, kMaxEngineCount, "an integer in 1..1024"));
  if (const char* v = std::getenv("TPL_SOCKETS_INLINE_COMPLETIONS"))
    c.inline_completions = tpl::detail::parse_environment_bool("TPL_SOCKETS_INLINE_COMPLETIONS", v);
  return c;
}

}  // namespace tpl::net::detail
