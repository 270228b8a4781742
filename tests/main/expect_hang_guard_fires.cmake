# ctest's tpl_hang_guard_fires: runs tpl_tests' never-ending self-test under a 2 s hang guard and
# expects the guard to end the process with status 124 and name the test on stderr.
#   cmake -DLAUNCHER=<launcher, ';' written as '|'> -DTEST_BINARY=<tpl_tests> -P expect_hang_guard_fires.cmake
string(REPLACE "|" ";" _launcher "${LAUNCHER}")
set(ENV{TPL_TEST_HANG_GUARD_SELFTEST} 1)
set(ENV{TPL_TEST_HANG_SECONDS} 2)
# TIMEOUT: a guard that never fires leaves the test to run forever; 60 s is far past its 2 s.
execute_process(
  COMMAND ${_launcher} "${TEST_BINARY}" "--gtest_filter=hang_guard_selftest.*"
  RESULT_VARIABLE _status
  OUTPUT_VARIABLE _out
  ERROR_VARIABLE _err
  TIMEOUT 60)
set(_expected "tpl test hang guard: hang_guard_selftest.a_test_that_never_ends still running after 2 s")
string(FIND "${_err}" "${_expected}" _at)
if(NOT _status STREQUAL "124" OR _at EQUAL -1)
  message(FATAL_ERROR "expected exit status 124 and \"${_expected}\" on stderr; got status '${_status}'\n"
                      "--- stdout ---\n${_out}\n--- stderr ---\n${_err}")
endif()
message(STATUS "the hang guard ended the never-ending test after 2 s and named it")
