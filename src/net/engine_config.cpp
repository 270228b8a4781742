// The socket engine's configuration from the environment, parsed as strictly as the pool's
// variables (src/thread_pool/options.cpp): a whole number in range or an exact boolean word, and
// anything else throws std::invalid_argument naming the variable and what was expected.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "socket_engine.hpp"

namespace tpl::net::detail {

namespace {

/// More engines than this would be a misconfiguration: each is a thread blocked in epoll_wait.
constexpr unsigned long long kMaxEngineCount = 1024;

[[noreturn]] void bad(const char* name, const char* value, const char* expected) {
  throw std::invalid_argument(std::string("tpl: environment variable ") + name + "=\"" + value +
                              "\" is invalid: expected " + expected);
}

unsigned long long parse_unsigned(const char* name, const char* value, unsigned long long lo,
                                  unsigned long long hi, const char* expected) {
  if (*value == '\0') bad(name, value, expected);
  for (const char* p = value; *p != '\0'; ++p)
    if (*p < '0' || *p > '9') bad(name, value, expected);
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(value, &end, 10);
  if (errno == ERANGE || v < lo || v > hi) bad(name, value, expected);
  return v;
}

bool parse_bool(const char* name, const char* value) {
  if (std::strcmp(value, "1") == 0 || std::strcmp(value, "true") == 0) return true;
  if (std::strcmp(value, "0") == 0 || std::strcmp(value, "false") == 0) return false;
  bad(name, value, "0, 1, true or false");
}

}  // namespace

engine_config engine_config_from_environment() {
  engine_config c;
  if (const char* v = std::getenv("TPL_SOCKETS_ENGINE_COUNT"))
    c.engine_count = static_cast<unsigned>(
        parse_unsigned("TPL_SOCKETS_ENGINE_COUNT", v, 1, kMaxEngineCount, "an integer in 1..1024"));
  if (const char* v = std::getenv("TPL_SOCKETS_INLINE_COMPLETIONS"))
    c.inline_completions = parse_bool("TPL_SOCKETS_INLINE_COMPLETIONS", v);
  return c;
}

}  // namespace tpl::net::detail
