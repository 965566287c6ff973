// File: daemon/config_test_util.h
//
// Helpers for the config tests (daemon_test): parse a snippet as migd.yaml,
// get the message of one that must fail. Including this header also clears
// NODE_NAME before every test program runs (kubernetes.nodeName defaults to
// it and a CI pod may have it set); a test that needs it sets it itself.
#ifndef MIGD_DAEMON_CONFIG_TEST_UTIL_H_
#define MIGD_DAEMON_CONFIG_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "daemon/config.h"
#include "daemon/config_parse.h"

namespace migd::daemon::testing {

inline StatusOr<Config> Parse(const std::string& yaml) { return ParseConfig(yaml, "migd.yaml"); }

// The full message of a config that must fail with kInvalidArgument.
inline std::string ErrorOf(const std::string& yaml) {
  StatusOr<Config> c = Parse(yaml);
  EXPECT_FALSE(c.ok()) << yaml;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status();
  return std::string(c.status().message());
}

class NoNodeNameEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { ::unsetenv("NODE_NAME"); }
};
inline const ::testing::Environment* const kNoNodeName =
    ::testing::AddGlobalTestEnvironment(new NoNodeNameEnvironment);

}  // namespace migd::daemon::testing

#endif  // MIGD_DAEMON_CONFIG_TEST_UTIL_H_
