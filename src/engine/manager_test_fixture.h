// ManagerTest: the engine_test fixture (a Manager over FakeGpuDriver behind a
// FaultInjectingDriver, a RecordStore in a temp dir, a FakeClock), shared by
// manager_test.cc and events_test.cc.
#ifndef MIGD_ENGINE_MANAGER_TEST_FIXTURE_H_
#define MIGD_ENGINE_MANAGER_TEST_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "driver/fault_injecting_driver.h"
#include "engine/engine_test_util.h"
#include "engine/manager.h"
#include "engine/owner_source.h"
#include "sim/fake_gpu_driver.h"
#include "store/record_store.h"
#include "testing/temp_dir.h"

namespace migd::engine {
namespace {

constexpr char kBoot[] = "boot-1";

using ::migd::engine::testing::Spec;

// Requests of these tests have opaque owners.
AllocateRequest Req(const std::string& id, std::vector<InstanceSpec> specs) {
  return testing::Req(id, std::move(specs), /*pod_owner=*/false);
}

class ManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { opts_.boot_id = kBoot; }

  void Machine(const std::string& gpus) {
    auto fake = sim::FakeGpuDriver::Create(gpus, {}, 42);
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = std::move(*fake);
    faults_ = std::make_unique<driver::FaultInjectingDriver>(fake_.get());
    OpenStore();
  }
  void OpenStore() {
    store::RecordStoreOptions so;
    so.boot_id = kBoot;
    auto st = store::RecordStore::Open(dir_->Join("state"), clock_, so);
    ASSERT_TRUE(st.ok()) << st.status();
    store_ = std::move(*st);
  }
  StatusOr<std::unique_ptr<Manager>> Make() {
    return Manager::Create(opts_, *faults_, *store_, clock_, owners_, &obs_);
  }
  void Start() {
    auto m = Make();
    ASSERT_TRUE(m.ok()) << m.status();
    mgr_ = std::move(*m);
  }
  // A process restart: a new store object and a new Manager on the same
  // hardware and state dir.
  void Restart() {
    mgr_.reset();
    store_.reset();
    OpenStore();
    Start();
  }
  InstanceView Get(const MigUuid& uuid) {
    for (const auto& v : mgr_->List().instances) {
      if (v.mig_uuid == uuid) return v;
    }
    return InstanceView();
  }
  size_t CountState(InstanceState s) {
    size_t n = 0;
    for (const auto& v : mgr_->List().instances) n += v.state == s;
    return n;
  }
  void Consistent() { testing::ExpectConsistent(*mgr_, *fake_, *store_); }

  std::unique_ptr<migd::testing::TempDir> dir_ = std::make_unique<migd::testing::TempDir>();
  FakeClock clock_;
  std::unique_ptr<sim::FakeGpuDriver> fake_;
  std::unique_ptr<driver::FaultInjectingDriver> faults_;
  std::unique_ptr<store::RecordStore> store_;
  RecordsOwnerSource owners_;
  testing::CountingObserver obs_;
  ManagerOptions opts_;
  std::unique_ptr<Manager> mgr_;
};

}  // namespace
}  // namespace migd::engine

#endif  // MIGD_ENGINE_MANAGER_TEST_FIXTURE_H_
