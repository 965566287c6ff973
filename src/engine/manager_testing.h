// File: engine/manager_testing.h
//
// The one test harness for everything that runs a real engine::Manager:
// engine, API and metrics tests (test-only library migd_engine_testing).
//
//   ManagerHarness    a gtest fixture base: a state dir in a temp dir, a
//                     RecordStore, a FakeClock, ManagerOptions, an owner
//                     source and an observer (CountingObserver by default),
//                     the Manager itself, Start / Restart (a process
//                     restart: new store object and Manager on the same
//                     hardware and state dir) and the invariant checks.
//   FakeHardwareTest  ... over the in-process simulator (sim::FakeGpuDriver
//                     behind driver::FaultInjectingDriver).
//   SimHardwareTest   ... over the production NvmlDriver loading
//                     libnvidia-ml-sim.so by path, with its call counters.
//
// Helpers: Spec / Req build requests; LiveLayout renders a driver's GIs;
// ExpectConsistent checks the quiescent invariants; ExpectMigIdentity checks
// that a MIG UUID names a MIG device (MIG-…, not its parent GPU's UUID).
//
// Example:
//   class MyTest : public engine::testing::FakeHardwareTest {};
//   TEST_F(MyTest, Reuse) {
//     Machine("a100-40gb:1");
//     Start();
//     MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("r1", {Spec("1g.5gb")})));
//     ENGINE_ASSERT_OK(mgr_->Release("r1"));
//     Restart();
//     Consistent();
//   }
//
// Thread-safety: fixtures run on the test's thread; CountingObserver is
// thread-safe.
#ifndef MIGD_ENGINE_MANAGER_TESTING_H_
#define MIGD_ENGINE_MANAGER_TESTING_H_

#include <absl/base/thread_annotations.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "driver/fault_injecting_driver.h"
#include "driver/gpu_driver.h"
#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "engine/instance_observer.h"
#include "engine/manager.h"
#include "engine/owner_source.h"
#include "sim/fake_gpu_driver.h"
#include "store/file_ops.h"
#include "store/record_store.h"
#include "testing/temp_dir.h"

// Like MIGD_ASSERT_OK, but copies the status first: MIGD_ASSERT_OK binds a
// reference to a temporary's status, which GCC 12 -O2 reports as dangling
// (-Wdangling-pointer) when `expr` returns by value.
#define ENGINE_ASSERT_OK(expr)                                                \
  do {                                                                        \
    const ::migd::Status engine_s_ = ::migd::engine::testing::ToStatus(expr); \
    ASSERT_TRUE(engine_s_.ok()) << engine_s_.ToString();                      \
  } while (0)

namespace migd::engine::testing {

inline constexpr char kBootId[] = "boot-1";

inline Status ToStatus(const Status& s) { return s; }
template <typename T>
Status ToStatus(const StatusOr<T>& s) {
  return s.status();
}

// One requested instance: a profile name, optionally pinned to a GPU and an
// exact placement.
InstanceSpec Spec(std::string profile, std::optional<uint32_t> gpu = std::nullopt,
                  std::optional<mig::Placement> placement = std::nullopt);

// Request `id` owned by pod default/pod-<id> (uid-<id>, container main), or
// with `pod_owner` false by the opaque owner "owner-<id>".
AllocateRequest Req(const std::string& id, std::vector<InstanceSpec> specs, bool pod_owner = true);
inline AllocateRequest OpaqueReq(const std::string& id, std::vector<InstanceSpec> specs) {
  return Req(id, std::move(specs), /*pod_owner=*/false);
}

// Counts publish/unpublish calls and tracks what is published. FailPublish
// makes every later OnPublish return `s`.
class CountingObserver final : public InstanceObserver {
 public:
  Status OnPublish(const PublishedInstance& i) override;
  Status OnUnpublish(const PublishedInstance& i) override;
  Status OnReconcile() override;
  int publishes() const;
  int unpublishes() const;
  int reconciles() const;
  std::set<std::string> published() const;
  void FailPublish(Status s);
  // Blocks until OnReconcile was called at least `n` times in all; false if
  // that did not happen within `deadline` (a safety net, not a timing).
  bool WaitForReconciles(int n, Clock::Duration deadline) const;

 private:
  mutable Mutex mu_;
  mutable CondVar cv_;
  int publishes_ ABSL_GUARDED_BY(mu_) = 0;
  int unpublishes_ ABSL_GUARDED_BY(mu_) = 0;
  int reconciles_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> published_ ABSL_GUARDED_BY(mu_);
  Status fail_publish_ ABSL_GUARDED_BY(mu_);
};

// "gpu=<i> gi=<id> profile=<p> at=<s:n> ci=<id>:<uuid>,..." per live GI.
std::vector<std::string> LiveLayout(driver::GpuDriver& d);

// A MIG UUID of an instance of `gpu_uuid` names a MIG device: it starts with
// "MIG-" and is not the parent GPU's own UUID.
void ExpectMigIdentity(const GpuUuid& gpu_uuid, const MigUuid& mig_uuid);
// The same for every instance of `views` that has a MIG UUID.
void ExpectMigIdentities(const std::vector<InstanceView>& views);

// The quiescent invariants: every live GI is tracked by the manager (with a
// committed record of the same ids and state) or preserved as foreign; every
// record is an instance the manager tracks; no intent record remains; no two
// instances overlap; every MIG UUID passes ExpectMigIdentity.
void ExpectConsistent(Manager& mgr, driver::GpuDriver& d, store::RecordStore& store);

// Record writes without fsync: still atomic against kill -9 (what the crash
// tests exercise), not against power loss; as MIGD_SIM_FSYNC=0 for the sim.
class NoSyncFileOps final : public store::FileOps {
 public:
  Status WriteFileAtomically(const std::string& path, std::string_view data,
                             const AtomicWriteOptions& options) override;
  Status SyncDirectory(const std::string&) override { return OkStatus(); }
};

// A RecordStore on `dir` stamping `boot_id`; without fsync unless `sync`.
StatusOr<std::unique_ptr<store::RecordStore>> OpenStore(const std::string& dir, Clock& clock,
                                                        const std::string& boot_id, bool sync);

class ManagerHarness : public ::testing::Test {
 protected:
  ManagerHarness();
  ~ManagerHarness() override;

  // The driver Manager::Create gets and the one invariants read (default:
  // the same). Not owned.
  void UseDrivers(driver::GpuDriver* manager_driver, driver::GpuDriver* inspect_driver = nullptr);
  // (Re)opens store_ on StateDir() with opts_.boot_id.
  void OpenStore();
  // Manager::Create with opts_, the drivers, store_, clock_, `owners`
  // (default owners_) and observer_.
  StatusOr<std::unique_ptr<Manager>> Make();
  StatusOr<std::unique_ptr<Manager>> Make(OwnerSource& owners);
  // mgr_ = Make(), asserting success.
  void Start();
  // A process restart: a new store object and a new Manager on the same
  // hardware and state dir.
  void Restart();
  // Drops the Manager and the store and starts over on a fresh state dir.
  void NewStateDir();
  std::string StateDir() const { return dir_->Join("state"); }

  // The instance of `uuid` in mgr_->List(); an empty view if none.
  InstanceView Get(const MigUuid& uuid);
  size_t CountState(InstanceState s);
  // ExpectConsistent on mgr_, the inspect driver and store_.
  void Consistent();

  std::unique_ptr<migd::testing::TempDir> dir_;
  FakeClock clock_;
  ManagerOptions opts_;
  bool sync_records_ = true;  // false: NoSyncFileOps
  RecordsOwnerSource owners_;
  CountingObserver obs_;
  InstanceObserver* observer_ = &obs_;
  std::unique_ptr<store::RecordStore> store_;
  std::unique_ptr<Manager> mgr_;

 private:
  driver::GpuDriver* manager_driver_ = nullptr;
  driver::GpuDriver* inspect_driver_ = nullptr;
};

// The in-process simulator: fake_ behind faults_ (the Manager's driver);
// invariants read fake_ directly, so faults_' call counts are the Manager's.
class FakeHardwareTest : public ManagerHarness {
 protected:
  ~FakeHardwareTest() override;
  // A fresh simulated machine of `gpus` ("a100-40gb:2,h100-80gb:1", seed 42)
  // and a store on it.
  void Machine(const std::string& gpus);

  std::unique_ptr<sim::FakeGpuDriver> fake_;
  std::unique_ptr<driver::FaultInjectingDriver> faults_;
};

// libnvidia-ml-sim.so through the production NvmlDriver: one simulated
// machine, one NVML session, one store, one Manager. Tests call Init() after
// MIGD_RUN_IN_FRESH_PROCESS() when they need per-process simulator state.
class SimHardwareTest : public ManagerHarness {
 protected:
  void TearDown() override;
  // `library` is the path of libnvidia-ml-sim.so.
  void Init(const std::string& library, const std::string& gpus,
            const std::map<std::string, std::string>& env = {});
  // Calls of the simulator's NVML functions made by `fn`.
  template <typename F>
  driver::sim_testing::CallCounts Measure(F&& fn) {
    const driver::sim_testing::CallCounts before = sim_->Counts();
    fn();
    return driver::sim_testing::Delta(before, sim_->Counts());
  }

  std::unique_ptr<driver::sim_testing::SimMachine> sim_;
  std::unique_ptr<driver::NvmlDriver> driver_;
};

// Total of a call-count map, and a one-line rendering of it.
uint64_t Total(const driver::sim_testing::CallCounts& c);
std::string Describe(const driver::sim_testing::CallCounts& c);

}  // namespace migd::engine::testing

#endif  // MIGD_ENGINE_MANAGER_TESTING_H_
