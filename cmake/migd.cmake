# Build helpers, abseil-style: migd_cc_library / migd_cc_binary / migd_cc_test.
# Warnings apply to our own targets only, never to third-party or generated code.

set(MIGD_WARNINGS
  -Wall -Wextra -Wpedantic -Werror -Wshadow -Wnon-virtual-dtor -Wcast-align
  -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough
  -Wmissing-declarations)

# Executables of a TSan build carry the suppressions for the uninstrumented
# Debian libraries (cmake/tsan_suppressions.cc).
function(migd_sanitizer_hooks target)
  if(MIGD_SANITIZE_THREAD)
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/tsan_suppressions.cc)
  endif()
endfunction()

# migd_cc_library(NAME name SRCS ... [HDRS ...] [DEPS ...])
function(migd_cc_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;HDRS;DEPS" ${ARGN})
  add_library(${ARG_NAME} STATIC ${ARG_SRCS} ${ARG_HDRS})
  target_include_directories(${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${ARG_NAME} PUBLIC ${ARG_DEPS})
  target_compile_options(${ARG_NAME} PRIVATE ${MIGD_WARNINGS})
endfunction()

# migd_cc_binary(NAME name SRCS ... [DEPS ...])
function(migd_cc_binary)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  target_compile_options(${ARG_NAME} PRIVATE ${MIGD_WARNINGS})
  migd_sanitizer_hooks(${ARG_NAME})
endfunction()

# migd_cc_test(NAME name SRCS ... [DEPS ...] [LABELS unit|integration|e2e|hw])
# Each test executable lands in <build>/tests and every TEST() is registered
# with ctest by gtest_discover_tests.
function(migd_cc_test)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_options(${ARG_NAME} PRIVATE ${MIGD_WARNINGS} -Wno-missing-declarations)
  migd_sanitizer_hooks(${ARG_NAME})
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  gtest_discover_tests(${ARG_NAME}
    PROPERTIES LABELS "${ARG_LABELS}"
    DISCOVERY_TIMEOUT 60)
endfunction()
