// HamiBackend and PodWatcher over a real engine::Manager (sim::FakeGpuDriver,
// one A100-40GB) and the fake API server over HTTP.
#include "k8s/apiserver/hami_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/clock.h"
#include "engine/manager.h"
#include "engine/owner_source.h"
#include "k8s/apiserver/hami_codec.h"
#include "k8s/apiserver/pod_watcher.h"
#include "k8s/apiserver/testing/fake_api_server.h"
#include "sim/fake_gpu_driver.h"
#include "store/record_store.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::k8s {
namespace {

using ::migd::k8s::testing::FakeApiServer;
using ::migd::k8s::testing::MakePod;
using ::migd::k8s::testing::PodSpec;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kNode[] = "node-1";

struct Reservation {
  int container_index;
  std::string profile;
  mig::Placement placement;
  int64_t mem = 9856;
  int64_t cores = 29;
};

class HamiBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start());
    server_.AddNode(kNode);
    KubeConfig c;
    c.server = server_.url();
    MIGD_ASSERT_OK_AND_ASSIGN(client_, KubeClient::Create(c));
    MIGD_ASSERT_OK_AND_ASSIGN(fake_, sim::FakeGpuDriver::Create("a100-40gb:1", {}, 7));
    store::RecordStoreOptions so;
    so.boot_id = "boot-1";
    MIGD_ASSERT_OK_AND_ASSIGN(store_, store::RecordStore::Open(dir_.Join("state"), clock_, so));
    engine::ManagerOptions mo;
    mo.boot_id = "boot-1";
    MIGD_ASSERT_OK_AND_ASSIGN(mgr_, engine::Manager::Create(mo, *fake_, *store_, clock_, owners_));
    gpu_uuid_ = mgr_->Gpus().at(0).info.uuid.value();
    MakeBackend();
  }
  void MakeBackend(int patch_attempts = 5) {
    HamiBackendOptions o;
    o.node_name = kNode;
    o.patch_attempts = patch_attempts;
    backend_ = std::make_unique<HamiBackend>(client_.get(), mgr_.get(), o);
  }

  // A pod as HAMi's scheduler leaves it after Filter + Bind: reservation,
  // devices to allocate, bind-phase allocating, node lock taken.
  void AddBoundPod(const std::string& name, const std::vector<Reservation>& res,
                   std::vector<std::string> init = {}, std::vector<std::string> ctrs = {"main"}) {
    PodSpec p;
    p.name = name;
    p.uid = "uid-" + name;
    p.node = kNode;
    p.containers = std::move(ctrs);
    p.init_containers = std::move(init);
    std::vector<hami::MigAllocation> allocs;
    hami::PodDevices devs(p.containers.size() + p.init_containers.size());
    std::map<int, int> next_device;
    for (const Reservation& r : res) {
      hami::MigAllocation a;
      a.container_index = r.container_index;
      a.device_index = next_device[r.container_index]++;
      a.gpu_uuid = gpu_uuid_;
      a.profile = r.profile;
      a.placement = r.placement;
      allocs.push_back(a);
      devs[r.container_index].push_back({gpu_uuid_, "NVIDIA", r.mem, r.cores});
    }
    p.annotations = {{hami::kMigAllocations, hami::EncodeMigAllocations(allocs)},
                     {hami::kDevicesToAllocate, hami::EncodePodDevices(devs)},
                     {hami::kDevicesAllocated, hami::EncodePodDevices(devs)},
                     {hami::kVgpuNode, kNode},
                     {hami::kBindTime, "1764410000"},
                     {hami::kBindPhase, hami::kBindPhaseAllocating},
                     {"nvidia.com/vgpu-mode", "mig"}};
    server_.AddPod(MakePod(p));
    nlohmann::json lock;
    lock["metadata"]["annotations"][hami::kNodeLock] = "2026-11-29T11:00:00Z,default," + name;
    MIGD_ASSERT_OK(client_->PatchNode(kNode, lock).status());
  }
  void SetPhase(const std::string& name, const std::string& phase) {
    ASSERT_TRUE(server_.UpdatePod("default", name,
                                  [&](nlohmann::json& p) { p["status"]["phase"] = phase; }));
  }
  std::vector<hami::MigAllocation> Allocations(const std::string& name) {
    auto text = server_.PodAnnotation("default", name, hami::kMigAllocations);
    if (!text) return {};
    auto a = hami::DecodeMigAllocations(*text);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : std::vector<hami::MigAllocation>{};
  }
  std::vector<engine::InstanceView> Instances() { return mgr_->List().instances; }
  std::optional<std::string> BindPhase(const std::string& name) {
    return server_.PodAnnotation("default", name, hami::kBindPhase);
  }
  std::optional<std::string> NodeLock() { return server_.NodeAnnotation(kNode, hami::kNodeLock); }

  migd::testing::TempDir dir_;
  FakeClock clock_;
  FakeApiServer server_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<sim::FakeGpuDriver> fake_;
  std::unique_ptr<store::RecordStore> store_;
  engine::RecordsOwnerSource owners_;
  std::unique_ptr<engine::Manager> mgr_;
  std::unique_ptr<HamiBackend> backend_;
  std::string gpu_uuid_;
};

TEST_F(HamiBackendTest, DevicesAreStablePlaceholderReplicas) {
  std::vector<AdvertisedDevice> d = backend_->Devices();
  ASSERT_EQ(d.size(), 10u);
  EXPECT_EQ(d[0].id, gpu_uuid_ + "-0");
  EXPECT_EQ(d[9].id, gpu_uuid_ + "-9");
  EXPECT_TRUE(d[3].healthy);
  MakeBackend();
  EXPECT_EQ(backend_->Devices(), d);
}

TEST_F(HamiBackendTest, AllocateRealisesReservationAndWritesBackIdentity) {
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation a, backend_->AllocateContainer({gpu_uuid_ + "-0"}));
  ASSERT_EQ(a.mig_uuids.size(), 1u);
  EXPECT_THAT(a.envs, ::testing::ElementsAre(std::pair<std::string, std::string>(
                          "NVIDIA_VISIBLE_DEVICES", a.mig_uuids[0].value())));
  // Exactly the reserved placement, Active, owned by the pod's container.
  const std::vector<engine::InstanceView> inst = Instances();
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].state, engine::InstanceState::kActive);
  EXPECT_EQ(inst[0].placement.start, 2u);
  EXPECT_EQ(inst[0].placement.size, 2u);
  EXPECT_EQ(inst[0].profile, "2g.10gb");
  EXPECT_EQ(inst[0].owner, store::Owner::Pod("default", "p1", PodUid("uid-p1"), "main"));
  EXPECT_EQ(inst[0].request_id, HamiBackend::RequestId("uid-p1", 0));
  // Runtime identity written back; container erased; bind done; lock freed.
  const auto allocs = Allocations("p1");
  ASSERT_EQ(allocs.size(), 1u);
  EXPECT_EQ(allocs[0].mig_uuid, inst[0].mig_uuid.value());
  EXPECT_EQ(allocs[0].gpu_instance_id, inst[0].gi_id.value());
  EXPECT_EQ(allocs[0].compute_instance_id, inst[0].ci_id.value());
  EXPECT_EQ(server_.PodAnnotation("default", "p1", hami::kDevicesToAllocate), ";");
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseSuccess);
  EXPECT_EQ(NodeLock(), std::nullopt);
}

TEST_F(HamiBackendTest, ContainersAllocateInitFirstAndBindSucceedsAfterTheLast) {
  AddBoundPod("p2", {{0, "1g.5gb", {6, 1}, 4864, 15}, {1, "3g.20gb", {0, 4}, 19968, 43}}, {"init"},
              {"main"});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation first, backend_->AllocateContainer({"x"}));
  ASSERT_EQ(first.mig_uuids.size(), 1u);
  std::vector<engine::InstanceView> inst = Instances();
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].owner.container, "init");
  EXPECT_EQ(inst[0].profile, "1g.5gb");
  // One container left: still allocating, lock still held.
  EXPECT_EQ(BindPhase("p2"), hami::kBindPhaseAllocating);
  EXPECT_TRUE(NodeLock().has_value());
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation second, backend_->AllocateContainer({"y"}));
  ASSERT_EQ(second.mig_uuids.size(), 1u);
  EXPECT_NE(second.mig_uuids[0], first.mig_uuids[0]);
  inst = Instances();
  ASSERT_EQ(inst.size(), 2u);
  EXPECT_EQ(BindPhase("p2"), hami::kBindPhaseSuccess);
  EXPECT_EQ(NodeLock(), std::nullopt);
  for (const auto& a : Allocations("p2")) EXPECT_TRUE(a.RuntimeReady());
}

TEST_F(HamiBackendTest, SeveralInstancesForOneContainerInDeviceOrder) {
  AddBoundPod("p3", {{0, "3g.20gb", {4, 4}, 19968, 43}, {0, "2g.10gb", {0, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation a, backend_->AllocateContainer({"x", "y"}));
  ASSERT_EQ(a.mig_uuids.size(), 2u);
  const auto allocs = Allocations("p3");
  ASSERT_EQ(allocs.size(), 2u);
  EXPECT_EQ(allocs[0].mig_uuid, a.mig_uuids[0].value());
  EXPECT_EQ(allocs[1].mig_uuid, a.mig_uuids[1].value());
  EXPECT_EQ(a.envs[0].second, a.mig_uuids[0].value() + "," + a.mig_uuids[1].value());
}

TEST_F(HamiBackendTest, ConflictingWriterIsRetriedAfterReRead) {
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  server_.SetBeforePodPatch([this](const std::string& ns, const std::string& name) {
    server_.UpdatePod(ns, name, [](nlohmann::json& p) {
      p["metadata"]["annotations"]["other.io/written"] = "meanwhile";
    });
  });
  MIGD_ASSERT_OK(backend_->AllocateContainer({"x"}).status());
  EXPECT_EQ(server_.conflicts(), 1);
  EXPECT_EQ(server_.PodAnnotation("default", "p1", "other.io/written"), "meanwhile");
  ASSERT_EQ(Allocations("p1").size(), 1u);
  EXPECT_TRUE(Allocations("p1")[0].RuntimeReady());
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseSuccess);
}

TEST_F(HamiBackendTest, PersistentConflictFailsThePodAndReturnsInstanceToIdle) {
  MakeBackend(/*patch_attempts=*/2);
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  std::function<void(const std::string&, const std::string&)> bump;
  bump = [this, &bump](const std::string& ns, const std::string& name) {
    server_.UpdatePod(ns, name, [](nlohmann::json&) {});
    server_.SetBeforePodPatch(bump);  // every patch conflicts
  };
  server_.SetBeforePodPatch(bump);
  EXPECT_THAT(backend_->AllocateContainer({"x"}).status(),
              StatusIs(StatusCode::kAborted, HasSubstr("gave up after 2 conflicting patches")));
  server_.SetBeforePodPatch(nullptr);
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseFailed);
  EXPECT_EQ(NodeLock(), std::nullopt);
  const auto inst = Instances();
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].state, engine::InstanceState::kIdle);
}

TEST_F(HamiBackendTest, NoPodBeingBoundIsFailedPrecondition) {
  EXPECT_THAT(
      backend_->AllocateContainer({gpu_uuid_ + "-1"}).status(),
      StatusIs(StatusCode::kFailedPrecondition, HasSubstr("no pod on node node-1 is being bound")));
  // A pod already failed is not pending either.
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  ASSERT_TRUE(server_.UpdatePod("default", "p1", [](nlohmann::json& p) {
    p["metadata"]["annotations"][hami::kBindPhase] = hami::kBindPhaseFailed;
  }));
  EXPECT_THAT(backend_->AllocateContainer({"x"}).status(),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_TRUE(Instances().empty());
}

TEST_F(HamiBackendTest, ListFailureIsUnavailable) {
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  server_.FailNext(1, 500);
  EXPECT_THAT(backend_->AllocateContainer({"x"}).status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("cannot list the pods of node node-1")));
  EXPECT_TRUE(Instances().empty());
}

TEST_F(HamiBackendTest, MissingReservationFailsPodAndReleasesLock) {
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  ASSERT_TRUE(server_.UpdatePod("default", "p1", [](nlohmann::json& p) {
    p["metadata"]["annotations"][hami::kMigAllocations] = "[]";
  }));
  EXPECT_THAT(backend_->AllocateContainer({"x"}).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("0 MIG reservations")));
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseFailed);
  EXPECT_EQ(NodeLock(), std::nullopt);
  EXPECT_TRUE(Instances().empty());
}

TEST_F(HamiBackendTest, UndecodableReservationFailsPod) {
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  ASSERT_TRUE(server_.UpdatePod("default", "p1", [](nlohmann::json& p) {
    p["metadata"]["annotations"][hami::kMigAllocations] = "{bad";
  }));
  EXPECT_THAT(backend_->AllocateContainer({"x"}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("pod default/p1")));
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseFailed);
}

TEST_F(HamiBackendTest, ReservationOnAnotherGpuIsRejected) {
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  ASSERT_TRUE(server_.UpdatePod("default", "p1", [](nlohmann::json& p) {
    const std::string other = "GPU-99999999-9999-9999-9999-999999999999";
    p["metadata"]["annotations"][hami::kMigAllocations] =
        R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")" + other +
        R"(","profile":"2g.10gb","placement":{"start":2,"size":2}}])";
    p["metadata"]["annotations"][hami::kDevicesToAllocate] = other + ",NVIDIA,9856,29:;";
  }));
  EXPECT_THAT(backend_->AllocateContainer({"x"}).status(),
              StatusIs(StatusCode::kNotFound, HasSubstr("is not on node node-1")));
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseFailed);
}

TEST_F(HamiBackendTest, DeviceListDisagreeingWithReservationIsRejected) {
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  ASSERT_TRUE(server_.UpdatePod("default", "p1", [](nlohmann::json& p) {
    p["metadata"]["annotations"][hami::kDevicesToAllocate] = "GPU-elsewhere,NVIDIA,9856,29:;";
  }));
  EXPECT_THAT(backend_->AllocateContainer({"x"}).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("the device to allocate is")));
}

TEST_F(HamiBackendTest, ReservedPlacementHeldByActivePodFailsWithoutTouchingIt) {
  AddBoundPod("a", {{0, "3g.20gb", {0, 4}, 19968, 43}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation first, backend_->AllocateContainer({"x"}));
  SetPhase("a", "Running");
  AddBoundPod("b", {{0, "3g.20gb", {0, 4}, 19968, 43}});
  const Status s = backend_->AllocateContainer({"y"}).status();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("pod default/b"));
  EXPECT_EQ(BindPhase("b"), hami::kBindPhaseFailed);
  const auto inst = Instances();
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].mig_uuid, first.mig_uuids[0]);
  EXPECT_EQ(inst[0].state, engine::InstanceState::kActive);
}

TEST_F(HamiBackendTest, PodDeletedWhileAllocatingRollsBackToIdle) {
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  server_.SetBeforePodPatch(
      [this](const std::string& ns, const std::string& name) { server_.DeletePod(ns, name); });
  EXPECT_THAT(backend_->AllocateContainer({"x"}).status(),
              StatusIs(StatusCode::kNotFound, HasSubstr("pods \"p1\" not found")));
  const auto inst = Instances();
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].state, engine::InstanceState::kIdle);
}

TEST_F(HamiBackendTest, EndedPodIsReleasedAndTheNextPodReusesTheSameInstance) {
  AddBoundPod("a", {{0, "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation first, backend_->AllocateContainer({"x"}));
  SetPhase("a", "Running");
  MIGD_ASSERT_OK_AND_ASSIGN(ReleasePassResult r, backend_->ReleaseEndedPods());
  EXPECT_EQ(r.released, 0u);
  EXPECT_EQ(r.active_pods, 1u);
  ASSERT_TRUE(server_.DeletePod("default", "a"));
  MIGD_ASSERT_OK_AND_ASSIGN(r, backend_->ReleaseEndedPods());
  EXPECT_EQ(r.released, 1u);
  ASSERT_EQ(Instances().size(), 1u);
  EXPECT_EQ(Instances()[0].state, engine::InstanceState::kIdle);

  AddBoundPod("b", {{0, "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation second, backend_->AllocateContainer({"y"}));
  ASSERT_EQ(second.mig_uuids.size(), 1u);
  EXPECT_EQ(second.mig_uuids[0], first.mig_uuids[0]);  // reused, not recreated
  EXPECT_EQ(Instances()[0].owner.pod_name, "b");
  EXPECT_EQ(Allocations("b")[0].mig_uuid, first.mig_uuids[0].value());
}

TEST_F(HamiBackendTest, FinishedAndTerminatingPodsAreReleased) {
  AddBoundPod("a", {{0, "2g.10gb", {0, 2}}});
  MIGD_ASSERT_OK(backend_->AllocateContainer({"x"}).status());
  AddBoundPod("b", {{0, "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK(backend_->AllocateContainer({"y"}).status());
  AddBoundPod("c", {{0, "2g.10gb", {4, 2}}});
  MIGD_ASSERT_OK(backend_->AllocateContainer({"z"}).status());
  SetPhase("a", "Succeeded");
  SetPhase("b", "Failed");
  SetPhase("c", "Running");
  ASSERT_TRUE(server_.UpdatePod("default", "c", [](nlohmann::json& p) {
    p["metadata"]["deletionTimestamp"] = "2026-11-29T11:00:00Z";
  }));
  MIGD_ASSERT_OK_AND_ASSIGN(ReleasePassResult r, backend_->ReleaseEndedPods());
  EXPECT_EQ(r.released, 3u);
  for (const auto& v : Instances()) EXPECT_EQ(v.state, engine::InstanceState::kIdle);
}

TEST_F(HamiBackendTest, ListFailureReleasesNothing) {
  AddBoundPod("a", {{0, "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK(backend_->AllocateContainer({"x"}).status());
  ASSERT_TRUE(server_.DeletePod("default", "a"));
  server_.FailNext(1, 503);
  EXPECT_THAT(backend_->ReleaseEndedPods().status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("nothing released")));
  EXPECT_EQ(Instances()[0].state, engine::InstanceState::kActive);
}

TEST_F(HamiBackendTest, ForeignNodeLockIsKept) {
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  nlohmann::json lock;
  lock["metadata"]["annotations"][hami::kNodeLock] = "2026-11-29T11:00:00Z,other,pod-x";
  MIGD_ASSERT_OK(client_->PatchNode(kNode, lock).status());
  MIGD_ASSERT_OK(backend_->AllocateContainer({"x"}).status());
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseSuccess);
  EXPECT_EQ(NodeLock(), "2026-11-29T11:00:00Z,other,pod-x");
}

TEST_F(HamiBackendTest, ConflictingNodeWriterDoesNotKeepTheLock) {
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  server_.SetBeforeNodePatch([this](const std::string& node) {
    server_.UpdateNode(node, [](nlohmann::json& n) {
      n["metadata"]["annotations"][hami::kNodeHandshake] = "Requesting_2026-11-29 11:00:00";
    });
  });
  MIGD_ASSERT_OK(backend_->AllocateContainer({"x"}).status());
  EXPECT_EQ(server_.conflicts(), 1);
  EXPECT_EQ(NodeLock(), std::nullopt);
  EXPECT_EQ(BindPhase("p1"), hami::kBindPhaseSuccess);
}

TEST_F(HamiBackendTest, FailureToFinishBindDoesNotUndoTheAllocation) {
  AddBoundPod("p1", {{0, "2g.10gb", {2, 2}}});
  // The identity patch works; the GET of the node for the lock release fails.
  server_.SetBeforePodPatch([this](const std::string&, const std::string&) {
    server_.SetBeforePodPatch([this](const std::string&, const std::string&) {
      server_.FailNext(1, 503);  // the GET of the node
    });
  });
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation a, backend_->AllocateContainer({"x"}));
  ASSERT_EQ(a.mig_uuids.size(), 1u);
  EXPECT_EQ(Instances().at(0).state, engine::InstanceState::kActive);
  EXPECT_TRUE(Allocations("p1").at(0).RuntimeReady());
}

TEST_F(HamiBackendTest, PublishesNodeRegistration) {
  MIGD_ASSERT_OK(backend_->PublishNodeRegistration());
  auto reg = server_.NodeAnnotation(kNode, hami::kNodeRegister);
  ASSERT_TRUE(reg.has_value());
  const nlohmann::json v = nlohmann::json::parse(*reg);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0]["id"], gpu_uuid_);
  EXPECT_EQ(v[0]["mode"], "mig");
  EXPECT_FALSE(v[0]["migProfiles"].empty());
  EXPECT_THAT(server_.NodeAnnotation(kNode, hami::kNodeHandshake).value_or(""),
              ::testing::StartsWith("Reported "));
  server_.FailNext(1, 500);
  EXPECT_THAT(backend_->PublishNodeRegistration(),
              StatusIs(StatusCode::kUnavailable, ::testing::_));
}

TEST_F(HamiBackendTest, PodWatcherRegistersAndReleasesEndedPods) {
  AddBoundPod("a", {{0, "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK(backend_->AllocateContainer({"x"}).status());
  ASSERT_TRUE(server_.DeletePod("default", "a"));
  PodWatcher watcher(backend_.get(), {std::chrono::milliseconds(10), std::chrono::seconds(60)});
  watcher.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline &&
         Instances()[0].state != engine::InstanceState::kIdle) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  watcher.Stop();
  EXPECT_EQ(Instances()[0].state, engine::InstanceState::kIdle);
  EXPECT_GE(watcher.passes(), 1u);
  EXPECT_TRUE(server_.NodeAnnotation(kNode, hami::kNodeRegister).has_value());
}

}  // namespace
}  // namespace migd::k8s
