// File: fuzz/fuzz_check.h
//
// FUZZ_CHECK(cond, what): a property every fuzz target asserts beyond "does
// not crash" (e.g. encode(decode(x)) decodes again to the same value). A
// violation prints `what` and aborts, which libFuzzer reports as a crash and
// saves the input, exactly like a sanitizer finding.
//
// Thread-safety: libFuzzer runs one input at a time.
#ifndef MIGD_FUZZ_FUZZ_CHECK_H_
#define MIGD_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, what)                                                   \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s: %s\n", __FILE__,     \
                   __LINE__, #cond, (what));                                     \
      std::abort();                                                              \
    }                                                                            \
  } while (0)

#endif  // MIGD_FUZZ_FUZZ_CHECK_H_
