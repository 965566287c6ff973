// Input validation and canonicalisation (plan_input.h): every
// kInvalidArgument of MakePlan, and the planner's counters and table cache.
#include "planner/plan_input.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/planner.h"
#include "planner/planner_test_util.h"
#include "testing/status_matchers.h"

namespace migd::planner {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

using namespace ::migd::planner::test;  // NOLINT(google-build-using-namespace): test builders

TEST(PlannerValidationTest, RejectsBadInput) {
  const GpuLayout h = Gpu(0, "h100-80gb");
  EXPECT_THAT(MakePlan(Input({}, {Any("1g.10gb")})),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no GPUs")));
  EXPECT_THAT(MakePlan(Input({h}, {})),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no instances requested")));
  EXPECT_THAT(MakePlan(Input({h, Gpu(0, "a30-24gb")}, {Any("1g.10gb")})),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("duplicate GPU index 0")));
  GpuLayout null_model = h;
  null_model.model = nullptr;
  EXPECT_THAT(MakePlan(Input({null_model}, {Any("1g.10gb")})),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("gpus[0].model: missing")));
  EXPECT_THAT(MakePlan(Input({h}, {Any("5g.50gb")})),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("request[0].profile: '5g.50gb' is not a profile of any GPU")));
  EXPECT_THAT(MakePlan(Input({h, Gpu(1, "a30-24gb")}, {OnGpu("3g.40gb", 1)})),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("'3g.40gb' is not a profile of GPU 1 (a30-24gb)")));
  EXPECT_THAT(
      MakePlan(Input({h}, {OnGpu("1g.10gb", 7)})),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("request[0].gpu: unknown GPU 7 (GPUs: 0)")));
  EXPECT_THAT(
      MakePlan(Input({Gpu(0, "h100-80gb", {Active("9g.1gb", "0:1", "a")})}, {Any("1g.10gb")})),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("gpus[0].occupants[0].profile")));
  EXPECT_THAT(
      MakePlan(Input({Gpu(0, "h100-80gb", {Active("3g.40gb", "1:4", "a")})}, {Any("1g.10gb")})),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("gpus[0].occupants[0].placement: 1:4 is not listed for 3g.40gb")));
  EXPECT_THAT(
      MakePlan(Input(
          {Gpu(0, "h100-80gb", {Active("3g.40gb", "4:4", "a"), Active("1g.10gb", "5:1", "b")})},
          {Any("1g.10gb")})),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("1g.10gb@5:1 overlaps 3g.40gb@4:4")));
  EXPECT_THAT(
      MakePlan(Input({Gpu(0, "h100-80gb", {Idle("1g.10gb", "0:1", "", 1)})}, {Any("1g.10gb")})),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("gpus[0].occupants[0].key: required for idle instances")));
  EXPECT_THAT(MakePlan(Input({Gpu(0, "h100-80gb", {Active("1g.10gb", "0:1", "dup")}),
                              Gpu(1, "h100-80gb", {Active("1g.10gb", "0:1", "dup")})},
                             {Any("1g.10gb")})),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("duplicate key 'dup'")));
  EXPECT_THAT(MakePlan(Input({h}, {Any("1g.10gb")}, {{"1g.10gb", -1.0}})),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("demand['1g.10gb']")));
  // Foreign and Error instances need no key.
  EXPECT_THAT(
      MakePlan(Input({Gpu(0, "h100-80gb", {Foreign("1g.10gb", "0:1"), Error("1g.10gb", "1:1")})},
                     {Any("1g.10gb")})),
      IsOk());
}

TEST(PlannerValidationTest, CountersTrackOutcomes) {
  Planner planner;
  EXPECT_THAT(planner.MakePlan(Input({Gpu(0, "h100-80gb")}, {Any("1g.10gb")})), IsOk());
  EXPECT_THAT(planner.MakePlan(Input({Gpu(0, "h100-80gb")}, {Any("nope")})), Not(IsOk()));
  EXPECT_THAT(planner.MakePlan(
                  Input({Gpu(0, "h100-80gb", {Active("7g.80gb", "0:8", "a")})}, {Any("1g.10gb")})),
              Not(IsOk()));
  const PlannerCounters& c = planner.counters();
  EXPECT_EQ(c.plans, 1u);
  EXPECT_EQ(c.greedy_plans, 1u);
  EXPECT_EQ(c.invalid, 1u);
  EXPECT_EQ(c.exhausted, 1u);
  EXPECT_GT(c.candidates_examined, 0u);
  EXPECT_EQ(c.table_cache_misses, 1u);
  planner.ClearCache();
  EXPECT_THAT(planner.MakePlan(Input({Gpu(0, "h100-80gb")}, {Any("1g.10gb")})), IsOk());
  EXPECT_EQ(planner.counters().table_cache_misses, 2u);
}

// GPUs whose models are equal objects at different addresses (the engine
// holds one per GPU) share one table: one precomputation, and the node term,
// which is defined over one table, applies to them. A model with another
// table gets its own.
TEST(PlannerTableCacheTest, EqualModelObjectsShareOneTable) {
  const mig::GpuModel a = Model("h100-80gb");
  const mig::GpuModel b = Model("h100-80gb");
  mig::GpuModel narrow = Model("h100-80gb");
  narrow.gi_profiles[0].instance_count = 3;
  Planner planner;
  auto on = [](uint32_t index, const mig::GpuModel& m, std::vector<Occupant> occ = {}) {
    return GpuLayout{GpuIndex(index), &m, std::move(occ)};
  };
  MIGD_ASSERT_OK_AND_ASSIGN(
      Plan plan, planner.MakePlan(Input({on(0, a), on(1, b, {Active("1g.10gb", "0:1", "x")})},
                                        {Any("3g.40gb")})));
  EXPECT_EQ(planner.counters().table_cache_misses, 1u);
  EXPECT_EQ(planner.counters().table_cache_hits, 1u);
  MIGD_ASSERT_OK_AND_ASSIGN(
      Plan shared, planner.MakePlan(Input({on(0, a), on(1, a, {Active("1g.10gb", "0:1", "x")})},
                                          {Any("3g.40gb")})));
  EXPECT_EQ(Where(plan), Where(shared));
  EXPECT_EQ(plan.score, shared.score);
  MIGD_ASSERT_OK(planner.MakePlan(Input({on(0, a), on(1, narrow)}, {Any("1g.10gb")})));
  EXPECT_EQ(planner.counters().table_cache_misses, 2u);
  EXPECT_EQ(planner.counters().table_cache_hits, 4u);
}

// A model of another GPU type at a cached address (a freed model's address,
// profile storage and slice count reused) is not served the stale table.
TEST(PlannerTableCacheTest, AnotherModelAtACachedAddressGetsItsOwnTable) {
  mig::GpuModel m = Model("h100-80gb");
  Planner planner;
  const GpuLayout g{GpuIndex(0), &m, {}};
  MIGD_ASSERT_OK(planner.MakePlan(Input({g}, {Any("1g.10gb")})));
  m.key = "h100-80gb-other";  // the same object now stands for another type
  MIGD_ASSERT_OK(planner.MakePlan(Input({g}, {Any("1g.10gb")})));
  EXPECT_EQ(planner.counters().table_cache_misses, 2u);
  EXPECT_EQ(planner.counters().table_cache_hits, 0u);
}

// A table the compact legality model cannot hold is refused, naming the GPU.
TEST(PlannerValidationTest, RejectsTablesOutsideTheLegalityModel) {
  mig::GpuModel wide = Model("h100-80gb");
  wide.memory_slices = 40;
  GpuLayout g;
  g.index = GpuIndex(0);
  g.model = &wide;
  EXPECT_THAT(
      MakePlan(Input({g}, {Any("1g.10gb")})),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("gpus[0]: model h100-80gb has 40 memory units (1..32 supported)")));
  mig::GpuModel big_cap = Model("h100-80gb");
  big_cap.gi_profiles[0].instance_count = 300;
  g.model = &big_cap;
  EXPECT_THAT(MakePlan(Input({g}, {Any("1g.10gb")})),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("instanceCount 300")));
}

// GPUs are canonicalised by index and occupants by placement.
TEST(CanonicaliseTest, OrdersGpusAndOccupants) {
  PlanInput in =
      Input({Gpu(3, "h100-80gb", {Active("1g.10gb", "6:1", "b"), Active("1g.10gb", "0:1", "a")}),
             Gpu(1, "h100-80gb")},
            {Any("1g.10gb"), Any("3g.40gb"), OnGpu("1g.10gb", 3)});
  std::vector<std::shared_ptr<const internal_planner::Table>> built;  // one per GPU: no cache here
  internal_planner::TableLookup lookup =
      [&built](const mig::GpuModel& m) -> StatusOr<const internal_planner::Table*> {
    StatusOr<std::shared_ptr<const internal_planner::Table>> t = internal_planner::BuildTable(m);
    if (!t.ok()) return t.status();
    built.push_back(*std::move(t));
    return built.back().get();
  };
  StatusOr<internal_planner::Canonical> c = internal_planner::Canonicalise(in, lookup);
  ASSERT_THAT(c, IsOk());
  ASSERT_EQ(c->gpus.size(), 2u);
  EXPECT_EQ(c->gpus[0].index, GpuIndex(1));
  EXPECT_EQ(c->gpus[1].index, GpuIndex(3));
  ASSERT_EQ(c->gpus[1].occ.size(), 2u);
  EXPECT_EQ(c->gpus[1].occ[0].placement.start, 0u);
  EXPECT_EQ(c->gpus[1].hard_mask, 0x41u);
  EXPECT_EQ(built.size(), 2u);
  // Pinned class first (rank 2), then the larger of the free ones.
  ASSERT_EQ(c->classes.size(), 3u);
  EXPECT_EQ(c->classes[0].pinned_gpu, std::optional<size_t>(1));
  EXPECT_EQ(c->classes[1].profile, "3g.40gb");
  EXPECT_EQ(c->classes[2].profile, "1g.10gb");
}

}  // namespace
}  // namespace migd::planner
