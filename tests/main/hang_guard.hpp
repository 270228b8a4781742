// tests/main/hang_guard.hpp — a per-test hang guard for the gtest binaries (tpl_tests,
// tpl_alloc_tests), installed by tests/main/test_main.cpp.
//
// ctest runs each binary as one test with a TIMEOUT of its own: a single hanging test would cost
// that whole timeout and name no test. The guard arms a deadline when each test starts and
// disarms it when the test ends; a watchdog thread that finds a test still running past its
// deadline prints
//
//   tpl test hang guard: <Suite.Name> still running after <N> s
//
// on stderr and ends the process at once with kHangExitCode, so ctest reports the failure then
// and its output names the test. The limit is a hang bound, far above what any test needs, never
// a timing assertion: TPL_TEST_HANG_SECONDS overrides the build's default (0 turns the guard off,
// e.g. under a debugger). docs/testing.md, "The per-test hang guard".
#pragma once

#include <chrono>
#include <optional>

namespace tpl_test {

/// The exit status of a process the hang guard ends (as timeout(1)'s).
inline constexpr int kHangExitCode = 124;

/// The limit from TPL_TEST_HANG_SECONDS, or `default_limit` when it is not set; nullopt (after
/// printing why on stderr) when it is set to something other than a whole number of seconds.
std::optional<std::chrono::seconds> hang_limit_from_environment(std::chrono::seconds default_limit);

/// Appends the guard to gtest's listeners with this limit per test (0: installs nothing). Call
/// once, after InitGoogleTest and before RUN_ALL_TESTS; stop_hang_guard() after RUN_ALL_TESTS.
void install_hang_guard(std::chrono::seconds limit);

/// Stops the watchdog thread and joins it (nothing if no guard is installed).
void stop_hang_guard();

}  // namespace tpl_test
