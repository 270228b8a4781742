# Helper functions shared by tpl's CMakeLists files.
include_guard(GLOBAL)

# tpl_apply_sanitizer(<"" | address | thread>)
# Adds the sanitizer flags to the compile AND link options of the calling
# directory (and therefore to every target created in it or below it).
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
  else()
    message(FATAL_ERROR "TPL_SANITIZER must be empty, 'address' or 'thread' (got '${sanitizer}')")
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

# tpl_configure_test_target(<target>)
# tpl_configure_target() + TPL_TEST_LIGHT=1 when a sanitizer is enabled, so the
# tests can run lighter stress loops under ASan/TSan.
function(tpl_configure_test_target target)
  tpl_configure_target(${target})
  if(NOT TPL_SANITIZER STREQUAL "")
    target_compile_definitions(${target} PRIVATE TPL_TEST_LIGHT=1)
  endif()
endfunction()
