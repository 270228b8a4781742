// Strict parsing of tpl's environment variables (TPL_THREADPOOL_*, TPL_SOCKETS_*, TPL_IO_ENGINE),
// shared so that every variable accepts the same spellings and reports a bad value the same way:
// an std::invalid_argument naming the variable, its value and what was expected.
//
//   auto n = parse_environment_unsigned("TPL_SOCKETS_ENGINE_COUNT", v, 1, 1024, "an integer in 1..1024");
//   switch (parse_environment_word("TPL_IO_ENGINE", v, {"epoll", "io_uring"})) { ... }  // index
#pragma once

#include <cstddef>
#include <initializer_list>

namespace tpl::detail {

[[noreturn]] void bad_environment_value(const char* name, const char* value, const char* expected);

/// A whole decimal number in [lo, hi], nothing else (no sign, no spaces, no trailing text).
unsigned long long parse_environment_unsigned(const char* name, const char* value, unsigned long long lo,
                                              unsigned long long hi, const char* expected);

/// 1, true, 0 or false.
bool parse_environment_bool(const char* name, const char* value);

/// One of `words`, exactly (case and blanks count); returns its index. A bad value's message lists
/// them ("expected epoll or io_uring").
std::size_t parse_environment_word(const char* name, const char* value, std::initializer_list<const char*> words);

}  // namespace tpl::detail
