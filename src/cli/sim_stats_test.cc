#include "cli/sim_stats.h"

#include <cstdlib>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::cli {
namespace {

using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kState = R"({
  "version": 1,
  "gpus": [],
  "counters": {
    "nvmlInit_v2": {"SUCCESS": 2},
    "nvmlGpuInstanceDestroy": {"SUCCESS": 5, "ERROR_IN_USE": 1},
    "nvmlDeviceCreateGpuInstanceWithPlacement": {"ERROR_INSUFFICIENT_RESOURCES": 3}
  }
})";

TEST(ParseSimCountersTest, SortedRows) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto rows, ParseSimCounters(kState));
  EXPECT_THAT(rows, ElementsAre(
                        SimCounter{"nvmlDeviceCreateGpuInstanceWithPlacement",
                                   "ERROR_INSUFFICIENT_RESOURCES", 3},
                        SimCounter{"nvmlGpuInstanceDestroy", "ERROR_IN_USE", 1},
                        SimCounter{"nvmlGpuInstanceDestroy", "SUCCESS", 5},
                        SimCounter{"nvmlInit_v2", "SUCCESS", 2}));
}

TEST(ParseSimCountersTest, NoCountersIsEmpty) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto rows, ParseSimCounters(R"({"gpus": []})"));
  EXPECT_THAT(rows, IsEmpty());
}

TEST(ParseSimCountersTest, RejectsBadShapes) {
  EXPECT_THAT(ParseSimCounters("{not json"),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not valid JSON")));
  EXPECT_THAT(ParseSimCounters("[1]"), StatusIs(StatusCode::kDataLoss, HasSubstr("object")));
  EXPECT_THAT(ParseSimCounters(R"({"counters": 3})"),
              StatusIs(StatusCode::kDataLoss, HasSubstr("\"counters\" is not an object")));
  EXPECT_THAT(ParseSimCounters(R"({"counters": {"nvmlInit_v2": 1}})"),
              StatusIs(StatusCode::kDataLoss, HasSubstr("nvmlInit_v2")));
  EXPECT_THAT(ParseSimCounters(R"({"counters": {"nvmlInit_v2": {"SUCCESS": -1}}})"),
              StatusIs(StatusCode::kDataLoss, HasSubstr("nvmlInit_v2\"/\"SUCCESS")));
  EXPECT_THAT(ParseSimCounters(R"({"counters": {"nvmlInit_v2": {"SUCCESS": "x"}}})"),
              StatusIs(StatusCode::kDataLoss, ::testing::_));
}

TEST(RunSimStatsTest, TableAndJson) {
  migd::testing::TempDir dir;
  const std::string path = dir.Join("state.json");
  migd::testing::WriteFileOrDie(path, kState);
  std::ostringstream out, err;
  EXPECT_EQ(RunSimStats({.state_file = path, .output = "table"}, out, err), 0);
  EXPECT_THAT(out.str(), HasSubstr("nvmlGpuInstanceDestroy                    ERROR_IN_USE"));
  EXPECT_THAT(out.str(), HasSubstr("TOTAL"));
  EXPECT_THAT(out.str(), HasSubstr("11\n"));
  EXPECT_EQ(err.str(), "");

  std::ostringstream jout;
  EXPECT_EQ(RunSimStats({.state_file = path, .output = "json"}, jout, err), 0);
  const nlohmann::json doc = nlohmann::json::parse(jout.str());
  EXPECT_EQ(doc["total"], 11);
  EXPECT_EQ(doc["counters"]["nvmlGpuInstanceDestroy"]["ERROR_IN_USE"], 1);
  EXPECT_EQ(doc["state_file"], path);
}

TEST(RunSimStatsTest, DefaultsToEnvironment) {
  migd::testing::TempDir dir;
  const std::string path = dir.Join("state.json");
  migd::testing::WriteFileOrDie(path, kState);
  ASSERT_EQ(setenv("MIGD_SIM_STATE", path.c_str(), 1), 0);
  std::ostringstream out, err;
  EXPECT_EQ(RunSimStats({}, out, err), 0);
  EXPECT_THAT(out.str(), HasSubstr(path));
  ASSERT_EQ(unsetenv("MIGD_SIM_STATE"), 0);
  std::ostringstream out2, err2;
  EXPECT_EQ(RunSimStats({}, out2, err2), 1);
  EXPECT_THAT(err2.str(), HasSubstr("pass --state FILE or set MIGD_SIM_STATE"));
}

TEST(RunSimStatsTest, UnreadableOrCorruptFileIsExit2) {
  migd::testing::TempDir dir;
  std::ostringstream out, err;
  EXPECT_EQ(RunSimStats({.state_file = dir.Join("absent.json")}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("cannot read"));
  migd::testing::WriteFileOrDie(dir.Join("bad.json"), "{");
  std::ostringstream err2;
  EXPECT_EQ(RunSimStats({.state_file = dir.Join("bad.json")}, out, err2), 2);
  EXPECT_THAT(err2.str(), HasSubstr("DATA_LOSS"));
  std::ostringstream err3;
  EXPECT_EQ(RunSimStats({.state_file = dir.Join("bad.json"), .output = "xml"}, out, err3), 1);
}

}  // namespace
}  // namespace migd::cli
