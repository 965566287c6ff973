// The planner under the value policy: choices by value, the safety rules and
// searches unchanged, the cost order until values exist, and the ranking /
// explanation API (RankPlacements, ExplainChoices).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "planner/plan_json.h"
#include "planner/planner.h"
#include "planner/planner_test_util.h"
#include "planner/search.h"
#include "planner/solve_executor.h"
#include "planner/value_service.h"
#include "testing/status_matchers.h"

namespace migd::planner {
namespace {

using ::migd::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::SizeIs;

using namespace ::migd::planner::test;  // NOLINT(google-build-using-namespace): test builders

const DemandWeights kUniform = {
    {"1g.10gb", 1}, {"2g.20gb", 1}, {"3g.40gb", 1}, {"4g.40gb", 1}, {"7g.80gb", 1}};

// A planner whose values are solved for `mix` at `load` before it is used.
struct ValuePlanner {
  explicit ValuePlanner(const DemandWeights& mix, double load = 0.9,
                        Objective objective = Objective::kCount,
                        const std::vector<const char*>& models = {"h100-80gb"},
                        std::optional<double> reuse_margin = std::nullopt,
                        std::optional<double> reuse_margin_several_gpus = std::nullopt) {
    auto e = std::make_unique<ManualExecutor>();
    executor = e.get();
    ValueOptions o;
    o.objective = objective;
    service = std::make_shared<ValueService>(o, std::move(e));
    planner =
        std::make_unique<Planner>(PlannerOptions{service, reuse_margin, reuse_margin_several_gpus});
    std::vector<const mig::GpuModel*> ms;
    for (const char* m : models) ms.push_back(&Model(m));
    service->Prime(mix, load, ms);
    executor->RunPending();
  }
  std::shared_ptr<const ValueTable> Table(const char* model = "h100-80gb") {
    return service->Values(Model(model), 0);
  }
  ManualExecutor* executor;
  std::shared_ptr<ValueService> service;
  std::unique_ptr<Planner> planner;
};

size_t Index(const char* name) {
  const mig::GpuModel& m = Model("h100-80gb");
  return static_cast<size_t>(m.FindProfileByName(name) - m.gi_profiles.data());
}

TEST(ValuePolicyTest, CostOrderUntilTheFirstSolve) {
  auto e = std::make_unique<ManualExecutor>();
  auto service = std::make_shared<ValueService>(ValueOptions{}, std::move(e));
  Planner with(PlannerOptions{service, std::nullopt, std::nullopt});
  Planner without;
  const PlanInput in =
      Input({Gpu(0, "h100-80gb", {Active("3g.40gb", "0:4", "a")})}, {Any("1g.10gb")}, kUniform);
  MIGD_ASSERT_OK_AND_ASSIGN(Plan a, with.MakePlan(in));
  MIGD_ASSERT_OK_AND_ASSIGN(Plan b, without.MakePlan(in));
  EXPECT_FALSE(a.stats.value_policy);
  EXPECT_EQ(PlanToJson(a), PlanToJson(b));
  EXPECT_EQ(with.counters().cost_order_plans, 1u);
}

// One GPU: the placement chosen maximises h of the next state (B11's rule).
TEST(ValuePolicyTest, OnOneGpuTheChoiceMaximisesTheValueOfTheNextState) {
  ValuePlanner vp(kUniform);
  std::shared_ptr<const ValueTable> t = vp.Table();
  ASSERT_NE(t, nullptr);
  const mig::GpuModel& m = Model("h100-80gb");
  for (const char* occupied : {"", "3g.40gb@4", "2g.20gb@0", "1g.10gb@6"}) {
    GpuLayout g = Gpu(0, "h100-80gb");
    uint64_t set = 0;
    if (*occupied != '\0') {
      const std::string s(occupied);
      const std::string profile = s.substr(0, s.find('@'));
      const uint32_t start = static_cast<uint32_t>(std::stoi(s.substr(s.find('@') + 1)));
      const mig::GiProfile* p = m.FindProfileByName(profile);
      g.occupants.push_back(
          Occupant{profile, {start, p->placement_size()}, OccupantState::kActive, "a", 0});
      set |= uint64_t{1} << t->SlotOf(static_cast<size_t>(p - m.gi_profiles.data()), start);
    }
    const int state = t->StateOf(set);
    for (const char* profile : {"1g.10gb", "2g.20gb", "3g.40gb"}) {
      StatusOr<Plan> plan = vp.planner->MakePlan(Input({g}, {Any(profile)}));
      if (!plan.ok()) continue;
      EXPECT_TRUE(plan->stats.value_policy);
      double best = -1e300;
      for (const mig::Placement& pl : m.FindProfileByName(profile)->placements) {
        const int next = t->Add(state, t->SlotOf(Index(profile), pl.start));
        if (next >= 0) best = std::max(best, t->Value(next));
      }
      const int chosen =
          t->Add(state, t->SlotOf(Index(profile), plan->instances[0].placement.start));
      EXPECT_EQ(t->Value(chosen), best) << occupied << " + " << profile;
    }
  }
}

// Idle instances count as free for value; at equal value the Idle one is
// reused (no create).
TEST(ValuePolicyTest, ReuseWinsTiesInValue) {
  ValuePlanner vp(kUniform);
  // The value-best 1g on an empty GPU is at 6 (ValueTableTest): an Idle 1g
  // there is handed out.
  const PlanInput in =
      Input({Gpu(0, "h100-80gb", {Idle("1g.10gb", "6:1", "i6", 1)})}, {Any("1g.10gb")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, vp.planner->MakePlan(in));
  EXPECT_EQ(plan.instances[0].stage, Stage::kReuse);
  EXPECT_EQ(plan.instances[0].reuse_key, "i6");
  EXPECT_EQ(plan.score.creates, 0);
  // An Idle 1g on a worse spot is not reused: a create goes to the best one.
  const PlanInput worse =
      Input({Gpu(0, "h100-80gb", {Idle("1g.10gb", "2:1", "i2", 1)})}, {Any("1g.10gb")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan p2, vp.planner->MakePlan(worse));
  EXPECT_EQ(p2.instances[0].stage, Stage::kFree);
  EXPECT_EQ(p2.instances[0].placement, P("6:1"));
}

// planner.reuseMargin: an Idle 1g on a worse spot is reused when the value it
// gives up against the best create (a 1g at 6) is within the margin, and not
// when the margin is a hair smaller; RankPlacements puts MakePlan's choice
// first either way.
TEST(ValuePolicyTest, ReuseMarginKeepsAnIdleInstanceWhoseValueLossIsWithinIt) {
  std::shared_ptr<const ValueTable> t = ValuePlanner(kUniform).Table();
  ASSERT_NE(t, nullptr);
  auto q = [](double h) { return std::llround(h * static_cast<double>(kValueScale)); };
  const int at2 = t->StateOf(uint64_t{1} << t->SlotOf(Index("1g.10gb"), 2));
  const int at6 = t->StateOf(uint64_t{1} << t->SlotOf(Index("1g.10gb"), 6));
  const int64_t gap = q(t->Value(at6)) - q(t->Value(at2));  // reuse at 2 gives up this much
  ASSERT_GT(gap, 0);
  const double units = static_cast<double>(gap) / static_cast<double>(kValueScale);
  const PlanInput in =
      Input({Gpu(0, "h100-80gb", {Idle("1g.10gb", "2:1", "i2", 1)})}, {Any("1g.10gb")});
  for (const double margin : {units * 1.01, units * 0.99}) {
    const bool reused = margin > units;
    ValuePlanner vp(kUniform, 0.9, Objective::kCount, {"h100-80gb"}, margin);
    MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, vp.planner->MakePlan(in));
    EXPECT_TRUE(plan.stats.value_policy);
    EXPECT_EQ(plan.instances[0].stage, reused ? Stage::kReuse : Stage::kFree) << margin;
    EXPECT_EQ(plan.instances[0].placement, reused ? P("2:1") : P("6:1")) << margin;
    EXPECT_EQ(plan.score.creates, reused ? 0 : 1) << margin;
    EXPECT_EQ(plan.stats.margin_reuses, reused ? 1u : 0u) << margin;
    MIGD_ASSERT_OK_AND_ASSIGN(std::vector<RankedCandidate> ranked,
                              vp.planner->RankPlacements(in, "1g.10gb"));
    ASSERT_FALSE(ranked.empty());
    EXPECT_EQ(ranked.front().stage, plan.instances[0].stage) << margin;
    EXPECT_EQ(ranked.front().placement, plan.instances[0].placement) << margin;
  }
}

// Without a margin, the cost order decides (create < reuse, a tie to the
// reuse). With one, only the node term leads; the pinned loss, opened GPUs
// and the alignment terms do not count against a reuse, and the value
// decides within the margin.
TEST(ValuePolicyTest, UnderAReuseMarginOnlyTheNodeTermAndTheValueDecide) {
  using internal_planner::CreateBeatsReuse;
  PlanScore reuse;
  reuse.value_loss = 100;
  PlanScore create;
  create.creates = 1;
  create.value_loss = 40;
  EXPECT_TRUE(CreateBeatsReuse(create, reuse, std::nullopt));
  EXPECT_TRUE(CreateBeatsReuse(create, reuse, 0));
  EXPECT_TRUE(CreateBeatsReuse(create, reuse, 59));
  EXPECT_FALSE(CreateBeatsReuse(create, reuse, 60));  // 40 + 60 is not below 100
  PlanScore tie = create;
  tie.value_loss = 100;
  EXPECT_FALSE(CreateBeatsReuse(tie, reuse, std::nullopt));  // a tie goes to the reuse
  EXPECT_FALSE(CreateBeatsReuse(tie, reuse, 0));
  for (int64_t PlanScore::*lead : {&PlanScore::opened_gpus, &PlanScore::pin_loss, &PlanScore::loss,
                                   &PlanScore::uniform_loss}) {
    PlanScore worse_reuse = reuse;
    worse_reuse.*lead = 1;
    PlanScore worse_create = create;
    worse_create.*lead = 1;
    EXPECT_EQ(CreateBeatsReuse(create, worse_reuse, std::nullopt), true);
    EXPECT_FALSE(CreateBeatsReuse(create, worse_reuse, 60)) << "only the value counts";
    EXPECT_TRUE(CreateBeatsReuse(worse_create, reuse, 0)) << "only the value counts";
  }
  PlanScore keeps_more = create;
  keeps_more.value_loss = 1000;
  keeps_more.node_loss = -1;
  EXPECT_TRUE(CreateBeatsReuse(keeps_more, reuse, int64_t{1} << 40));
  PlanScore loses_a_profile = create;
  loses_a_profile.value_loss = -1000;
  loses_a_profile.node_loss = 1;
  EXPECT_FALSE(CreateBeatsReuse(loses_a_profile, reuse, 0));
}

// Two GPUs (planner.multiGpu tie-break: the cost order leads). Without a
// margin the cost order prefers creating a 1g at 1:4:1, which reclaims the
// Idle 2g under it, over handing out the Idle 1g at 1:0:1; with margin 0
// the values decide (no less value given up by the create) and the Idle 1g
// is reused: no destroy, no create.
// One 1g.10gb asked of two H100s full of Idle instances: GPU 0 holds Idle
// 2g, 2g, 3g; GPU 1 an Active 1g at 6:1 and Idle 2g, 1g (key "e" at 0:1), 2g
// and 1g. The pinned loss prefers a create at 4:1 that reclaims "f".
PlanInput TwoGpusWithIdle1gsOnTheSecond() {
  return Input({Gpu(0, "h100-80gb",
                    {Idle("2g.20gb", "0:2", "a", 1), Idle("2g.20gb", "2:2", "b", 1),
                     Idle("3g.40gb", "4:4", "c", 1)}),
                Gpu(1, "h100-80gb",
                    {Active("1g.10gb", "6:1", "x"), Idle("2g.20gb", "2:2", "d", 1),
                     Idle("1g.10gb", "0:1", "e", 1), Idle("2g.20gb", "4:2", "f", 1),
                     Idle("1g.10gb", "1:1", "g", 1)})},
               {Any("1g.10gb")});
}

TEST(ValuePolicyTest, OnSeveralGpusAReuseMarginKeepsTheIdleInstanceThePinnedLossPassesOver) {
  const DemandWeights mix = {{"1g.10gb", 6}, {"2g.20gb", 3}, {"3g.40gb", 1}};
  const PlanInput in = TwoGpusWithIdle1gsOnTheSecond();
  ValuePlanner off(mix, 0.7);
  MIGD_ASSERT_OK_AND_ASSIGN(Plan a, off.planner->MakePlan(in));
  EXPECT_TRUE(a.stats.value_policy);
  EXPECT_THAT(Where(a), ElementsAre("1:1g.10gb@4:1"));
  EXPECT_EQ(a.instances[0].stage, Stage::kReclaim);
  EXPECT_THAT(Keys(a.instances[0].reclaim), ElementsAre("f"));
  EXPECT_EQ(a.stats.margin_reuses, 0u);
  ValuePlanner zero(mix, 0.7, Objective::kCount, {"h100-80gb"}, 0.0);
  MIGD_ASSERT_OK_AND_ASSIGN(Plan b, zero.planner->MakePlan(in));
  ASSERT_TRUE(PlanIsLegal(in, b));
  EXPECT_EQ(b.instances[0].stage, Stage::kReuse);
  EXPECT_EQ(b.instances[0].reuse_key, "e");
  EXPECT_EQ(b.score.creates, 0);
  EXPECT_EQ(b.score.destroyed_instances, 0);
  EXPECT_EQ(b.stats.margin_reuses, 1u);  // the cost order would have created
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<RankedCandidate> ranked,
                            zero.planner->RankPlacements(in, "1g.10gb"));
  ASSERT_FALSE(ranked.empty());
  EXPECT_EQ(ranked.front().reuse_key, "e");
}

// reuse_margin_several_gpus decides on calls over several GPUs, reuse_margin
// on one: the two-GPU case above reuses under a several-GPU margin of 0 with
// no one-GPU margin, and a one-GPU call ignores a several-GPU margin.
TEST(ValuePolicyTest, TheSeveralGpuMarginDecidesOnlyCallsOverSeveralGpus) {
  const DemandWeights mix = {{"1g.10gb", 6}, {"2g.20gb", 3}, {"3g.40gb", 1}};
  const PlanInput two = TwoGpusWithIdle1gsOnTheSecond();
  ValuePlanner several(mix, 0.7, Objective::kCount, {"h100-80gb"}, std::nullopt, 0.0);
  MIGD_ASSERT_OK_AND_ASSIGN(Plan a, several.planner->MakePlan(two));
  EXPECT_EQ(a.instances[0].stage, Stage::kReuse);
  EXPECT_EQ(a.instances[0].reuse_key, "e");
  // One GPU: the values would create at 0:1 beside an Idle 1g at 6:1
  // (docs/planner.md's worked example); a margin of 1000 for several GPUs
  // does not reach this call, the same margin for one GPU does.
  const DemandWeights worked = {{"1g.10gb", 4}, {"2g.20gb", 2}, {"3g.40gb", 1}};
  const PlanInput one =
      Input({Gpu(0, "h100-80gb", {Idle("1g.10gb", "6:1", "i6", 1)})}, {Any("1g.10gb")});
  ValuePlanner only_several(worked, 0.9, Objective::kCount, {"h100-80gb"}, std::nullopt, 1000.0);
  MIGD_ASSERT_OK_AND_ASSIGN(Plan b, only_several.planner->MakePlan(one));
  EXPECT_EQ(b.instances[0].stage, Stage::kFree);
  EXPECT_EQ(b.instances[0].placement, (mig::Placement{0, 1}));
  ValuePlanner only_one(worked, 0.9, Objective::kCount, {"h100-80gb"}, 1000.0, std::nullopt);
  MIGD_ASSERT_OK_AND_ASSIGN(Plan c, only_one.planner->MakePlan(one));
  EXPECT_EQ(c.instances[0].stage, Stage::kReuse);
  EXPECT_EQ(c.instances[0].reuse_key, "i6");
}

// A random walk of allocations and releases on two GPUs under margin 0:
// every plan is legal, and none destroys an Idle instance to create the same
// profile at the same placement (search.h, CreateBeatsReuse's invariant).
TEST(ValuePolicyTest, UnderAReuseMarginNoPlanRecreatesAnIdleInstance) {
  ValuePlanner vp({{"1g.10gb", 6}, {"2g.20gb", 3}, {"3g.40gb", 1}}, 0.7, Objective::kCount,
                  {"h100-80gb"}, 0.0);
  const char* profiles[] = {"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb",
                            "1g.10gb", "2g.20gb", "2g.20gb", "2g.20gb", "3g.40gb"};
  std::mt19937 rng(7);
  PlanInput in = Input({Gpu(0, "h100-80gb"), Gpu(1, "h100-80gb")}, {Any("1g.10gb")});
  int plans = 0, reuses = 0;
  for (int step = 0; step < 3000; ++step) {
    std::vector<Occupant*> active;
    for (GpuLayout& g : in.gpus) {
      for (Occupant& o : g.occupants) {
        if (o.state == OccupantState::kActive) active.push_back(&o);
      }
    }
    if (!active.empty() && rng() % 2 == 0) {
      Occupant* o = active[rng() % active.size()];
      o->state = OccupantState::kIdle;
      o->last_used = step;
      continue;
    }
    in.request = {Any(profiles[rng() % 10])};
    StatusOr<Plan> plan = vp.planner->MakePlan(in);
    if (!plan.ok()) continue;
    ++plans;
    ASSERT_TRUE(PlanIsLegal(in, *plan)) << "step " << step;
    for (const InstancePlan& ip : plan->instances) {
      reuses += ip.stage == Stage::kReuse;
      for (const ReclaimedInstance& r : ip.reclaim) {
        ASSERT_FALSE(ip.stage != Stage::kReuse && r.gpu == ip.gpu && r.profile == ip.profile &&
                     r.placement == ip.placement)
            << "step " << step << ": destroys and re-creates " << r.key;
      }
    }
    ApplyPlan(in, *plan, "s" + std::to_string(step) + "-");
  }
  EXPECT_GT(plans, 1000);
  EXPECT_GT(reuses, plans / 2);
}

// Without values (before the first solve) the margin changes nothing.
TEST(ValuePolicyTest, ReuseMarginIsIgnoredUnderTheCostOrder) {
  auto e = std::make_unique<ManualExecutor>();
  auto service = std::make_shared<ValueService>(ValueOptions{}, std::move(e));
  Planner with(PlannerOptions{service, 5.0, std::nullopt});
  Planner without;
  const PlanInput in =
      Input({Gpu(0, "h100-80gb", {Idle("1g.10gb", "2:1", "i2", 1), Active("3g.40gb", "4:4", "a")})},
            {Any("1g.10gb")}, kUniform);
  MIGD_ASSERT_OK_AND_ASSIGN(Plan a, with.MakePlan(in));
  MIGD_ASSERT_OK_AND_ASSIGN(Plan b, without.MakePlan(in));
  EXPECT_FALSE(a.stats.value_policy);
  EXPECT_EQ(PlanToJson(a), PlanToJson(b));
}

TEST(ValuePolicyTest, ReuseMarginTextIsAutoOffOrANumberInRange) {
  MIGD_ASSERT_OK_AND_ASSIGN(ReuseMargins automatic, ParseReuseMargin("auto"));
  EXPECT_EQ(automatic, (ReuseMargins{0.0, kAutoReuseMarginSeveralGpus}));
  MIGD_ASSERT_OK_AND_ASSIGN(ReuseMargins off, ParseReuseMargin("off"));
  EXPECT_EQ(off, ReuseMargins{});
  MIGD_ASSERT_OK_AND_ASSIGN(ReuseMargins m, ParseReuseMargin("0.25"));
  EXPECT_EQ(m, (ReuseMargins{0.25, 0.25}));
  MIGD_ASSERT_OK_AND_ASSIGN(ReuseMargins zero, ParseReuseMargin("0"));
  EXPECT_EQ(zero, (ReuseMargins{0.0, 0.0}));
  for (const char* bad : {"", "Off", "Auto", "0.1x", "-1", "1001", "nan", "inf"}) {
    StatusOr<ReuseMargins> r = ParseReuseMargin(bad);
    EXPECT_TRUE(IsInvalidArgument(r.status())) << bad;
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("reuse margin")) << bad;
  }
}

TEST(ValuePolicyTest, ReuseMarginOutOfRangeIsRefused) {
  const PlanInput in = Input({Gpu(0, "h100-80gb")}, {Any("1g.10gb")}, kUniform);
  for (const double bad :
       {-0.5, kMaxReuseMargin * 2, std::nan(""), std::numeric_limits<double>::infinity()}) {
    Planner p(PlannerOptions{nullptr, bad, std::nullopt});
    StatusOr<Plan> plan = p.MakePlan(in);
    EXPECT_TRUE(IsInvalidArgument(plan.status())) << bad;
    EXPECT_THAT(plan.status().message(), ::testing::HasSubstr("reuse margin")) << bad;
    EXPECT_TRUE(IsInvalidArgument(p.RankPlacements(in, "1g.10gb").status())) << bad;
    EXPECT_EQ(p.counters().invalid, 1u);
    // A bad several-GPU margin is refused on every call, one GPU too.
    Planner q(PlannerOptions{nullptr, std::nullopt, bad});
    EXPECT_TRUE(IsInvalidArgument(q.MakePlan(in).status())) << bad;
  }
}

TEST(ValuePolicyTest, ExactPlacementsAndOccupantsAreHonoured) {
  ValuePlanner vp(kUniform);
  const PlanInput in = Input({Gpu(0, "h100-80gb",
                                  {Active("1g.10gb", "0:1", "a"), Foreign("1g.10gb", "3:1"),
                                   Idle("1g.10gb", "5:1", "i", 1)})},
                             {At("3g.40gb", 0, "4:4")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, vp.planner->MakePlan(in));
  EXPECT_TRUE(plan.stats.value_policy);
  EXPECT_THAT(Where(plan), ElementsAre("0:3g.40gb@4:4"));
  ASSERT_TRUE(PlanIsLegal(in, plan));
  EXPECT_THAT(Keys(plan.instances[0].reclaim), ElementsAre("i"));
}

// Reclaim is chosen by the same values: a 2g fits only after reclaiming two
// Idle 1g's, at 0:2, 2:2 or 4:2 (equal cost order: 2 slices, 2 instances);
// the planner takes the start whose next pinned state has the largest h (by
// the table, Idle counted as free) and reclaims exactly the Idle pair under it.
TEST(ValuePolicyTest, ReclaimChoiceUsesTheValues) {
  ValuePlanner vp(kUniform);
  std::shared_ptr<const ValueTable> t = vp.Table();
  ASSERT_NE(t, nullptr);
  std::vector<Occupant> occ = {Active("1g.10gb", "6:1", "a")};
  for (uint32_t s = 0; s < 6; ++s) {
    occ.push_back(Idle("1g.10gb", std::to_string(s) + ":1", "i" + std::to_string(s), s));
  }
  const PlanInput in = Input({Gpu(0, "h100-80gb", occ)}, {Any("2g.20gb")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, vp.planner->MakePlan(in));
  ASSERT_TRUE(PlanIsLegal(in, plan));
  EXPECT_TRUE(plan.stats.value_policy);
  EXPECT_EQ(plan.instances[0].stage, Stage::kReclaim);
  const int pinned = t->StateOf(uint64_t{1} << t->SlotOf(Index("1g.10gb"), 6));
  ASSERT_GE(pinned, 0);
  uint32_t best_start = 0;
  double best = -1e300;
  for (uint32_t start : {0u, 2u, 4u}) {
    const double h = t->Value(t->Add(pinned, t->SlotOf(Index("2g.20gb"), start)));
    if (h > best) {
      best = h;
      best_start = start;
    }
  }
  EXPECT_EQ(plan.instances[0].placement.start, best_start);
  EXPECT_THAT(Keys(plan.instances[0].reclaim),
              ElementsAre("i" + std::to_string(best_start), "i" + std::to_string(best_start + 1)));
}

// Values are summed over GPUs: a 1g goes where it costs the node least, and
// the plan's value_loss is that GPU's loss.
TEST(ValuePolicyTest, ValueLossIsSummedOverGpus) {
  ValuePlanner vp(kUniform);
  std::shared_ptr<const ValueTable> t = vp.Table();
  const PlanInput in =
      Input({Gpu(0, "h100-80gb"), Gpu(1, "h100-80gb", {Active("4g.40gb", "0:4", "a")})},
            {Any("1g.10gb"), Any("1g.10gb")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, vp.planner->MakePlan(in));
  ASSERT_TRUE(PlanIsLegal(in, plan));
  EXPECT_TRUE(plan.stats.value_policy);
  EXPECT_GT(plan.score.value_loss, 0);
  EXPECT_EQ(plan.score.node_loss, 0);  // the values replace the node term
  // Recompute the loss from the table: Σ_g h(before) − h(after).
  int64_t expected = 0;
  for (uint32_t g = 0; g < 2; ++g) {
    uint64_t before = 0;
    if (g == 1) before |= uint64_t{1} << t->SlotOf(Index("4g.40gb"), 0);
    uint64_t after = before;
    for (const InstancePlan& ip : plan.instances) {
      if (ip.gpu == GpuIndex(g))
        after |= uint64_t{1} << t->SlotOf(Index("1g.10gb"), ip.placement.start);
    }
    auto q = [](double h) { return std::llround(h * static_cast<double>(kValueScale)); };
    expected += q(t->Value(t->StateOf(before))) - q(t->Value(t->StateOf(after)));
  }
  EXPECT_EQ(plan.score.value_loss, expected);
}

TEST(ValuePolicyTest, AProfileOutsideTheTableFallsBackAndIsSolvedFor) {
  ValuePlanner vp({{"1g.10gb", 1}});
  const PlanInput in = Input({Gpu(0, "h100-80gb")}, {Any("2g.20gb")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, vp.planner->MakePlan(in));
  EXPECT_FALSE(plan.stats.value_policy);
  EXPECT_EQ(vp.executor->RunPending(), 1u);
  MIGD_ASSERT_OK_AND_ASSIGN(Plan again, vp.planner->MakePlan(in));
  EXPECT_TRUE(again.stats.value_policy);
}

TEST(ValuePolicyTest, SameInputAndValuesGiveTheSameBytes) {
  ValuePlanner vp(kUniform);
  PlanInput in =
      Input({Gpu(1, "h100-80gb", {Active("2g.20gb", "2:2", "b"), Idle("1g.10gb", "6:1", "c", 4)}),
             Gpu(0, "h100-80gb", {Active("1g.10gb", "0:1", "a")})},
            {Any("1g.10gb"), Any("3g.40gb")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan a, vp.planner->MakePlan(in));
  std::reverse(in.gpus.begin(), in.gpus.end());
  MIGD_ASSERT_OK_AND_ASSIGN(Plan b, vp.planner->MakePlan(in));
  EXPECT_EQ(PlanToJson(a), PlanToJson(b));
  EXPECT_EQ(a.stats.value_version, vp.Table()->stats().serial);
}

// The ranking's first candidate is what MakePlan chooses, under both
// policies, on random layouts.
TEST(RankPlacementsTest, FirstCandidateIsMakePlansChoice) {
  const mig::GpuModel& m = Model("h100-80gb");
  const std::vector<const mig::GiProfile*> profiles =
      mig::ProfilesOfVariants(m, {mig::Variant::kBase});
  const std::vector<mig::Layout> layouts = mig::EnumerateLayouts(m, profiles);
  ValuePlanner vp(kUniform);
  Planner plain;
  std::mt19937 rng(7);
  for (int iter = 0; iter < 150; ++iter) {
    PlanInput in;
    const uint32_t n = 1 + rng() % 4;
    int key = 0;
    for (uint32_t g = 0; g < n; ++g) {
      GpuLayout gl{GpuIndex(g), &m, {}};
      for (const mig::PlacedGi& gi : layouts[rng() % layouts.size()].instances()) {
        const uint32_t r = rng() % 4;
        if (r == 0) continue;
        gl.occupants.push_back(Occupant{
            gi.profile->name, gi.placement, r == 1 ? OccupantState::kIdle : OccupantState::kActive,
            "k" + std::to_string(key++), static_cast<int64_t>(rng() % 9)});
      }
      in.gpus.push_back(std::move(gl));
    }
    const std::string profile = profiles[rng() % profiles.size()]->name;
    in.request = {Any(profile)};
    in.demand = kUniform;
    for (Planner* p : {vp.planner.get(), &plain}) {
      StatusOr<Plan> plan = p->MakePlan(in);
      MIGD_ASSERT_OK_AND_ASSIGN(std::vector<RankedCandidate> ranked,
                                p->RankPlacements(in, profile));
      ASSERT_EQ(plan.ok(), !ranked.empty()) << PlanInputToJson(in);
      if (!plan.ok()) continue;
      const InstancePlan& ip = plan->instances[0];
      EXPECT_EQ(ranked[0].gpu, ip.gpu) << PlanInputToJson(in);
      EXPECT_EQ(ranked[0].placement, ip.placement);
      EXPECT_EQ(ranked[0].stage, ip.stage);
      EXPECT_EQ(ranked[0].reuse_key, ip.reuse_key);
      EXPECT_EQ(ranked[0].cost, plan->score);
      for (size_t i = 1; i < ranked.size(); ++i) EXPECT_FALSE(ranked[i].cost < ranked[i - 1].cost);
    }
  }
}

TEST(RankPlacementsTest, OneGpuAndIdleCandidates) {
  ValuePlanner vp(kUniform);
  const PlanInput in =
      Input({Gpu(0, "h100-80gb"), Gpu(1, "h100-80gb", {Idle("1g.10gb", "6:1", "i", 1)})}, {});
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<RankedCandidate> all,
                            vp.planner->RankPlacements(in, "1g.10gb"));
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<RankedCandidate> one,
                            vp.planner->RankPlacements(in, "1g.10gb", GpuIndex(1)));
  EXPECT_THAT(all, SizeIs(7 + 8));  // 7 creates on GPU 0; the Idle reuse and 7 creates on GPU 1
  EXPECT_THAT(one, SizeIs(8));
  for (const RankedCandidate& c : one) EXPECT_EQ(c.gpu, GpuIndex(1));
  EXPECT_EQ(one[0].stage, Stage::kReuse);  // the Idle 1g sits on the best spot
  EXPECT_EQ(one[0].reuse_key, "i");
  // Creating over the Idle 1g after reclaiming it is a candidate of its own,
  // ranked below reusing it (same value, a destroy and a create more).
  size_t reclaim = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    if (one[i].stage == Stage::kReclaim) reclaim = i;
  }
  ASSERT_GT(reclaim, 0u);
  EXPECT_EQ(one[reclaim].placement, P("6:1"));
  EXPECT_THAT(Keys(one[reclaim].reclaim), ElementsAre("i"));
  EXPECT_FALSE(vp.planner->RankPlacements(in, "9g.99gb").ok());
}

TEST(ExplainChoicesTest, ChosenAndNextBestPerInstance) {
  ValuePlanner vp(kUniform);
  const PlanInput in =
      Input({Gpu(0, "h100-80gb", {Active("3g.40gb", "0:4", "a")}), Gpu(1, "h100-80gb")},
            {Any("1g.10gb"), Any("2g.20gb")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, vp.planner->MakePlan(in));
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<InstanceChoice> why, vp.planner->ExplainChoices(in, plan));
  ASSERT_THAT(why, SizeIs(2));
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(why[i].chosen.gpu, plan.instances[i].gpu);
    EXPECT_EQ(why[i].chosen.placement, plan.instances[i].placement);
    ASSERT_TRUE(why[i].next_best.has_value());
    EXPECT_TRUE(why[i].next_best->gpu != why[i].chosen.gpu ||
                why[i].next_best->placement != why[i].chosen.placement);
    EXPECT_FALSE(why[i].next_best->cost < why[i].chosen.cost);
  }
  Plan wrong = plan;
  wrong.instances.pop_back();
  EXPECT_FALSE(vp.planner->ExplainChoices(in, wrong).ok());
}

}  // namespace
}  // namespace migd::planner
