# Helper functions shared by tpl's CMakeLists files.
include_guard(GLOBAL)

# tpl_apply_sanitizer(<"" | address | thread | fuzzer>)
# Adds the sanitizer flags to the compile AND link options of the calling
# directory (and therefore to every target created in it or below it).
# 'fuzzer' (Clang only, the `fuzz` preset): AddressSanitizer + UBSan + libFuzzer's coverage
# instrumentation (-fsanitize=fuzzer-no-link); the fuzz targets add -fsanitize=fuzzer themselves
# (tests/fuzz/CMakeLists.txt), which links libFuzzer's main().
function(tpl_apply_sanitizer sanitizer)
  if(sanitizer STREQUAL "")
    return()
  endif()
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "TPL_SANITIZER='${sanitizer}' is only supported with GCC or Clang "
                        "(compiler is ${CMAKE_CXX_COMPILER_ID})")
  endif()
  if(sanitizer STREQUAL "address")
    set(_flags -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  elseif(sanitizer STREQUAL "thread")
    set(_flags -fsanitize=thread)
  elseif(sanitizer STREQUAL "fuzzer")
    if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      message(FATAL_ERROR "TPL_SANITIZER='fuzzer' needs Clang (libFuzzer); compiler is ${CMAKE_CXX_COMPILER_ID}")
    endif()
    set(_flags -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
               -fno-sanitize-recover=undefined)
  else()
    message(FATAL_ERROR "TPL_SANITIZER must be empty, 'address', 'thread' or 'fuzzer' (got '${sanitizer}')")
  endif()
  add_compile_options(${_flags})
  add_link_options(${_flags})
endfunction()

# tpl_configure_target(<target>)
# Standard settings for every target tpl builds itself (library, tests, bench,
# examples): strict ISO C++20 and the warning set (+ -Werror if TPL_WERROR).
function(tpl_configure_target target)
  set_target_properties(${target} PROPERTIES CXX_EXTENSIONS OFF)
  target_compile_features(${target} PRIVATE cxx_std_20)
  if(MSVC)
    target_compile_options(${target} PRIVATE /W4 /permissive- $<$<BOOL:${TPL_WERROR}>:/WX>)
  else()
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic $<$<BOOL:${TPL_WERROR}>:-Werror>)
  endif()
endfunction()

# tpl_shared_pch(<target> <group> <header>...)
# The first target of <group> precompiles the headers; every later one reuses that precompiled
# header (REUSE_FROM), which requires that the group's targets share every compile option.
function(tpl_shared_pch target group)
  get_property(_owner GLOBAL PROPERTY TPL_PCH_OWNER_${group})
  if(_owner)
    target_precompile_headers(${target} REUSE_FROM ${_owner})
  else()
    target_precompile_headers(${target} PRIVATE ${ARGN})
    set_property(GLOBAL PROPERTY TPL_PCH_OWNER_${group} ${target})
  endif()
endfunction()

# tpl_configure_test_target(<target>)
# tpl_configure_target() + TPL_TEST_LIGHT=1 when a sanitizer is enabled, so the
# tests can run lighter stress loops under ASan/TSan.
# Under TSan each test program also gets tests/main/tsan_suppressions.cpp (TSan's built-in
# suppressions: what libc++ synchronises inside its uninstrumented shared library).
function(tpl_configure_test_target target)
  tpl_configure_target(${target})
  if(NOT TPL_SANITIZER STREQUAL "")
    target_compile_definitions(${target} PRIVATE TPL_TEST_LIGHT=1)
  endif()
  get_target_property(_type ${target} TYPE)
  if(TPL_SANITIZER STREQUAL "thread" AND _type STREQUAL "EXECUTABLE")
    set(_supp "${PROJECT_SOURCE_DIR}/tests/main/tsan_suppressions.cpp")
    target_sources(${target} PRIVATE "${_supp}")
    set_source_files_properties("${_supp}" TARGET_DIRECTORY ${target} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()

# tpl_sanitizer_test_launcher(<out_var>)
# Kernels with vm.mmap_rnd_bits > 28 (e.g. Ubuntu >= 23.10 defaults to 32)
# break the ASan/TSan runtimes of GCC 12 / Clang 16 ("unexpected memory
# mapping", endless DEADLYSIGNAL). In that case the sanitized test binaries
# (unit tests, fuzz targets, soak) run with ASLR disabled via `setarch -R` when
# the sandbox allows it: <out_var> is set to that launcher (a list), or "".
#   TPL_TEST_DISABLE_ASLR: AUTO (default) | ON | OFF
function(tpl_sanitizer_test_launcher out_var)
  set(TPL_TEST_DISABLE_ASLR AUTO CACHE STRING "Run sanitized tests under 'setarch -R' (AUTO|ON|OFF)")
  set_property(CACHE TPL_TEST_DISABLE_ASLR PROPERTY STRINGS AUTO ON OFF)
  set(_launcher "")
  if(NOT TPL_SANITIZER STREQUAL "" AND CMAKE_HOST_SYSTEM_NAME STREQUAL "Linux")
    set(_want_no_aslr OFF)
    set(_rnd_bits "?")
    if(TPL_TEST_DISABLE_ASLR STREQUAL "AUTO")
      if(EXISTS /proc/sys/vm/mmap_rnd_bits)
        file(READ /proc/sys/vm/mmap_rnd_bits _rnd_bits)
        string(STRIP "${_rnd_bits}" _rnd_bits)
        if(_rnd_bits GREATER 28)
          set(_want_no_aslr ON)
        endif()
      endif()
    elseif(TPL_TEST_DISABLE_ASLR)
      set(_want_no_aslr ON)
    endif()
    if(_want_no_aslr)
      find_program(TPL_SETARCH setarch)
      if(TPL_SETARCH)
        execute_process(
          COMMAND "${TPL_SETARCH}" "${CMAKE_HOST_SYSTEM_PROCESSOR}" -R true
          RESULT_VARIABLE _setarch_rc OUTPUT_QUIET ERROR_QUIET)
      endif()
      if(TPL_SETARCH AND _setarch_rc EQUAL 0)
        set(_launcher "${TPL_SETARCH}" "${CMAKE_HOST_SYSTEM_PROCESSOR}" -R)
        message(STATUS "tpl tests: running sanitized tests with ASLR disabled (${TPL_SETARCH} -R)")
      else()
        message(WARNING "tpl tests: vm.mmap_rnd_bits=${_rnd_bits} may break the sanitizer runtime and "
                        "'setarch -R' is unavailable; if the tests crash at startup run "
                        "'sudo sysctl vm.mmap_rnd_bits=28'.")
      endif()
    endif()
  endif()
  set(${out_var} "${_launcher}" PARENT_SCOPE)
endfunction()
