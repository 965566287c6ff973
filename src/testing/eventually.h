// File: testing/eventually.h
//
// Eventually(cond): polls `cond` until it holds or a generous deadline passes
// (default 60 s: the build hosts are shared; this bounds a wait, it is not a
// performance expectation). Returns the last evaluation.
//
// Thread-safety: calls `cond` from the calling thread only.
#ifndef MIGD_TESTING_EVENTUALLY_H_
#define MIGD_TESTING_EVENTUALLY_H_

#include <chrono>
#include <thread>

namespace migd::testing {

template <typename F>
bool Eventually(F cond, std::chrono::milliseconds deadline_after = std::chrono::seconds(60),
                std::chrono::milliseconds period = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + deadline_after;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(period);
  }
  return cond();
}

}  // namespace migd::testing

#endif  // MIGD_TESTING_EVENTUALLY_H_
