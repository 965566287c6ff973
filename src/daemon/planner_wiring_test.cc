// The `planner:` section: parsing, one error per knob, and the value service
// the daemon builds from it (not started until Start, nothing solved after
// Stop).
#include "daemon/planner_wiring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "daemon/config.h"
#include "daemon/config_test_util.h"
#include "mig/catalog.h"
#include "planner/planner.h"
#include "testing/status_matchers.h"

namespace migd::daemon {
namespace {

using ::migd::daemon::testing::ErrorOf;
using ::migd::daemon::testing::Parse;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

// The `planner:` section of an empty file (every key at its default).
PlannerConfig Defaults() {
  StatusOr<Config> c = Parse("");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->planner : PlannerConfig{};
}

TEST(PlannerConfigTest, DefaultsAreTheValuePolicyCountAndFivePercent) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse(""));
  EXPECT_EQ(c.planner.policy, "value");
  EXPECT_EQ(c.planner.objective, "count");
  EXPECT_EQ(c.planner.drift_threshold, "0.05");
  MIGD_ASSERT_OK_AND_ASSIGN(planner::ValueOptions o, ValueOptionsOf(c.planner));
  EXPECT_EQ(o.objective, planner::Objective::kCount);
  EXPECT_DOUBLE_EQ(o.drift_threshold, 0.05);
}

// The file's defaults are ValueOptions' own, so an empty `planner:` section
// behaves as the service did before these keys existed.
TEST(PlannerConfigTest, DefaultsAreValueOptionsDefaults) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse(""));
  EXPECT_EQ(c.planner.multi_gpu, "tie-break");
  EXPECT_EQ(c.planner.half_life_arrivals, "2000");
  EXPECT_EQ(c.planner.min_arrivals, "50");
  EXPECT_EQ(c.planner.reuse_margin, "auto");
  MIGD_ASSERT_OK_AND_ASSIGN(planner::ReuseMargins margin, ReuseMarginOf(c.planner));
  MIGD_ASSERT_OK_AND_ASSIGN(planner::ReuseMargins automatic, planner::ParseReuseMargin("auto"));
  EXPECT_EQ(margin, automatic);
  MIGD_ASSERT_OK_AND_ASSIGN(planner::ValueOptions o, ValueOptionsOf(c.planner));
  const planner::ValueOptions d;
  EXPECT_EQ(o.objective, d.objective);
  EXPECT_EQ(o.multi_gpu, d.multi_gpu);
  EXPECT_EQ(o.drift_threshold, d.drift_threshold);
  EXPECT_EQ(o.half_life_arrivals, d.half_life_arrivals);
  EXPECT_EQ(o.min_arrivals, d.min_arrivals);
  EXPECT_EQ(o.solve.tolerance, d.solve.tolerance);
  EXPECT_EQ(o.solve.max_iterations, d.solve.max_iterations);
  EXPECT_EQ(o.solve.max_states, d.solve.max_states);
}

TEST(PlannerConfigTest, EveryKnobIsParsed) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c,
                            Parse("planner: {policy: cost, objective: slices, driftThreshold: 0.2, "
                                  "multiGpu: separable, halfLifeArrivals: 500.5, minArrivals: 7}"));
  EXPECT_EQ(c.planner.policy, "cost");
  MIGD_ASSERT_OK_AND_ASSIGN(planner::ValueOptions o, ValueOptionsOf(c.planner));
  EXPECT_EQ(o.objective, planner::Objective::kSliceWeighted);
  EXPECT_DOUBLE_EQ(o.drift_threshold, 0.2);
  EXPECT_EQ(o.multi_gpu, planner::MultiGpuValues::kSeparable);
  EXPECT_DOUBLE_EQ(o.half_life_arrivals, 500.5);
  EXPECT_EQ(o.min_arrivals, 7);
}

TEST(PlannerConfigTest, MultiGpuTieBreakIsParsed) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse("planner: {multiGpu: tie-break}"));
  MIGD_ASSERT_OK_AND_ASSIGN(planner::ValueOptions o, ValueOptionsOf(c.planner));
  EXPECT_EQ(o.multi_gpu, planner::MultiGpuValues::kTieBreak);
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

TEST(PlannerConfigTest, ReuseMarginIsParsed) {
  for (const auto& [text, want] : std::vector<std::pair<const char*, planner::ReuseMargins>>{
           {"off", {}},
           {"0", {0.0, 0.0}},
           {"0.05", {0.05, 0.05}},
           {"1000", {1000.0, 1000.0}},
           {"auto", {0.0, planner::kAutoReuseMarginSeveralGpus}}}) {
    MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse(std::string("planner: {reuseMargin: ") + text + "}"));
    MIGD_ASSERT_OK_AND_ASSIGN(planner::ReuseMargins m, ReuseMarginOf(c.planner));
    EXPECT_EQ(m, want) << text;
  }
}

TEST(PlannerConfigTest, BadReuseMarginIsAConfigError) {
  for (const char* bad : {"-0.1", "1000.5", "nan", "inf", "some", "AUTO", "[0.1]"}) {
    const std::string yaml = std::string("planner: {reuseMargin: ") + bad + "}";
    EXPECT_THAT(ErrorOf(yaml), HasSubstr("planner.reuseMargin")) << bad;
  }
  EXPECT_THAT(ErrorOf("planner: {reuseMargin: -1}"),
              HasSubstr("\"-1\" is not a reuse margin (use auto, off or a number from 0 to 1000)"));
  PlannerConfig c = Defaults();
  c.reuse_margin = "2000";  // not through validation
  EXPECT_THAT(ReuseMarginOf(c).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("planner.reuseMargin: \"2000\"")));
}

TEST(PlannerConfigTest, BadMultiGpuIsAConfigError) {
  EXPECT_EQ(ErrorOf("planner: {multiGpu: tieBreak}"),
            "config migd.yaml: planner.multiGpu: \"tieBreak\" is not a multi-GPU value mode "
            "(use tie-break or separable)");
  EXPECT_THAT(ErrorOf("planner: {multiGpu: [separable]}"), HasSubstr("planner.multiGpu"));
}

TEST(PlannerConfigTest, BadHalfLifeArrivalsIsAConfigError) {
  for (const char* bad :
       {"0", "0.5", "-10", "1000000001", "1e10", "nan", "inf", "-inf", "lots", "\"\"", "[2000]"}) {
    const std::string yaml = std::string("planner: {halfLifeArrivals: ") + bad + "}";
    EXPECT_THAT(ErrorOf(yaml), HasSubstr("planner.halfLifeArrivals")) << bad;
  }
  EXPECT_EQ(ErrorOf("planner: {halfLifeArrivals: 0}"),
            "config migd.yaml: planner.halfLifeArrivals: \"0\" is not a half-life in requests "
            "(use a number from 1 to 1000000000, e.g. 2000)");
  EXPECT_TRUE(Parse("planner: {halfLifeArrivals: 1}").ok());
  EXPECT_TRUE(Parse("planner: {halfLifeArrivals: 1000000000}").ok());
  EXPECT_TRUE(Parse("planner: {halfLifeArrivals: 1e3}").ok());
}

TEST(PlannerConfigTest, BadMinArrivalsIsAConfigError) {
  for (const char* bad : {"0", "-1", "1000001", "2.5", "1e3", "nan", "fifty", "\"\"", "[50]"}) {
    const std::string yaml = std::string("planner: {minArrivals: ") + bad + "}";
    EXPECT_THAT(ErrorOf(yaml), HasSubstr("planner.minArrivals")) << bad;
  }
  EXPECT_EQ(ErrorOf("planner: {minArrivals: 0}"),
            "config migd.yaml: planner.minArrivals: \"0\" is not a number of requests (use a "
            "whole number from 1 to 1000000, e.g. 50)");
  EXPECT_TRUE(Parse("planner: {minArrivals: 1}").ok());
  EXPECT_TRUE(Parse("planner: {minArrivals: 1000000}").ok());
}

TEST(PlannerWiringTest, CostPolicyBuildsNoService) {
  PlannerConfig c = Defaults();
  c.policy = "cost";
  MIGD_ASSERT_OK_AND_ASSIGN(auto service,
                            MakeValueService(c, std::make_unique<planner::ManualExecutor>()));
  EXPECT_EQ(service, nullptr);
}

TEST(PlannerWiringTest, UnvalidatedValuesAreRefusedNamingTheKey) {
  auto make = [](void (*edit)(PlannerConfig&)) {
    PlannerConfig c = Defaults();
    edit(c);
    return MakeValueService(c, std::make_unique<planner::ManualExecutor>()).status();
  };
  EXPECT_THAT(make([](PlannerConfig& c) { c.policy = "x"; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("planner.policy")));
  EXPECT_THAT(make([](PlannerConfig& c) { c.objective = "x"; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("planner.objective")));
  EXPECT_THAT(make([](PlannerConfig& c) { c.drift_threshold = "9"; }),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("planner.driftThreshold: \"9\" is not a drift threshold")));
  EXPECT_THAT(make([](PlannerConfig& c) { c.multi_gpu = "x"; }),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("planner.multiGpu: \"x\" is not a multi-GPU value mode (use "
                                 "tie-break or separable)")));
  EXPECT_THAT(make([](PlannerConfig& c) { c.half_life_arrivals = "inf"; }),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("planner.halfLifeArrivals: \"inf\" is not a half-life")));
  EXPECT_THAT(make([](PlannerConfig& c) { c.min_arrivals = "0"; }),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("planner.minArrivals: \"0\" is not a number of requests")));
}

// The configured options reach the service the daemon builds.
TEST(PlannerWiringTest, TheServiceGetsTheConfiguredOptions) {
  PlannerConfig c = Defaults();
  c.multi_gpu = "separable";
  c.half_life_arrivals = "300";
  c.min_arrivals = "4";
  MIGD_ASSERT_OK_AND_ASSIGN(auto service,
                            MakeValueService(c, std::make_unique<planner::ManualExecutor>()));
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->options().multi_gpu, planner::MultiGpuValues::kSeparable);
  EXPECT_DOUBLE_EQ(service->options().half_life_arrivals, 300);
  EXPECT_EQ(service->options().min_arrivals, 4);
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
  const PlannerConfig c = Defaults();
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
  service->Stop();                                // idempotent
  EXPECT_EQ(service->counters().solves, 1u);
  EXPECT_NE(service->Values(*h100, 0), nullptr) << "the last values keep serving";
}

}  // namespace
}  // namespace migd::daemon
