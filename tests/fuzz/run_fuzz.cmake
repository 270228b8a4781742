# ctest driver of one fuzz target: fresh scratch corpus, committed corpus replayed, then a bounded
# fuzzing run with a fixed seed. Variables: FUZZER, LAUNCHER (list, may be empty), SCRATCH, CORPUS,
# RUNS.
file(REMOVE_RECURSE "${SCRATCH}")
file(MAKE_DIRECTORY "${SCRATCH}")
set(_cmd ${LAUNCHER} "${FUZZER}" -runs=${RUNS} -seed=1 -max_len=512 -timeout=30 -rss_limit_mb=2048
         -print_final_stats=1 "-artifact_prefix=${SCRATCH}-" "${SCRATCH}" "${CORPUS}")
string(REPLACE ";" " " _shown "${_cmd}")
message(STATUS "running: ${_shown}")
execute_process(COMMAND ${_cmd} RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "fuzz target failed (exit ${_rc}); the failing input was saved as "
                      "${SCRATCH}-crash-* (or -leak-*, -timeout-*); replay it with: ${FUZZER} <file> "
                      "(see docs/testing.md, Fuzzing)")
endif()
