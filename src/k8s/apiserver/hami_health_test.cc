// Health as kubelet and HAMi's scheduler see it: a GPU the health monitor
// marks unhealthy reaches the fake kubelet's ListAndWatch at once (real gRPC,
// no periodic re-read) and hami.io/node-nvidia-register reads health false;
// the operator's clear makes both healthy again at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/mutex.h"
#include "engine/events.h"
#include "engine/health_monitor.h"
#include "k8s/deviceplugin/device_plugin_server.h"
#include "k8s/testing/fake_kubelet.h"
#include "k8s/apiserver/pod_watcher.h"
#include "k8s/apiserver/testing/hami_backend_fixture.h"
#include "testing/status_matchers.h"

namespace migd::k8s {
namespace {

using testing::kTestNode;

// The daemon's wiring (daemon/k8s_wiring.h HealthForwarder), for the test.
class ToBackend final : public engine::EngineListener {
 public:
  void Set(HamiBackend* b) {
    MutexLock lock(&mu_);
    backend_ = b;
  }
  void OnInstanceEvent(const engine::InstanceEvent&) override {}
  void OnAllocation(const engine::AllocationOutcome&) override {}
  void OnReclaim(engine::EventReason, const engine::InstanceView&) override {}
  void OnHealthChange(const engine::HealthChange& c) override {
    MutexLock lock(&mu_);
    if (backend_ != nullptr) backend_->OnHealthChange(c);
  }

 private:
  Mutex mu_;
  HamiBackend* backend_ ABSL_GUARDED_BY(mu_) = nullptr;
};

class HamiHealthTest : public testing::HamiBackendFixture {
 protected:
  HamiHealthTest() {
    gpus_ = "a100-40gb:2";
    listener_ = &to_backend_;
  }
  void TearDown() override {
    if (plugin_) plugin_->Stop();
    to_backend_.Set(nullptr);
  }
  // Kubelet, then the plugin over backend_; the periodic re-read is an hour,
  // so any later list comes from the backend's notification.
  void StartKubeletAndPlugin() {
    to_backend_.Set(backend_.get());
    MIGD_ASSERT_OK_AND_ASSIGN(kubelet_, k8s::testing::FakeKubelet::Start(plugin_dir_.path()));
    DevicePluginOptions o;
    o.plugin_dir = plugin_dir_.path();
    o.list_refresh_period = std::chrono::hours(1);
    MIGD_ASSERT_OK_AND_ASSIGN(plugin_, DevicePluginServer::Start(o, backend_.get()));
    ASSERT_TRUE(kubelet_->WaitForRegistration(1));
    ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 20; }));
  }
  // A migd restart before kubelet and the plugin start: a new store, Manager
  // and backend on the same state dir and hardware.
  void RestartMigd() {
    to_backend_.Set(nullptr);
    backend_.reset();
    mgr_.reset();
    store_.reset();
    OpenEngine();
    MakeBackend();
  }
  // "<healthy>/<unhealthy>" of GPU `gpu`'s replicas in kubelet's latest list.
  static std::string Count(const std::vector<v1beta1::Device>& devices, const std::string& uuid) {
    int healthy = 0, unhealthy = 0;
    for (const v1beta1::Device& d : devices) {
      if (d.id().rfind(uuid + "-", 0) != 0) continue;
      (d.health() == "Healthy" ? healthy : unhealthy)++;
    }
    return std::to_string(healthy) + "/" + std::to_string(unhealthy);
  }

  ToBackend to_backend_;
  migd::testing::TempDir plugin_dir_;
  std::unique_ptr<k8s::testing::FakeKubelet> kubelet_;
  std::unique_ptr<DevicePluginServer> plugin_;
};

TEST_F(HamiHealthTest, ListAndWatchSendsTheUnhealthyGpusReplicasAtOnce) {
  StartKubeletAndPlugin();
  EXPECT_EQ(Count(kubelet_->devices(), Gpu(0)), "10/0");
  const int lists = kubelet_->list_updates();
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(1), "xid 79");
  ASSERT_TRUE(kubelet_->WaitForDevices(
      [&](const auto& d) { return Count(d, Gpu(1)) == "0/10"; }));
  EXPECT_EQ(Count(kubelet_->devices(), Gpu(0)), "10/0");
  EXPECT_EQ(kubelet_->list_updates(), lists + 1);
}

TEST_F(HamiHealthTest, AnUnhealthyInstanceLeavesItsGpusReplicasHealthy) {
  StartKubeletAndPlugin();
  Schedule("a", {{0, "", "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK(backend_->AllocateContainer({Id(0)}).status());
  const engine::InstanceView v = Instances()[0];
  const int lists = kubelet_->list_updates();
  mgr_->health_sink().MarkInstanceUnhealthy(v.gpu, v.gi_id, v.ci_id, 94);
  // Replicas stand for the GPU's capacity; the engine never reuses the
  // instance, so nothing changes for kubelet: the next list is GPU 1's mark.
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(1), "xid 79");
  ASSERT_TRUE(kubelet_->WaitForDevices(
      [&](const auto& d) { return Count(d, Gpu(1)) == "0/10"; }));
  EXPECT_EQ(Count(kubelet_->devices(), Gpu(0)), "10/0");
  EXPECT_EQ(kubelet_->list_updates(), lists + 1);
  EXPECT_TRUE(Instances()[0].unhealthy);
}

TEST_F(HamiHealthTest, NodeRegistrationReportsHealthFalseForAnUnhealthyGpu) {
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "lost");
  MIGD_ASSERT_OK(backend_->PublishNodeRegistration());
  auto reg = api_.NodeAnnotation(kTestNode, hami::kNodeRegister);
  ASSERT_TRUE(reg.has_value());
  const nlohmann::json v = nlohmann::json::parse(*reg);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0]["id"], Gpu(0));
  EXPECT_EQ(v[0]["health"], false);
  EXPECT_EQ(v[1]["health"], true);
}

TEST_F(HamiHealthTest, ListAndWatchSendsAClearedGpusReplicasHealthyAtOnce) {
  StartKubeletAndPlugin();
  const int lists = kubelet_->list_updates();
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(1), "xid 79");
  ASSERT_TRUE(kubelet_->WaitForDevices([&](const auto& d) { return Count(d, Gpu(1)) == "0/10"; }));
  MIGD_ASSERT_OK(mgr_->ClearGpuHealth(GpuIndex(1)).status());
  ASSERT_TRUE(kubelet_->WaitForDevices([&](const auto& d) { return Count(d, Gpu(1)) == "10/0"; }));
  EXPECT_EQ(Count(kubelet_->devices(), Gpu(0)), "10/0");
  EXPECT_EQ(kubelet_->list_updates(), lists + 2);
  // A clear that changes nothing sends nothing: the next list is GPU 0's mark.
  MIGD_ASSERT_OK(mgr_->ClearGpuHealth(GpuIndex(1)).status());
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "xid 79");
  ASSERT_TRUE(kubelet_->WaitForDevices([&](const auto& d) { return Count(d, Gpu(0)) == "0/10"; }));
  EXPECT_EQ(kubelet_->list_updates(), lists + 3);
}

TEST_F(HamiHealthTest, AnUnhealthyGpuIsStillUnhealthyInListAndWatchAfterARestart) {
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(1), "xid 79");
  RestartMigd();
  StartKubeletAndPlugin();
  EXPECT_EQ(Count(kubelet_->devices(), Gpu(1)), "0/10");
  EXPECT_EQ(Count(kubelet_->devices(), Gpu(0)), "10/0");
  // No allocation lands there.
  Schedule("a", {{0, Gpu(1), "1g.5gb", {0, 1}}});
  EXPECT_FALSE(backend_->AllocateContainer({Id(0, 1)}).ok());
}

TEST_F(HamiHealthTest, AClearedGpuIsHealthyInListAndWatchAfterARestart) {
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(1), "xid 79");
  MIGD_ASSERT_OK(mgr_->ClearGpuHealth(GpuIndex(1)).status());
  RestartMigd();
  StartKubeletAndPlugin();
  EXPECT_EQ(Count(kubelet_->devices(), Gpu(1)), "10/0");
}

TEST_F(HamiHealthTest, NodeRegistrationFollowsAMarkAndAClearAtOnce) {
  to_backend_.Set(backend_.get());
  // Periodic passes an hour apart: every publication after the first is
  // the health change's.
  PodWatcher watcher(backend_.get(), {std::chrono::hours(1), std::chrono::hours(1)});
  backend_->SetRegistrationChangedCallback([&watcher] { watcher.RequestRegistration(); });
  watcher.Start();
  ASSERT_TRUE(watcher.WaitForRegistrations(1, std::chrono::seconds(30)));
  auto health_of_gpu0 = [&] {
    auto reg = api_.NodeAnnotation(kTestNode, hami::kNodeRegister);
    EXPECT_TRUE(reg.has_value());
    return reg ? nlohmann::json::parse(*reg)[0]["health"] : nlohmann::json();
  };
  EXPECT_EQ(health_of_gpu0(), true);
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "lost");
  ASSERT_TRUE(watcher.WaitForRegistrations(2, std::chrono::seconds(30)));
  EXPECT_EQ(health_of_gpu0(), false);
  MIGD_ASSERT_OK(mgr_->ClearGpuHealth(GpuIndex(0)).status());
  ASSERT_TRUE(watcher.WaitForRegistrations(3, std::chrono::seconds(30)));
  EXPECT_EQ(health_of_gpu0(), true);
  watcher.Stop();
  to_backend_.Set(nullptr);
}

// The check: Xid events injected into the simulated GPUs while a
// workload runs (pod a, Active) and an instance is Idle (pod b ended); the
// health monitor feeds the engine; kubelet sees GPU 1 go Unhealthy, and no
// unhealthy instance is handed out again.
TEST_F(HamiHealthTest, InjectedXidsWhileWorkloadsRunNeverHandOutAnUnhealthyInstance) {
  StartKubeletAndPlugin();
  Schedule("a", {{0, "", "2g.10gb", {2, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation a, backend_->AllocateContainer({Id(0)}));
  Schedule("b", {{0, "", "2g.10gb", {4, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation b, backend_->AllocateContainer({Id(1)}));
  ASSERT_TRUE(api_.DeletePod("default", "b"));
  MIGD_ASSERT_OK(backend_->ReleaseEndedPods().status());
  auto gi_of = [&](const MigUuid& uuid) {
    for (const engine::InstanceView& v : Instances()) {
      if (v.mig_uuid == uuid) return std::to_string(v.gi_id.value());
    }
    return std::string("?");
  };
  engine::HealthOptions options;
  options.wait = std::chrono::milliseconds(20);
  MIGD_ASSERT_OK_AND_ASSIGN(auto monitor,
                            engine::HealthMonitor::Start(*fake_, {GpuIndex(0), GpuIndex(1)},
                                                         options, mgr_->health_sink()));
  MIGD_ASSERT_OK(fake_->InjectEvents("xid=48@0/" + gi_of(a.mig_uuids[0]) + ",xid=94@0/" +
                                     gi_of(b.mig_uuids[0]) + ",xid=31@0,xid=79@1"));
  monitor->WaitForEvents(4);
  ASSERT_TRUE(kubelet_->WaitForDevices([&](const auto& d) { return Count(d, Gpu(1)) == "0/10"; }));
  EXPECT_EQ(Count(kubelet_->devices(), Gpu(0)), "10/0");

  // The Idle unhealthy instance's placement asked for again, after the
  // reconciler's pass reclaimed it (until then the planner does not offer
  // it): a new instance.
  MIGD_ASSERT_OK(mgr_->ReconcileOnce().status());
  Schedule("c", {{0, "", "2g.10gb", {4, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerAllocation c, backend_->AllocateContainer({Id(2)}));
  EXPECT_NE(c.mig_uuids[0], b.mig_uuids[0]);
  // The running workload keeps its instance; released, it is destroyed.
  ASSERT_TRUE(api_.DeletePod("default", "a"));
  MIGD_ASSERT_OK(backend_->ReleaseEndedPods().status());
  monitor->Stop();
  for (const engine::InstanceView& v : Instances()) {
    EXPECT_NE(v.mig_uuid, a.mig_uuids[0]);
    EXPECT_NE(v.mig_uuid, b.mig_uuids[0]);
    EXPECT_FALSE(v.unhealthy) << v.mig_uuid.value();
  }
  // Nothing new on the unhealthy GPU.
  Schedule("d", {{0, Gpu(1), "1g.5gb", {0, 1}}});
  EXPECT_FALSE(backend_->AllocateContainer({Id(0, 1)}).ok());
}

}  // namespace
}  // namespace migd::k8s
