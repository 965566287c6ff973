// migd restart in HAMi mode: the engine recovers through the `hami` owner
// source (pod annotations over the fake API server) on NvmlDriver over
// libnvidia-ml-sim.so.
//   - live pods' instances are adopted Active (same MIG UUID, same owner),
//     the instance of a pod deleted while migd was down becomes Idle, and the
//     release pass after restart works on the adopted instances;
//   - API server down at startup: recovery fails closed and no NVML
//     mutation is made.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "engine/manager.h"
#include "engine/manager_testing.h"
#include "k8s/apiserver/hami_backend.h"
#include "k8s/apiserver/hami_codec.h"
#include "k8s/apiserver/kube_client.h"
#include "k8s/apiserver/testing/fake_api_server.h"
#include "k8s/apiserver/testing/hami_scheduler.h"
#include "k8s/podresources/kube_pod_lister.h"
#include "k8s/podresources/owner_sources.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::k8s {
namespace {

using ::migd::driver::NvmlDriver;
using ::migd::driver::sim_testing::SimMachine;
using ::migd::k8s::testing::FakeApiServer;
using ::migd::k8s::testing::FakeHamiScheduler;
using ::migd::k8s::testing::PodSpec;

constexpr char kNode[] = "gpu-node-1";

class HamiRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim_ = std::make_unique<SimMachine>("a100-40gb:1");
    MIGD_ASSERT_OK_AND_ASSIGN(driver_, NvmlDriver::Open(MIGD_SIM_LIBRARY));
    ASSERT_TRUE(api_.Start());
    api_.AddNode(kNode);
    KubeConfig kc;
    kc.server = api_.url();
    MIGD_ASSERT_OK_AND_ASSIGN(client_, KubeClient::Create(kc));
    lister_ = std::make_unique<KubeHamiPodLister>(*client_, kNode);
    source_ = std::make_unique<HamiOwnerSource>(*lister_);
  }
  void TearDown() override {
    backend_.reset();
    mgr_.reset();
    store_.reset();
    driver_.reset();
    sim_.reset();
  }
  // (Re)starts migd's engine and backend with the `hami` owner source.
  Status StartMigd() {
    backend_.reset();
    mgr_.reset();
    store_.reset();
    auto st =
        engine::testing::OpenStore(dir_.Join("state"), clock_, engine::testing::kBootId, false);
    if (!st.ok()) return st.status();
    store_ = std::move(*st);
    engine::ManagerOptions mo;
    mo.boot_id = engine::testing::kBootId;
    auto m = engine::Manager::Create(mo, *driver_, *store_, clock_, *source_);
    if (!m.ok()) return m.status();
    mgr_ = std::move(*m);
    HamiBackendOptions ho;
    ho.node_name = kNode;
    backend_ = std::make_unique<HamiBackend>(client_.get(), mgr_.get(), &clock_, ho);
    return OkStatus();
  }
  // A bound pod, allocated through the backend, then Running.
  std::string RunPod(const std::string& name, const std::string& profile, mig::Placement p) {
    const std::string gpu = mgr_->Gpus().at(0).info.uuid.value();
    PodSpec ps;
    ps.name = name;
    ps.uid = "uid-" + name;
    scheduler_.Schedule(ps, {{0, gpu, profile, p}});
    StatusOr<ContainerAllocation> r = backend_->AllocateContainer({gpu + "-0"});
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(api_.UpdatePod("default", name,
                               [](nlohmann::json& pod) { pod["status"]["phase"] = "Running"; }));
    return r.ok() && !r->mig_uuids.empty() ? r->mig_uuids[0].value() : "";
  }
  std::optional<engine::InstanceView> Find(const std::string& mig) {
    for (const auto& v : mgr_->List().instances) {
      if (v.mig_uuid.value() == mig) return v;
    }
    return std::nullopt;
  }

  migd::testing::TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<SimMachine> sim_;
  std::unique_ptr<NvmlDriver> driver_;
  FakeApiServer api_;
  FakeHamiScheduler scheduler_{&api_, &clock_, kNode};
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<KubeHamiPodLister> lister_;
  std::unique_ptr<HamiOwnerSource> source_;
  std::unique_ptr<store::RecordStore> store_;
  std::unique_ptr<engine::Manager> mgr_;
  std::unique_ptr<HamiBackend> backend_;
};

TEST_F(HamiRestartTest, LivePodsAdoptedActiveEndedPodIdleThenReleasable) {
  MIGD_ASSERT_OK(StartMigd());
  const std::string a = RunPod("a", "3g.20gb", {4, 4});
  const std::string b = RunPod("b", "2g.10gb", {0, 2});
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  // migd goes down; meanwhile pod b is deleted.
  backend_.reset();
  mgr_.reset();
  ASSERT_TRUE(api_.DeletePod("default", "b"));

  MIGD_ASSERT_OK(StartMigd());
  auto va = Find(a);
  auto vb = Find(b);
  ASSERT_TRUE(va && vb);
  EXPECT_EQ(va->state, engine::InstanceState::kActive);
  EXPECT_EQ(va->owner, store::Owner::Pod("default", "a", PodUid("uid-a"), "main"));
  EXPECT_EQ(vb->state, engine::InstanceState::kIdle);
  EXPECT_EQ(sim_->GiCount(), 2);

  // Pod a ends after the restart: the adopted instance is released.
  ASSERT_TRUE(api_.UpdatePod("default", "a",
                             [](nlohmann::json& pod) { pod["status"]["phase"] = "Succeeded"; }));
  MIGD_ASSERT_OK_AND_ASSIGN(ReleasePassResult r, backend_->ReleaseEndedPods());
  EXPECT_EQ(r.released, 1u);
  EXPECT_EQ(Find(a)->state, engine::InstanceState::kIdle);
}

TEST_F(HamiRestartTest, ApiServerDownAtStartupRefusesToTouchHardware) {
  MIGD_ASSERT_OK(StartMigd());
  const std::string a = RunPod("a", "3g.20gb", {4, 4});
  ASSERT_FALSE(a.empty());
  backend_.reset();
  mgr_.reset();
  api_.Stop();
  const auto before = sim_->Counts();
  const Status s = StartMigd();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(api_.url())) << s;
  EXPECT_EQ(mgr_, nullptr);
  // No GI/CI was created or destroyed by the failed startup.
  const auto delta = driver::sim_testing::Delta(before, sim_->Counts());
  for (const auto& [key, n] : delta) {
    EXPECT_THAT(key.first, ::testing::Not(::testing::HasSubstr("Create"))) << key.first;
    EXPECT_THAT(key.first, ::testing::Not(::testing::HasSubstr("Destroy"))) << key.first;
  }
  EXPECT_EQ(sim_->GiCount(), 1);
}

}  // namespace
}  // namespace migd::k8s
