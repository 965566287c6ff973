# Turns a file into a C++ source that defines it as a byte array, so data (the
# MIG catalogue) is part of the binary. Run as a build step by migd_embed_file
# (cmake/migd.cmake).
#
#   cmake -DINPUT=<file> -DOUTPUT=<file.cc> -DNAMESPACE=<ns> -DSYMBOL=<name> -P embed_file.cmake
#
# Defines `extern const unsigned char <SYMBOL>[]` (NUL-terminated; unsigned so
# that UTF-8 bytes above 0x7f are not narrowing conversions) and
# `extern const std::size_t <SYMBOL>Size` (without the NUL) in <NAMESPACE>.
# A byte array rather than a raw string literal: no delimiter can clash with the
# content, and no compiler limit on string-literal length applies.

foreach(var INPUT OUTPUT NAMESPACE SYMBOL)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_file.cmake: -D${var}=... is required")
  endif()
endforeach()

file(READ "${INPUT}" hex HEX)
file(SIZE "${INPUT}" size)
# 16 bytes (32 hex digits) per line.
string(REPEAT "[0-9a-f]" 32 line_pattern)
string(REGEX REPLACE "(${line_pattern})" "\\1\n" hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")

get_filename_component(input_name "${INPUT}" NAME)
set(content "// Generated from ${input_name} by embed_file.cmake. Do not edit.
#include <cstddef>

namespace ${NAMESPACE} {

extern const unsigned char ${SYMBOL}[];
extern const std::size_t ${SYMBOL}Size;

const unsigned char ${SYMBOL}[] = {
${bytes}0x00};
const std::size_t ${SYMBOL}Size = ${size};

}  // namespace ${NAMESPACE}
")

file(WRITE "${OUTPUT}" "${content}")
