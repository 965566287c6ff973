#include "engine/verifier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mig/catalog.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kGpu[] = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";
constexpr char kMigA[] = "MIG-aaaaaaaa-0000-0000-0000-000000000000";
constexpr char kMigB[] = "MIG-bbbbbbbb-0000-0000-0000-000000000000";
// A100-40GB GI profile ids.
constexpr uint32_t k1g = 19;
constexpr uint32_t k3g = 9;

driver::GpuInstanceInfo Gi(uint32_t id, uint32_t profile, uint32_t start, uint32_t size,
                           std::vector<std::pair<uint32_t, std::string>> cis) {
  driver::GpuInstanceInfo gi;
  gi.id = NvmlGiId(id);
  gi.profile_id = GiProfileId(profile);
  gi.placement = {.start = start, .size = size};
  for (const auto& [ci, uuid] : cis) {
    driver::ComputeInstanceInfo c;
    c.id = NvmlCiId(ci);
    c.mig_uuid = MigUuid(uuid);
    gi.compute_instances.push_back(c);
  }
  return gi;
}

store::Record Committed(uint32_t start, uint32_t gi, uint32_t ci, const std::string& mig,
                        store::RecordState state) {
  store::Record r;
  r.key = {GpuUuid(kGpu), GiProfileId(k1g), {.start = start, .size = 1}};
  r.phase = store::RecordPhase::kCommitted;
  r.state = state;
  r.profile_name = "1g.5gb";
  r.gi_id = NvmlGiId(gi);
  r.ci_id = NvmlCiId(ci);
  r.mig_uuid = MigUuid(mig);
  if (state == store::RecordState::kActive) {
    r.owner = store::Owner::Opaque("job");
    r.request_id = "req";
  }
  return r;
}

store::Record Intent(uint32_t start) {
  store::Record r;
  r.key = {GpuUuid(kGpu), GiProfileId(k1g), {.start = start, .size = 1}};
  r.phase = store::RecordPhase::kIntent;
  r.state = store::RecordState::kCreating;
  r.profile_name = "1g.5gb";
  return r;
}

OwnedInstance Owned(const std::string& mig) {
  OwnedInstance o;
  o.mig_uuid = MigUuid(mig);
  o.owner = store::Owner::Opaque("job");
  o.request_id = "req";
  return o;
}

class VerifierTest : public ::testing::Test {
 protected:
  StatusOr<Takeover> Verify(const std::vector<store::Record>& records,
                            const std::vector<OwnedInstance>& owned = {}) {
    info_.index = GpuIndex(0);
    info_.uuid = GpuUuid(kGpu);
    std::map<uint32_t, ScopeGpu> scope;
    scope[0] = ScopeGpu{&info_, mig::Catalog::Default().FindModel("a100-40gb"), &live_};
    return VerifyTakeover(scope, records, owned, "test-source", options_);
  }
  driver::GpuInfo info_;
  std::vector<driver::GpuInstanceInfo> live_;
  VerifyOptions options_{.now = Clock::TimePoint(std::chrono::seconds(500))};
};

TEST_F(VerifierTest, MatchingRecordsAreRestoredOrRewrittenByOwner) {
  live_ = {Gi(1, k1g, 0, 1, {{0, kMigA}}), Gi(2, k1g, 1, 1, {{0, kMigB}})};
  const std::vector<store::Record> records = {
      Committed(0, 1, 0, kMigA, store::RecordState::kIdle),
      Committed(1, 2, 0, kMigB, store::RecordState::kActive)};
  // No owner holds B: Active on disk, Idle now (record rewritten).
  MIGD_ASSERT_OK_AND_ASSIGN(Takeover t, Verify(records));
  ASSERT_EQ(t.restore.size(), 1u);
  EXPECT_EQ(t.restore[0].id.mig_uuid, MigUuid(kMigA));
  EXPECT_EQ(t.restore[0].state, InstanceState::kIdle);
  ASSERT_EQ(t.rewrite.size(), 1u);
  EXPECT_EQ(t.rewrite[0].state, InstanceState::kIdle);
  EXPECT_TRUE(t.rewrite[0].owner.empty());
  EXPECT_EQ(t.rewrite[0].last_used, options_.now);
  // Its owner holds it: Active as recorded.
  MIGD_ASSERT_OK_AND_ASSIGN(t, Verify(records, {Owned(kMigB)}));
  ASSERT_EQ(t.restore.size(), 2u);
  EXPECT_EQ(t.restore[1].state, InstanceState::kActive);
  EXPECT_EQ(t.restore[1].request_id, "req");
  EXPECT_TRUE(t.rewrite.empty());
  EXPECT_TRUE(t.foreign.empty());
}

TEST_F(VerifierTest, ContradictionsStopNamingGpuInstanceAndMismatch) {
  live_ = {Gi(1, k1g, 0, 1, {{0, kMigA}})};
  EXPECT_THAT(
      Verify({Committed(0, 1, 3, kMigA, store::RecordState::kIdle)}),
      StatusIs(StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("nothing on the hardware was changed"), HasSubstr(kGpu),
                     HasSubstr(kMigA), HasSubstr("record says CI id 3, GI 1 has CIs [0]"))));
  EXPECT_THAT(Verify({Committed(0, 1, 0, kMigB, store::RecordState::kIdle)}),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr(std::string("record says MIG UUID ") + kMigB)));
  EXPECT_THAT(Verify({Committed(1, 1, 0, kMigA, store::RecordState::kIdle)}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("record says placement 1:1")));
  EXPECT_THAT(Verify({Committed(0, 1, 0, kMigA, store::RecordState::kIdle),
                      Committed(0, 1, 0, kMigA, store::RecordState::kIdle)}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("GI claimed by two records")));
  store::Record other_gpu = Committed(0, 1, 0, kMigA, store::RecordState::kIdle);
  other_gpu.key.gpu_uuid = GpuUuid("GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_THAT(Verify({other_gpu}), StatusIs(StatusCode::kFailedPrecondition,
                                            HasSubstr("not present or not in MIG mode")));
}

TEST_F(VerifierTest, VanishedInstancesAreForgottenUnlessActive) {
  live_ = {};
  MIGD_ASSERT_OK_AND_ASSIGN(Takeover t,
                            Verify({Committed(0, 1, 0, kMigA, store::RecordState::kIdle),
                                    Committed(1, 2, 0, kMigB, store::RecordState::kDeleting)}));
  EXPECT_EQ(t.remove.size(), 2u);
  EXPECT_EQ(t.counts.vanished_removed, 1u);
  EXPECT_EQ(t.counts.deletions_finished, 1u);
  EXPECT_THAT(Verify({Committed(0, 1, 0, kMigA, store::RecordState::kActive)}),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("the Active instance of opaque job no longer exists")));
  // Something else at its slices: a contradiction, not a vanished instance.
  live_ = {Gi(5, k3g, 0, 4, {})};
  EXPECT_THAT(Verify({Committed(0, 1, 0, kMigA, store::RecordState::kIdle)}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("but live GI 5 (profile 9)")));
}

TEST_F(VerifierTest, IntentsAreRemovedDestroyedOrAdopted) {
  live_ = {Gi(3, k1g, 2, 1, {{0, kMigA}})};
  MIGD_ASSERT_OK_AND_ASSIGN(Takeover t, Verify({Intent(0), Intent(2)}));
  EXPECT_EQ(t.remove, std::vector<store::RecordKey>{Intent(0).key});
  EXPECT_EQ(t.counts.intents_removed, 1u);
  ASSERT_EQ(t.destroy.size(), 1u);
  EXPECT_EQ(t.destroy[0].state, InstanceState::kCreating);
  EXPECT_EQ(t.destroy[0].gi(), NvmlGiId(3));
  EXPECT_EQ(t.destroy[0].ci(), NvmlCiId(0));
  options_.adopt_complete_intents = true;
  MIGD_ASSERT_OK_AND_ASSIGN(t, Verify({Intent(2)}));
  ASSERT_EQ(t.rewrite.size(), 1u);
  EXPECT_EQ(t.rewrite[0].state, InstanceState::kIdle);
  EXPECT_TRUE(t.rewrite[0].committed);
  EXPECT_EQ(t.counts.intents_adopted, 1u);
  options_.adopt_complete_intents = false;
  MIGD_ASSERT_OK_AND_ASSIGN(t, Verify({Intent(2)}, {Owned(kMigA)}));
  ASSERT_EQ(t.rewrite.size(), 1u);
  EXPECT_EQ(t.rewrite[0].state, InstanceState::kActive) << "an owner holds it";
  store::Record wrong = Intent(2);
  wrong.gi_id = NvmlGiId(4);
  EXPECT_THAT(Verify({wrong}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("intent names GI 4 but GI 3")));
}

TEST_F(VerifierTest, OwnersAreVerifiedAndAdoptedWithoutRecord) {
  live_ = {Gi(1, k1g, 0, 1, {{0, kMigA}})};
  EXPECT_THAT(Verify({}, {Owned(kMigB)}),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("held by active owner opaque job (source test-source)"),
                             HasSubstr("no such MIG device"))));
  OwnedInstance misplaced = Owned(kMigA);
  misplaced.placement = mig::Placement{.start = 1, .size = 1};
  EXPECT_THAT(Verify({}, {misplaced}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("owner says placement 1:1")));
  EXPECT_THAT(Verify({}, {Owned(kMigA), Owned(kMigA)}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("claimed by two owners")));
  MIGD_ASSERT_OK_AND_ASSIGN(Takeover t, Verify({}, {Owned(kMigA)}));
  ASSERT_EQ(t.rewrite.size(), 1u);
  EXPECT_EQ(t.rewrite[0].state, InstanceState::kActive);
  EXPECT_EQ(t.rewrite[0].id.mig_uuid, MigUuid(kMigA));
  EXPECT_EQ(t.counts.adopted, 1u);
}

TEST_F(VerifierTest, UnknownGisAreForeignOrAdoptedOrOrphans) {
  live_ = {Gi(1, k1g, 0, 1, {{0, kMigA}}), Gi(2, k3g, 4, 4, {})};
  MIGD_ASSERT_OK_AND_ASSIGN(Takeover t, Verify({}));
  EXPECT_EQ(t.foreign[0].size(), 2u);
  EXPECT_EQ(t.counts.foreign, 2u);
  options_.adopt_existing_mig_instances = true;
  MIGD_ASSERT_OK_AND_ASSIGN(t, Verify({}));
  ASSERT_EQ(t.rewrite.size(), 1u);
  EXPECT_EQ(t.rewrite[0].state, InstanceState::kIdle);
  ASSERT_EQ(t.orphans.size(), 1u) << "a CI-less GI on a GPU with no live allocation";
  EXPECT_EQ(t.orphans[0].second.id, NvmlGiId(2));
  // With an Active instance on the GPU the CI-less GI is preserved.
  MIGD_ASSERT_OK_AND_ASSIGN(t, Verify({}, {Owned(kMigA)}));
  EXPECT_TRUE(t.orphans.empty());
  EXPECT_EQ(t.foreign[0].size(), 1u);
}

}  // namespace
}  // namespace migd::engine
