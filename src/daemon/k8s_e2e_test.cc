// End-to-end tests of migd's Kubernetes wiring (daemon.cc): the real binary
// on simulated GPUs with
//   - recovery.ownerSource: podresources against FakePodResources (real gRPC
//     on <kubeletDir>/pod-resources/kubelet.sock): live pods' instances
//     adopted Active, the rest Idle; kubelet down or inconsistent -> exit 3
//     with nothing on the GPUs changed;
//   - kubernetes.enabled against the fake API server (kubeconfig): the device
//     plugin socket served, the node registration annotation published;
//   - the config errors of the kubernetes section at startup.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "k8s/apiserver/testing/fake_api_server.h"
#include "k8s/podresources/testing/fake_pod_resources.h"
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
using ::migd::testing::TempDir;
using ::migd::testing::WriteFileOrDie;
using ::testing::HasSubstr;

constexpr auto kRpcDeadline = std::chrono::seconds(30);

k8s::PodResourcesEntry KubeletPod(const std::string& name, const std::string& resource) {
  return k8s::PodResourcesEntry{.pod_namespace = "ml",
                                .pod_name = name,
                                .containers = {k8s::ContainerEntry{
                                    .name = "main",
                                    .devices = {k8s::ContainerDevicesEntry{
                                        .resource_name = resource, .device_ids = {"GPU-x-0"}}}}}};
}

class DaemonK8sE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::mkdir(KubeletDir().c_str(), 0755), 0); }

  std::string Socket() const { return dir_.Join("api.socket"); }
  std::string KubeletDir() const { return dir_.Join("kubelet"); }

  std::map<std::string, std::string> Env() const {
    std::map<std::string, std::string> env = migd::testing::SimulatedMachineEnv(dir_.Join("sim"));
    // Nothing of a real cluster may leak in.
    env["NODE_NAME"] = "";
    env["KUBERNETES_SERVICE_HOST"] = "";
    env["KUBERNETES_SERVICE_PORT"] = "";
    return env;
  }

  std::vector<std::string> Args(const std::string& config = "") const {
    std::vector<std::string> args = {
        "--simulate",       "a100-40gb:1",    "--socket",       Socket(),           "--state-dir",
        dir_.Join("state"), "--cdi-spec-dir", dir_.Join("cdi"), "--metrics-listen", "",
        "--log-level",      "debug"};
    if (!config.empty()) {
      args.push_back("--config");
      args.push_back(config);
    }
    return args;
  }

  std::string WriteConfig(const std::string& yaml) {
    const std::string path = dir_.Join("migd.yaml");
    WriteFileOrDie(path, yaml);
    return path;
  }

  std::string PodResourcesConfig() {
    return WriteConfig("recovery:\n  ownerSource: podresources\nkubernetes:\n  kubeletDir: " +
                       KubeletDir() + "\n");
  }

  std::unique_ptr<DaemonProcess> Start(std::vector<std::string> args) {
    DaemonOptions o;
    o.args = std::move(args);
    o.env = Env();
    o.socket_path = Socket();
    StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }

  DaemonExit RunToExit(std::vector<std::string> args) {
    DaemonOptions o;
    o.args = std::move(args);
    o.env = Env();
    StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return {};
    return (*d)->WaitForExit();
  }

  std::unique_ptr<v1::MigManager::Stub> Stub() {
    return v1::MigManager::NewStub(
        grpc::CreateChannel("unix:" + Socket(), grpc::InsecureChannelCredentials()));
  }

  // Allocates one 1g.5gb for pod ml/<pod>/main; returns its MIG UUID.
  std::string AllocateForPod(v1::MigManager::Stub& stub, const std::string& pod) {
    v1::AllocateRequest req;
    req.set_request_id("req-" + pod);
    v1::PodOwner* owner = req.mutable_owner()->mutable_pod();
    owner->set_namespace_("ml");
    owner->set_name(pod);
    owner->set_uid("uid-" + pod);
    owner->set_container("main");
    req.add_instances()->set_profile("1g.5gb");
    v1::AllocateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
    const grpc::Status s = stub.Allocate(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok() || resp.instances_size() != 1) return "";
    return resp.instances(0).instance().mig_uuid();
  }

  // MIG UUID -> state.
  std::map<std::string, v1::InstanceState> States() {
    auto stub = Stub();
    v1::ListResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
    const grpc::Status s = stub->List(&ctx, v1::ListRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::map<std::string, v1::InstanceState> out;
    for (const v1::Instance& i : resp.instances()) out[i.mig_uuid()] = i.state();
    return out;
  }

  // Runs migd in records mode, allocates for pods "a" and "b", stops it.
  void AllocateTwoPods(std::string* a, std::string* b) {
    std::unique_ptr<DaemonProcess> migd = Start(Args());
    ASSERT_NE(migd, nullptr);
    auto stub = Stub();
    *a = AllocateForPod(*stub, "a");
    *b = AllocateForPod(*stub, "b");
    ASSERT_FALSE(a->empty());
    ASSERT_FALSE(b->empty());
    const DaemonExit exit = migd->Stop();
    ASSERT_EQ(exit.exit_code, 0) << exit.err;
  }

  TempDir dir_;
};

TEST_F(DaemonK8sE2eTest, PodResourcesAdoptsLivePodsAndIdlesTheRest) {
  std::string a, b;
  ASSERT_NO_FATAL_FAILURE(AllocateTwoPods(&a, &b));

  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<k8s::FakePodResources> kubelet,
                            k8s::FakePodResources::Start(KubeletDir()));
  // Pod a holds our resource; pod b is gone (another pod holds something else).
  kubelet->SetPods({KubeletPod("a", "nvidia.com/gpu"), KubeletPod("c", "example.com/nic")});
  std::unique_ptr<DaemonProcess> migd = Start(Args(PodResourcesConfig()));
  ASSERT_NE(migd, nullptr);
  EXPECT_THAT(migd->Stderr(), HasSubstr("podresources"));
  const auto states = States();
  EXPECT_EQ(states.at(a), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(states.at(b), v1::INSTANCE_STATE_IDLE);
  // b was unmatched: a second, confirming List before it went Idle.
  EXPECT_GE(kubelet->list_calls(), 2);
  const DaemonExit exit = migd->Stop();
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
}

TEST_F(DaemonK8sE2eTest, KubeletDownFailsClosedAndTouchesNothing) {
  std::string a, b;
  ASSERT_NO_FATAL_FAILURE(AllocateTwoPods(&a, &b));

  const DaemonExit exit = RunToExit(Args(PodResourcesConfig()));
  EXPECT_EQ(exit.exit_code, 3) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("recovery.ownerSource: podresources"));
  EXPECT_THAT(exit.err, HasSubstr(KubeletDir() + "/pod-resources/kubelet.sock"));

  // Nothing was changed: in records mode both are still Active.
  std::unique_ptr<DaemonProcess> migd = Start(Args());
  ASSERT_NE(migd, nullptr);
  const auto states = States();
  EXPECT_EQ(states.at(a), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(states.at(b), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(migd->Stop().exit_code, 0);
}

TEST_F(DaemonK8sE2eTest, UnknownHolderFailsClosed) {
  std::string a, b;
  ASSERT_NO_FATAL_FAILURE(AllocateTwoPods(&a, &b));
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<k8s::FakePodResources> kubelet,
                            k8s::FakePodResources::Start(KubeletDir()));
  kubelet->SetPods({KubeletPod("a", "nvidia.com/gpu"), KubeletPod("stray", "nvidia.com/gpu")});
  const DaemonExit exit = RunToExit(Args(PodResourcesConfig()));
  EXPECT_EQ(exit.exit_code, 3) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("ml/stray/main"));
}

// hami.io/vgpu-mig-allocations for one realised instance of container 0.
std::string Reservation(const v1::Instance& i) {
  nlohmann::ordered_json a = {
      {"containerIndex", 0},
      {"deviceIndex", 0},
      {"gpuUUID", i.gpu_uuid()},
      {"profile", i.profile()},
      {"placement", {{"start", i.placement().start()}, {"size", i.placement().size()}}},
      {"migUUID", i.mig_uuid()},
      {"gpuInstanceID", i.gi_id()},
      {"computeInstanceID", i.ci_id()}};
  return nlohmann::ordered_json::array({a}).dump();
}

TEST_F(DaemonK8sE2eTest, HamiOwnerSourceAdoptsAnnotatedPodsAndIdlesTheRest) {
  std::string a, b;
  ASSERT_NO_FATAL_FAILURE(AllocateTwoPods(&a, &b));
  // The instances as migd reported them (identity for the annotation).
  std::map<std::string, v1::Instance> by_uuid;
  {
    std::unique_ptr<DaemonProcess> migd = Start(Args());
    ASSERT_NE(migd, nullptr);
    auto stub = Stub();
    v1::ListResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
    ASSERT_TRUE(stub->List(&ctx, v1::ListRequest(), &resp).ok());
    for (const v1::Instance& i : resp.instances()) by_uuid[i.mig_uuid()] = i;
    ASSERT_EQ(migd->Stop().exit_code, 0);
  }
  ASSERT_TRUE(by_uuid.contains(a));

  k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.Start());
  k8s::testing::PodSpec live;
  live.ns = "ml";
  live.name = "a";
  live.uid = "uid-a";
  live.node = "gpu-node-1";
  live.phase = "Running";
  live.annotations = {{"hami.io/vgpu-mig-allocations", Reservation(by_uuid[a])}};
  api.AddPod(k8s::testing::MakePod(live));
  k8s::testing::PodSpec done = live;  // b's pod finished: owns nothing
  done.name = "b";
  done.uid = "uid-b";
  done.phase = "Succeeded";
  done.annotations = {{"hami.io/vgpu-mig-allocations", Reservation(by_uuid[b])}};
  api.AddPod(k8s::testing::MakePod(done));
  const std::string kubeconfig = dir_.Join("kubeconfig");
  WriteFileOrDie(kubeconfig,
                 "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n"
                 "- name: k\n  cluster: {server: \"" +
                     api.url() +
                     "\"}\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                     "users:\n- name: u\n  user: {token: t}\n");
  const std::string config = WriteConfig(
      "recovery: {ownerSource: hami}\nkubernetes:\n  nodeName: gpu-node-1\n"
      "  apiServer: {inCluster: false, kubeconfig: " +
      kubeconfig + "}\n");
  {
    std::unique_ptr<DaemonProcess> migd = Start(Args(config));
    ASSERT_NE(migd, nullptr);
    const auto states = States();
    EXPECT_EQ(states.at(a), v1::INSTANCE_STATE_ACTIVE);
    EXPECT_EQ(states.at(b), v1::INSTANCE_STATE_IDLE);
    ASSERT_EQ(migd->Stop().exit_code, 0);
  }

  // API server down at startup: refuses to touch the GPUs.
  api.Stop();
  const DaemonExit exit = RunToExit(Args(config));
  EXPECT_EQ(exit.exit_code, 3) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("recovery.ownerSource: hami"));
  std::unique_ptr<DaemonProcess> migd = Start(Args());
  ASSERT_NE(migd, nullptr);
  const auto states = States();
  EXPECT_EQ(states.at(a), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(states.at(b), v1::INSTANCE_STATE_IDLE);
  EXPECT_EQ(migd->Stop().exit_code, 0);
}

TEST_F(DaemonK8sE2eTest, KubernetesEnabledServesThePluginAndRegistersTheNode) {
  k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.Start());
  api.AddNode("gpu-node-1");
  const std::string kubeconfig = dir_.Join("kubeconfig");
  WriteFileOrDie(kubeconfig,
                 "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n"
                 "- name: k\n  cluster: {server: \"" +
                     api.url() +
                     "\"}\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                     "users:\n- name: u\n  user: {token: t}\n");
  const std::string config = WriteConfig(
      "kubernetes:\n  enabled: true\n  nodeName: gpu-node-1\n  kubeletDir: " + KubeletDir() +
      "\n  apiServer:\n    inCluster: false\n    kubeconfig: " + kubeconfig + "\n");
  std::unique_ptr<DaemonProcess> migd = Start(Args(config));
  ASSERT_NE(migd, nullptr);
  struct stat st {};
  EXPECT_TRUE(Eventually([&] {
    return ::stat((KubeletDir() + "/device-plugins/migd-mig.sock").c_str(), &st) == 0 &&
           S_ISSOCK(st.st_mode);
  }));
  EXPECT_TRUE(Eventually([&] {
    return api.NodeAnnotation("gpu-node-1", "hami.io/node-nvidia-register").has_value();
  })) << migd->Stderr();
  const auto reg = api.NodeAnnotation("gpu-node-1", "hami.io/node-nvidia-register");
  EXPECT_THAT(reg.value_or(""), HasSubstr("migProfiles"));
  const DaemonExit exit = migd->Stop();
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
}

TEST_F(DaemonK8sE2eTest, KubernetesConfigErrorsExitOne) {
  // In-cluster credentials outside a pod.
  DaemonExit exit = RunToExit(Args(
      WriteConfig("kubernetes: {enabled: true, nodeName: n, kubeletDir: " + KubeletDir() + "}\n")));
  EXPECT_EQ(exit.exit_code, 1) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("inCluster: true needs migd to run in a pod"));
  // No node name at all.
  exit = RunToExit(Args(WriteConfig("recovery: {ownerSource: hami}\n")));
  EXPECT_EQ(exit.exit_code, 1) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("NODE_NAME is not set"));
  // A kubeconfig that does not exist.
  exit = RunToExit(Args(WriteConfig(
      "kubernetes: {enabled: true, nodeName: n, apiServer: {inCluster: false, kubeconfig: " +
      dir_.Join("missing") + "}}\n")));
  EXPECT_EQ(exit.exit_code, 1) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("kubernetes.apiServer"));
}

}  // namespace
}  // namespace migd
