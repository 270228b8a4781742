// tests/main/test_main.cpp — main() of tpl_tests and tpl_alloc_tests: gtest, with the per-test
// hang guard (hang_guard.hpp) armed around every test and, in sanitizer builds, the death report
// that names the running test (sanitizer_report.hpp).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "hang_guard.hpp"
#include "sanitizer_report.hpp"

#ifndef TPL_TEST_HANG_SECONDS_DEFAULT
#error "tests/CMakeLists.txt defines TPL_TEST_HANG_SECONDS_DEFAULT (per build configuration)"
#endif

namespace {

/// Registered only when TPL_TEST_HANG_GUARD_SELFTEST=1 (ctest's tpl_hang_guard_fires): a test that
/// never ends, so that the guard must end the process and name it.
class never_ends final : public ::testing::Test {
 public:
  void TestBody() override {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
};

/// Registered only when TPL_TEST_SANITIZER_REPORT_SELFTEST=1 (ctest's tpl_sanitizer_report_names_the_test,
/// ASan builds): a use after free on another thread, so that the report's last lines must name this
/// test and the faulting function.
class reads_freed_memory final : public ::testing::Test {
 public:
  void TestBody() override {
    std::thread([] { read_after_free(); }).join();
  }

 private:
  [[gnu::noinline]] static void read_after_free() {
    // Read through a volatile pointer, so that the compiler neither proves the use after free
    // (g++ -O2 warns, and -Werror would fail the build) nor drops the read.
    int* volatile p = new int(7);
    delete p;
    volatile int seen = *p;  // the report
    (void)seen;
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (const char* selftest = std::getenv("TPL_TEST_HANG_GUARD_SELFTEST");
      selftest != nullptr && std::string_view(selftest) == "1") {
    ::testing::RegisterTest("hang_guard_selftest", "a_test_that_never_ends", nullptr, nullptr, __FILE__, __LINE__,
                            []() -> ::testing::Test* { return new never_ends; });
  }
  if (const char* selftest = std::getenv("TPL_TEST_SANITIZER_REPORT_SELFTEST");
      selftest != nullptr && std::string_view(selftest) == "1") {
    ::testing::RegisterTest("sanitizer_report_selftest", "a_read_after_free_on_another_thread", nullptr, nullptr,
                            __FILE__, __LINE__, []() -> ::testing::Test* { return new reads_freed_memory; });
  }
  tpl_test::install_sanitizer_report();
  const auto limit = tpl_test::hang_limit_from_environment(std::chrono::seconds(TPL_TEST_HANG_SECONDS_DEFAULT));
  if (!limit) return 2;
  tpl_test::install_hang_guard(*limit);
  const int status = RUN_ALL_TESTS();
  tpl_test::stop_hang_guard();
  return status;
}
