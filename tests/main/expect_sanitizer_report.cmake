# ctest's tpl_sanitizer_report_names_the_test (ASan builds): runs tpl_tests' use-after-free
# self-test and expects ASan to end the process with the death report's lines last on stderr,
# naming the test and the faulting function (tests/main/sanitizer_report.hpp).
#   cmake -DLAUNCHER=<launcher, ';' written as '|'> -DTEST_BINARY=<tpl_tests> -P expect_sanitizer_report.cmake
string(REPLACE "|" ";" _launcher "${LAUNCHER}")
set(ENV{TPL_TEST_SANITIZER_REPORT_SELFTEST} 1)
set(ENV{ASAN_OPTIONS} "detect_leaks=1:halt_on_error=1")
execute_process(
  COMMAND ${_launcher} "${TEST_BINARY}" "--gtest_filter=sanitizer_report_selftest.*"
  RESULT_VARIABLE _status
  OUTPUT_VARIABLE _out
  ERROR_VARIABLE _err
  TIMEOUT 60)
set(_summary "tpl test main: ASan: heap-use-after-free, READ of 4 bytes at ")
set(_test "during sanitizer_report_selftest.a_read_after_free_on_another_thread")
set(_frame "read_after_free")
string(FIND "${_err}" "${_summary}" _at_summary)
string(FIND "${_err}" "${_test}" _at_test)
string(FIND "${_err}" "tpl test main: faulting thread's frames:" _at_frames)
string(FIND "${_err}" "${_frame}" _at_frame REVERSE)
string(FIND "${_err}" "ABORTING" _at_abort REVERSE)
if(_status EQUAL 0 OR _at_summary EQUAL -1 OR _at_test EQUAL -1 OR _at_frames EQUAL -1
   OR _at_frame LESS _at_frames OR _at_summary LESS _at_abort)
  message(FATAL_ERROR "expected a failing status and, after ASan's report, \"${_summary}...${_test}\" "
                      "and the faulting thread's frames with ${_frame}; got status '${_status}'\n"
                      "--- stderr ---\n${_err}")
endif()
message(STATUS "the death report named the test and the faulting function after ASan's report")
