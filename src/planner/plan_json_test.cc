#include "planner/plan_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "planner/planner_test_util.h"
#include "testing/status_matchers.h"

namespace migd::planner {
namespace {

using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using namespace ::migd::planner::test;  // NOLINT(google-build-using-namespace): test builders

constexpr char kLayout[] = R"({
  "gpus": [
    {"index": 1, "model": "h100-80gb",
     "instances": [
       {"profile": "1g.10gb", "placement": "0:1", "state": "active", "key": "MIG-a"},
       {"profile": "3g.40gb", "placement": "4:4", "state": "idle", "key": "MIG-b", "lastUsed": 1200},
       {"profile": "1g.10gb", "placement": "1:1", "state": "foreign"}]},
    {"index": 0, "model": "a30-24gb"}
  ],
  "request": "gpu1/3g.40gb@4:4, 1g.6gb",
  "demand": {"1g.10gb": 2.5}
})";

TEST(PlanJsonTest, ParsesALayoutFile) {
  MIGD_ASSERT_OK_AND_ASSIGN(PlanInput in, PlanInputFromJson(kLayout, mig::Catalog::Default()));
  ASSERT_EQ(in.gpus.size(), 2u);
  EXPECT_EQ(in.gpus[0].index, GpuIndex(1));
  EXPECT_EQ(in.gpus[0].model, &Model("h100-80gb"));
  ASSERT_EQ(in.gpus[0].occupants.size(), 3u);
  EXPECT_EQ(in.gpus[0].occupants[1].state, OccupantState::kIdle);
  EXPECT_EQ(in.gpus[0].occupants[1].last_used, 1200);
  EXPECT_EQ(in.gpus[0].occupants[2].state, OccupantState::kForeign);
  EXPECT_TRUE(in.gpus[1].occupants.empty());
  EXPECT_EQ(RequestToString(in.request), "gpu1/3g.40gb@4:4, 1g.6gb");
  EXPECT_EQ(in.demand.at("1g.10gb"), 2.5);

  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, MakePlan(in));
  EXPECT_THAT(Where(plan), ElementsAre("1:3g.40gb@4:4", "0:1g.6gb@0:1"));
  EXPECT_EQ(plan.instances[0].reuse_key, "MIG-b");
}

TEST(PlanJsonTest, InputRoundTrips) {
  MIGD_ASSERT_OK_AND_ASSIGN(PlanInput in, PlanInputFromJson(kLayout, mig::Catalog::Default()));
  const std::string text = PlanInputToJson(in);
  MIGD_ASSERT_OK_AND_ASSIGN(PlanInput again, PlanInputFromJson(text, mig::Catalog::Default()));
  EXPECT_EQ(PlanInputToJson(again), text);
  EXPECT_THAT(text, HasSubstr(R"("placement": "4:4")"));
  EXPECT_THAT(text, HasSubstr(R"("gpu": 1)"));
}

TEST(PlanJsonTest, PlanRoundTripsAndIsStable) {
  const PlanInput in = Input({Gpu(0, "h100-80gb",
                                  {Active("4g.40gb", "0:4", "a"), Idle("1g.20gb", "4:2", "x", 3),
                                   Idle("1g.10gb", "6:1", "r", 1)}),
                              Gpu(1, "h100-80gb")},
                             {Any("1g.10gb"), Any("1g.10gb"), Any("1g.10gb")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, MakePlan(in));
  const std::string text = PlanToJson(plan);
  MIGD_ASSERT_OK_AND_ASSIGN(Plan back, PlanFromJson(text));
  EXPECT_EQ(back, plan);
  EXPECT_EQ(PlanToJson(back), text);
  EXPECT_THAT(text, HasSubstr(R"("reuseKey": "r")"));
  EXPECT_THAT(text, HasSubstr(R"("key": "x")"));
  EXPECT_THAT(text, HasSubstr(R"("nodeLoss": 0)"));
  EXPECT_THAT(text, HasSubstr(R"("search": "greedy")"));
  EXPECT_THAT(text, HasSubstr(R"("greedyFailed": false)"));
}

// One error style (base/json_reader.h): "<source>: <JSON pointer>: expected
// <X>, got <Y>".
// The value policy's fields: written, read back, and optional for plan
// documents written before them.
TEST(PlanJsonTest, ValueFieldsRoundTripAndAreOptional) {
  MIGD_ASSERT_OK_AND_ASSIGN(PlanInput in, PlanInputFromJson(kLayout, mig::Catalog::Default()));
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, MakePlan(in));
  plan.score.value_loss = 12345;
  plan.stats.value_policy = true;
  plan.stats.value_version = 7;
  const std::string text = PlanToJson(plan);
  EXPECT_THAT(text, HasSubstr(R"("valueLoss": 12345)"));
  EXPECT_THAT(text, HasSubstr(R"("valuePolicy": true)"));
  EXPECT_THAT(text, HasSubstr(R"("valueVersion": 7)"));
  MIGD_ASSERT_OK_AND_ASSIGN(Plan back, PlanFromJson(text));
  EXPECT_EQ(back, plan);
  nlohmann::json old = nlohmann::json::parse(text);
  old["score"].erase("valueLoss");
  old["stats"].erase("valuePolicy");
  old["stats"].erase("valueVersion");
  MIGD_ASSERT_OK_AND_ASSIGN(Plan before, PlanFromJson(old.dump()));
  EXPECT_EQ(before.score.value_loss, 0);
  EXPECT_FALSE(before.stats.value_policy);
  EXPECT_EQ(before.stats.value_version, 0u);
  // Every stats member is known (marginReuses too); anything else is refused.
  plan.stats.margin_reuses = 3;
  MIGD_ASSERT_OK_AND_ASSIGN(Plan with_margin, PlanFromJson(PlanToJson(plan)));
  EXPECT_EQ(with_margin.stats.margin_reuses, 3u);
  nlohmann::json bad = nlohmann::json::parse(text);
  bad["stats"]["marginReuse"] = 1;
  EXPECT_THAT(
      PlanFromJson(bad.dump()).status(),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("/stats/marginReuse: unknown member")));
  bad["stats"] = 5;
  EXPECT_FALSE(PlanFromJson(bad.dump()).ok());
}

TEST(PlanJsonTest, ErrorsNameTheMember) {
  const mig::Catalog& cat = mig::Catalog::Default();
  auto input_error = [&cat](std::string_view text) {
    return PlanInputFromJson(text, cat, "h100.json").status();
  };
  EXPECT_THAT(input_error("{"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("h100.json: not valid JSON")));
  EXPECT_THAT(input_error(R"({"gpus": 3})"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("h100.json: /gpus: expected an array, got 3")));
  EXPECT_THAT(input_error(R"({"gpus": [{"index": 0, "model": "z100"}]})"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("/gpus/0/model: expected a model key of the catalogue ("),
                             HasSubstr("h100-80gb"), HasSubstr("got \"z100\""))));
  EXPECT_THAT(input_error(R"({"gpus": [{"index": -1, "model": "h100-80gb"}]})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("/gpus/0/index: expected")));
  EXPECT_THAT(input_error(R"({"gpus": [{"model": "h100-80gb"}]})"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/gpus/0/index: expected a non-negative integer, got nothing")));
  EXPECT_THAT(input_error(R"({"gpus": [{"index": 0, "model": "h100-80gb", "instances": [
                           {"profile": "1g.10gb", "placement": "0:1", "state": "busy"}]}]})"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/gpus/0/instances/0/state: expected one of active, idle, "
                                 "error, foreign, got \"busy\"")));
  EXPECT_THAT(input_error(R"({"gpus": [{"index": 0, "model": "h100-80gb", "instances": [
                           {"profile": "1g.10gb", "placement": "0-1", "state": "idle"}]}]})"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/gpus/0/instances/0/placement: expected a placement "
                                 "\"start:size\", got \"0-1\"")));
  EXPECT_THAT(input_error(R"({"gpus": [{"index": 0, "model": "h100-80gb", "instances": [
                           {"profile": "1g.10gb", "placement": "0:1", "stat": "idle"}]}]})"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/gpus/0/instances/0/stat: unknown member")));
  EXPECT_THAT(input_error(R"({"gpus": [], "request": [{"gpu": 1}]})"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/request/0/profile: expected a string, got nothing")));
  EXPECT_THAT(input_error(R"({"gpus": [], "request": [{"profile": ""}]})"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/request/0/profile: expected a profile name, got \"\"")));
  EXPECT_THAT(input_error(R"({"gpus": [], "request": "1g.10gb,,2g.20gb"})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("/request: request item 1: empty")));
  EXPECT_THAT(input_error(R"({"gpus": [], "request": 7})"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/request: expected an array of instances or a request string")));
  EXPECT_THAT(input_error(R"({"gpus": [], "demand": {"1g.10gb": "lots"}})"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/demand/1g.10gb: expected a number, got \"lots\"")));
  EXPECT_THAT(input_error(R"({"gpus": [], "demand": {"1g.10gb": -1}})"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/demand/1g.10gb: expected a weight >= 0, got -1")));
  EXPECT_THAT(PlanFromJson(R"({"stage": "free"})", "plan.json"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("plan.json: /search: expected one of greedy, exhaustive, got "
                                 "nothing")));
  EXPECT_THAT(PlanFromJson(R"({"stage": "free", "search": "greedy", "instances": [],
                               "score": {"loss": 0, "extra": 1}})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("/score/nodeLoss: expected")));
}

TEST(PlanJsonTest, RequestSyntax) {
  MIGD_ASSERT_OK_AND_ASSIGN(
      std::vector<InstanceRequest> req,
      ParseRequest(" 1g.10gb ,gpu3/3g.40gb@4:4, 1g.24gb+me.all@0:3,gpu0/2g.20gb"));
  ASSERT_EQ(req.size(), 4u);
  EXPECT_EQ(req[0].profile, "1g.10gb");
  EXPECT_FALSE(req[0].gpu.has_value());
  EXPECT_EQ(req[1].gpu, GpuIndex(3));
  EXPECT_EQ(req[1].placement, P("4:4"));
  EXPECT_EQ(req[2].profile, "1g.24gb+me.all");
  EXPECT_EQ(req[3].gpu, GpuIndex(0));
  EXPECT_FALSE(req[3].placement.has_value());
  EXPECT_EQ(RequestToString(req), "1g.10gb, gpu3/3g.40gb@4:4, 1g.24gb+me.all@0:3, gpu0/2g.20gb");

  EXPECT_THAT(ParseRequest(""), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(ParseRequest("1g.10gb,,2g.20gb"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("request item 1: empty")));
  EXPECT_THAT(ParseRequest("gpux/1g.10gb"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad GPU index 'x'")));
  EXPECT_THAT(ParseRequest("gpu1"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("gpuN/PROFILE")));
  EXPECT_THAT(ParseRequest("3g.40gb@4"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("start:size")));
  EXPECT_THAT(ParseRequest("@4:4"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("missing profile")));
}

}  // namespace
}  // namespace migd::planner
