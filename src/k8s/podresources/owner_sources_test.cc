#include "k8s/podresources/owner_sources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

#include "k8s/podresources/testing/fake_pod_resources.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::k8s {
namespace {

using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr char kResource[] = "nvidia.com/gpu";
constexpr char kGpu[] = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";

PodResourcesEntry Pod(std::string ns, std::string name, std::string container,
                      std::string resource = kResource) {
  return PodResourcesEntry{
      .pod_namespace = std::move(ns),
      .pod_name = std::move(name),
      .containers = {ContainerEntry{
          .name = std::move(container),
          .devices = {ContainerDevicesEntry{.resource_name = std::move(resource),
                                            .device_ids = {std::string(kGpu) + "-0"}}}}}};
}

store::Record Rec(uint32_t start, store::RecordState state, store::Owner owner) {
  store::Record r;
  r.key = {GpuUuid(kGpu), GiProfileId(19), {.start = start, .size = 1}};
  r.phase = store::RecordPhase::kCommitted;
  r.state = state;
  r.profile_name = "1g.10gb";
  r.gi_id = NvmlGiId(7 + start);
  r.ci_id = NvmlCiId(0);
  r.mig_uuid = MigUuid("MIG-00000000-0000-0000-0000-00000000000" + std::to_string(start));
  r.owner = std::move(owner);
  r.request_id = "req-" + std::to_string(start);
  return r;
}

store::Owner PodOwner(std::string name, std::string container = "main") {
  return store::Owner::Pod("ns", std::move(name), PodUid("uid-" + name), std::move(container));
}

std::vector<std::string> Uuids(const std::vector<engine::OwnedInstance>& owned) {
  std::vector<std::string> out;
  for (const auto& o : owned) out.push_back(o.mig_uuid.value());
  return out;
}

std::string Uuid(uint32_t start) {
  return "MIG-00000000-0000-0000-0000-00000000000" + std::to_string(start);
}

// Canned answers, one per List call; the last repeats.
class CannedLister final : public PodResourcesLister {
 public:
  void Push(StatusOr<std::vector<PodResourcesEntry>> answer) { answers_.push_back(answer); }
  StatusOr<std::vector<PodResourcesEntry>> List() override {
    ++calls;
    auto a = answers_.front();
    if (answers_.size() > 1) answers_.pop_front();
    return a;
  }
  int calls = 0;

 private:
  std::deque<StatusOr<std::vector<PodResourcesEntry>>> answers_;
};

class PodResourcesOwnerSourceTest : public ::testing::Test {
 protected:
  PodResourcesOwnerSource Source() {
    return PodResourcesOwnerSource(
        lister_, {.resource_name = kResource,
                  .confirm_delay = std::chrono::milliseconds(1234),
                  .sleep = [this](std::chrono::milliseconds d) { sleeps_.push_back(d); }});
  }
  CannedLister lister_;
  std::vector<std::chrono::milliseconds> sleeps_;
};

TEST_F(PodResourcesOwnerSourceTest, SplitsActiveAndIdle) {
  lister_.Push(std::vector<PodResourcesEntry>{
      Pod("ns", "a", "main"), Pod("ns", "b", "main", "other.io/thing"),  // not our resource
      Pod("ns", "x", "main", "other.io/thing")});
  std::vector<store::Record> records = {
      Rec(0, store::RecordState::kActive, PodOwner("a")),     // listed: active
      Rec(1, store::RecordState::kActive, PodOwner("b")),     // only other resource: idle
      Rec(2, store::RecordState::kActive, PodOwner("gone")),  // not listed: idle
      Rec(3, store::RecordState::kIdle, store::Owner()),      // idle stays idle
      Rec(4, store::RecordState::kActive, store::Owner::Opaque("job-7")),  // opaque: kept
  };
  PodResourcesOwnerSource source = Source();
  EXPECT_EQ(source.name(), "podresources");
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<engine::OwnedInstance> owned, source.ActiveOwners(records));
  EXPECT_THAT(Uuids(owned), UnorderedElementsAre(Uuid(0), Uuid(4)));
  for (const auto& o : owned) {
    if (o.mig_uuid.value() != Uuid(0)) continue;
    EXPECT_EQ(o.owner, PodOwner("a"));
    EXPECT_EQ(o.gpu_uuid, GpuUuid(kGpu));
    EXPECT_EQ(o.gi_id, NvmlGiId(7));
    EXPECT_EQ(o.request_id, "req-0");
  }
  // Unmatched pod records: a second, confirming List after the delay.
  EXPECT_EQ(lister_.calls, 2);
  EXPECT_THAT(sleeps_, ElementsAre(std::chrono::milliseconds(1234)));
}

TEST_F(PodResourcesOwnerSourceTest, NoConfirmingListWhenEveryOwnerIsListed) {
  lister_.Push(std::vector<PodResourcesEntry>{Pod("ns", "a", "main")});
  PodResourcesOwnerSource source = Source();
  MIGD_ASSERT_OK_AND_ASSIGN(
      std::vector<engine::OwnedInstance> owned,
      source.ActiveOwners({Rec(0, store::RecordState::kActive, PodOwner("a"))}));
  EXPECT_THAT(Uuids(owned), ElementsAre(Uuid(0)));
  EXPECT_EQ(lister_.calls, 1);
  EXPECT_THAT(sleeps_, IsEmpty());
}

TEST_F(PodResourcesOwnerSourceTest, ConfirmingListKeepsPodSeenOnlyThere) {
  lister_.Push(std::vector<PodResourcesEntry>{});
  lister_.Push(std::vector<PodResourcesEntry>{Pod("ns", "a", "main")});
  PodResourcesOwnerSource source = Source();
  MIGD_ASSERT_OK_AND_ASSIGN(
      std::vector<engine::OwnedInstance> owned,
      source.ActiveOwners({Rec(0, store::RecordState::kActive, PodOwner("a")),
                           Rec(1, store::RecordState::kActive, PodOwner("b"))}));
  EXPECT_THAT(Uuids(owned), ElementsAre(Uuid(0)));
}

TEST_F(PodResourcesOwnerSourceTest, ContainerMustMatchUnlessRecordHasNone) {
  lister_.Push(std::vector<PodResourcesEntry>{Pod("ns", "a", "sidecar"), Pod("ns", "b", "c")});
  PodResourcesOwnerSource source = Source();
  MIGD_ASSERT_OK_AND_ASSIGN(
      std::vector<engine::OwnedInstance> owned,
      source.ActiveOwners({Rec(0, store::RecordState::kActive, PodOwner("a", "sidecar")),
                           Rec(1, store::RecordState::kActive, PodOwner("a", "main")),
                           Rec(2, store::RecordState::kActive, PodOwner("b", ""))}));
  EXPECT_THAT(Uuids(owned), UnorderedElementsAre(Uuid(0), Uuid(2)));
}

TEST_F(PodResourcesOwnerSourceTest, UnreachableKubeletIsAnError) {
  lister_.Push(UnavailableError("kubelet pod-resources socket /x: connection refused"));
  PodResourcesOwnerSource source = Source();
  EXPECT_THAT(source.ActiveOwners({Rec(0, store::RecordState::kActive, PodOwner("a"))}),
              StatusIs(StatusCode::kUnavailable, HasSubstr("connection refused")));
}

TEST_F(PodResourcesOwnerSourceTest, FailedConfirmingListIsAnError) {
  lister_.Push(std::vector<PodResourcesEntry>{});
  lister_.Push(UnavailableError("kubelet restarting"));
  PodResourcesOwnerSource source = Source();
  EXPECT_THAT(source.ActiveOwners({Rec(0, store::RecordState::kActive, PodOwner("a"))}),
              StatusIs(StatusCode::kUnavailable, HasSubstr("kubelet restarting")));
}

TEST_F(PodResourcesOwnerSourceTest, HolderWithoutRecordIsInconsistent) {
  lister_.Push(std::vector<PodResourcesEntry>{Pod("ns", "a", "main"), Pod("ns", "stray", "c")});
  PodResourcesOwnerSource source = Source();
  EXPECT_THAT(source.ActiveOwners({Rec(0, store::RecordState::kActive, PodOwner("a")),
                                   Rec(1, store::RecordState::kIdle, store::Owner())}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("ns/stray/c")));
}

TEST_F(PodResourcesOwnerSourceTest, PodListedTwiceIsInconsistent) {
  lister_.Push(std::vector<PodResourcesEntry>{Pod("ns", "a", "main"), Pod("ns", "a", "main")});
  PodResourcesOwnerSource source = Source();
  EXPECT_THAT(source.ActiveOwners({Rec(0, store::RecordState::kActive, PodOwner("a"))}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("twice")));
}

TEST_F(PodResourcesOwnerSourceTest, MissingResourceNameIsInvalid) {
  lister_.Push(std::vector<PodResourcesEntry>{});
  PodResourcesOwnerSource source(lister_, {});
  EXPECT_THAT(source.ActiveOwners({}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("resource")));
}

// The same join over real gRPC: PodResourcesClient against FakePodResources.
TEST(PodResourcesOwnerSourceGrpcTest, JoinsThroughTheKubeletSocket) {
  migd::testing::TempDir dir;
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<FakePodResources> fake,
                            FakePodResources::Start(dir.path()));
  fake->SetPods({Pod("ns", "a", "main")});
  PodResourcesClient client({.socket_path = fake->socket_path(),
                             .attempts = 2,
                             .initial_backoff = std::chrono::milliseconds(1)});
  PodResourcesOwnerSource source(
      client, {.resource_name = kResource, .confirm_delay = std::chrono::milliseconds(0)});
  std::vector<store::Record> records = {Rec(0, store::RecordState::kActive, PodOwner("a")),
                                        Rec(1, store::RecordState::kActive, PodOwner("b"))};
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<engine::OwnedInstance> owned, source.ActiveOwners(records));
  EXPECT_THAT(Uuids(owned), ElementsAre(Uuid(0)));
  EXPECT_EQ(fake->list_calls(), 2);

  fake->Stop();
  EXPECT_THAT(source.ActiveOwners(records), StatusIs(StatusCode::kUnavailable, HasSubstr("List")));
}

// ---- hami ----

class CannedPods final : public HamiPodLister {
 public:
  StatusOr<std::vector<HamiNodePod>> ListNodePods() override { return answer; }
  StatusOr<std::vector<HamiNodePod>> answer = std::vector<HamiNodePod>{};
};

HamiMigReservation Reservation(int container_index, uint32_t start, bool realised) {
  HamiMigReservation r;
  r.container_index = container_index;
  r.gpu_uuid = GpuUuid(kGpu);
  r.profile = "1g.10gb";
  r.placement = {.start = start, .size = 1};
  if (realised) {
    r.mig_uuid = MigUuid(Uuid(start));
    r.gi_id = NvmlGiId(7 + start);
    r.ci_id = NvmlCiId(0);
  }
  return r;
}

HamiNodePod HamiPod(std::string name, std::string phase, std::vector<HamiMigReservation> res) {
  return HamiNodePod{.pod_namespace = "ns",
                     .pod_name = name,
                     .uid = PodUid("uid-" + name),
                     .phase = std::move(phase),
                     .containers = {"init", "main"},
                     .reservations = std::move(res)};
}

TEST(HamiOwnerSourceTest, LivePodsWithRuntimeIdentityOwnTheirInstances) {
  CannedPods pods;
  HamiNodePod deleting = HamiPod("deleting", "Running", {Reservation(1, 3, true)});
  deleting.deleting = true;
  pods.answer = std::vector<HamiNodePod>{
      HamiPod("running", "Running", {Reservation(1, 0, true), Reservation(0, 1, true)}),
      HamiPod("pending", "Pending", {Reservation(1, 2, false)}),  // not allocated yet
      HamiPod("done", "Succeeded", {Reservation(1, 4, true)}),
      HamiPod("failed", "Failed", {Reservation(1, 5, true)}),
      deleting,
  };
  HamiOwnerSource source(pods);
  EXPECT_EQ(source.name(), "hami");
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<engine::OwnedInstance> owned, source.ActiveOwners({}));
  ASSERT_EQ(owned.size(), 2u);
  EXPECT_EQ(owned[0].mig_uuid, MigUuid(Uuid(0)));
  EXPECT_EQ(owned[0].owner, store::Owner::Pod("ns", "running", PodUid("uid-running"), "main"));
  EXPECT_EQ(owned[0].gpu_uuid, GpuUuid(kGpu));
  EXPECT_EQ(owned[0].placement, (mig::Placement{.start = 0, .size = 1}));
  EXPECT_EQ(owned[0].gi_id, NvmlGiId(7));
  EXPECT_EQ(owned[0].ci_id, NvmlCiId(0));
  EXPECT_EQ(owned[1].owner.container, "init");
}

TEST(HamiOwnerSourceTest, ApiServerErrorIsAnError) {
  CannedPods pods;
  pods.answer = UnavailableError("API server https://10.0.0.1:443: connection refused");
  HamiOwnerSource source(pods);
  EXPECT_THAT(source.ActiveOwners({}), StatusIs(StatusCode::kUnavailable, HasSubstr("refused")));
}

TEST(HamiOwnerSourceTest, ContainerIndexOutOfRangeIsInconsistent) {
  CannedPods pods;
  pods.answer = std::vector<HamiNodePod>{HamiPod("p", "Running", {Reservation(2, 0, true)})};
  HamiOwnerSource source(pods);
  EXPECT_THAT(source.ActiveOwners({}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("containerIndex 2")));
}

TEST(HamiOwnerSourceTest, MigUuidReservedTwiceIsInconsistent) {
  CannedPods pods;
  pods.answer = std::vector<HamiNodePod>{HamiPod("p", "Running", {Reservation(1, 0, true)}),
                                         HamiPod("q", "Running", {Reservation(1, 0, true)})};
  HamiOwnerSource source(pods);
  EXPECT_THAT(source.ActiveOwners({}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("ns/p/main and ns/q/main")));
}

TEST(HamiOwnerSourceTest, PartialRuntimeIdentityIsInconsistent) {
  CannedPods pods;
  HamiMigReservation partial = Reservation(1, 0, true);
  partial.ci_id.reset();
  pods.answer = std::vector<HamiNodePod>{HamiPod("p", "Running", {partial})};
  HamiOwnerSource source(pods);
  EXPECT_THAT(source.ActiveOwners({}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("partial runtime identity")));
}

}  // namespace
}  // namespace migd::k8s
