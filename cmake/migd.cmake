# Build helpers, abseil-style. Every target of migd is declared with one of
#
#   migd_cc_library(NAME n SRCS ... [HDRS ...] [DEPS ...])       production code
#   migd_cc_test_library(NAME n SRCS ... [HDRS ...] [DEPS ...])  test helpers
#   migd_cc_binary(NAME n SRCS ... [DEPS ...])
#   migd_cc_test(NAME n SRCS ... [DEPS ...] [LABELS ...])
#
# and carries its kind in the target property MIGD_ROLE (library,
# test-helper, binary, test), which the build-graph check reads
# (cmake/migd_build_graph.cmake, tests/build_graph/): migd, migctl and the
# libraries they link must never reach the simulator (src/sim/), a test helper
# or gtest/gmock. Test helpers shared by several modules live in src/testing/;
# a module's own are files named *_test_util.{h,cc} beside it (README, Layout).
#
# Warnings apply to our own targets only, never to third-party or generated
# code. With clang, -Wthread-safety checks every ABSL_GUARDED_BY /
# ABSL_EXCLUSIVE_LOCKS_REQUIRED annotation (src/base/mutex.h); -Werror makes
# a violation a build error. CI's clang tree (build-fuzz) compiles the rest of
# the annotated code with scripts/thread_safety_check.py.

set(MIGD_WARNINGS
  -Wall -Wextra -Wpedantic -Werror -Wshadow -Wnon-virtual-dtor -Wcast-align
  -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough
  -Wmissing-declarations)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  list(APPEND MIGD_WARNINGS -Wthread-safety)
endif()

# Executables of a TSan build carry the suppressions for the uninstrumented
# Debian libraries (cmake/tsan_suppressions.cc).
function(migd_sanitizer_hooks target)
  if(MIGD_SANITIZE_THREAD)
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/tsan_suppressions.cc)
  endif()
endfunction()

function(migd_cc_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;HDRS;DEPS" ${ARGN})
  add_library(${ARG_NAME} STATIC ${ARG_SRCS} ${ARG_HDRS})
  target_include_directories(${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${ARG_NAME} PUBLIC ${ARG_DEPS})
  target_compile_options(${ARG_NAME} PRIVATE ${MIGD_WARNINGS})
  set_target_properties(${ARG_NAME} PROPERTIES MIGD_ROLE library)
endfunction()

# A library only tests link (fakes, fixtures, matchers). Production targets
# linking one fail the build_graph_check test.
function(migd_cc_test_library)
  migd_cc_library(${ARGN})
  cmake_parse_arguments(ARG "" "NAME" "" ${ARGN})
  set_target_properties(${ARG_NAME} PROPERTIES MIGD_ROLE test-helper)
endfunction()

function(migd_cc_binary)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  target_compile_options(${ARG_NAME} PRIVATE ${MIGD_WARNINGS})
  set_target_properties(${ARG_NAME} PROPERTIES MIGD_ROLE binary)
  migd_sanitizer_hooks(${ARG_NAME})
endfunction()

# Test executables' own sources compile at MIGD_TEST_OPTIMIZATION (default
# -Og) in optimised builds: the libraries they test (what ships) keep the
# preset's -O2, and -Og takes about a third less compile time for a gtest
# translation unit (README, "Other targets"). Debug builds keep -O0.
set(MIGD_TEST_OPTIMIZATION "-Og" CACHE STRING
    "Optimisation flag for test executables' own sources in optimised builds (empty: the preset's)")

# LABELS: unit (default), integration, e2e, bench. Each test executable lands
# in <build>/tests and every TEST() is registered with ctest by
# gtest_discover_tests.
function(migd_cc_test)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_options(${ARG_NAME} PRIVATE ${MIGD_WARNINGS} -Wno-missing-declarations)
  if(MIGD_TEST_OPTIMIZATION AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
    target_compile_options(${ARG_NAME} PRIVATE ${MIGD_TEST_OPTIMIZATION})
  endif()
  migd_sanitizer_hooks(${ARG_NAME})
  set_target_properties(${ARG_NAME} PROPERTIES
    MIGD_ROLE test
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  gtest_discover_tests(${ARG_NAME}
    PROPERTIES LABELS "${ARG_LABELS}"
    DISCOVERY_TIMEOUT 60)
endfunction()

# migd_embed_file(OUTPUT file.cc INPUT file NAMESPACE ns SYMBOL name): a build
# step that compiles `file` into `file.cc` as a byte array (cmake/embed_file.cmake);
# rebuilt whenever the input changes, without a re-configure.
function(migd_embed_file)
  cmake_parse_arguments(ARG "" "OUTPUT;INPUT;NAMESPACE;SYMBOL" "" ${ARGN})
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${ARG_INPUT})
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND}
            -DINPUT=${ARG_INPUT}
            -DOUTPUT=${ARG_OUTPUT}
            -DNAMESPACE=${ARG_NAMESPACE}
            -DSYMBOL=${ARG_SYMBOL}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake
    DEPENDS ${ARG_INPUT} ${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake
    COMMENT "Embedding ${rel}"
    VERBATIM)
  # Generated code: the house warnings apply to hand-written sources only.
  set_source_files_properties(${ARG_OUTPUT} PROPERTIES COMPILE_OPTIONS -w)
endfunction()
