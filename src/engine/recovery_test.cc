// Recovery (Manager::Create) over the in-process simulator: clean restarts,
// other boots, foreign and adopted instances, orphans, contradictions that
// stop startup with the hardware untouched, intents, owner sources.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/manager_testing.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::engine::testing::LiveLayout;
using ::migd::engine::testing::OpaqueReq;
using ::migd::engine::testing::Spec;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;
using Method = driver::FaultInjectingDriver::Method;

class RecoveryTest : public testing::FakeHardwareTest {};

TEST_F(RecoveryTest, CleanRestartRestoresActiveAndIdleWithMigUuids) {
  Machine("a100-40gb:2");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("a", {Spec("3g.20gb", 0)})));
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(OpaqueReq("b", {Spec("2g.10gb", 1)})));
  ENGINE_ASSERT_OK(mgr_->Release("b"));
  const auto before = mgr_->List().instances;
  const auto layout = LiveLayout(*fake_);
  Restart();
  const auto after = mgr_->List().instances;
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i].mig_uuid, before[i].mig_uuid);
    EXPECT_EQ(after[i].state, before[i].state);
    EXPECT_EQ(after[i].owner, before[i].owner);
    EXPECT_EQ(after[i].gi_id, before[i].gi_id);
  }
  EXPECT_EQ(LiveLayout(*fake_), layout);
  EXPECT_EQ(mgr_->recovery_summary().active, 1u);
  EXPECT_EQ(mgr_->recovery_summary().idle, 1u);
  // Idempotency and release survive the restart.
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation again, mgr_->Allocate(OpaqueReq("a", {Spec("3g.20gb", 0)})));
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(again.instances[0].mig_uuid, a.instances[0].mig_uuid);
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  // The Idle one is reused after the restart.
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation c, mgr_->Allocate(OpaqueReq("c", {Spec("2g.10gb", 1)})));
  EXPECT_EQ(c.instances[0].mig_uuid, b.instances[0].mig_uuid);
  Consistent();
}

TEST_F(RecoveryTest, RecordsOfAnotherBootAreDiscarded) {
  Machine("a100-40gb:1");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("a", {Spec("1g.5gb")})).status());
  mgr_.reset();
  fake_->Reboot();  // instances gone
  opts_.boot_id = "boot-2";
  OpenStore();
  Start();
  EXPECT_EQ(mgr_->recovery_summary().other_boot_discarded, 1u);
  EXPECT_TRUE(mgr_->List().instances.empty());
  auto loaded = store_->LoadAll();
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded->records.empty());
}

TEST_F(RecoveryTest, UnknownInstancesArePreservedAsForeign) {
  Machine("a100-40gb:1");
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(9), {0, 4}));
  ENGINE_ASSERT_OK(fake_->CreateCi(GpuIndex(0), gi.id).status());
  const auto layout = LiveLayout(*fake_);
  Start();
  ASSERT_EQ(mgr_->List().foreign.size(), 1u);
  EXPECT_TRUE(mgr_->List().instances.empty());
  // It blocks its slices and is never reclaimed.
  EXPECT_FALSE(mgr_->Allocate(OpaqueReq("r", {Spec("3g.20gb", 0, mig::Placement{0, 4})})).ok());
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("r2", {Spec("3g.20gb")})));
  EXPECT_EQ(a.instances[0].placement, (mig::Placement{4, 4}));
  ENGINE_ASSERT_OK(mgr_->Reclaim({}).status());
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_EQ(LiveLayout(*fake_).size(), 2u);
  Consistent();
}

TEST_F(RecoveryTest, AdoptFlagClaimsUnknownPairsAsIdle) {
  Machine("a100-40gb:1");
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(9), {0, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, fake_->CreateCi(GpuIndex(0), gi.id));
  opts_.adopt_existing_mig_instances = true;
  Start();
  EXPECT_TRUE(mgr_->List().foreign.empty());
  EXPECT_EQ(Get(ci.mig_uuid).state, InstanceState::kIdle);
  EXPECT_EQ(mgr_->recovery_summary().adopted, 1u);
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation a, mgr_->Allocate(OpaqueReq("r", {Spec("3g.20gb", 0, mig::Placement{0, 4})})));
  EXPECT_EQ(a.instances[0].mig_uuid, ci.mig_uuid);
  Consistent();
}

TEST_F(RecoveryTest, OrphanGisAreDestroyedOnlyOnIdleGpus) {
  Machine("a100-40gb:2");
  Start();
  ENGINE_ASSERT_OK(
      mgr_->Allocate(OpaqueReq("busy", {Spec("1g.5gb", 0, mig::Placement{0, 1})})).status());
  mgr_.reset();
  ENGINE_ASSERT_OK(fake_->CreateGi(GpuIndex(0), GiProfileId(9), {4, 4}).status());  // no CI
  ENGINE_ASSERT_OK(fake_->CreateGi(GpuIndex(1), GiProfileId(9), {4, 4}).status());  // no CI
  opts_.adopt_existing_mig_instances = true;
  Restart();
  EXPECT_EQ(mgr_->recovery_summary().orphan_gis_destroyed, 1u);
  ASSERT_EQ(mgr_->List().foreign.size(), 1u);
  EXPECT_EQ(mgr_->List().foreign[0].gpu, GpuIndex(0));
  EXPECT_EQ(fake_->ListGpuInstances(GpuIndex(1))->size(), 0u);
  EXPECT_EQ(fake_->ListGpuInstances(GpuIndex(0))->size(), 2u);
}

TEST_F(RecoveryTest, WithoutAdoptFlagOrphanGisArePreserved) {
  Machine("a100-40gb:1");
  ENGINE_ASSERT_OK(fake_->CreateGi(GpuIndex(0), GiProfileId(9), {4, 4}).status());
  Start();
  EXPECT_EQ(mgr_->List().foreign.size(), 1u);
  EXPECT_EQ(LiveLayout(*fake_).size(), 1u);
}

TEST_F(RecoveryTest, ContradictingRecordStopsStartupWithHardwareUntouched) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("a", {Spec("1g.5gb")})));
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("b", {Spec("2g.10gb")})).status());
  ENGINE_ASSERT_OK(mgr_->Release("b"));
  mgr_.reset();
  // Rewrite a's record with a wrong CI id.
  auto loaded = store_->LoadAll();
  ASSERT_TRUE(loaded.ok());
  store::Record bad;
  for (const auto& r : loaded->records) {
    if (r.mig_uuid == a.instances[0].mig_uuid) bad = r;
  }
  bad.ci_id = NvmlCiId(5);
  ENGINE_ASSERT_OK(store_->Put(bad).status());
  const auto layout = LiveLayout(*fake_);
  const int destroys =
      faults_->CallCount(Method::kDestroyGi) + faults_->CallCount(Method::kDestroyCi);
  const int creates = faults_->CallCount(Method::kCreateGi) + faults_->CallCount(Method::kCreateCi);
  store_.reset();
  OpenStore();
  auto m = Make();
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status(), StatusIs(StatusCode::kFailedPrecondition, HasSubstr("CI id 5")));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(a.instances[0].gpu_uuid.value()));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(a.instances[0].mig_uuid.value()));
  EXPECT_EQ(LiveLayout(*fake_), layout);
  EXPECT_EQ(faults_->CallCount(Method::kDestroyGi) + faults_->CallCount(Method::kDestroyCi),
            destroys);
  EXPECT_EQ(faults_->CallCount(Method::kCreateGi) + faults_->CallCount(Method::kCreateCi), creates);
}

TEST_F(RecoveryTest, ActiveRecordWhoseInstanceVanishedStopsStartup) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("a", {Spec("1g.5gb")})));
  mgr_.reset();
  ENGINE_ASSERT_OK(fake_->DestroyCi(GpuIndex(0), a.instances[0].gi_id, a.instances[0].ci_id));
  ENGINE_ASSERT_OK(fake_->DestroyGi(GpuIndex(0), a.instances[0].gi_id));
  store_.reset();
  OpenStore();
  auto m = Make();
  EXPECT_THAT(m.status(), StatusIs(StatusCode::kFailedPrecondition,
                                   HasSubstr(a.instances[0].mig_uuid.value())));
}

TEST_F(RecoveryTest, IntentWithLiveGiIsDestroyedOrAdopted) {
  for (bool adopt : {false, true}) {
    SCOPED_TRACE(adopt ? "adopt" : "destroy");
    NewStateDir();
    Machine("a100-40gb:1");
    // Simulate a crash after CreateGi/CreateCi, before the commit.
    store::Record intent;
    MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, fake_->ListGpus());
    intent.key = {gpus[0].uuid, GiProfileId(14), {2, 2}};
    intent.phase = store::RecordPhase::kIntent;
    intent.state = store::RecordState::kCreating;
    intent.profile_name = "2g.10gb";
    ENGINE_ASSERT_OK(store_->Put(intent).status());
    MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(14), {2, 2}));
    ENGINE_ASSERT_OK(fake_->CreateCi(GpuIndex(0), gi.id).status());
    store_.reset();
    OpenStore();
    opts_.adopt_complete_intents = adopt;
    Start();
    if (adopt) {
      EXPECT_EQ(mgr_->recovery_summary().intents_adopted, 1u);
      EXPECT_EQ(CountState(InstanceState::kIdle), 1u);
      EXPECT_EQ(LiveLayout(*fake_).size(), 1u);
    } else {
      EXPECT_EQ(mgr_->recovery_summary().intents_destroyed, 1u);
      EXPECT_TRUE(LiveLayout(*fake_).empty());
    }
    Consistent();
    mgr_.reset();
    store_.reset();
  }
}

TEST_F(RecoveryTest, IntentWithoutGiIsRemoved) {
  Machine("a100-40gb:1");
  store::Record intent;
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, fake_->ListGpus());
  intent.key = {gpus[0].uuid, GiProfileId(14), {2, 2}};
  intent.phase = store::RecordPhase::kIntent;
  intent.state = store::RecordState::kCreating;
  intent.profile_name = "2g.10gb";
  ENGINE_ASSERT_OK(store_->Put(intent).status());
  Start();
  EXPECT_EQ(mgr_->recovery_summary().intents_removed, 1u);
  Consistent();
}

// An owner source like the Kubernetes ones: reports owners by MIG UUID.
class FakeOwnerSource final : public OwnerSource {
 public:
  std::string_view name() const override { return "fake-k8s"; }
  StatusOr<std::vector<OwnedInstance>> ActiveOwners(const std::vector<store::Record>&) override {
    if (!status.ok()) return status;
    return owned;
  }
  std::vector<OwnedInstance> owned;
  Status status;
};

TEST_F(RecoveryTest, OwnerSourceDecidesActiveAndAdoptsUnrecordedOwnedInstances) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation gone,
      mgr_->Allocate(OpaqueReq("gone", {Spec("1g.5gb", 0, mig::Placement{0, 1})})));
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation kept,
      mgr_->Allocate(OpaqueReq("kept", {Spec("2g.10gb", 0, mig::Placement{2, 2})})));
  mgr_.reset();
  // An instance realised by someone else (e.g. HAMi) for a live pod.
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(9), {4, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, fake_->CreateCi(GpuIndex(0), gi.id));
  FakeOwnerSource k8s;
  OwnedInstance o1;
  o1.mig_uuid = kept.instances[0].mig_uuid;
  o1.owner = store::Owner::Pod("ns", "p1", PodUid("u1"), "c");
  o1.request_id = "kept";
  OwnedInstance o2;
  o2.mig_uuid = ci.mig_uuid;
  o2.owner = store::Owner::Pod("ns", "p2", PodUid("u2"), "c");
  o2.placement = mig::Placement{4, 4};
  o2.gi_id = gi.id;
  k8s.owned = {o1, o2};
  store_.reset();
  OpenStore();
  MIGD_ASSERT_OK_AND_ASSIGN(mgr_, Make(k8s));
  EXPECT_EQ(Get(gone.instances[0].mig_uuid).state, InstanceState::kIdle);  // pod gone
  EXPECT_EQ(Get(kept.instances[0].mig_uuid).state, InstanceState::kActive);
  EXPECT_EQ(Get(kept.instances[0].mig_uuid).owner, o1.owner);
  EXPECT_EQ(Get(ci.mig_uuid).state, InstanceState::kActive);
  EXPECT_EQ(mgr_->recovery_summary().adopted, 1u);
  Consistent();
}

TEST_F(RecoveryTest, OwnerSourceErrorsAndMismatchesStopStartup) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("a", {Spec("1g.5gb")})));
  mgr_.reset();
  FakeOwnerSource k8s;
  k8s.status = UnavailableError("API server unreachable");
  EXPECT_THAT(Make(k8s).status(), StatusIs(StatusCode::kUnavailable, HasSubstr("fake-k8s")));
  k8s.status = OkStatus();
  OwnedInstance o;
  o.mig_uuid = a.instances[0].mig_uuid;
  o.owner = store::Owner::Opaque("x");
  o.placement = mig::Placement{0, 1};  // wrong on purpose unless it really is at 0
  if (a.instances[0].placement == *o.placement) o.placement = mig::Placement{1, 1};
  k8s.owned = {o};
  const auto layout = LiveLayout(*fake_);
  EXPECT_THAT(Make(k8s).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("owner says placement")));
  OwnedInstance missing;
  missing.mig_uuid = MigUuid("MIG-11111111-2222-3333-4444-555555555555");
  missing.owner = store::Owner::Opaque("y");
  k8s.owned = {missing};
  EXPECT_THAT(Make(k8s).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("no such MIG device")));
  EXPECT_EQ(LiveLayout(*fake_), layout);
}

TEST_F(RecoveryTest, FaultDuringRecoveryDestroyKeepsErrorAndRetries) {
  Machine("a100-40gb:1");
  store::Record intent;
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, fake_->ListGpus());
  intent.key = {gpus[0].uuid, GiProfileId(14), {2, 2}};
  intent.phase = store::RecordPhase::kIntent;
  intent.state = store::RecordState::kCreating;
  intent.profile_name = "2g.10gb";
  ENGINE_ASSERT_OK(store_->Put(intent).status());
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(14), {2, 2}));
  faults_->FailAlways(Method::kDestroyGi, UnknownError("NVML_ERROR_UNKNOWN"));
  Start();
  EXPECT_EQ(CountState(InstanceState::kError), 1u);
  faults_->ClearAll();
  MIGD_ASSERT_OK_AND_ASSIGN(ReconcileReport r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.errors_cleaned, 1u);
  EXPECT_TRUE(LiveLayout(*fake_).empty());
  Consistent();
}

}  // namespace
}  // namespace migd::engine
