// DraPluginServer against the fake DRA kubelet over real unix sockets, with
// a test claim handler: registration (both DRA versions, the advertised
// services), per-claim results, kubelet restart, sockets removed behind our
// back, the health stream in both versions.
#include "k8s/dra/plugin_server.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>

#include "k8s/dra/testing/fake_dra_kubelet.h"
#include "k8s/dra/testing/fake_health_source.h"
#include "testing/eventually.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::k8s::dra {
namespace {

using testing::ClaimRequest;
using testing::FakeDraKubelet;
using testing::FakeDraKubeletOptions;
using testing::FakeHealthSource;
using testing::HealthMode;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;

constexpr char kDriver[] = "mig.migd.io";

class TestHandler final : public ClaimHandler {
 public:
  StatusOr<std::vector<PreparedDevice>> Prepare(const ClaimRef& c) override {
    MutexLock l(&mu_);
    prepares_.push_back(c.uid);
    if (c.name == "bad") return ResourceExhaustedError("claim " + c.name + ": placement blocked");
    return std::vector<PreparedDevice>{
        {"gpu", "node-a", "gpu-0-1g5gb-19-" + c.uid, {"hami.io/mig=MIG-" + c.uid}}};
  }
  Status Unprepare(const ClaimRef& c) override {
    MutexLock l(&mu_);
    unprepares_.push_back(c.uid);
    return OkStatus();
  }
  std::vector<std::string> prepares() {
    MutexLock l(&mu_);
    return prepares_;
  }
  std::vector<std::string> unprepares() {
    MutexLock l(&mu_);
    return unprepares_;
  }

 private:
  Mutex mu_;
  std::vector<std::string> prepares_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> unprepares_ ABSL_GUARDED_BY(mu_);
};

class PluginServerTest : public ::testing::Test {
 protected:
  DraPluginOptions Options() {
    DraPluginOptions o;
    o.driver = kDriver;
    o.registry_dir = dir_.Join("plugins_registry");
    o.plugin_dir = dir_.Join("plugins/mig.migd.io");
    o.watch_period = std::chrono::milliseconds(20);
    o.health_heartbeat = std::chrono::milliseconds(200);
    return o;
  }
  std::unique_ptr<DraPluginServer> Start(HealthFeed feed = {}) {
    StatusOr<std::unique_ptr<DraPluginServer>> s =
        DraPluginServer::Start(Options(), &handler_, std::move(feed), [this] { ++registered_; });
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<FakeDraKubelet> Kubelet(HealthMode health = HealthMode::kOff,
                                          std::vector<std::string> known = {"v1.DRAPlugin",
                                                                            "v1beta1.DRAPlugin"}) {
    FakeDraKubeletOptions o;
    o.registry_dir = dir_.Join("plugins_registry");
    o.known_services = std::move(known);
    o.health = health;
    StatusOr<std::unique_ptr<FakeDraKubelet>> k = FakeDraKubelet::Start(o);
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? std::move(*k) : nullptr;
  }
  HealthFeed Feed() {
    return {&health_, [this] {
              HealthSnapshot h = health_.Snapshot();
              DeviceHealthReport r{"node-a", "gpu-0-7g40gb-0-0", Health::kHealthy, "", 10};
              if (auto it = h.gpus.find(GpuIndex(0)); it != h.gpus.end()) {
                r.health = it->second.health;
                r.message = it->second.message;
              }
              return std::vector<DeviceHealthReport>{r};
            }};
  }

  migd::testing::TempDir dir_;
  TestHandler handler_;
  FakeHealthSource health_;
  std::atomic<int> registered_{0};
};

TEST_F(PluginServerTest, RegistersAndPreparesThroughV1) {
  auto server = Start();
  ASSERT_NE(server, nullptr);
  auto kubelet = Kubelet();
  ASSERT_EQ(kubelet->plugins().size(), 1u);
  const testing::RegisteredPlugin p = kubelet->plugins()[0];
  EXPECT_EQ(p.socket, dir_.Join("plugins_registry/mig.migd.io-reg.sock"));
  EXPECT_EQ(p.name, kDriver);
  EXPECT_EQ(p.endpoint, dir_.Join("plugins/mig.migd.io/dra.sock"));
  EXPECT_EQ(p.supported_versions, (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin"}));
  EXPECT_EQ(p.service, "v1.DRAPlugin");
  ASSERT_TRUE(migd::testing::Eventually([&] { return server->registrations() == 1; }));
  EXPECT_EQ(registered_.load(), 1);

  drav1::NodePrepareResourcesResponse resp;
  grpc::Status s = kubelet->Prepare(kDriver, {{"ns", "ok", "u1"}, {"ns", "bad", "u2"}}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.claims().size(), 2u);
  const auto& ok = resp.claims().at("u1");
  EXPECT_TRUE(ok.error().empty());
  ASSERT_EQ(ok.devices_size(), 1);
  EXPECT_EQ(ok.devices(0).request_names(0), "gpu");
  EXPECT_EQ(ok.devices(0).pool_name(), "node-a");
  EXPECT_EQ(ok.devices(0).device_name(), "gpu-0-1g5gb-19-u1");
  EXPECT_EQ(ok.devices(0).cdi_device_ids(0), "hami.io/mig=MIG-u1");
  EXPECT_FALSE(ok.devices(0).has_share_id());
  EXPECT_EQ(resp.claims().at("u2").error(), "claim bad: placement blocked");
  EXPECT_EQ(resp.claims().at("u2").devices_size(), 0);

  drav1::NodeUnprepareResourcesResponse un;
  s = kubelet->Unprepare(kDriver, {{"ns", "ok", "u1"}, {"ns", "x", ""}}, &un);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(un.claims().size(), 2u);
  EXPECT_TRUE(un.claims().at("u1").error().empty());
  EXPECT_NE(un.claims().at("x").error().find("uid is required"), std::string::npos);
  EXPECT_EQ(handler_.unprepares(), std::vector<std::string>{"u1"});
}

TEST_F(PluginServerTest, Kubelet133SpeaksV1beta1) {
  auto server = Start();
  auto kubelet = Kubelet(HealthMode::kOff, {"v1beta1.DRAPlugin"});
  ASSERT_EQ(kubelet->plugins().size(), 1u);
  EXPECT_EQ(kubelet->plugins()[0].service, "v1beta1.DRAPlugin");
  drav1::NodePrepareResourcesResponse resp;
  ASSERT_TRUE(kubelet->Prepare(kDriver, {{"ns", "ok", "u9"}}, &resp).ok());
  EXPECT_EQ(resp.claims().at("u9").devices(0).cdi_device_ids(0), "hami.io/mig=MIG-u9");
}

TEST_F(PluginServerTest, KubeletWithoutKnownServiceRefuses) {
  auto server = Start();
  auto kubelet = Kubelet(HealthMode::kOff, {"v1alpha4.DRAPlugin"});
  EXPECT_TRUE(kubelet->plugins().empty());
  ASSERT_EQ(kubelet->refusals().size(), 1u);
  ASSERT_TRUE(migd::testing::Eventually([&] { return server->rejections() == 1; }));
  EXPECT_EQ(registered_.load(), 0);
}

TEST_F(PluginServerTest, KubeletRestartRegistersAgainAndCallsBack) {
  auto server = Start();
  auto kubelet = Kubelet();
  ASSERT_TRUE(migd::testing::Eventually([&] { return registered_.load() == 1; }));
  MIGD_ASSERT_OK(kubelet->Restart());
  ASSERT_TRUE(migd::testing::Eventually([&] { return registered_.load() == 2; }));
  EXPECT_EQ(kubelet->registrations(), 2);
  EXPECT_EQ(server->registration_serves(), 1);  // the same sockets serve on
  drav1::NodePrepareResourcesResponse resp;
  EXPECT_TRUE(kubelet->Prepare(kDriver, {{"ns", "ok", "u3"}}, &resp).ok());
}

TEST_F(PluginServerTest, RemovedSocketsAreServedAgain) {
  auto server = Start();
  ASSERT_EQ(::unlink(server->registration_socket().c_str()), 0);
  ASSERT_EQ(::unlink(server->dra_socket().c_str()), 0);
  ASSERT_TRUE(migd::testing::Eventually(
      [&] { return server->registration_serves() == 2 && server->dra_serves() == 2; }));
  auto kubelet = Kubelet();
  ASSERT_EQ(kubelet->plugins().size(), 1u);
  drav1::NodePrepareResourcesResponse resp;
  EXPECT_TRUE(kubelet->Prepare(kDriver, {{"ns", "ok", "u4"}}, &resp).ok());
}

TEST_F(PluginServerTest, StaleSocketIsReplacedAndOtherFilesRefused) {
  auto first = Start();
  first.reset();  // stopped: sockets removed
  struct stat st {};
  EXPECT_NE(::lstat(dir_.Join("plugins_registry/mig.migd.io-reg.sock").c_str(), &st), 0);
  {
    std::ofstream f(dir_.Join("plugins/mig.migd.io/dra.sock"));
    f << "not a socket";
  }
  StatusOr<std::unique_ptr<DraPluginServer>> s =
      DraPluginServer::Start(Options(), &handler_, {}, {});
  EXPECT_THAT(s.status(), migd::testing::StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  ASSERT_EQ(::unlink(dir_.Join("plugins/mig.migd.io/dra.sock").c_str()), 0);
  auto again = Start();
  EXPECT_NE(again, nullptr);
}

TEST_F(PluginServerTest, BadOptionsAreRefused) {
  DraPluginOptions o = Options();
  o.registry_dir = "relative";
  EXPECT_THAT(DraPluginServer::Start(o, &handler_, {}, {}).status(),
              migd::testing::StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  o = Options();
  o.plugin_dir = "/" + std::string(120, 'x');
  EXPECT_THAT(DraPluginServer::Start(o, &handler_, {}, {}).status(),
              migd::testing::StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(DraPluginServer::Start(Options(), nullptr, {}, {}).status(),
              migd::testing::StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

TEST_F(PluginServerTest, HealthStreamV1WhenAdvertised) {
  auto server = Start(Feed());
  auto kubelet = Kubelet(HealthMode::kAdvertised);
  ASSERT_EQ(kubelet->plugins().size(), 1u);
  EXPECT_EQ(kubelet->plugins()[0].supported_versions,
            (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                                      "v1alpha1.DRAResourceHealth"}));
  EXPECT_EQ(kubelet->plugins()[0].health_service, "v1.DRAResourceHealth");
  ASSERT_TRUE(kubelet->WaitForHealth(
      kDriver, [](const auto& d) { return d.size() == 1 && d[0].health() == ::v1::HEALTHY; }));
  EXPECT_EQ(kubelet->health(kDriver)[0].device().device_name(), "gpu-0-7g40gb-0-0");
  EXPECT_EQ(kubelet->health(kDriver)[0].device().pool_name(), "node-a");
  health_.SetGpu(GpuIndex(0), {Health::kUnhealthy, "XID 48", 20});
  ASSERT_TRUE(kubelet->WaitForHealth(kDriver, [](const auto& d) {
    return d.size() == 1 && d[0].health() == ::v1::UNHEALTHY && d[0].message() == "XID 48";
  }));
  // Heartbeats keep coming without changes.
  const int n = kubelet->health_updates(kDriver);
  EXPECT_TRUE(kubelet->WaitForHealthUpdates(kDriver, n + 2));
}

TEST_F(PluginServerTest, HealthStreamV1alpha1AsKubelet134To136) {
  auto server = Start(Feed());
  auto kubelet = Kubelet(HealthMode::kAlways);
  EXPECT_EQ(kubelet->plugins()[0].health_service, "v1alpha1.DRAResourceHealth");
  health_.SetGpu(GpuIndex(0), {Health::kUnknown, "lost", 20});
  ASSERT_TRUE(kubelet->WaitForHealth(kDriver, [](const auto& d) {
    return d.size() == 1 && d[0].health() == ::v1::UNKNOWN && d[0].message() == "lost";
  }));
}

TEST_F(PluginServerTest, NoHealthSourceNoHealthService) {
  auto server = Start();
  auto kubelet = Kubelet(HealthMode::kAdvertised);
  EXPECT_TRUE(kubelet->plugins()[0].health_service.empty());
  EXPECT_EQ(health_.listeners(), 0u);
}

TEST_F(PluginServerTest, StopRemovesSocketsAndListener) {
  auto server = Start(Feed());
  EXPECT_EQ(health_.listeners(), 1u);
  server->Stop();
  struct stat st {};
  EXPECT_NE(::lstat(server->registration_socket().c_str(), &st), 0);
  EXPECT_NE(::lstat(server->dra_socket().c_str(), &st), 0);
  EXPECT_EQ(health_.listeners(), 0u);
}

}  // namespace
}  // namespace migd::k8s::dra
