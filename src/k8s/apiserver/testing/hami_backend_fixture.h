// File: k8s/apiserver/testing/hami_backend_fixture.h
//
// HamiBackendFixture: a real engine::Manager over sim::FakeGpuDriver
// (A100-40GB GPUs), the fake API server over HTTP with this node, a
// FakeHamiScheduler and a HamiBackend, for the backend's tests. Header-only
// test helper; include from tests only.
#ifndef MIGD_K8S_APISERVER_TESTING_HAMI_BACKEND_FIXTURE_H_
#define MIGD_K8S_APISERVER_TESTING_HAMI_BACKEND_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "engine/manager.h"
#include "engine/owner_source.h"
#include "k8s/apiserver/hami_annotations.h"
#include "k8s/apiserver/hami_backend.h"
#include "k8s/apiserver/mig_allocations.h"
#include "k8s/apiserver/placeholder_id.h"
#include "k8s/apiserver/testing/fake_api_server.h"
#include "k8s/apiserver/testing/hami_scheduler.h"
#include "sim/fake_gpu_driver.h"
#include "store/record_store.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::k8s::testing {

inline constexpr char kTestNode[] = "node-1";

class HamiBackendFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start());
    api_.AddNode(kTestNode);
    KubeConfig c;
    c.server = api_.url();
    MIGD_ASSERT_OK_AND_ASSIGN(client_, KubeClient::Create(c));
    MIGD_ASSERT_OK_AND_ASSIGN(fake_, sim::FakeGpuDriver::Create(gpus_, {}, 7));
    OpenEngine();
    for (const engine::GpuView& g : mgr_->Gpus()) gpu_uuids_.push_back(g.info.uuid.value());
    MakeBackend();
  }
  // The record store and the Manager on dir_/state and fake_ (SetUp, and a
  // test's migd restart after resetting both).
  void OpenEngine() {
    store::RecordStoreOptions so;
    so.boot_id = "boot-1";
    MIGD_ASSERT_OK_AND_ASSIGN(store_, store::RecordStore::Open(dir_.Join("state"), clock_, so));
    engine::ManagerOptions mo;
    mo.boot_id = "boot-1";
    mo.listener = listener_;
    MIGD_ASSERT_OK_AND_ASSIGN(mgr_, engine::Manager::Create(mo, *fake_, *store_, clock_, owners_));
  }
  void MakeBackend(int patch_attempts = 5, std::set<std::string> allowlist = {}) {
    HamiBackendOptions o;
    o.node_name = kTestNode;
    o.patch_attempts = patch_attempts;
    o.profile_allowlist = std::move(allowlist);
    backend_ = std::make_unique<HamiBackend>(client_.get(), mgr_.get(), &clock_, o);
  }

  const std::string& Gpu(size_t i = 0) const { return gpu_uuids_.at(i); }
  std::string Id(int replica, size_t gpu = 0) const { return PlaceholderId(Gpu(gpu), replica); }

  // A pod scheduled and bound by HAMi's scheduler; reservations on GPU 0
  // unless they name one.
  void Schedule(const std::string& name, std::vector<HamiReservation> res,
                std::vector<std::string> init = {}, std::vector<std::string> ctrs = {"main"}) {
    PodSpec p;
    p.name = name;
    p.uid = "uid-" + name;
    p.containers = std::move(ctrs);
    p.init_containers = std::move(init);
    for (HamiReservation& r : res) {
      if (r.gpu_uuid.empty()) r.gpu_uuid = Gpu();
    }
    scheduler_.Schedule(p, res);
  }
  void SetPhase(const std::string& name, const std::string& phase) {
    ASSERT_TRUE(
        api_.UpdatePod("default", name, [&](nlohmann::json& p) { p["status"]["phase"] = phase; }));
  }
  std::vector<hami::MigAllocation> Allocations(const std::string& name) {
    auto text = api_.PodAnnotation("default", name, hami::kMigAllocations);
    if (!text) return {};
    auto a = hami::DecodeMigAllocations(*text);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : std::vector<hami::MigAllocation>{};
  }
  std::vector<engine::InstanceView> Instances() { return mgr_->List().instances; }
  std::optional<std::string> BindPhase(const std::string& name) {
    return api_.PodAnnotation("default", name, hami::kBindPhase);
  }
  std::optional<std::string> NodeLock() { return api_.NodeAnnotation(kTestNode, hami::kNodeLock); }
  // GI/CI creates and destroys the simulated GPUs saw.
  uint64_t Mutations() {
    uint64_t n = 0;
    const auto counters = fake_->Snapshot().counters;
    for (const char* m : {"CreateGi", "CreateCi", "DestroyCi", "DestroyGi"}) {
      auto it = counters.find(m);
      if (it == counters.end()) continue;
      for (const auto& [result, count] : it->second) n += count;
    }
    return n;
  }

  std::string gpus_ = "a100-40gb:1";  // a derived fixture may change it before SetUp
  engine::EngineListener* listener_ = nullptr;  // the Manager's; likewise
  migd::testing::TempDir dir_;
  FakeClock clock_;
  FakeApiServer api_;
  FakeHamiScheduler scheduler_{&api_, &clock_, kTestNode};
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<sim::FakeGpuDriver> fake_;
  std::unique_ptr<store::RecordStore> store_;
  engine::RecordsOwnerSource owners_;
  std::unique_ptr<engine::Manager> mgr_;
  std::unique_ptr<HamiBackend> backend_;
  std::vector<std::string> gpu_uuids_;
};

}  // namespace migd::k8s::testing

#endif  // MIGD_K8S_APISERVER_TESTING_HAMI_BACKEND_FIXTURE_H_
