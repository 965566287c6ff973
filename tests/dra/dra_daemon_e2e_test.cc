// DRA mode through the real migd binary on a simulated A100-40GB: the fake
// DRA kubelet registers migd (kubelet's plugins_registry under a temp
// kubeletDir), the fake API server receives the ResourceSlices and serves the
// ResourceClaims, the allocator model plays kube-scheduler.
//   slices published -> claim scheduled on them -> NodePrepareResources (CDI
//   id, spec file, Active instance owned by the claim) -> migd restarted ->
//   kubelet prepares again (same answer) -> unprepare (Idle) -> kubelet
//   restart deletes the node's slices -> migd republishes them;
//   and dra.enabled with kubernetes.enabled is refused (exit 1);
//   an Xid the simulator injects (MIGD_SIM_EVENTS) reaches kubelet's
//   dra-health stream, which health.enabled: false does not offer.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <functional>

#include "cdi/names.h"
#include "k8s/apiserver/testing/fake_api_server.h"
#include "k8s/dra/testing/allocator_model.h"
#include "k8s/dra/testing/fake_dra_kubelet.h"
#include "k8s/dra/testing/fake_resource_api.h"
#include "migd/v1/migd.grpc.pb.h"
#include "testing/daemon_process.h"
#include "testing/eventually.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

using ::migd::testing::DaemonExit;
using ::migd::testing::DaemonOptions;
using ::migd::testing::DaemonProcess;
using ::migd::testing::Eventually;
using ::migd::testing::WriteFileOrDie;
using ::testing::HasSubstr;
using Json = nlohmann::json;
namespace dra = ::migd::k8s::dra::testing;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;

constexpr char kNode[] = "gpu-node-1";
constexpr char kDriver[] = "mig.migd.io";

class DraDaemonE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(KubeletDir());
    ASSERT_TRUE(api_.Start());
    api_.AddNode(kNode);
    WriteFileOrDie(dir_.Join("kubeconfig"),
                   "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n"
                   "- name: k\n  cluster: {server: \"" +
                       api_.url() +
                       "\"}\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                       "users:\n- name: u\n  user: {token: t}\n");
  }
  std::string KubeletDir() const { return dir_.Join("kubelet"); }
  std::string Socket() const { return dir_.Join("api.socket"); }
  std::string Config(const std::string& extra = "") {
    const std::string path = dir_.Join("migd.yaml");
    WriteFileOrDie(
        path,
        "kubernetes:\n  nodeName: " + std::string(kNode) + "\n  kubeletDir: " + KubeletDir() +
            "\n  apiServer:\n    inCluster: false\n    kubeconfig: " + dir_.Join("kubeconfig") +
            "\ndra:\n  enabled: true\n  resyncInterval: 1s\n" + extra);
    return path;
  }
  DaemonOptions Options(const std::string& config) {
    DaemonOptions o;
    o.args = {"--simulate",       "a100-40gb:1",
              "--socket",         Socket(),
              "--state-dir",      dir_.Join("state"),
              "--cdi-spec-dir",   dir_.Join("cdi"),
              "--metrics-listen", "",
              "--config",         config};
    o.env = migd::testing::SimulatedMachineEnv(dir_.Join("sim"));
    o.env["NODE_NAME"] = "";
    o.env["KUBERNETES_SERVICE_HOST"] = "";
    o.env["KUBERNETES_SERVICE_PORT"] = "";
    return o;
  }
  std::unique_ptr<DaemonProcess> Start() {
    DaemonOptions o = Options(Config());
    o.socket_path = Socket();
    StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }
  // A kubelet (health stream as `health`) that has registered `migd`'s plugin.
  std::unique_ptr<dra::FakeDraKubelet> StartKubelet(
      DaemonProcess& migd, dra::HealthMode health = dra::HealthMode::kOff,
      std::function<void()> on_start = nullptr) {
    dra::FakeDraKubeletOptions ko;
    ko.registry_dir = KubeletDir() + "/plugins_registry";
    ko.health = health;
    ko.on_start = std::move(on_start);
    std::unique_ptr<dra::FakeDraKubelet> kubelet;
    EXPECT_TRUE(Eventually([&] {
      auto k = dra::FakeDraKubelet::Start(ko);
      if (!k.ok() || (*k)->plugins().empty()) return false;
      kubelet = std::move(*k);
      return true;
    })) << migd.Stderr();
    return kubelet;
  }
  bool PoolReady() {
    const auto pools = dra::AllocatorModel(35).Pools(resources_.Slices(), kNode);
    return pools.size() == 1 && pools[0].complete && pools[0].valid && pools[0].devices > 0;
  }
  std::map<std::string, std::string> Owners() {
    auto stub = v1::MigManager::NewStub(
        grpc::CreateChannel("unix:" + Socket(), grpc::InsecureChannelCredentials()));
    v1::ListRequest req;
    v1::ListResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    EXPECT_TRUE(stub->List(&ctx, req, &resp).ok());
    std::map<std::string, std::string> out;  // MIG UUID -> state:owner
    for (const auto& i : resp.instances()) {
      out[i.mig_uuid()] = v1::InstanceState_Name(i.state()) + ":" + i.owner().opaque_id();
    }
    return out;
  }

  migd::testing::TempDir dir_;
  k8s::testing::FakeApiServer api_;
  dra::FakeResourceApi resources_{api_};
};

TEST_F(DraDaemonE2eTest, PublishPrepareRestartUnprepareAndKubeletRestart) {
  std::unique_ptr<DaemonProcess> migd = Start();
  ASSERT_NE(migd, nullptr);
  std::unique_ptr<dra::FakeDraKubelet> kubelet = StartKubelet(
      *migd, dra::HealthMode::kOff, [this] { resources_.DeleteNodeSlices(kNode); });
  ASSERT_NE(kubelet, nullptr);
  EXPECT_EQ(kubelet->plugins()[0].endpoint, KubeletDir() + "/plugins/mig.migd.io/dra.sock");
  // kubelet deleted the slices at its start; the registration republishes.
  ASSERT_TRUE(Eventually([&] { return PoolReady(); })) << migd->Stderr();

  auto got = dra::AllocatorModel(35).Allocate(
      resources_.Slices(), {},
      {dra::ModelRequest{kDriver, dra::StringAttributeIs("profile", "3g.20gb"), 1}}, kNode);
  ASSERT_TRUE(got.has_value());
  const std::string device = (*got)[0].device;
  resources_.AddClaim(
      dra::MakeClaim("ml", "train", "uid-train", kNode, {{"gpu", kDriver, kNode, device}}));
  drav1::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(kubelet->Prepare(kDriver, {{"ml", "train", "uid-train"}}, &resp).ok());
  const drav1::NodePrepareResourceResponse r = resp.claims().at("uid-train");
  ASSERT_TRUE(r.error().empty()) << r.error();
  ASSERT_EQ(r.devices_size(), 1);
  EXPECT_EQ(r.devices(0).device_name(), device);
  const std::string cdi_id = r.devices(0).cdi_device_ids(0);
  const std::string mig = cdi_id.substr(cdi_id.find('=') + 1);
  EXPECT_EQ(cdi_id, "hami.io/mig=" + mig);
  struct stat st {};
  EXPECT_EQ(::lstat((dir_.Join("cdi") + "/" + cdi::SpecFileName(cdi::Kind(), mig)).c_str(), &st),
            0);
  EXPECT_EQ(Owners()[mig], "INSTANCE_STATE_ACTIVE:resourceclaim:ml/train");

  // migd restarts between prepare and unprepare: its records carry the claim.
  DaemonExit exit = migd->Stop();
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  migd = Start();
  ASSERT_NE(migd, nullptr);
  ASSERT_TRUE(Eventually([&] { return kubelet->Discover().ok() && !kubelet->plugins().empty(); }))
      << migd->Stderr();
  drav1::NodePrepareResourcesResponse again;
  ASSERT_TRUE(kubelet->Prepare(kDriver, {{"ml", "train", "uid-train"}}, &again).ok());
  EXPECT_EQ(again.claims().at("uid-train").SerializeAsString(), r.SerializeAsString());
  drav1::NodeUnprepareResourcesResponse un;
  ASSERT_TRUE(kubelet->Unprepare(kDriver, {{"ml", "train", "uid-train"}}, &un).ok());
  EXPECT_TRUE(un.claims().at("uid-train").error().empty());
  EXPECT_EQ(Owners()[mig], "INSTANCE_STATE_IDLE:");

  // kubelet restarts: it deletes the node's slices; migd puts them back.
  MIGD_ASSERT_OK(kubelet->Restart());
  ASSERT_TRUE(Eventually([&] { return PoolReady(); })) << migd->Stderr();
  exit = migd->Stop();
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("DRA driver serving"));
}

// The daemon's health monitor marks the GPU on an unattributed critical Xid
// (79, fallen off the bus); the DRA plugin advertises dra-health and every
// device of that GPU turns UNHEALTHY on kubelet's stream. The Xid is
// injected at several delays: one after migd registered its events suffices
// ("All events that occurred before this call are not recorded", nvml.h).
TEST_F(DraDaemonE2eTest, XidOnTheGpuReachesKubeletsHealthStream) {
  DaemonOptions o = Options(Config());
  o.env["MIGD_SIM_EVENTS"] = "xid=79@0+1000,xid=79@0+4000,xid=79@0+12000,xid=79@0+30000";
  o.socket_path = Socket();
  StatusOr<std::unique_ptr<DaemonProcess>> migd = DaemonProcess::Start(o, dir_.path());
  ASSERT_TRUE(migd.ok()) << migd.status();
  std::unique_ptr<dra::FakeDraKubelet> kubelet = StartKubelet(**migd, dra::HealthMode::kAdvertised);
  ASSERT_NE(kubelet, nullptr);
  EXPECT_EQ(kubelet->plugins()[0].health_service, "v1.DRAResourceHealth");
  const auto all_unhealthy = [](const std::vector<::v1::DeviceHealth>& list) {
    if (list.empty()) return false;
    for (const auto& h : list) {
      if (h.health() != ::v1::UNHEALTHY || h.device().pool_name() != kNode) return false;
    }
    return true;
  };
  EXPECT_TRUE(kubelet->WaitForHealth(kDriver, all_unhealthy, std::chrono::seconds(60)))
      << (*migd)->Stderr();
  const DaemonExit exit = (*migd)->Stop();
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("health: GPU 0: xid 79: action gpu-unhealthy"));
}

TEST_F(DraDaemonE2eTest, HealthDisabledOffersNoHealthService) {
  DaemonOptions o = Options(Config("health:\n  enabled: false\n"));
  o.socket_path = Socket();
  StatusOr<std::unique_ptr<DaemonProcess>> migd = DaemonProcess::Start(o, dir_.path());
  ASSERT_TRUE(migd.ok()) << migd.status();
  std::unique_ptr<dra::FakeDraKubelet> kubelet = StartKubelet(**migd, dra::HealthMode::kAdvertised);
  ASSERT_NE(kubelet, nullptr);
  EXPECT_EQ(kubelet->plugins()[0].health_service, "");
  EXPECT_EQ(kubelet->plugins()[0].supported_versions,
            (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin"}));
  const DaemonExit exit = (*migd)->Stop();
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
}

TEST_F(DraDaemonE2eTest, DraAndHamiModeExcludeEachOther) {
  DaemonOptions o = Options(Config());
  WriteFileOrDie(dir_.Join("both.yaml"),
                 "kubernetes: {enabled: true, nodeName: n}\ndra: {enabled: true}\n");
  o.args.back() = dir_.Join("both.yaml");
  StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
  ASSERT_TRUE(d.ok()) << d.status();
  const DaemonExit exit = (*d)->WaitForExit();
  EXPECT_EQ(exit.exit_code, 1) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("HAMi mode and DRA mode exclude each other"));
}

}  // namespace
}  // namespace migd
