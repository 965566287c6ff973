// The trust boundary of HAMi mode (docs/security.md, "Kubernetes"): migd
// serves only the pod HAMi's scheduler named in the node lock, cross-checks
// everything the pod's own annotations say, and a refusal creates, destroys
// and patches nothing. Hostile pods are built with MakePod, as anyone who
// may create pods can build them: their own annotations and spec.nodeName.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "k8s/apiserver/hami_annotations.h"
#include "k8s/apiserver/hami_backend.h"
#include "k8s/apiserver/testing/hami_backend_fixture.h"
#include "testing/status_matchers.h"

namespace migd::k8s {
namespace {

using ::migd::k8s::testing::HamiReservation;
using ::migd::k8s::testing::kTestNode;
using ::migd::k8s::testing::MakePod;
using ::migd::k8s::testing::PodSpec;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

class HamiTrustTest : public testing::HamiBackendFixture {
 protected:
  // A pod that wrote HAMi's annotations itself (what Filter and Bind would
  // write) and set spec.nodeName, bypassing the scheduler and its lock.
  void AddAttacker(const std::string& name, std::vector<HamiReservation> res,
                   const std::string& bind_time = "1") {
    PodSpec p;
    p.name = name;
    p.uid = "uid-" + name;
    p.node = kTestNode;
    for (HamiReservation& r : res) {
      if (r.gpu_uuid.empty()) r.gpu_uuid = Gpu();
    }
    p.annotations = scheduler_.FilterAnnotations(p, res);
    p.annotations[hami::kBindPhase] = hami::kBindPhaseAllocating;
    p.annotations[hami::kBindTime] = bind_time;
    p.limits["main"]["nvidia.com/gpu"] = std::to_string(res.size());
    api_.AddPod(MakePod(p));
  }
  // Everything a refusal must leave alone.
  struct World {
    uint64_t mutations;
    int patches;
    size_t instances;
    std::optional<nlohmann::json> node;
    friend bool operator==(const World&, const World&) = default;
  };
  World Snapshot() {
    return {Mutations(), api_.requests("PATCH"), Instances().size(), api_.GetNode(kTestNode)};
  }
  Status Allocate(std::vector<std::string> ids) {
    return backend_->AllocateContainer(ids).status();
  }
};

TEST_F(HamiTrustTest, AttackerWithSelfWrittenAnnotationsAndNodeNameGetsNothing) {
  AddAttacker("evil", {{0, "", "7g.40gb", {0, 8}}});
  const std::optional<nlohmann::json> pod = api_.GetPod("default", "evil");
  const World before = Snapshot();
  EXPECT_THAT(Allocate({Id(0)}),
              StatusIs(StatusCode::kUnavailable, HasSubstr("the node has no hami.io/mutex.lock")));
  EXPECT_EQ(Snapshot(), before);  // nothing created, nothing patched
  EXPECT_EQ(api_.GetPod("default", "evil"), pod);
  // Nor does GetPreferredAllocation follow it.
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<std::string> ids,
                            backend_->PreferredAllocation({Id(0), Id(1)}, {}, 1));
  EXPECT_THAT(ids, ::testing::ElementsAre(Id(0)));
}

TEST_F(HamiTrustTest, AttackerWithAnOlderBindTimeDoesNotDivertTheRealPod) {
  Schedule("real", {{0, "", "3g.20gb", {4, 4}, 19968, 43}});
  // Same GPU, an older bind time, its own choice of profile and placement.
  AddAttacker("evil", {{0, "", "3g.20gb", {0, 4}, 19968, 43}}, "1");
  const std::optional<nlohmann::json> evil = api_.GetPod("default", "evil");
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation a, backend_->AllocateContainer({Id(0)}));
  ASSERT_EQ(a.mig_uuids.size(), 1u);
  const std::vector<engine::InstanceView> inst = Instances();
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].placement, (mig::Placement{4, 4}));  // the real reservation
  EXPECT_EQ(inst[0].owner.pod_name, "real");
  EXPECT_EQ(Allocations("real").at(0).mig_uuid, a.mig_uuids[0].value());
  EXPECT_EQ(api_.GetPod("default", "evil"), evil);  // never written
  // The lock is gone; the attacker's admission gets nothing either.
  const World before = Snapshot();
  EXPECT_THAT(Allocate({Id(1)}), StatusIs(StatusCode::kUnavailable, ::testing::_));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(HamiTrustTest, LockNamingAPodOfAnotherNodeIsRefused) {
  PodSpec other;
  other.name = "elsewhere";
  other.uid = "uid-elsewhere";
  other.node = "node-2";
  other.annotations = scheduler_.FilterAnnotations(other, {{0, Gpu(), "2g.10gb", {0, 2}}});
  api_.AddPod(MakePod(other));
  scheduler_.SetNodeLock(scheduler_.LockValue("default", "elsewhere"));
  const World before = Snapshot();
  EXPECT_THAT(Allocate({Id(0)}),
              StatusIs(StatusCode::kUnavailable,
                       HasSubstr("names pod default/elsewhere, which is bound to \"node-2\"")));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(HamiTrustTest, StaleLockIsRefusedAndALockAtTheExpiryIsNot) {
  Schedule("p", {{0, "", "2g.10gb", {2, 2}}});
  clock_.Advance(std::chrono::minutes(5) + std::chrono::seconds(1));
  const World before = Snapshot();
  EXPECT_THAT(Allocate({Id(0)}),
              StatusIs(StatusCode::kUnavailable,
                       HasSubstr("is 301 s old, older than HAMi's node-lock expiry of 300 s")));
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(BindPhase("p"), hami::kBindPhaseAllocating);
  // HAMi expires a lock only when it is older than NodeLockTimeout.
  scheduler_.SetNodeLock(scheduler_.LockValue("default", "p", std::chrono::minutes(5)));
  MIGD_EXPECT_OK(Allocate({Id(0)}));
}

TEST_F(HamiTrustTest, MissingLockIsRefusedEvenForAScheduledPod) {
  Schedule("p", {{0, "", "2g.10gb", {2, 2}}});
  scheduler_.SetNodeLock("");
  const World before = Snapshot();
  EXPECT_THAT(Allocate({Id(0)}),
              StatusIs(StatusCode::kUnavailable, HasSubstr("no hami.io/mutex.lock")));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(HamiTrustTest, LocksThatNameNoPendingPodAreRefused) {
  Schedule("p", {{0, "", "2g.10gb", {2, 2}}});
  const std::string lock = *NodeLock();
  auto refused = [&](const char* why) {
    const World before = Snapshot();
    EXPECT_THAT(Allocate({Id(0)}), StatusIs(StatusCode::kUnavailable, HasSubstr(why)));
    EXPECT_EQ(Snapshot(), before);
  };
  SetPhase("p", "Running");
  refused("which is Running, not Pending");
  SetPhase("p", "Pending");
  ASSERT_TRUE(api_.UpdatePod("default", "p", [](nlohmann::json& pod) {
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  }));
  refused("which is being deleted");
  scheduler_.SetNodeLock(scheduler_.LockValue("default", "gone"));
  refused("names pod default/gone, which does not exist");
  scheduler_.SetNodeLock(FormatRfc3339(clock_.Now()));  // HAMi's legacy bare time
  refused("names no pod");
  scheduler_.SetNodeLock("not a lock");
  refused("is not an RFC 3339 time");
}

TEST_F(HamiTrustTest, LockedPodWhoseAnnotationsDoNotConfirmIsRefused) {
  struct Case {
    const char* key;
    const char* value;  // nullptr: the annotation is removed
    const char* why;
  };
  int n = 0;
  for (const Case& c :
       {Case{hami::kVgpuNode, "node-2", "hami.io/vgpu-node is \"node-2\", not this node node-1"},
        Case{hami::kBindPhase, "failed", "hami.io/bind-phase is \"failed\""},
        Case{hami::kBindTime, nullptr, "hami.io/bind-time is missing"}}) {
    const std::string name = "p" + std::to_string(n++);
    Schedule(name, {{0, "", "2g.10gb", {2, 2}}});
    ASSERT_TRUE(api_.UpdatePod("default", name, [&](nlohmann::json& pod) {
      if (c.value == nullptr) {
        pod["metadata"]["annotations"].erase(c.key);
      } else {
        pod["metadata"]["annotations"][c.key] = c.value;
      }
    }));
    const World before = Snapshot();
    EXPECT_THAT(Allocate({Id(0)}), StatusIs(StatusCode::kFailedPrecondition, HasSubstr(c.why)));
    EXPECT_EQ(Snapshot(), before);
    scheduler_.SetNodeLock("");  // the scheduler's lock expiry, for the next case
  }
}

class HamiTrustTwoGpuTest : public HamiTrustTest {
 protected:
  HamiTrustTwoGpuTest() { gpus_ = "a100-40gb:2"; }
};

TEST_F(HamiTrustTwoGpuTest, ReservationOnAGpuNotInKubeletsDeviceListIsRefused) {
  Schedule("p", {{0, Gpu(1), "2g.10gb", {2, 2}}});
  const World before = Snapshot();
  EXPECT_THAT(Allocate({Id(0, /*gpu=*/0)}),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("reserves container main on [" + Gpu(1) + "]")));
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(BindPhase("p"), hami::kBindPhaseAllocating);
  // kubelet follows migd's preference to the reserved GPU, which passes.
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<std::string> ids,
                            backend_->PreferredAllocation({Id(0, 0), Id(0, 1)}, {}, 1));
  EXPECT_THAT(ids, ::testing::ElementsAre(Id(0, 1)));
  MIGD_EXPECT_OK(Allocate(ids));
  EXPECT_EQ(Instances().at(0).gpu_uuid, GpuUuid(Gpu(1)));
}

TEST_F(HamiTrustTest, DeviceIdsMigdNeverAdvertisedAreRefused) {
  Schedule("p", {{0, "", "2g.10gb", {2, 2}}});
  const World before = Snapshot();
  EXPECT_THAT(Allocate({Gpu() + "-10"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("which migd does not advertise")));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(HamiTrustTest, ProfileOutsideTheAllowlistIsRefused) {
  MakeBackend(5, {"1g.5gb", "2g.10gb"});
  Schedule("p", {{0, "", "7g.40gb", {0, 8}}});
  const World before = Snapshot();
  EXPECT_THAT(Allocate({Id(0)}), StatusIs(StatusCode::kFailedPrecondition,
                                          HasSubstr("is not in migd's migProfileAllowlist")));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(HamiTrustTest, RuntimeIdentityOfAnotherPodIsNeverWritten) {
  // Two pods scheduled one after the other; each Allocate writes only the
  // pod its lock names.
  Schedule("a", {{0, "", "2g.10gb", {0, 2}}});
  MIGD_ASSERT_OK(Allocate({Id(0)}));
  const std::optional<nlohmann::json> a = api_.GetPod("default", "a");
  Schedule("b", {{0, "", "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK(Allocate({Id(1)}));
  EXPECT_EQ(api_.GetPod("default", "a"), a);
  EXPECT_TRUE(Allocations("b").at(0).RuntimeReady());
}

}  // namespace
}  // namespace migd::k8s
