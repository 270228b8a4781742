// Strict parsing of tpl's environment variables: see env_parse.hpp.
#include "env_parse.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tpl::detail {

void bad_environment_value(const char* name, const char* value, const char* expected) {
  throw std::invalid_argument(std::string("tpl: environment variable ") + name + "=\"" + value +
                              "\" is invalid: expected " + expected);
}

unsigned long long parse_environment_unsigned(const char* name, const char* value, unsigned long long lo,
                                              unsigned long long hi, const char* expected) {
  if (*value == '\0') bad_environment_value(name, value, expected);
  for (const char* p = value; *p != '\0'; ++p)
    if (*p < '0' || *p > '9') bad_environment_value(name, value, expected);
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(value, &end, 10);
  if (errno == ERANGE || v < lo || v > hi) bad_environment_value(name, value, expected);
  return v;
}

bool parse_environment_bool(const char* name, const char* value) {
  if (std::strcmp(value, "1") == 0 || std::strcmp(value, "true") == 0) return true;
  if (std::strcmp(value, "0") == 0 || std::strcmp(value, "false") == 0) return false;
  bad_environment_value(name, value, "0, 1, true or false");
}

std::size_t parse_environment_word(const char* name, const char* value, std::initializer_list<const char*> words) {
  std::size_t i = 0;
  for (const char* w : words) {
    if (std::strcmp(value, w) == 0) return i;
    ++i;
  }
  std::string expected;
  i = 0;
  for (const char* w : words) {
    if (i != 0) expected += i + 1 == words.size() ? " or " : ", ";
    expected += w;
    ++i;
  }
  bad_environment_value(name, value, expected.c_str());
}

}  // namespace tpl::detail
