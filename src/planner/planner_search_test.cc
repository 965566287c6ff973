// The joint (multi-instance) search: cases where the greedy stage fails or
// reclaims needlessly and the exhaustive search must find the layout, a
// brute-force cross-check of completeness on random inputs, and large
// requests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mig/layout.h"
#include "planner/plan_json.h"
#include "planner/planner.h"
#include "planner/planner_test_util.h"
#include "planner/solve_executor.h"
#include "planner/value_service.h"
#include "testing/status_matchers.h"

namespace migd::planner {
namespace {

using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using namespace ::migd::planner::test;  // NOLINT(google-build-using-namespace): test builders

TEST(PlannerSearchTest, GreedyFailsExhaustiveFindsTheLayout) {
  // Free on the H100: slices 2, 3, 6, 7. The GPU-pinned 1g is placed first
  // (most constrained) at its best-scored spot, 6 (it kills only 1g@6 and
  // 1g.20gb@6, whereas 2 or 3 would also kill 2g@2). That leaves the
  // double-memory 1g only 2:2, and the last 1g nothing. The only layout:
  // 1g.20gb@6, 1g@2, 1g@3.
  const PlanInput in =
      Input({Gpu(0, "h100-80gb", {Active("1g.20gb", "0:2", "a"), Active("2g.20gb", "4:2", "b")})},
            {Any("1g.20gb"), OnGpu("1g.10gb", 0), Any("1g.10gb")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, MakePlan(in));
  EXPECT_TRUE(PlanIsLegal(in, plan));
  EXPECT_EQ(plan.search, Search::kExhaustive);
  EXPECT_TRUE(plan.stats.greedy_failed);
  EXPECT_GT(plan.stats.exhaustive_options, 0u);
  EXPECT_GT(plan.stats.exhaustive_states, 0u);
  EXPECT_THAT(Where(plan), ElementsAre("0:1g.20gb@6:2", "0:1g.10gb@2:1", "0:1g.10gb@3:1"));
  EXPECT_EQ(plan.stage, Stage::kFree);
}

TEST(PlannerSearchTest, GreedyFailsAcrossGpus) {
  // RTX PRO 6000 (+me: one per GPU). The 2g goes first (largest) to its
  // best-scored spot, GPU 0's last half, which leaves both 1g+me for GPU 1.
  const PlanInput in = Input({Gpu(0, "rtx-pro-6000-blackwell", {Active("2g.48gb", "0:6", "a")}),
                              Gpu(1, "rtx-pro-6000-blackwell")},
                             {Any("1g.24gb+me"), Any("1g.24gb+me"), Any("2g.48gb")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, MakePlan(in));
  EXPECT_TRUE(PlanIsLegal(in, plan));
  EXPECT_TRUE(plan.stats.greedy_failed);
  EXPECT_THAT(Where(plan), ElementsAre("0:1g.24gb+me@6:3", "1:1g.24gb+me@6:3", "1:2g.48gb@0:6"));
}

TEST(PlannerSearchTest, ExhaustiveAvoidsANeedlessReclaim) {
  // As above on GPU 0, plus GPU 1 whose only space is under an Idle 3g: the
  // greedy stage succeeds by destroying it; the joint search finds the
  // layout that destroys nothing, and wins.
  const PlanInput in = Input(
      {Gpu(0, "h100-80gb", {Active("1g.20gb", "0:2", "a"), Active("2g.20gb", "4:2", "b")}),
       Gpu(1, "h100-80gb", {Active("4g.40gb", "0:4", "c"), Idle("3g.40gb", "4:4", "idle", 1)})},
      {Any("1g.20gb"), OnGpu("1g.10gb", 0), Any("1g.10gb")});
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, MakePlan(in));
  EXPECT_TRUE(PlanIsLegal(in, plan));
  EXPECT_EQ(plan.search, Search::kExhaustive);
  EXPECT_FALSE(plan.stats.greedy_failed);
  EXPECT_EQ(plan.stage, Stage::kFree);
  EXPECT_THAT(plan.AllReclaims(), ::testing::IsEmpty());
  EXPECT_THAT(Where(plan), ElementsAre("0:1g.20gb@6:2", "0:1g.10gb@2:1", "0:1g.10gb@3:1"));
}

TEST(PlannerSearchTest, LargeRequestsAcrossEightGpus) {
  std::vector<GpuLayout> gpus;
  for (uint32_t g = 0; g < 8; ++g) gpus.push_back(Gpu(g, "h100-80gb"));

  const std::vector<InstanceRequest> ones(56, Any("1g.10gb"));
  MIGD_ASSERT_OK_AND_ASSIGN(Plan full, MakePlan(Input(gpus, ones)));
  EXPECT_TRUE(PlanIsLegal(Input(gpus, ones), full));

  std::vector<InstanceRequest> too_many = ones;
  too_many.push_back(Any("1g.10gb"));
  EXPECT_THAT(MakePlan(Input(gpus, too_many)),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("not all together")));

  const std::vector<InstanceRequest> threes(16, Any("3g.40gb"));
  MIGD_ASSERT_OK_AND_ASSIGN(Plan sixteen, MakePlan(Input(gpus, threes)));
  EXPECT_TRUE(PlanIsLegal(Input(gpus, threes), sixteen));

  // 3g+3g fills a GPU's memory, so eight 1g more cannot fit anywhere even
  // though compute (8 x 7 = 56) would allow it: the search proves it.
  std::vector<InstanceRequest> mixed = threes;
  for (int i = 0; i < 8; ++i) mixed.push_back(Any("1g.10gb"));
  EXPECT_THAT(MakePlan(Input(gpus, mixed)),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("not all together")));

  // Mixed sizes that fit only as 4g+3g on four GPUs and 2g+2g+2g+1g on four.
  std::vector<InstanceRequest> tight;
  for (int i = 0; i < 4; ++i) {
    tight.push_back(Any("4g.40gb"));
    tight.push_back(Any("3g.40gb"));
    tight.push_back(Any("2g.20gb"));
    tight.push_back(Any("2g.20gb"));
    tight.push_back(Any("2g.20gb"));
    tight.push_back(Any("1g.10gb"));
  }
  MIGD_ASSERT_OK_AND_ASSIGN(Plan packed, MakePlan(Input(gpus, tight)));
  EXPECT_TRUE(PlanIsLegal(Input(gpus, tight), packed));
}

// ---------------------------------------------------------------------------
// Brute-force cross-check: on random small inputs, MakePlan finds a plan if
// and only if one exists, and every plan it returns is legal and does not
// depend on the order of GPUs and occupants.

struct GpuView {
  const mig::GpuModel* model;
  std::vector<Occupant> occupants;
};

// Tries every assignment of request instances to (GPU, reuse an Idle
// instance | create at a listed placement), destroying Idle instances that
// overlap a create; on a GPU where some create is not an exact placement,
// every other Idle instance not reused may go too (that is where the
// planner may reclaim for instanceCount or engines).
bool ExistsPlan(const std::vector<GpuView>& gpus, const std::vector<InstanceRequest>& req) {
  struct Created {
    const mig::GiProfile* profile;
    mig::Placement placement;
    bool exact;
  };
  std::vector<uint32_t> reused(gpus.size(), 0);
  std::vector<std::vector<Created>> created(gpus.size());
  std::function<bool(size_t)> rec = [&](size_t i) -> bool {
    if (i == req.size()) {
      for (size_t g = 0; g < gpus.size(); ++g) {
        mig::Layout layout(*gpus[g].model);
        bool all_exact = !created[g].empty();
        for (const Created& c : created[g]) all_exact = all_exact && c.exact;
        for (size_t k = 0; k < gpus[g].occupants.size(); ++k) {
          const Occupant& o = gpus[g].occupants[k];
          if (o.state == OccupantState::kIdle && ((reused[g] >> k) & 1u) == 0) {
            bool overlaps = false;
            for (const Created& c : created[g])
              overlaps = overlaps || c.placement.Overlaps(o.placement);
            if (overlaps || !all_exact) continue;  // destroyed
          }
          if (!layout.Add(*gpus[g].model->FindProfileByName(o.profile), o.placement).ok()) {
            return false;
          }
        }
        for (const Created& c : created[g]) {
          if (!layout.Add(*c.profile, c.placement).ok()) return false;
        }
      }
      return true;
    }
    const InstanceRequest& r = req[i];
    for (size_t g = 0; g < gpus.size(); ++g) {
      if (r.gpu.has_value() && r.gpu->value() != g) continue;
      const mig::GiProfile* p = gpus[g].model->FindProfileByName(r.profile);
      if (p == nullptr) continue;
      for (size_t k = 0; k < gpus[g].occupants.size(); ++k) {
        const Occupant& o = gpus[g].occupants[k];
        if (o.state != OccupantState::kIdle || ((reused[g] >> k) & 1u) != 0) continue;
        if (gpus[g].model->FindProfileByName(o.profile) != p) continue;
        if (r.placement.has_value() && o.placement != *r.placement) continue;
        bool clash = false;
        for (const Created& c : created[g]) clash = clash || c.placement.Overlaps(o.placement);
        if (clash) continue;
        reused[g] |= 1u << k;
        if (rec(i + 1)) return true;
        reused[g] &= ~(1u << k);
      }
      for (const mig::Placement& pl : p->placements) {
        if (r.placement.has_value() && pl != *r.placement) continue;
        bool clash = false;
        for (size_t k = 0; k < gpus[g].occupants.size(); ++k) {
          const Occupant& o = gpus[g].occupants[k];
          const bool removable = o.state == OccupantState::kIdle && ((reused[g] >> k) & 1u) == 0;
          clash = clash || (o.placement.Overlaps(pl) && !removable);
        }
        for (const Created& c : created[g]) clash = clash || c.placement.Overlaps(pl);
        if (clash) continue;
        created[g].push_back({p, pl, r.placement.has_value()});
        if (rec(i + 1)) return true;
        created[g].pop_back();
      }
    }
    return false;
  };
  return rec(0);
}

struct CrossCheckCase {
  const char* model;
  bool values;  // the value policy (else the cost order)
};

class CrossCheckTest : public ::testing::TestWithParam<CrossCheckCase> {};

// The planner of a case: with the value policy, values solved for every
// profile the cases use (uniform mix), so that every call is ordered by them.
std::unique_ptr<Planner> CasePlanner(const CrossCheckCase& c,
                                     const std::vector<const mig::GiProfile*>& profiles) {
  if (!c.values) return std::make_unique<Planner>();
  auto executor = std::make_unique<ManualExecutor>();
  ManualExecutor* e = executor.get();
  auto service = std::make_shared<ValueService>(ValueOptions{}, std::move(executor));
  DemandWeights mix;
  for (const mig::GiProfile* p : profiles) mix[p->name] = 1;
  service->Prime(mix, 0.9, {&Model(c.model)});
  e->RunPending();
  return std::make_unique<Planner>(PlannerOptions{service, std::nullopt, std::nullopt});
}

TEST_P(CrossCheckTest, PlansExactlyWhenAPlanExists) {
  const mig::GpuModel& m = Model(GetParam().model);
  const std::vector<const mig::GiProfile*> profiles = mig::ProfilesOfVariants(
      m,
      {mig::Variant::kBase, mig::Variant::kDoubleMemory, mig::Variant::kMe, mig::Variant::kMeAll});
  const std::vector<mig::Layout> layouts = mig::EnumerateLayouts(m, profiles);
  std::mt19937 rng(20240601);  // fixed: the same cases on every run
  std::unique_ptr<Planner> owned = CasePlanner(GetParam(), profiles);
  Planner& planner = *owned;
  // One model object per GPU position, as the engine holds them: equal to
  // `m`, at other addresses.
  const std::vector<mig::GpuModel> copies(3, m);
  int feasible = 0;
  int exhaustive = 0;
  int node_term = 0;  // multi-GPU plans, one object per GPU, with a node term
  constexpr int kCases = 400;
  for (int iter = 0; iter < kCases; ++iter) {
    PlanInput in;
    std::vector<GpuView> views;
    const uint32_t n_gpus = 1 + rng() % 3;
    int key = 0;
    for (uint32_t g = 0; g < n_gpus; ++g) {
      const mig::Layout& l = layouts[rng() % layouts.size()];
      GpuLayout gl{GpuIndex(g), &m, {}};
      for (const mig::PlacedGi& gi : l.instances()) {
        const uint32_t r = rng() % 5;
        if (r == 0) continue;  // leave free space
        const OccupantState st =
            r == 1   ? OccupantState::kActive
            : r == 2 ? OccupantState::kIdle
            : r == 3 ? OccupantState::kIdle
                     : (rng() % 2 != 0 ? OccupantState::kForeign : OccupantState::kError);
        gl.occupants.push_back(Occupant{gi.profile->name, gi.placement, st,
                                        "k" + std::to_string(key++),
                                        static_cast<int64_t>(rng() % 50)});
      }
      views.push_back({&m, gl.occupants});
      in.gpus.push_back(std::move(gl));
    }
    const uint32_t n_req = 1 + rng() % 4;
    for (uint32_t r = 0; r < n_req; ++r) {
      const mig::GiProfile* p = profiles[rng() % profiles.size()];
      InstanceRequest q = Any(p->name);
      if (rng() % 4 == 0) q.gpu = GpuIndex(rng() % n_gpus);
      if (rng() % 5 == 0) q.placement = p->placements[rng() % p->placements.size()];
      in.request.push_back(q);
    }
    SCOPED_TRACE(PlanInputToJson(in));
    StatusOr<Plan> plan = planner.MakePlan(in);
    if (!plan.ok() && plan.status().code() == StatusCode::kInvalidArgument) {
      // Two exact placements that overlap on one GPU: a bad request.
      EXPECT_THAT(plan, StatusIs(StatusCode::kInvalidArgument, HasSubstr("overlap on GPU")));
      continue;
    }
    const bool exists = ExistsPlan(views, in.request);
    ASSERT_EQ(plan.ok(), exists) << plan.status();
    if (!plan.ok()) {
      EXPECT_EQ(plan.status().code(), StatusCode::kResourceExhausted);
      continue;
    }
    ++feasible;
    EXPECT_EQ(plan->stats.value_policy, GetParam().values);
    if (plan->search == Search::kExhaustive) ++exhaustive;
    ASSERT_TRUE(PlanIsLegal(in, *plan));
    PlanInput shuffled = in;
    std::reverse(shuffled.gpus.begin(), shuffled.gpus.end());
    for (GpuLayout& g : shuffled.gpus) std::reverse(g.occupants.begin(), g.occupants.end());
    MIGD_ASSERT_OK_AND_ASSIGN(Plan again, planner.MakePlan(shuffled));
    ASSERT_EQ(PlanToJson(again), PlanToJson(*plan));
    // The same plan when every GPU has its own (equal) model object.
    PlanInput own = in;
    for (size_t g = 0; g < own.gpus.size(); ++g) own.gpus[g].model = &copies[g];
    MIGD_ASSERT_OK_AND_ASSIGN(Plan separate, planner.MakePlan(own));
    ASSERT_EQ(PlanToJson(separate), PlanToJson(*plan));
    if (n_gpus > 1 && separate.score.node_loss != 0) ++node_term;
  }
  // The node term was live on nodes of separate model objects.
  EXPECT_GT(node_term, 0);
  RecordProperty("node_term", node_term);
  // The generator must exercise both outcomes.
  EXPECT_GT(feasible, kCases / 10);
  EXPECT_LT(feasible, kCases);
  RecordProperty("feasible", feasible);
  RecordProperty("exhaustive", exhaustive);
}

INSTANTIATE_TEST_SUITE_P(Models, CrossCheckTest,
                         ::testing::Values(CrossCheckCase{"a30-24gb", false},
                                           CrossCheckCase{"a100-40gb", false},
                                           CrossCheckCase{"h100-80gb", false},
                                           CrossCheckCase{"rtx-pro-6000-blackwell", false},
                                           CrossCheckCase{"a30-24gb", true},
                                           CrossCheckCase{"a100-40gb", true},
                                           CrossCheckCase{"h100-80gb", true},
                                           CrossCheckCase{"rtx-pro-6000-blackwell", true}),
                         [](const ::testing::TestParamInfo<CrossCheckCase>& param) {
                           std::string name = param.param.model;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + (param.param.values ? "_values" : "_cost_order");
                         });

}  // namespace
}  // namespace migd::planner
