# Install / consumer test for tpl, run by ctest as:
#
#   cmake -DTPL_SOURCE_DIR=<repo> -DTPL_BINARY_DIR=<build> -DWORK_DIR=<scratch>
#         -DCXX_COMPILER=<c++> -DBUILD_TYPE=<cfg> [-DMAKE_PROGRAM=<ninja>]
#         -P run_consumer_tests.cmake
#
# (a) `cmake --install` the already-built tree into <scratch>/prefix, then
#     configure/build/run tests/install/find_package (find_package(tpl)).
#     The same prefix is then used through pkg-config (tpl.pc) to build the same program.
# (b) configure/build/run tests/install/fetch_content, which pulls tpl in with
#     FetchContent_Declare(tpl SOURCE_DIR <repo>) -- no network access -- built at -O0 -g0 whatever
#     <cfg> is (it compiles the library again; the test is about packaging, not code generation).
cmake_minimum_required(VERSION 3.25)

foreach(_var TPL_SOURCE_DIR TPL_BINARY_DIR WORK_DIR CXX_COMPILER)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer_tests.cmake: -D${_var}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()
if(NOT CMAKE_GENERATOR_FOR_CONSUMERS)
  set(CMAKE_GENERATOR_FOR_CONSUMERS Ninja)
endif()

set(_consumers_src "${TPL_SOURCE_DIR}/tests/install")
set(_prefix "${WORK_DIR}/prefix")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(_common_args
  -G "${CMAKE_GENERATOR_FOR_CONSUMERS}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_PACKAGE_NO_SYSTEM_PACKAGE_REGISTRY=ON)
if(MAKE_PROGRAM)
  list(APPEND _common_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()

function(_step what)
  message(STATUS "[tpl-consumers] ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "[tpl-consumers] FAILED (${_rc}): ${what}\n  command: ${ARGN}")
  endif()
endfunction()

# Runs <exe>, checks exit code 0 and that it printed "42".
function(_run_consumer name exe)
  message(STATUS "[tpl-consumers] ${name}: running ${exe}")
  execute_process(COMMAND "${exe}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err
                  TIMEOUT 120)
  string(STRIP "${_out}" _out)
  string(STRIP "${_err}" _err)
  message(STATUS "[tpl-consumers] ${name}: exit=${_rc} stdout='${_out}' stderr='${_err}'")
  if(NOT _rc EQUAL 0 OR NOT _out MATCHES "42")
    message(FATAL_ERROR "[tpl-consumers] ${name}: consumer did not exit 0 / print 42")
  endif()
endfunction()

# --- (a) install + find_package ----------------------------------------------
_step("install ${TPL_BINARY_DIR} -> ${_prefix}"
  "${CMAKE_COMMAND}" --install "${TPL_BINARY_DIR}" --prefix "${_prefix}" --config "${BUILD_TYPE}")

foreach(_f include/tpl/tpl.hpp)
  if(NOT EXISTS "${_prefix}/${_f}")
    message(FATAL_ERROR "[tpl-consumers] install is missing ${_f}")
  endif()
endforeach()
file(GLOB_RECURSE _cfg "${_prefix}/*/tplConfig.cmake")
file(GLOB_RECURSE _ver "${_prefix}/*/tplConfigVersion.cmake")
if(NOT _cfg OR NOT _ver)
  message(FATAL_ERROR "[tpl-consumers] install is missing tplConfig.cmake / tplConfigVersion.cmake")
endif()

set(_fp_bin "${WORK_DIR}/find_package")
_step("configure find_package consumer"
  "${CMAKE_COMMAND}" -S "${_consumers_src}/find_package" -B "${_fp_bin}" ${_common_args}
  "-DCMAKE_PREFIX_PATH=${_prefix}")
# Make sure the package came from our prefix, not from somewhere on the system.
file(STRINGS "${_fp_bin}/CMakeCache.txt" _tpl_dir REGEX "^tpl_DIR:")
string(FIND "${_tpl_dir}" "${_prefix}" _pos)
if(_pos EQUAL -1)
  message(FATAL_ERROR "[tpl-consumers] find_package(tpl) did not use ${_prefix}: ${_tpl_dir}")
endif()
_step("build find_package consumer" "${CMAKE_COMMAND}" --build "${_fp_bin}")
_run_consumer(find_package "${_fp_bin}/tpl_consumer_find_package")

# --- (a') the same install through pkg-config ----------------------------------
file(GLOB_RECURSE _pc "${_prefix}/*/pkgconfig/tpl.pc")
if(NOT _pc)
  message(FATAL_ERROR "[tpl-consumers] install is missing pkgconfig/tpl.pc")
endif()
find_program(_pkg_config NAMES pkg-config pkgconf)
if(NOT _pkg_config)
  message(WARNING "[tpl-consumers] pkg-config not found: the tpl.pc consumer is skipped "
                  "(make test installs pkgconf)")
else()
  get_filename_component(_pc_dir "${_pc}" DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} "${_pc_dir}")
  execute_process(COMMAND "${_pkg_config}" --cflags --libs tpl
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "[tpl-consumers] pkg-config --cflags --libs tpl failed (${_rc})")
  endif()
  message(STATUS "[tpl-consumers] pkg-config: ${_pc_flags}")
  string(FIND "${_pc_flags}" "${_prefix}" _pos)
  if(_pos EQUAL -1)
    message(FATAL_ERROR "[tpl-consumers] tpl.pc does not point into ${_prefix}: ${_pc_flags}")
  endif()
  separate_arguments(_pc_flag_list UNIX_COMMAND "${_pc_flags}")
  set(_pc_exe "${WORK_DIR}/tpl_consumer_pkg_config")
  _step("build pkg-config consumer"
    "${CXX_COMPILER}" -std=c++20 -O1 "${_consumers_src}/find_package/main.cpp" -o "${_pc_exe}"
    ${_pc_flag_list})
  _run_consumer(pkg_config "${_pc_exe}")
endif()

# --- (b) FetchContent (SOURCE_DIR, no network) -------------------------------
set(_fc_bin "${WORK_DIR}/fetch_content")
_step("configure FetchContent consumer"
  "${CMAKE_COMMAND}" -S "${_consumers_src}/fetch_content" -B "${_fc_bin}" ${_common_args}
  "-DTPL_SOURCE_DIR=${TPL_SOURCE_DIR}"
  -DFETCHCONTENT_FULLY_DISCONNECTED=ON
  # This consumer compiles tpl's sources again: unoptimised and without debug information, since
  # it proves only that the subproject configures, builds and links.
  -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g0")
_step("build FetchContent consumer" "${CMAKE_COMMAND}" --build "${_fc_bin}")
_run_consumer(fetch_content "${_fc_bin}/tpl_consumer_fetch_content")

message(STATUS "[tpl-consumers] all consumer checks passed")
