// The sanitizer death report: see sanitizer_report.hpp.
//
// The callback runs once, inside the sanitizer's Die(), on the reporting thread, while other
// threads may still run. It therefore reads only the running test's name (two pointers to strings
// gtest keeps for the whole run, published with release stores and read with acquire loads so the
// characters behind them are visible on ARMv8 as on x86) and writes with fprintf to stderr, which
// is unbuffered. It allocates nothing of its own: the sanitizer's symbolizer does, in its own heap.
#include "sanitizer_report.hpp"

// The test main links no tpl header: the sanitizer is detected as include/tpl/detail/config.hpp does.
#if defined(__SANITIZE_ADDRESS__)
#define TPL_TEST_ASAN 1
#elif defined(__SANITIZE_THREAD__)
#define TPL_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TPL_TEST_ASAN 1
#elif __has_feature(thread_sanitizer)
#define TPL_TEST_TSAN 1
#endif
#endif
#if defined(TPL_TEST_ASAN) || defined(TPL_TEST_TSAN)
#define TPL_TEST_SANITIZER_REPORT 1
#endif

#if defined(TPL_TEST_SANITIZER_REPORT)
#include <execinfo.h>
#include <gtest/gtest.h>
#include <sanitizer/common_interface_defs.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#if defined(TPL_TEST_ASAN)
#include <sanitizer/asan_interface.h>
#endif
#endif

namespace tpl_test {

#if defined(TPL_TEST_SANITIZER_REPORT)
namespace {

std::atomic<const char*> g_suite{nullptr};
std::atomic<const char*> g_name{nullptr};

class running_test_listener final : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo& test) override {
    // release: a reader that sees the name's pointer sees the suite's (stored before) and both
    // strings' characters, which gtest wrote before the test started.
    g_suite.store(test.test_suite_name(), std::memory_order_release);
    g_name.store(test.name(), std::memory_order_release);
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    // release pairs with the callback's acquire: a null name means "between tests".
    g_name.store(nullptr, std::memory_order_release);
  }
};

#if defined(TPL_TEST_ASAN)
/// True when a frame belongs to the sanitizer's runtime or to this file, or has no symbol: the
/// reader of the report needs none of them.
bool is_runtime_frame(const char* symbolized) {
  static const char* const kRuntime[] = {"__sanitizer", "__asan", "__tsan", "__ubsan", "libsanitizer",
                                         "compiler-rt", "sanitizer_report", "libasan", "libtsan", "libubsan", "<null>"};
  for (const char* marker : kRuntime)
    if (std::strstr(symbolized, marker) != nullptr) return true;
  return false;
}
#endif

void on_sanitizer_death() {
  // acquire: pairs with the listener's release stores (see above). The suite is read after the
  // name, so it is at least that test's; a test starting in between could pair a newer suite with
  // an older name, which a diagnostic printed once at death can afford.
  const char* name = g_name.load(std::memory_order_acquire);
  const char* suite = g_suite.load(std::memory_order_acquire);
  char what[256] = "a sanitizer report";
#if defined(TPL_TEST_ASAN)
  if (__asan_report_present()) {
    std::snprintf(what, sizeof what, "ASan: %s, %s of %zu bytes at %p", __asan_get_report_description(),
                  __asan_get_report_access_type() != 0 ? "WRITE" : "READ", __asan_get_report_access_size(),
                  __asan_get_report_address());
  }
#elif defined(TPL_TEST_TSAN)
  std::snprintf(what, sizeof what, "a TSan report");
#endif
  std::fprintf(stderr, "tpl test main: %s during %s%s%s\n", what, name != nullptr ? suite : "",
               name != nullptr ? "." : "", name != nullptr ? name : "no running test (between tests or at exit)");
#if defined(TPL_TEST_ASAN)
  // ASan calls this after its report has released the symbolizer; TSan calls it with
  // its report's locks still held, where symbolizing again would deadlock, and its report already
  // opens with the racing stacks. So the frames are printed in ASan builds only.
  void* frames[40];
  const int count = ::backtrace(frames, 40);
  std::fprintf(stderr, "tpl test main: faulting thread's frames:\n");
  int printed = 0;
  for (int i = 0; i < count && printed < 12; ++i) {
    char line[512];
    // A return address points after the call: one byte back names the calling line.
    __sanitizer_symbolize_pc(static_cast<char*>(frames[i]) - 1, "%F %S", line, sizeof line);
    if (is_runtime_frame(line)) continue;
    std::fprintf(stderr, "    %s\n", line);
    ++printed;
  }
#endif
}

}  // namespace

void install_sanitizer_report() {
  ::testing::UnitTest::GetInstance()->listeners().Append(new running_test_listener);
  __sanitizer_set_death_callback(on_sanitizer_death);
}
#else
void install_sanitizer_report() {}
#endif

}  // namespace tpl_test
