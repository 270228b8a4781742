// Strict parsing of tpl's environment variables (TPL_THREADPOOL_*, TPL_SOCKETS_*), shared so that
// every variable accepts the same spellings and reports a bad value the same way: an
// std::invalid_argument naming the variable, its value and what was expected.
#pragma once

namespace tpl::detail {

[[noreturn]] void bad_environment_value(const char* name, const char* value, const char* expected);

/// A whole decimal number in [lo, hi], nothing else (no sign, no spaces, no trailing text).
unsigned long long parse_environment_unsigned(const char* name, const char* value, unsigned long long lo,
                                              unsigned long long hi, const char* expected);

/// 1, true, 0 or false.
bool parse_environment_bool(const char* name, const char* value);

}  // namespace tpl::detail
