// tests/main/sanitizer_report.hpp — the last lines of a sanitizer's report name the test.
//
// A sanitizer that ends a test process (ASan or TSan with halt_on_error) prints its report
// and then its threads' creation stacks; when the report is long, a log that keeps only its head
// and tail (CI's excerpt) loses the test that was running and the frames that faulted. With a
// sanitizer in the build, install_sanitizer_report() registers a death callback that runs after
// the report, on the thread that made it, and prints at the very end
//
//   tpl test main: <ASan: heap-use-after-free, READ of 8 bytes at 0x...> during <Suite.Name>
//   tpl test main: faulting thread's frames: <function file:line> (ASan: up to 12, one per line)
//
// UBSan's reports are short and end without calling it. Without a sanitizer it does nothing. docs/testing.md, "When a sanitizer ends a test binary".
#pragma once

namespace tpl_test {

/// Registers the death callback and a gtest listener that records the running test's name. Call
/// once, after InitGoogleTest and before RUN_ALL_TESTS.
void install_sanitizer_report();

}  // namespace tpl_test
