// The `planner:` section: parsing, one error per knob, and the value service
// the daemon builds from it (not started until Start, nothing solved after
// Stop).
#include "daemon/planner_wiring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <utility>

#include "base/mutex.h"
#include "daemon/config.h"
#include "daemon/config_test_util.h"
#include "mig/catalog.h"
#include "testing/status_matchers.h"

namespace migd::daemon {
namespace {

using ::migd::daemon::testing::ErrorOf;
using ::migd::daemon::testing::Parse;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(PlannerConfigTest, DefaultsAreTheValuePolicyCountAndFivePercent) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse(""));
  EXPECT_EQ(c.planner.policy, "value");
  EXPECT_EQ(c.planner.objective, "count");
  EXPECT_EQ(c.planner.drift_threshold, "0.05");
  MIGD_ASSERT_OK_AND_ASSIGN(planner::ValueOptions o, ValueOptionsOf(c.planner));
  EXPECT_EQ(o.objective, planner::Objective::kCount);
  EXPECT_DOUBLE_EQ(o.drift_threshold, 0.05);
}

TEST(PlannerConfigTest, EveryKnobIsParsed) {
  MIGD_ASSERT_OK_AND_ASSIGN(
      Config c, Parse("planner: {policy: cost, objective: slices, driftThreshold: 0.2}"));
  EXPECT_EQ(c.planner.policy, "cost");
  MIGD_ASSERT_OK_AND_ASSIGN(planner::ValueOptions o, ValueOptionsOf(c.planner));
  EXPECT_EQ(o.objective, planner::Objective::kSliceWeighted);
  EXPECT_DOUBLE_EQ(o.drift_threshold, 0.2);
}

TEST(PlannerConfigTest, BadPolicyIsAConfigError) {
  EXPECT_EQ(ErrorOf("planner: {policy: greedy}"),
            "config migd.yaml: planner.policy: \"greedy\" is not a planner policy (use value or "
            "cost)");
}

TEST(PlannerConfigTest, BadObjectiveIsAConfigError) {
  EXPECT_THAT(ErrorOf("planner: {objective: slice}"),
              HasSubstr("planner.objective: \"slice\" is not a planner objective"));
}

TEST(PlannerConfigTest, BadDriftThresholdIsAConfigError) {
  for (const char* bad : {"0", "0.001", "1.5", "-0.1", "nan", "inf", "lots", "[0.1]"}) {
    const std::string yaml = std::string("planner: {driftThreshold: ") + bad + "}";
    EXPECT_THAT(ErrorOf(yaml), HasSubstr("planner.driftThreshold")) << bad;
  }
  EXPECT_THAT(ErrorOf("planner: {driftThreshold: 2}"),
              HasSubstr("\"2\" is not a drift threshold (use a number from 0.01 to 1"));
  EXPECT_TRUE(Parse("planner: {driftThreshold: 0.01}").ok());
  EXPECT_TRUE(Parse("planner: {driftThreshold: 1}").ok());
}

TEST(PlannerWiringTest, CostPolicyBuildsNoService) {
  PlannerConfig c{.policy = "cost", .objective = "count", .drift_threshold = "0.05"};
  MIGD_ASSERT_OK_AND_ASSIGN(auto service,
                            MakeValueService(c, std::make_unique<planner::ManualExecutor>()));
  EXPECT_EQ(service, nullptr);
}

TEST(PlannerWiringTest, UnvalidatedValuesAreRefusedNamingTheKey) {
  auto make = [](PlannerConfig c) {
    return MakeValueService(c, std::make_unique<planner::ManualExecutor>()).status();
  };
  EXPECT_THAT(make({.policy = "x", .objective = "count", .drift_threshold = "0.05"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("planner.policy")));
  EXPECT_THAT(make({.policy = "value", .objective = "x", .drift_threshold = "0.05"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("planner.objective")));
  EXPECT_THAT(make({.policy = "value", .objective = "count", .drift_threshold = "9"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("planner.driftThreshold")));
}

// The executor the daemon uses (BackgroundExecutor, not started), wrapped to
// tell the test when a task finished: no solve before Start, one after it,
// none after Stop.
class SignallingExecutor : public planner::SolveExecutor {
 public:
  void Submit(std::function<void()> task) override {
    inner_.Submit([this, task = std::move(task)] {
      task();
      MutexLock l(&mu_);
      ++done_;
      cv_.SignalAll();
    });
  }
  void Start() override { inner_.Start(); }
  void Stop() override { inner_.Stop(); }
  bool running() { return inner_.running(); }
  void WaitFor(int n) {
    MutexLock l(&mu_);
    cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ >= n; });
  }

 private:
  planner::BackgroundExecutor inner_{/*start=*/false};
  Mutex mu_;
  CondVar cv_;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(PlannerWiringTest, TheSolveThreadStartsAndStopsWithTheDaemonsCalls) {
  PlannerConfig c{.policy = "value", .objective = "count", .drift_threshold = "0.05"};
  auto exec = std::make_unique<SignallingExecutor>();
  SignallingExecutor* e = exec.get();
  MIGD_ASSERT_OK_AND_ASSIGN(auto service, MakeValueService(c, std::move(exec)));
  ASSERT_NE(service, nullptr);
  const mig::GpuModel* h100 = mig::Catalog::Default().FindModel("h100-80gb");
  ASSERT_NE(h100, nullptr);
  service->Prime({{"1g.10gb", 1}, {"3g.40gb", 1}}, 0.9, {h100});
  EXPECT_FALSE(e->running());
  EXPECT_EQ(service->counters().solves, 0u) << "no thread before Start";

  service->Start();
  EXPECT_TRUE(e->running());
  e->WaitFor(1);
  EXPECT_EQ(service->counters().solves, 1u);

  service->Stop();
  EXPECT_FALSE(e->running());
  service->Prime({{"1g.10gb", 1}}, 0.5, {h100});  // dropped: no thread after Stop
  service->Stop();                                  // idempotent
  EXPECT_EQ(service->counters().solves, 1u);
  EXPECT_NE(service->Values(*h100, 0), nullptr) << "the last values keep serving";
}

}  // namespace
}  // namespace migd::daemon
