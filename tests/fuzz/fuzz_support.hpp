// What the fuzz targets share: failing loudly on a model mismatch, the exception type their
// callbacks and completions throw, and reading the input. Define TPL_FUZZ_TARGET (the target's
// name) before including it.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>

#ifndef TPL_FUZZ_TARGET
#error "define TPL_FUZZ_TARGET before including fuzz_support.hpp"
#endif

namespace tpl_fuzz {

/// Prints the mismatch and aborts, so libFuzzer records the input as a crash.
[[noreturn]] inline void fail(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::fputs(TPL_FUZZ_TARGET ": MODEL MISMATCH: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::fflush(stderr);
  std::abort();
}

/// Thrown by the inputs' callbacks and used as completion errors: its id tells them apart.
struct fuzz_error : std::exception {
  explicit fuzz_error(int i) : id(i) {}
  const char* what() const noexcept override { return "fuzz_error"; }
  int id;
};

/// The fuzzer's bytes, read one at a time; 0 once they run out.
struct input {
  const std::uint8_t* p;
  std::size_t n;
  bool empty() const { return n == 0; }
  std::uint8_t next() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
};

}  // namespace tpl_fuzz

#define FUZZ_CHECK(cond, ...)                 \
  do {                                        \
    if (!(cond)) tpl_fuzz::fail(__VA_ARGS__); \
  } while (0)
