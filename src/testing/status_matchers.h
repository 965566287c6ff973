// File: testing/status_matchers.h
//
// gMock matchers for Status and StatusOr (test-only).
//
// Example:
//   EXPECT_THAT(driver.DestroyGi(gpu, gi), IsOk());
//   EXPECT_THAT(result, StatusIs(StatusCode::kNotFound, HasSubstr("GI 3")));
#ifndef MIGD_TESTING_STATUS_MATCHERS_H_
#define MIGD_TESTING_STATUS_MATCHERS_H_

#include <gmock/gmock.h>

#include "base/status.h"

namespace migd::testing {

inline const Status& GetStatus(const Status& s) { return s; }
template <typename T>
const Status& GetStatus(const StatusOr<T>& s) {
  return s.status();
}

MATCHER(IsOk, "is OK") {
  const Status& s = ::migd::testing::GetStatus(arg);
  if (!s.ok()) *result_listener << "status is " << s.ToString();
  return s.ok();
}

MATCHER_P2(StatusIs, code, message_matcher,
           "has code " + std::string(::migd::StatusCodeName(code))) {
  const Status& s = ::migd::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(s.message()),
                                       result_listener);
}

// ASSERT_OK_AND_ASSIGN(auto x, F()): fails the test on error.
#define MIGD_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  MIGD_ASSERT_OK_AND_ASSIGN_IMPL_(MIGD_STATUS_CONCAT_(migd_test_or_, __COUNTER__), lhs, expr)
#define MIGD_ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr)    \
  auto tmp = (expr);                                       \
  ASSERT_TRUE(tmp.ok()) << tmp.status().ToString();        \
  lhs = std::move(tmp).value()

#define MIGD_ASSERT_OK(expr)                               \
  do {                                                     \
    const ::migd::Status migd_s_ = ::migd::testing::GetStatus(expr); \
    ASSERT_TRUE(migd_s_.ok()) << migd_s_.ToString();       \
  } while (0)
#define MIGD_EXPECT_OK(expr) EXPECT_THAT((expr), ::migd::testing::IsOk())

}  // namespace migd::testing

#include "base/status_macros.h"

#endif  // MIGD_TESTING_STATUS_MATCHERS_H_
