// HamiBackend and PodWatcher over a real engine::Manager (sim::FakeGpuDriver,
// one A100-40GB), the fake API server over HTTP and a fake HAMi scheduler.
// The trust boundary (hostile pods, locks) is hami_trust_test.cc.
#include "k8s/apiserver/hami_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "k8s/apiserver/hami_annotations.h"
#include "k8s/apiserver/pod_watcher.h"
#include "k8s/apiserver/testing/hami_backend_fixture.h"
#include "k8s/hami_request_id.h"
#include "testing/status_matchers.h"

namespace migd::k8s {
namespace {

using ::migd::k8s::testing::kTestNode;
using ::migd::k8s::testing::MakePod;
using ::migd::k8s::testing::PodSpec;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

class HamiBackendTest : public testing::HamiBackendFixture {};

TEST_F(HamiBackendTest, DevicesAreStablePlaceholderReplicas) {
  std::vector<AdvertisedDevice> d = backend_->Devices();
  ASSERT_EQ(d.size(), 10u);
  EXPECT_EQ(d[0].id, Gpu() + "-0");
  EXPECT_EQ(d[9].id, Gpu() + "-9");
  EXPECT_TRUE(d[3].healthy);
  MakeBackend();
  EXPECT_EQ(backend_->Devices(), d);
}

TEST_F(HamiBackendTest, AllocateRealisesReservationAndWritesBackIdentity) {
  Schedule("p1", {{0, "", "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation a, backend_->AllocateContainer({Id(0)}));
  ASSERT_EQ(a.mig_uuids.size(), 1u);
  EXPECT_THAT(a.envs, ::testing::ElementsAre(std::pair<std::string, std::string>(
                          "NVIDIA_VISIBLE_DEVICES", a.mig_uuids[0].value())));
  // Exactly the reserved placement, Active, owned by the pod's container.
  const std::vector<engine::InstanceView> inst = Instances();
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].state, engine::InstanceState::kActive);
  EXPECT_EQ(inst[0].placement, (mig::Placement{2, 2}));
  EXPECT_EQ(inst[0].profile, "2g.10gb");
  EXPECT_EQ(inst[0].owner, store::Owner::Pod("default", "p1", PodUid("uid-p1"), "main"));
  EXPECT_EQ(inst[0].request_id, HamiRequestId("uid-p1", 0));
  // Runtime identity written back; container erased; bind done; lock freed.
  const auto allocs = Allocations("p1");
  ASSERT_EQ(allocs.size(), 1u);
  EXPECT_EQ(allocs[0].mig_uuid, inst[0].mig_uuid.value());
  EXPECT_EQ(allocs[0].gpu_instance_id, inst[0].gi_id.value());
  EXPECT_EQ(allocs[0].compute_instance_id, inst[0].ci_id.value());
  EXPECT_EQ(api_.PodAnnotation("default", "p1", hami::kDevicesToAllocate), ";");
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseSuccess);
  EXPECT_EQ(NodeLock(), std::nullopt);
}

TEST_F(HamiBackendTest, ContainersAllocateInitFirstAndBindSucceedsAfterTheLast) {
  Schedule("p2", {{0, "", "1g.5gb", {6, 1}, 4864, 15}, {1, "", "3g.20gb", {0, 4}, 19968, 43}},
           {"init"}, {"main"});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation first, backend_->AllocateContainer({Id(3)}));
  ASSERT_EQ(first.mig_uuids.size(), 1u);
  std::vector<engine::InstanceView> inst = Instances();
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].owner.container, "init");
  EXPECT_EQ(inst[0].profile, "1g.5gb");
  // One container left: still allocating, lock still held.
  EXPECT_EQ(BindPhase("p2"), hami::kBindPhaseAllocating);
  EXPECT_TRUE(NodeLock().has_value());
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation second, backend_->AllocateContainer({Id(4)}));
  ASSERT_EQ(second.mig_uuids.size(), 1u);
  EXPECT_NE(second.mig_uuids[0], first.mig_uuids[0]);
  EXPECT_EQ(Instances().size(), 2u);
  EXPECT_EQ(BindPhase("p2"), hami::kBindPhaseSuccess);
  EXPECT_EQ(NodeLock(), std::nullopt);
  for (const auto& a : Allocations("p2")) EXPECT_TRUE(a.RuntimeReady());
}

TEST_F(HamiBackendTest, SeveralInstancesForOneContainerInDeviceOrder) {
  Schedule("p3", {{0, "", "3g.20gb", {4, 4}, 19968, 43}, {0, "", "2g.10gb", {0, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation a, backend_->AllocateContainer({Id(5), Id(1)}));
  ASSERT_EQ(a.mig_uuids.size(), 2u);
  const auto allocs = Allocations("p3");
  ASSERT_EQ(allocs.size(), 2u);
  EXPECT_EQ(allocs[0].mig_uuid, a.mig_uuids[0].value());
  EXPECT_EQ(allocs[1].mig_uuid, a.mig_uuids[1].value());
  EXPECT_EQ(a.envs[0].second, a.mig_uuids[0].value() + "," + a.mig_uuids[1].value());
}

TEST_F(HamiBackendTest, ConflictingWriterIsRetriedAfterReRead) {
  Schedule("p1", {{0, "", "2g.10gb", {2, 2}}});
  api_.SetBeforePodPatch([this](const std::string& ns, const std::string& name) {
    api_.UpdatePod(ns, name, [](nlohmann::json& p) {
      p["metadata"]["annotations"]["other.io/written"] = "meanwhile";
    });
  });
  MIGD_ASSERT_OK(backend_->AllocateContainer({Id(0)}).status());
  EXPECT_EQ(api_.conflicts(), 1);
  EXPECT_EQ(api_.PodAnnotation("default", "p1", "other.io/written"), "meanwhile");
  ASSERT_EQ(Allocations("p1").size(), 1u);
  EXPECT_TRUE(Allocations("p1")[0].RuntimeReady());
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseSuccess);
}

TEST_F(HamiBackendTest, PersistentConflictFailsThePodAndReturnsInstanceToIdle) {
  MakeBackend(/*patch_attempts=*/2);
  Schedule("p1", {{0, "", "2g.10gb", {2, 2}}});
  std::function<void(const std::string&, const std::string&)> bump;
  bump = [this, &bump](const std::string& ns, const std::string& name) {
    api_.UpdatePod(ns, name, [](nlohmann::json&) {});
    api_.SetBeforePodPatch(bump);  // every patch conflicts
  };
  api_.SetBeforePodPatch(bump);
  EXPECT_THAT(backend_->AllocateContainer({Id(0)}).status(),
              StatusIs(StatusCode::kAborted, HasSubstr("gave up after 2 conflicting patches")));
  api_.SetBeforePodPatch(nullptr);
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseFailed);
  EXPECT_EQ(NodeLock(), std::nullopt);
  const auto inst = Instances();
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].state, engine::InstanceState::kIdle);
}

TEST_F(HamiBackendTest, MissingReservationIsRefusedAndNothingIsPatched) {
  Schedule("p1", {{0, "", "2g.10gb", {2, 2}}});
  ASSERT_TRUE(api_.UpdatePod("default", "p1", [](nlohmann::json& p) {
    p["metadata"]["annotations"][hami::kMigAllocations] = "[]";
  }));
  const int patches = api_.requests("PATCH");
  EXPECT_THAT(backend_->AllocateContainer({Id(0)}).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("has 0 reservations")));
  EXPECT_EQ(api_.requests("PATCH"), patches);
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseAllocating);
  EXPECT_TRUE(NodeLock().has_value());
  EXPECT_TRUE(Instances().empty());
}

TEST_F(HamiBackendTest, UndecodableReservationIsRefusedNamingThePod) {
  Schedule("p1", {{0, "", "2g.10gb", {2, 2}}});
  ASSERT_TRUE(api_.UpdatePod("default", "p1", [](nlohmann::json& p) {
    p["metadata"]["annotations"][hami::kMigAllocations] = "{bad";
  }));
  EXPECT_THAT(backend_->AllocateContainer({Id(0)}).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("pod default/p1 hami.io/vgpu-mig-allocations: not valid JSON")));
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseAllocating);
}

TEST_F(HamiBackendTest, ReservedPlacementHeldByActivePodFailsWithoutTouchingIt) {
  Schedule("a", {{0, "", "3g.20gb", {0, 4}, 19968, 43}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation first, backend_->AllocateContainer({Id(0)}));
  SetPhase("a", "Running");
  Schedule("b", {{0, "", "3g.20gb", {0, 4}, 19968, 43}});
  const Status s = backend_->AllocateContainer({Id(1)}).status();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("pod default/b"));
  EXPECT_EQ(BindPhase("b"), hami::kBindPhaseFailed);
  EXPECT_EQ(NodeLock(), std::nullopt);
  const auto inst = Instances();
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].mig_uuid, first.mig_uuids[0]);
  EXPECT_EQ(inst[0].state, engine::InstanceState::kActive);
}

TEST_F(HamiBackendTest, PodDeletedWhileAllocatingRollsBackToIdle) {
  Schedule("p1", {{0, "", "2g.10gb", {2, 2}}});
  api_.SetBeforePodPatch(
      [this](const std::string& ns, const std::string& name) { api_.DeletePod(ns, name); });
  EXPECT_THAT(backend_->AllocateContainer({Id(0)}).status(),
              StatusIs(StatusCode::kNotFound, HasSubstr("pods \"p1\" not found")));
  const auto inst = Instances();
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].state, engine::InstanceState::kIdle);
}

TEST_F(HamiBackendTest, EndedPodIsReleasedAndTheNextPodReusesTheSameInstance) {
  Schedule("a", {{0, "", "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation first, backend_->AllocateContainer({Id(0)}));
  SetPhase("a", "Running");
  MIGD_ASSERT_OK_AND_ASSIGN(ReleasePassResult r, backend_->ReleaseEndedPods());
  EXPECT_EQ(r.released, 0u);
  EXPECT_EQ(r.active_pods, 1u);
  ASSERT_TRUE(api_.DeletePod("default", "a"));
  MIGD_ASSERT_OK_AND_ASSIGN(r, backend_->ReleaseEndedPods());
  EXPECT_EQ(r.released, 1u);
  ASSERT_EQ(Instances().size(), 1u);
  EXPECT_EQ(Instances()[0].state, engine::InstanceState::kIdle);

  Schedule("b", {{0, "", "2g.10gb", {2, 2}}});
  const uint64_t mutations = Mutations();
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation second, backend_->AllocateContainer({Id(1)}));
  ASSERT_EQ(second.mig_uuids.size(), 1u);
  EXPECT_EQ(second.mig_uuids[0], first.mig_uuids[0]);  // reused, not recreated
  EXPECT_EQ(Mutations(), mutations);
  EXPECT_EQ(Instances()[0].owner.pod_name, "b");
  EXPECT_EQ(Allocations("b")[0].mig_uuid, first.mig_uuids[0].value());
}

TEST_F(HamiBackendTest, FinishedAndTerminatingPodsAreReleased) {
  Schedule("a", {{0, "", "2g.10gb", {0, 2}}});
  MIGD_ASSERT_OK(backend_->AllocateContainer({Id(0)}).status());
  Schedule("b", {{0, "", "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK(backend_->AllocateContainer({Id(1)}).status());
  Schedule("c", {{0, "", "2g.10gb", {4, 2}}});
  MIGD_ASSERT_OK(backend_->AllocateContainer({Id(2)}).status());
  SetPhase("a", "Succeeded");
  SetPhase("b", "Failed");
  SetPhase("c", "Running");
  ASSERT_TRUE(api_.UpdatePod("default", "c", [](nlohmann::json& p) {
    p["metadata"]["deletionTimestamp"] = "2026-11-29T11:00:00Z";
  }));
  MIGD_ASSERT_OK_AND_ASSIGN(ReleasePassResult r, backend_->ReleaseEndedPods());
  EXPECT_EQ(r.released, 3u);
  for (const auto& v : Instances()) EXPECT_EQ(v.state, engine::InstanceState::kIdle);
}

TEST_F(HamiBackendTest, ListFailureReleasesNothing) {
  Schedule("a", {{0, "", "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK(backend_->AllocateContainer({Id(0)}).status());
  ASSERT_TRUE(api_.DeletePod("default", "a"));
  api_.FailNext(1, 503);
  EXPECT_THAT(backend_->ReleaseEndedPods().status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("nothing released")));
  EXPECT_EQ(Instances()[0].state, engine::InstanceState::kActive);
}

TEST_F(HamiBackendTest, MalformedPodListFailsAllocateClosed) {
  Schedule("p1", {{0, "", "2g.10gb", {2, 2}}});
  PodSpec broken;
  broken.name = "no-uid";
  broken.node = kTestNode;
  api_.AddPod(MakePod(broken));  // an item the API server would never send
  EXPECT_THAT(backend_->AllocateContainer({Id(0)}).status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("cannot list the pods of node node-1")));
  EXPECT_TRUE(Instances().empty());
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseAllocating);
}

TEST_F(HamiBackendTest, ForeignNodeLockIsKept) {
  Schedule("p1", {{0, "", "2g.10gb", {2, 2}}});
  // While p1 is allocated, the lock changes hands (it expired on the
  // scheduler's side): the release must keep the new holder's lock.
  const std::string other = scheduler_.LockValue("other", "pod-x");
  api_.SetBeforePodPatch(
      [&](const std::string&, const std::string&) { scheduler_.SetNodeLock(other); });
  MIGD_ASSERT_OK(backend_->AllocateContainer({Id(0)}).status());
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseSuccess);
  EXPECT_EQ(NodeLock(), other);
}

TEST_F(HamiBackendTest, ConflictingNodeWriterDoesNotKeepTheLock) {
  Schedule("p1", {{0, "", "2g.10gb", {2, 2}}});
  api_.SetBeforeNodePatch([this](const std::string& node) {
    api_.UpdateNode(node, [](nlohmann::json& n) {
      n["metadata"]["annotations"]["hami.io/node-handshake"] = "Requesting_2026-11-29 11:00:00";
    });
  });
  MIGD_ASSERT_OK(backend_->AllocateContainer({Id(0)}).status());
  EXPECT_EQ(api_.conflicts(), 1);
  EXPECT_EQ(NodeLock(), std::nullopt);
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseSuccess);
}

TEST_F(HamiBackendTest, FailureToFinishBindDoesNotUndoTheAllocation) {
  Schedule("p1", {{0, "", "2g.10gb", {2, 2}}});
  // The identity patch works; the GET of the node for the lock release fails.
  api_.SetBeforePodPatch([this](const std::string&, const std::string&) {
    api_.SetBeforePodPatch([this](const std::string&, const std::string&) {
      api_.FailNext(1, 503);  // the GET of the node
    });
  });
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation a, backend_->AllocateContainer({Id(0)}));
  ASSERT_EQ(a.mig_uuids.size(), 1u);
  EXPECT_EQ(Instances().at(0).state, engine::InstanceState::kActive);
  EXPECT_TRUE(Allocations("p1").at(0).RuntimeReady());
}

TEST_F(HamiBackendTest, PreferredAllocationSteersKubeletToTheReservedGpu) {
  Schedule("p1", {{0, "", "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<std::string> ids,
                            backend_->PreferredAllocation({"junk-1", Id(4), Id(5)}, {}, 1));
  EXPECT_THAT(ids, ::testing::ElementsAre(Id(4)));
  // Without a bound pod: the default choice, no error (kubelet would fail
  // the pod's admission on one).
  scheduler_.SetNodeLock("");
  MIGD_ASSERT_OK_AND_ASSIGN(ids, backend_->PreferredAllocation({"junk-1", Id(4)}, {}, 1));
  EXPECT_THAT(ids, ::testing::ElementsAre("junk-1"));
}

TEST_F(HamiBackendTest, PublishesNodeRegistration) {
  MIGD_ASSERT_OK(backend_->PublishNodeRegistration());
  auto reg = api_.NodeAnnotation(kTestNode, hami::kNodeRegister);
  ASSERT_TRUE(reg.has_value());
  const nlohmann::json v = nlohmann::json::parse(*reg);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0]["id"], Gpu());
  EXPECT_EQ(v[0]["mode"], "mig");
  EXPECT_FALSE(v[0]["migProfiles"].empty());
  // HAMi v2.10's plugin writes no handshake (the scheduler owns it).
  EXPECT_EQ(api_.NodeAnnotation(kTestNode, "hami.io/node-handshake"), std::nullopt);
  api_.FailNext(1, 500);
  EXPECT_THAT(backend_->PublishNodeRegistration(),
              StatusIs(StatusCode::kUnavailable, ::testing::_));
}

TEST_F(HamiBackendTest, PodWatcherRegistersAndReleasesEndedPods) {
  Schedule("a", {{0, "", "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK(backend_->AllocateContainer({Id(0)}).status());
  ASSERT_TRUE(api_.DeletePod("default", "a"));
  PodWatcher watcher(backend_.get(), {std::chrono::seconds(60), std::chrono::seconds(60)});
  watcher.Start();
  // The first pass runs at start, after the registration.
  ASSERT_TRUE(watcher.WaitForPasses(1, std::chrono::seconds(30)));
  watcher.Stop();
  EXPECT_EQ(watcher.passes(), 1u);
  EXPECT_EQ(Instances()[0].state, engine::InstanceState::kIdle);
  EXPECT_TRUE(api_.NodeAnnotation(kTestNode, hami::kNodeRegister).has_value());
}

}  // namespace
}  // namespace migd::k8s
