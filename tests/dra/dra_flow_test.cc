// The DRA frontend end to end in one process: the fake DRA kubelet (real
// unix sockets, the public protos) drives migd's DraPluginServer, whose
// ClaimPreparer reads ResourceClaims from the fake API server and realises
// them through a real engine::Manager with CdiObserver on NvmlDriver over
// libnvidia-ml-sim.so (one A100-40GB); the SlicePublisher publishes the
// pool there, and the allocator model plays kube-scheduler on those slices.
//
// Covered: publish -> schedule -> prepare (CDI id, exact placement) ->
// prepare again (no NVML mutation) -> unprepare (Idle, spec kept) ->
// republish (Idle first) -> reuse; a claim blocked by an Active instance
// (refused, nothing changed); a device of another pool; only overlapping
// Idle instances reclaimed; kubelet restart (slices recreated, claims still
// prepared); migd restart between prepare and unprepare; health by MIG UUID.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "cdi/fake_host_reader.h"
#include "cdi/names.h"
#include "cdi/publisher.h"
#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "engine/cdi_observer.h"
#include "engine/events.h"
#include "engine/manager.h"
#include "engine/owner_source.h"
#include "engine/manager_testing.h"
#include "k8s/apiserver/kube_client.h"
#include "k8s/apiserver/testing/fake_api_server.h"
#include "k8s/dra/claim_preparer.h"
#include "k8s/dra/engine_snapshot.h"
#include "k8s/dra/health_reporter.h"
#include "k8s/dra/plugin_server.h"
#include "k8s/dra/resource_api.h"
#include "k8s/dra/slice_publisher.h"
#include "k8s/dra/testing/allocator_model.h"
#include "k8s/dra/testing/fake_dra_kubelet.h"
#include "k8s/dra/testing/fake_health_source.h"
#include "k8s/dra/testing/fake_resource_api.h"
#include "testing/eventually.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::k8s::dra {
namespace {

using ::migd::driver::NvmlDriver;
using ::migd::driver::sim_testing::SimMachine;
using ::testing::HasSubstr;
using Json = nlohmann::json;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;

constexpr char kNode[] = "gpu-node-1";
constexpr char kDriver[] = "mig.migd.io";
constexpr char kDevRoot[] = "/fake-dev";

// migd's side: everything a restart of migd replaces.
struct Migd {
  std::unique_ptr<NvmlDriver> driver;
  std::unique_ptr<store::RecordStore> store;
  std::unique_ptr<cdi::Publisher> publisher;
  std::unique_ptr<engine::CdiObserver> observer;
  engine::RecordsOwnerSource owners;
  engine::ListenerFanout fanout;
  std::unique_ptr<SlicePublisher> slices;
  std::unique_ptr<engine::Manager> mgr;
  std::unique_ptr<ClaimPreparer> preparer;
  std::unique_ptr<HealthReporter> health;
  std::unique_ptr<DraPluginServer> plugin;
};

class DraFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim_ = std::make_unique<SimMachine>(
        "a100-40gb:1",
        std::map<std::string, std::string>{{"MIGD_SIM_PROC_ROOT", dir_.Join("proc")}});
    const std::string dev = kDevRoot;
    reader_.AddNode(dev + "/nvidia0", {'c', 195, 0, 0666});
    reader_.AddNode(dev + "/nvidiactl", {'c', 195, 255, 0666});
    reader_.AddNode(dev + "/nvidia-uvm", {'c', 511, 0, 0666});
    reader_.AddNode(dev + "/nvidia-uvm-tools", {'c', 511, 1, 0666});
    std::filesystem::create_directories(dir_.Join("cdi"));
    ASSERT_TRUE(api_.Start());
    api_.AddNode(kNode);
    KubeConfig kc;
    kc.server = api_.url();
    MIGD_ASSERT_OK_AND_ASSIGN(client_, KubeClient::Create(kc));
    resource_api_ = std::make_unique<ResourceApi>(client_.get());
    StartMigd();
    testing::FakeDraKubeletOptions ko;
    ko.registry_dir = dir_.Join("plugins_registry");
    ko.health = testing::HealthMode::kAdvertised;
    ko.on_start = [this] { resources_.DeleteNodeSlices(kNode); };
    MIGD_ASSERT_OK_AND_ASSIGN(kubelet_, testing::FakeDraKubelet::Start(ko));
    ASSERT_EQ(kubelet_->plugins().size(), 1u);
    // kubelet deleted the node's slices at its start; the registration's
    // Kick would republish through the loop, which most tests drive by hand.
    MIGD_ASSERT_OK(migd_->slices->SyncOnce());
  }
  void TearDown() override {
    kubelet_.reset();
    StopMigd();
    sim_.reset();
  }

  void StartMigd() {
    migd_ = std::make_unique<Migd>();
    Migd& m = *migd_;
    MIGD_ASSERT_OK_AND_ASSIGN(m.driver, NvmlDriver::Open(MIGD_SIM_LIBRARY));
    MIGD_ASSERT_OK_AND_ASSIGN(m.store,
                              engine::testing::OpenStore(dir_.Join("state"), clock_,
                                                         engine::testing::kBootId, false));
    cdi::Options co;
    co.spec_dir = dir_.Join("cdi");
    co.proc_root = dir_.Join("proc");
    co.dev_root = kDevRoot;
    co.sync = false;
    m.publisher = std::make_unique<cdi::Publisher>(co, &reader_);
    m.observer = std::make_unique<engine::CdiObserver>(m.publisher.get());
    SlicePublisherOptions so;
    so.driver = kDriver;
    so.node_name = kNode;
    so.resync_period = std::chrono::milliseconds(100);
    so.retry_initial = std::chrono::milliseconds(20);
    Migd* raw = &m;
    m.slices = std::make_unique<SlicePublisher>(
        resource_api_.get(), [raw] { return SnapshotOf(*raw->mgr); }, so);
    m.fanout.Add(m.slices.get());
    engine::ManagerOptions mo;
    mo.boot_id = engine::testing::kBootId;
    mo.listener = &m.fanout;
    MIGD_ASSERT_OK_AND_ASSIGN(m.mgr, engine::Manager::Create(mo, *m.driver, *m.store, clock_,
                                                             m.owners, m.observer.get()));
    m.preparer = std::make_unique<ClaimPreparer>(resource_api_.get(), m.mgr.get(), m.observer.get(),
                                                 ClaimPreparerOptions{kDriver, kNode});
    m.health = std::make_unique<HealthReporter>(&health_, m.mgr.get(), kNode, clock_);
    DraPluginOptions po;
    po.driver = kDriver;
    po.registry_dir = dir_.Join("plugins_registry");
    po.plugin_dir = dir_.Join("plugins/mig.migd.io");
    po.watch_period = std::chrono::milliseconds(50);
    po.health_heartbeat = std::chrono::milliseconds(500);
    MIGD_ASSERT_OK_AND_ASSIGN(m.plugin,
                              DraPluginServer::Start(po, m.preparer.get(), m.health->Feed(),
                                                     [raw] { raw->slices->Kick(); }));
    MIGD_ASSERT_OK(m.slices->SyncOnce());
    gpu_uuid_ = m.mgr->Gpus().at(0).info.uuid.value();
  }
  void StopMigd() {
    if (!migd_) return;
    if (migd_->plugin) migd_->plugin->Stop();
    if (migd_->slices) migd_->slices->Stop();
    migd_->plugin.reset();
    migd_->preparer.reset();
    migd_->health.reset();
    migd_->mgr.reset();
    migd_.reset();
  }

  // kube-scheduler: the device for one `profile` on the published slices,
  // with the devices of `claims_` allocated.
  std::string Schedule(const std::string& profile) {
    std::set<testing::DeviceRef> allocated;
    for (const auto& [uid, device] : claims_) allocated.insert({kDriver, kNode, device});
    auto got = testing::AllocatorModel(36).Allocate(
        resources_.Slices(), allocated,
        {testing::ModelRequest{kDriver, testing::StringAttributeIs("profile", profile), 1}}, kNode);
    EXPECT_TRUE(got.has_value()) << "no " << profile << " device is allocatable";
    return got ? (*got)[0].device : "";
  }
  // A claim allocated to `devices` in pool `pool`.
  void AddClaim(const std::string& name, const std::vector<std::string>& devices,
                const std::string& pool = kNode) {
    std::vector<testing::AllocatedDevice> results;
    for (size_t i = 0; i < devices.size(); ++i) {
      results.push_back({"gpu" + std::to_string(i), kDriver, pool, devices[i]});
      claims_["uid-" + name] = devices[i];
    }
    resources_.AddClaim(testing::MakeClaim("ml", name, "uid-" + name, kNode, results));
  }
  drav1::NodePrepareResourceResponse Prepare(const std::string& name) {
    drav1::NodePrepareResourcesResponse resp;
    grpc::Status s = kubelet_->Prepare(kDriver, {{"ml", name, "uid-" + name}}, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.claims().size(), 1u);
    return resp.claims().count("uid-" + name) ? resp.claims().at("uid-" + name)
                                              : drav1::NodePrepareResourceResponse();
  }
  std::string Unprepare(const std::string& name) {
    drav1::NodeUnprepareResourcesResponse resp;
    grpc::Status s = kubelet_->Unprepare(kDriver, {{"ml", name, "uid-" + name}}, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.claims().count("uid-" + name), 1u);
    claims_.erase("uid-" + name);
    return resp.claims().count("uid-" + name) ? resp.claims().at("uid-" + name).error() : "?";
  }
  std::optional<engine::InstanceView> Find(const std::string& mig_uuid) {
    for (const auto& v : migd_->mgr->List().instances) {
      if (v.mig_uuid.value() == mig_uuid) return v;
    }
    return std::nullopt;
  }
  bool HasSpecFile(const std::string& mig_uuid) {
    struct stat st {};
    return ::lstat((dir_.Join("cdi") + "/" + cdi::SpecFileName(cdi::Kind(), mig_uuid)).c_str(),
                   &st) == 0;
  }
  // NVML calls that change the layout.
  uint64_t Mutations() {
    uint64_t n = 0;
    for (const auto& [k, v] : sim_->Counts()) {
      if (k.first.find("Create") != std::string::npos ||
          k.first.find("Destroy") != std::string::npos) {
        n += v;
      }
    }
    return n;
  }
  std::string MigOf(const drav1::NodePrepareResourceResponse& r, int i = 0) {
    const std::string id = r.devices(i).cdi_device_ids(0);
    return id.substr(id.find('=') + 1);
  }

  migd::testing::TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<SimMachine> sim_;
  cdi::testing::FakeHostReader reader_;
  k8s::testing::FakeApiServer api_;
  testing::FakeResourceApi resources_{api_};
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<ResourceApi> resource_api_;
  testing::FakeHealthSource health_;
  std::unique_ptr<Migd> migd_;
  std::unique_ptr<testing::FakeDraKubelet> kubelet_;
  std::map<std::string, std::string> claims_;  // uid -> allocated device
  std::string gpu_uuid_;
};

TEST_F(DraFlowTest, SchedulePrepareTwiceUnprepareAndReuse) {
  const std::string device = Schedule("3g.20gb");
  ASSERT_FALSE(device.empty());
  AddClaim("train", {device});
  const drav1::NodePrepareResourceResponse r = Prepare("train");
  ASSERT_TRUE(r.error().empty()) << r.error();
  ASSERT_EQ(r.devices_size(), 1);
  EXPECT_EQ(r.devices(0).device_name(), device);
  EXPECT_EQ(r.devices(0).pool_name(), kNode);
  EXPECT_EQ(r.devices(0).request_names(0), "gpu0");
  const std::string mig = MigOf(r);
  EXPECT_EQ(r.devices(0).cdi_device_ids(0), "hami.io/mig=" + mig);
  EXPECT_TRUE(HasSpecFile(mig));
  auto inst = Find(mig);
  ASSERT_TRUE(inst);
  EXPECT_EQ(inst->state, engine::InstanceState::kActive);
  EXPECT_EQ(DeviceName(GpuIndex(0), *migd_->mgr->ModelOf(GpuIndex(0))->FindProfileByName("3g.20gb"),
                       inst->placement),
            device);
  EXPECT_EQ(inst->request_id, "dra-uid-train");
  EXPECT_EQ(inst->owner.opaque_id, "resourceclaim:ml/train");

  // Prepare again (kubelet retries, restarts): the same answer, no NVML change.
  const uint64_t before = Mutations();
  const drav1::NodePrepareResourceResponse again = Prepare("train");
  EXPECT_EQ(again.SerializeAsString(), r.SerializeAsString());
  EXPECT_EQ(Mutations(), before);

  // Unprepare: Idle, GI/CI and CDI spec kept; twice is fine.
  EXPECT_EQ(Unprepare("train"), "");
  EXPECT_EQ(Find(mig)->state, engine::InstanceState::kIdle);
  EXPECT_TRUE(HasSpecFile(mig));
  EXPECT_EQ(Unprepare("train"), "");
  EXPECT_EQ(Unprepare("never-prepared"), "");

  // The republished pool puts the Idle instance first: the scheduler picks
  // it and Prepare reuses it (same MIG UUID, no create).
  MIGD_ASSERT_OK(migd_->slices->SyncOnce());
  EXPECT_EQ(Schedule("3g.20gb"), device);
  AddClaim("train-2", {device});
  const uint64_t creates = migd_->mgr->counters().creates;
  const drav1::NodePrepareResourceResponse r2 = Prepare("train-2");
  ASSERT_TRUE(r2.error().empty()) << r2.error();
  EXPECT_EQ(MigOf(r2), mig);
  EXPECT_EQ(migd_->mgr->counters().creates, creates);
  EXPECT_EQ(migd_->mgr->counters().reuses, 1u);
}

TEST_F(DraFlowTest, PlacementBlockedByActiveInstanceIsRefusedAndNothingChanges) {
  const std::string device = Schedule("7g.40gb");
  AddClaim("big", {device});
  // Before kubelet prepares, migd's own API hands out a 1g on that GPU.
  engine::AllocateRequest req{.request_id = "api-1",
                              .owner = store::Owner::Opaque("job-1"),
                              .instances = {{"1g.5gb", std::nullopt, std::nullopt}}};
  MIGD_ASSERT_OK(migd_->mgr->Allocate(req).status());
  const uint64_t before = Mutations();
  const auto instances = migd_->mgr->List().instances;
  const drav1::NodePrepareResourceResponse r = Prepare("big");
  EXPECT_THAT(r.error(), HasSubstr("ResourceClaim ml/big: preparing " + device + " failed"));
  EXPECT_THAT(r.error(), HasSubstr("blocked by Active 1g.5gb"));
  EXPECT_THAT(r.error(), HasSubstr("the scheduler did not allocate"));
  EXPECT_EQ(r.devices_size(), 0);
  EXPECT_EQ(Mutations(), before);
  EXPECT_EQ(migd_->mgr->List().instances.size(), instances.size());
  // The republished pool no longer offers the 7g (publishing less).
  MIGD_ASSERT_OK(migd_->slices->SyncOnce());
  for (const Json& s : resources_.Slices()) {
    for (const Json& d : s["spec"].value("devices", Json::array())) {
      EXPECT_NE(d["attributes"]["profile"]["string"], "7g.40gb");
    }
  }
}

TEST_F(DraFlowTest, DeviceOfAnotherPoolOrUnknownDeviceIsRefused) {
  AddClaim("elsewhere", {"gpu-0-3g20gb-9-4"}, "other-node");
  const uint64_t before = Mutations();
  EXPECT_THAT(Prepare("elsewhere").error(),
              HasSubstr("is in pool other-node, which is not this node's pool"));
  AddClaim("ghost", {"gpu-7-3g20gb-9-4"});
  EXPECT_THAT(Prepare("ghost").error(), HasSubstr("no device gpu-7-3g20gb-9-4"));
  // Replaced claim: the API server has another uid under the same name.
  resources_.AddClaim(testing::MakeClaim("ml", "replaced", "uid-new", kNode,
                                         {{"gpu", kDriver, kNode, "gpu-0-3g20gb-9-4"}}));
  EXPECT_THAT(Prepare("replaced").error(), HasSubstr("deleted and recreated"));
  resources_.AddClaim(testing::MakeClaim("ml", "pending", "uid-pending", kNode, {}));
  EXPECT_THAT(Prepare("pending").error(), HasSubstr("not allocated"));
  EXPECT_THAT(Prepare("missing").error(), HasSubstr("ResourceClaim ml/missing"));
  EXPECT_EQ(Mutations(), before);
  EXPECT_TRUE(migd_->mgr->List().instances.empty());
}

TEST_F(DraFlowTest, OnlyOverlappingIdleInstancesAreReclaimed) {
  // Two 1g claims at both ends, prepared and unprepared: two Idle instances.
  AddClaim("a", {"gpu-0-1g5gb-19-0"});
  AddClaim("b", {"gpu-0-1g5gb-19-6"});
  const std::string mig_a = MigOf(Prepare("a"));
  const std::string mig_b = MigOf(Prepare("b"));
  Unprepare("a");
  Unprepare("b");
  // A 4g at 0:4 overlaps only a.
  AddClaim("four", {"gpu-0-4g20gb-5-0"});
  const drav1::NodePrepareResourceResponse r = Prepare("four");
  ASSERT_TRUE(r.error().empty()) << r.error();
  EXPECT_FALSE(Find(mig_a).has_value());
  ASSERT_TRUE(Find(mig_b).has_value());
  EXPECT_EQ(Find(mig_b)->state, engine::InstanceState::kIdle);
  EXPECT_FALSE(HasSpecFile(mig_a));
  EXPECT_TRUE(HasSpecFile(mig_b));
}

TEST_F(DraFlowTest, MultiDeviceClaimIsAllOrNothing) {
  AddClaim("pair", {"gpu-0-2g10gb-14-0", "gpu-0-2g10gb-14-2"});
  const drav1::NodePrepareResourceResponse r = Prepare("pair");
  ASSERT_TRUE(r.error().empty()) << r.error();
  ASSERT_EQ(r.devices_size(), 2);
  EXPECT_EQ(r.devices(0).request_names(0), "gpu0");
  EXPECT_EQ(r.devices(1).request_names(0), "gpu1");
  EXPECT_NE(MigOf(r, 0), MigOf(r, 1));
  // Overlapping devices in one claim: refused before anything is created.
  AddClaim("overlap", {"gpu-0-3g20gb-9-4", "gpu-0-4g20gb-5-0"});
  const uint64_t before = Mutations();
  EXPECT_FALSE(Prepare("overlap").error().empty());
  EXPECT_EQ(Mutations(), before);
}

TEST_F(DraFlowTest, KubeletRestartRecreatesSlicesAndKeepsClaimsPrepared) {
  migd_->slices->Start();
  AddClaim("train", {Schedule("2g.10gb")});
  const drav1::NodePrepareResourceResponse r = Prepare("train");
  ASSERT_TRUE(r.error().empty()) << r.error();
  const int regs = migd_->plugin->registrations();
  MIGD_ASSERT_OK(kubelet_->Restart());  // deletes the node's slices first
  ASSERT_TRUE(
      migd::testing::Eventually([&] { return migd_->plugin->registrations() == regs + 1; }));
  ASSERT_TRUE(migd::testing::Eventually([&] { return !resources_.Slices().empty(); }));
  const uint64_t before = Mutations();
  EXPECT_EQ(Prepare("train").SerializeAsString(), r.SerializeAsString());
  EXPECT_EQ(Mutations(), before);
  // The recreated pool is complete and valid for the scheduler.
  ASSERT_TRUE(migd::testing::Eventually([&] {
    const auto p = testing::AllocatorModel(36).Pools(resources_.Slices(), kNode);
    return p.size() == 1 && p[0].complete && p[0].valid;
  }));
}

TEST_F(DraFlowTest, MigdRestartBetweenPrepareAndUnprepare) {
  AddClaim("train", {Schedule("3g.20gb")});
  const drav1::NodePrepareResourceResponse r = Prepare("train");
  ASSERT_TRUE(r.error().empty()) << r.error();
  const std::string mig = MigOf(r);
  const int64_t gen = migd_->slices->stats().generation;
  StopMigd();
  StartMigd();  // recovery from the records; the sockets are new files
  MIGD_ASSERT_OK(kubelet_->Discover());
  ASSERT_EQ(kubelet_->plugins().size(), 1u);
  EXPECT_EQ(Find(mig)->state, engine::InstanceState::kActive);
  EXPECT_GT(migd_->slices->stats().generation, gen);
  // kubelet prepares again after a restart of either side: a replay.
  const uint64_t before = Mutations();
  EXPECT_EQ(Prepare("train").SerializeAsString(), r.SerializeAsString());
  EXPECT_EQ(Mutations(), before);
  EXPECT_EQ(Unprepare("train"), "");
  EXPECT_EQ(Find(mig)->state, engine::InstanceState::kIdle);
  EXPECT_EQ(Mutations(), before);
}

TEST_F(DraFlowTest, InstanceHealthReachesItsDevice) {
  const std::string device = Schedule("1g.10gb");
  AddClaim("train", {device});
  const std::string mig = MigOf(Prepare("train"));
  ASSERT_TRUE(kubelet_->WaitForHealth(kDriver, [](const auto& d) { return !d.empty(); }));
  health_.SetInstance(MigUuid(mig), {Health::kUnhealthy, "Xid 94: contained ECC error", 0});
  ASSERT_TRUE(kubelet_->WaitForHealth(kDriver, [&](const auto& d) {
    for (const auto& h : d) {
      if (h.device().device_name() == device) return h.health() == ::v1::UNHEALTHY;
    }
    return false;
  }));
  int unhealthy = 0;
  for (const auto& h : kubelet_->health(kDriver)) {
    unhealthy += h.health() == ::v1::UNHEALTHY;
    EXPECT_EQ(h.device().pool_name(), kNode);
  }
  EXPECT_EQ(unhealthy, 1);
}

}  // namespace
}  // namespace migd::k8s::dra
