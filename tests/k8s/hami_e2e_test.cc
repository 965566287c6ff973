// HAMi mode end to end: a FakeKubelet (real unix sockets, dial-back
// registration) talks to migd's DevicePluginServer, whose backend is the
// HamiBackend over the fake API server (HTTP) and a real engine::Manager with
// CdiObserver on NvmlDriver over libnvidia-ml-sim.so (one A100-40GB).
//
//   pod with a reservation -> kubelet Allocate -> instance created exactly
//   at the reserved placement -> annotation patched (migUUID, ids) ->
//   CDI name returned and its spec file present; pod deleted -> Idle (spec
//   kept); next pod with the same reservation -> the same MIG UUID; kubelet
//   restart -> re-registered and the device list sent again. Hostile pods
//   (self-written annotations, spec.nodeName, older bind times, forged or
//   stale locks) reach the same path through the fake kubelet and leave the
//   simulated GPUs and every pod untouched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "cdi/fake_host_reader.h"
#include "cdi/names.h"
#include "cdi/publisher.h"
#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "engine/cdi_observer.h"
#include "engine/manager.h"
#include "engine/manager_testing.h"
#include "engine/owner_source.h"
#include "k8s/apiserver/hami_backend.h"
#include "k8s/apiserver/hami_codec.h"
#include "k8s/apiserver/kube_client.h"
#include "k8s/apiserver/pod_watcher.h"
#include "k8s/apiserver/testing/fake_api_server.h"
#include "k8s/apiserver/testing/hami_scheduler.h"
#include "k8s/deviceplugin/device_plugin_server.h"
#include "k8s/testing/fake_kubelet.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::k8s {
namespace {

using ::migd::driver::NvmlDriver;
using ::migd::driver::sim_testing::SimMachine;
using ::migd::k8s::testing::FakeApiServer;
using ::migd::k8s::testing::FakeHamiScheduler;
using ::migd::k8s::testing::FakeKubelet;
using ::migd::k8s::testing::MakePod;
using ::migd::k8s::testing::PodSpec;

constexpr char kNode[] = "gpu-node-1";

// "<verb> <resource>" for every rule of the Helm chart's ClusterRole
// (deploy/helm/migd/templates/rbac.yaml): `resources: [...]` then
// `verbs: [...]`.
// The rules the chart renders in HAMi mode: the DRA block
// ({{- if .Values.config.dra.enabled }} ... {{- end }}) is left out.
std::set<std::string> ChartRbacVerbs() {
  std::ifstream in(std::string(MIGD_SOURCE_DIR) + "/deploy/helm/migd/templates/rbac.yaml");
  std::set<std::string> out;
  std::vector<std::string> resources;
  const std::regex list(R"(^\s*-?\s*(resources|verbs):\s*\[(.*)\]\s*$)");
  const std::regex item(R"re("([^"]+)")re");
  bool in_dra = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("{{- if .Values.config.dra.enabled }}") != std::string::npos) in_dra = true;
    if (in_dra && line.find("{{- end }}") != std::string::npos) in_dra = false;
    std::smatch m;
    if (in_dra || !std::regex_match(line, m, list)) continue;
    std::vector<std::string> items;
    const std::string body = m[2];
    for (auto it = std::sregex_iterator(body.begin(), body.end(), item);
         it != std::sregex_iterator(); ++it) {
      items.push_back((*it)[1]);
    }
    if (m[1] == "resources") {
      resources = items;
      continue;
    }
    for (const std::string& r : resources) {
      for (const std::string& v : items) out.insert(v + " " + r);
    }
  }
  return out;
}
constexpr char kDevRoot[] = "/fake-dev";

class HamiE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The machine and the engine with CDI publication.
    sim_ = std::make_unique<SimMachine>(
        "a100-40gb:1",
        std::map<std::string, std::string>{{"MIGD_SIM_PROC_ROOT", dir_.Join("proc")}});
    MIGD_ASSERT_OK_AND_ASSIGN(driver_, NvmlDriver::Open(MIGD_SIM_LIBRARY));
    MIGD_ASSERT_OK_AND_ASSIGN(store_, engine::testing::OpenStore(dir_.Join("state"), clock_,
                                                                 engine::testing::kBootId, false));
    std::filesystem::create_directories(dir_.Join("cdi"));
    const std::string dev = kDevRoot;
    reader_.AddNode(dev + "/nvidia0", {'c', 195, 0, 0666});
    reader_.AddNode(dev + "/nvidiactl", {'c', 195, 255, 0666});
    reader_.AddNode(dev + "/nvidia-uvm", {'c', 511, 0, 0666});
    reader_.AddNode(dev + "/nvidia-uvm-tools", {'c', 511, 1, 0666});
    cdi::Options co;
    co.spec_dir = dir_.Join("cdi");
    co.proc_root = dir_.Join("proc");
    co.dev_root = kDevRoot;
    co.sync = false;
    publisher_ = std::make_unique<cdi::Publisher>(co, &reader_);
    observer_ = std::make_unique<engine::CdiObserver>(publisher_.get());
    engine::ManagerOptions mo;
    mo.boot_id = engine::testing::kBootId;
    MIGD_ASSERT_OK_AND_ASSIGN(
        mgr_, engine::Manager::Create(mo, *driver_, *store_, clock_, owners_, observer_.get()));
    gpu_uuid_ = mgr_->Gpus().at(0).info.uuid.value();

    // The cluster side.
    ASSERT_TRUE(api_.Start());
    api_.AddNode(kNode);
    KubeConfig kc;
    kc.server = api_.url();
    MIGD_ASSERT_OK_AND_ASSIGN(client_, KubeClient::Create(kc));
    HamiBackendOptions ho;
    ho.node_name = kNode;
    ho.cdi = observer_.get();
    backend_ = std::make_unique<HamiBackend>(client_.get(), mgr_.get(), &clock_, ho);

    const std::string plugins = dir_.Join("device-plugins");
    std::filesystem::create_directories(plugins);
    MIGD_ASSERT_OK_AND_ASSIGN(kubelet_, FakeKubelet::Start(plugins));
    DevicePluginOptions po;
    po.plugin_dir = plugins;
    po.watch_period = std::chrono::milliseconds(50);
    po.register_retry_initial = std::chrono::milliseconds(20);
    MIGD_ASSERT_OK_AND_ASSIGN(plugin_, DevicePluginServer::Start(po, backend_.get()));
  }
  void TearDown() override {
    if (plugin_) plugin_->Stop();
    kubelet_.reset();
    plugin_.reset();
    backend_.reset();
    mgr_.reset();
    store_.reset();
    driver_.reset();
    sim_.reset();
  }

  // The pod as HAMi's scheduler leaves it after Filter and Bind.
  void AddBoundPod(const std::string& name, const std::string& profile, mig::Placement p) {
    PodSpec ps;
    ps.name = name;
    ps.uid = "uid-" + name;
    scheduler_.Schedule(ps, {{0, gpu_uuid_, profile, p, 19968, 43}});
  }
  // GI/CI creates and destroys seen by the simulated library.
  uint64_t Mutations() {
    uint64_t n = 0;
    for (const auto& [key, count] : sim_->Counts()) {
      for (const char* f : {"CreateGpuInstance", "CreateComputeInstance", "Destroy"}) {
        if (key.first.find(f) != std::string::npos) n += count;
      }
    }
    return n;
  }
  std::optional<hami::MigAllocation> Reservation(const std::string& pod) {
    auto text = api_.PodAnnotation("default", pod, hami::kMigAllocations);
    if (!text) return std::nullopt;
    auto a = hami::DecodeMigAllocations(*text);
    if (!a.ok() || a->size() != 1) return std::nullopt;
    return (*a)[0];
  }
  std::optional<engine::InstanceView> Find(const std::string& mig_uuid) {
    for (const auto& v : mgr_->List().instances) {
      if (v.mig_uuid.value() == mig_uuid) return v;
    }
    return std::nullopt;
  }
  bool HasSpecFile(const std::string& mig_uuid) {
    struct stat st {};
    const std::string path = dir_.Join("cdi") + "/" + cdi::SpecFileName(cdi::Kind(), mig_uuid);
    return ::lstat(path.c_str(), &st) == 0;
  }
  migd::testing::TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<SimMachine> sim_;
  std::unique_ptr<NvmlDriver> driver_;
  std::unique_ptr<store::RecordStore> store_;
  cdi::testing::FakeHostReader reader_;
  std::unique_ptr<cdi::Publisher> publisher_;
  std::unique_ptr<engine::CdiObserver> observer_;
  engine::RecordsOwnerSource owners_;
  std::unique_ptr<engine::Manager> mgr_;
  FakeApiServer api_;
  FakeHamiScheduler scheduler_{&api_, &clock_, kNode};
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<HamiBackend> backend_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<DevicePluginServer> plugin_;
  std::string gpu_uuid_;
};

TEST_F(HamiE2eTest, ReservationToCdiThenReleaseReuseAndKubeletRestart) {
  ASSERT_TRUE(kubelet_->WaitForRegistration(1));
  EXPECT_EQ(kubelet_->registrations()[0].resource_name(), "nvidia.com/gpu");
  ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 10; }));
  EXPECT_EQ(kubelet_->devices()[0].id(), gpu_uuid_ + "-0");

  // 1. A pod with a 3g.20gb reservation at 4:4.
  AddBoundPod("train", "3g.20gb", {4, 4});
  v1beta1::ContainerAllocateResponse resp;
  grpc::Status gs = kubelet_->Allocate({gpu_uuid_ + "-0"}, &resp);
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  auto res = Reservation("train");
  ASSERT_TRUE(res && res->RuntimeReady());
  const std::string mig = *res->mig_uuid;
  auto inst = Find(mig);
  ASSERT_TRUE(inst.has_value());
  EXPECT_EQ(inst->state, engine::InstanceState::kActive);
  EXPECT_EQ(inst->placement.start, 4u);
  EXPECT_EQ(inst->placement.size, 4u);
  EXPECT_EQ(res->gpu_instance_id, inst->gi_id.value());
  EXPECT_EQ(res->compute_instance_id, inst->ci_id.value());
  EXPECT_EQ(api_.PodAnnotation("default", "train", hami::kBindPhase), hami::kBindPhaseSuccess);
  EXPECT_EQ(api_.NodeAnnotation(kNode, hami::kNodeLock), std::nullopt);
  // The CDI name of the published spec, whose file exists.
  ASSERT_EQ(resp.cdi_devices_size(), 1);
  EXPECT_EQ(resp.cdi_devices(0).name(), "hami.io/mig=" + mig);
  EXPECT_TRUE(HasSpecFile(mig));
  EXPECT_TRUE(resp.envs().count("NVIDIA_VISIBLE_DEVICES"));

  // 2. The pod runs, then is deleted: the watcher makes the instance Idle.
  ASSERT_TRUE(api_.UpdatePod("default", "train",
                             [](nlohmann::json& p) { p["status"]["phase"] = "Running"; }));
  ASSERT_TRUE(api_.DeletePod("default", "train"));
  PodWatcher watcher(backend_.get(), {std::chrono::seconds(60), std::chrono::seconds(60)});
  watcher.Start();  // its first pass runs at once
  ASSERT_TRUE(watcher.WaitForPasses(1, std::chrono::seconds(30)));
  watcher.Stop();
  EXPECT_EQ(Find(mig)->state, engine::InstanceState::kIdle);
  EXPECT_TRUE(HasSpecFile(mig));  // CDI belongs to the instance: kept while Idle
  EXPECT_TRUE(api_.NodeAnnotation(kNode, hami::kNodeRegister).has_value());

  // 3. The next pod with the same reservation gets the same instance.
  AddBoundPod("train-2", "3g.20gb", {4, 4});
  v1beta1::ContainerAllocateResponse resp2;
  gs = kubelet_->Allocate({gpu_uuid_ + "-1"}, &resp2);
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  auto res2 = Reservation("train-2");
  ASSERT_TRUE(res2 && res2->RuntimeReady());
  EXPECT_EQ(*res2->mig_uuid, mig);
  ASSERT_EQ(resp2.cdi_devices_size(), 1);
  EXPECT_EQ(resp2.cdi_devices(0).name(), "hami.io/mig=" + mig);
  EXPECT_EQ(Find(mig)->state, engine::InstanceState::kActive);
  EXPECT_EQ(Find(mig)->owner.pod_name, "train-2");
  EXPECT_EQ(mgr_->counters().creates, 1u);
  EXPECT_EQ(mgr_->counters().reuses, 1u);

  // 4. Kubelet restarts: migd registers again and resends the list.
  const int updates = kubelet_->list_updates();
  MIGD_ASSERT_OK(kubelet_->Restart());
  ASSERT_TRUE(kubelet_->WaitForRegistration(2));
  ASSERT_TRUE(kubelet_->WaitForListUpdates(updates + 1));
  EXPECT_EQ(kubelet_->devices().size(), 10u);

  // Least privilege: the chart's ClusterRole grants exactly the verbs this
  // whole cycle used (docs/kubernetes.md, "RBAC").
  EXPECT_EQ(api_.verbs(), ChartRbacVerbs());
  EXPECT_EQ(ChartRbacVerbs(), (std::set<std::string>{"get pods", "list pods", "patch pods",
                                                     "get nodes", "patch nodes"}));
}

TEST_F(HamiE2eTest, AllocateWithoutBoundPodFailsWithActionableError) {
  ASSERT_TRUE(kubelet_->WaitForRegistration(1));
  v1beta1::ContainerAllocateResponse resp;
  grpc::Status gs = kubelet_->Allocate({gpu_uuid_ + "-0"}, &resp);
  EXPECT_EQ(gs.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(gs.error_message(), ::testing::HasSubstr("no pod is being bound to node gpu-node-1"));
  EXPECT_TRUE(mgr_->List().instances.empty());
}

// Hostile pods of several shapes, each admitted through the fake kubelet:
// the simulated GPUs see no create or destroy, no pod or node is patched, and
// the legitimate pod afterwards gets exactly its own reservation.
TEST_F(HamiE2eTest, HostilePodsThroughKubeletChangeNothingAndTheRealPodGetsItsReservation) {
  ASSERT_TRUE(kubelet_->WaitForRegistration(1));
  auto hostile = [&](const std::string& name, const std::string& node,
                     std::map<std::string, std::string> extra) {
    PodSpec ps;
    ps.name = name;
    ps.uid = "uid-" + name;
    ps.node = node;
    ps.annotations =
        scheduler_.FilterAnnotations(ps, {{0, gpu_uuid_, "7g.40gb", {0, 8}, 40192, 100}});
    ps.annotations[hami::kBindPhase] = hami::kBindPhaseAllocating;
    ps.annotations[hami::kBindTime] = "1";
    for (auto& [k, v] : extra) ps.annotations[k] = v;
    ps.limits["main"]["nvidia.com/gpu"] = "1";
    api_.AddPod(MakePod(ps));
  };
  auto refused = [&](const std::string& what) {
    const uint64_t mutations = Mutations();
    const int patches = api_.requests("PATCH");
    v1beta1::ContainerAllocateResponse resp;
    const grpc::Status gs = kubelet_->Allocate({gpu_uuid_ + "-0"}, &resp);
    EXPECT_FALSE(gs.ok()) << what;
    EXPECT_EQ(Mutations(), mutations) << what;
    EXPECT_EQ(api_.requests("PATCH"), patches) << what;
  };
  hostile("self-bound", kNode, {});
  refused("self-written annotations and spec.nodeName, no lock");
  scheduler_.SetNodeLock(scheduler_.LockValue("default", "self-bound", std::chrono::minutes(6)));
  refused("a stale lock naming it");
  hostile("foreign", "other-node", {});
  scheduler_.SetNodeLock(scheduler_.LockValue("default", "foreign"));
  refused("a lock naming a pod of another node");
  scheduler_.SetNodeLock(scheduler_.LockValue("default", "self-bound") + ",extra");
  refused("a malformed lock");
  scheduler_.SetNodeLock("");
  EXPECT_EQ(sim_->GiCount(), 0);

  // The real pod, scheduled now; the hostile ones (older bind times) stay.
  AddBoundPod("real", "3g.20gb", {4, 4});
  const std::optional<nlohmann::json> self = api_.GetPod("default", "self-bound");
  v1beta1::ContainerAllocateResponse resp;
  const grpc::Status gs = kubelet_->Allocate({gpu_uuid_ + "-3"}, &resp);
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  auto res = Reservation("real");
  ASSERT_TRUE(res && res->RuntimeReady());
  const auto inst = Find(*res->mig_uuid);
  ASSERT_TRUE(inst.has_value());
  EXPECT_EQ(inst->placement, (mig::Placement{4, 4}));
  EXPECT_EQ(inst->owner.pod_name, "real");
  EXPECT_EQ(sim_->GiCount(), 1);
  EXPECT_EQ(api_.GetPod("default", "self-bound"), self);
}

}  // namespace
}  // namespace migd::k8s
