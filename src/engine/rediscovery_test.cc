// Rediscovery (Manager::ReconcileOnce step 0): GPUs that recovery could not
// manage at startup are probed again by the reconciler and, once they answer
// MIG-enabled, taken over through recovery's verification for that GPU alone.
// Over FakeGpuDriver, with a wrapper that makes a GPU's discovery fail the way
// NVML's one-shot faults do (MIG NOT_SUPPORTED, NO_PERMISSION).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "driver/gpu_driver_wrapper.h"
#include "engine/manager_testing.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::engine::testing::OpaqueReq;
using ::migd::engine::testing::Spec;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

// Makes GPUs' discovery fail for their next N reads: NoMig answers "MIG not
// supported" (NVML's NOT_SUPPORTED from GetMigMode), Deny refuses the GPU
// (NO_PERMISSION: ListGpus skips it, GetMigMode fails). Counts GetMigMode and
// ListGpus calls.
class FlakyDiscovery final : public driver::GpuDriverWrapper {
 public:
  using GpuDriverWrapper::GpuDriverWrapper;

  void NoMig(uint32_t gpu, int reads) { no_mig_[gpu] = reads; }
  void Deny(uint32_t gpu, int reads) { deny_[gpu] = reads; }
  int mig_mode_calls() const { return mig_mode_calls_; }
  int list_calls() const { return list_calls_; }

  StatusOr<std::vector<driver::GpuInfo>> ListGpus() override {
    ++list_calls_;
    StatusOr<std::vector<driver::GpuInfo>> gpus = GpuDriverWrapper::ListGpus();
    if (!gpus.ok()) return gpus;
    std::vector<driver::GpuInfo> out;
    skipped_.clear();
    for (driver::GpuInfo g : *gpus) {
      if (Take(deny_, g.index.value())) {
        skipped_.push_back(g.index);
        continue;
      }
      if (Take(no_mig_, g.index.value())) g.mig = driver::MigModeInfo{};
      out.push_back(std::move(g));
    }
    return out;
  }
  std::vector<GpuIndex> SkippedGpus() override { return skipped_; }
  StatusOr<driver::MigModeInfo> GetMigMode(GpuIndex gpu) override {
    ++mig_mode_calls_;
    if (Take(deny_, gpu.value())) {
      return PermissionDeniedError("getting the handle of GPU " + std::to_string(gpu.value()) +
                                   ": NVML_ERROR_NO_PERMISSION (Insufficient Permissions)");
    }
    if (Take(no_mig_, gpu.value())) return driver::MigModeInfo{};
    return GpuDriverWrapper::GetMigMode(gpu);
  }

 private:
  static bool Take(std::map<uint32_t, int>& m, uint32_t gpu) {
    auto it = m.find(gpu);
    if (it == m.end() || it->second == 0) return false;
    --it->second;
    return true;
  }
  std::map<uint32_t, int> no_mig_;
  std::map<uint32_t, int> deny_;
  std::vector<GpuIndex> skipped_;
  int mig_mode_calls_ = 0;
  int list_calls_ = 0;
};

// Counts the log lines that contain `needle` while it is installed.
class CountingSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit CountingSink(std::string needle) : needle_(std::move(needle)) {}
  int count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (std::string_view(msg.payload.data(), msg.payload.size()).find(needle_) !=
        std::string_view::npos) {
      ++count_;
    }
  }
  void flush_() override {}

 private:
  const std::string needle_;
  int count_ = 0;
};

class ScopedLogCounter {
 public:
  explicit ScopedLogCounter(const std::string& needle)
      : sink_(std::make_shared<CountingSink>(needle)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~ScopedLogCounter() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  int count() { return sink_->count(); }

 private:
  std::shared_ptr<CountingSink> sink_;
};

class RediscoveryTest : public testing::FakeHardwareTest {
 protected:
  ~RediscoveryTest() override { mgr_.reset(); }
  void Machine(const std::string& gpus) {
    FakeHardwareTest::Machine(gpus);
    flaky_ = std::make_unique<FlakyDiscovery>(faults_.get());
    UseDrivers(flaky_.get(), fake_.get());
  }
  StatusOr<std::unique_ptr<Manager>> MakeFlaky() { return Make(); }
  void StartFlaky() {
    auto m = MakeFlaky();
    ASSERT_TRUE(m.ok()) << m.status();
    mgr_ = std::move(*m);
  }
  const GpuView* FindGpu(uint32_t index) {
    gpus_ = mgr_->Gpus();
    for (const GpuView& g : gpus_) {
      if (g.info.index.value() == index) return &g;
    }
    return nullptr;
  }
  ReconcileReport Reconcile() {
    StatusOr<ReconcileReport> r = mgr_->ReconcileOnce();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ReconcileReport{};
  }
  size_t RecordsOn(const GpuUuid& gpu) {
    StatusOr<store::LoadResult> loaded = store_->LoadAll();
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (!loaded.ok()) return 0;
    return std::count_if(loaded->records.begin(), loaded->records.end(),
                         [&](const store::Record& r) { return r.key.gpu_uuid == gpu; });
  }

  std::unique_ptr<FlakyDiscovery> flaky_;
  std::vector<GpuView> gpus_;
};

TEST_F(RediscoveryTest, GpuWithoutMigAtStartupIsManagedAfterOneReconcile) {
  Machine("a100-40gb:2");
  flaky_->NoMig(1, 1);  // one-shot: the startup read
  StartFlaky();
  ASSERT_NE(FindGpu(1), nullptr);
  EXPECT_EQ(FindGpu(1)->model, nullptr);
  EXPECT_FALSE(FindGpu(1)->info.mig.supported);
  EXPECT_EQ(mgr_->ModelOf(GpuIndex(1)), nullptr);
  EXPECT_FALSE(mgr_->Allocate(OpaqueReq("early", {Spec("1g.5gb", 1)})).ok());

  ScopedLogCounter managed_lines("GPU now managed");
  const ReconcileReport r = Reconcile();
  EXPECT_EQ(r.gpus_discovered, 1u);
  EXPECT_EQ(r.gpus_unmanaged, 0u);
  EXPECT_EQ(managed_lines.count(), 1);
  EXPECT_EQ(mgr_->counters().gpus_discovered, 1u);
  ASSERT_NE(FindGpu(1), nullptr);
  EXPECT_NE(FindGpu(1)->model, nullptr);
  EXPECT_TRUE(FindGpu(1)->info.mig.supported);
  EXPECT_EQ(FindGpu(1)->info.mig.current, driver::MigMode::kEnabled);
  EXPECT_NE(mgr_->ModelOf(GpuIndex(1)), nullptr);

  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("a", {Spec("1g.5gb", 1)})));
  EXPECT_EQ(a.instances[0].gpu, GpuIndex(1));
  EXPECT_EQ(a.instances[0].state, InstanceState::kActive);
  Consistent();
  // Managed now: later passes do not probe it any more.
  const int probes = flaky_->mig_mode_calls();
  EXPECT_EQ(Reconcile().gpus_discovered, 0u);
  EXPECT_EQ(flaky_->mig_mode_calls(), probes);
}

TEST_F(RediscoveryTest, GpuSkippedForNoPermissionIsListedAndManagedOnceAccessible) {
  Machine("a100-40gb:1");
  flaky_->Deny(0, 2);  // the startup listing and the first probe
  StartFlaky();
  EXPECT_TRUE(mgr_->Gpus().empty());
  EXPECT_THAT(mgr_->Allocate(OpaqueReq("early", {Spec("1g.5gb")})).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no GPUs")));

  // Still refused: one probe, no listing.
  const int lists = flaky_->list_calls();
  ReconcileReport r = Reconcile();
  EXPECT_EQ(r.gpus_discovered, 0u);
  EXPECT_EQ(r.gpus_unmanaged, 1u);
  EXPECT_EQ(flaky_->list_calls(), lists);
  EXPECT_TRUE(mgr_->Gpus().empty());

  // Accessible: listed once, then managed.
  r = Reconcile();
  EXPECT_EQ(r.gpus_discovered, 1u);
  EXPECT_EQ(flaky_->list_calls(), lists + 1);
  ASSERT_EQ(mgr_->Gpus().size(), 1u);
  EXPECT_NE(mgr_->Gpus()[0].model, nullptr);
  EXPECT_FALSE(mgr_->Gpus()[0].info.uuid.value().empty());
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("a", {Spec("1g.5gb")})));
  EXPECT_FALSE(a.instances[0].mig_uuid.value().empty());
  Consistent();
}

TEST_F(RediscoveryTest, GpuThatStaysBrokenStaysUnmanagedAndIsLoggedOnlyOnChange) {
  Machine("a100-40gb:1");
  flaky_->Deny(0, 1000);
  StartFlaky();
  ScopedLogCounter probe_lines("GPU not managed");
  const int probes = flaky_->mig_mode_calls();
  for (int pass = 0; pass < 5; ++pass) {
    const ReconcileReport r = Reconcile();
    EXPECT_EQ(r.gpus_discovered, 0u);
    EXPECT_EQ(r.gpus_unmanaged, 1u);
  }
  EXPECT_EQ(flaky_->mig_mode_calls(), probes + 5);  // one probe per pass
  EXPECT_EQ(probe_lines.count(), 1);                // the first outcome, then nothing new
  EXPECT_TRUE(mgr_->Gpus().empty());
  EXPECT_EQ(mgr_->counters().reconcile_errors, 0u);  // not an error of the pass
  // A different outcome is logged once more.
  flaky_->Deny(0, 0);
  flaky_->NoMig(0, 1000);
  EXPECT_EQ(Reconcile().gpus_discovered, 0u);
  EXPECT_EQ(Reconcile().gpus_discovered, 0u);
  EXPECT_EQ(probe_lines.count(), 2);
}

TEST_F(RediscoveryTest, MigDisabledGpuStaysUnmanagedWithOneProbePerPass) {
  Machine("a100-40gb:1,a30-24gb:1:mig-off");
  Start();
  ASSERT_NE(FindGpu(1), nullptr);
  EXPECT_EQ(FindGpu(1)->model, nullptr);
  ScopedLogCounter probe_lines("GPU not managed");
  const int before = faults_->CallCount(driver::FaultInjectingDriver::Method::kGetMigMode);
  for (int pass = 0; pass < 3; ++pass) {
    const ReconcileReport r = Reconcile();
    EXPECT_EQ(r.gpus_discovered, 0u);
    EXPECT_EQ(r.gpus_unmanaged, 1u);
  }
  EXPECT_EQ(faults_->CallCount(driver::FaultInjectingDriver::Method::kGetMigMode), before + 3);
  EXPECT_EQ(faults_->CallCount(driver::FaultInjectingDriver::Method::kGetGiProfiles), 1);
  EXPECT_EQ(probe_lines.count(), 0);  // same outcome as startup's: nothing new to say
  EXPECT_EQ(FindGpu(1)->model, nullptr);
  EXPECT_FALSE(mgr_->Allocate(OpaqueReq("a", {Spec("1g.6gb", 1)})).ok());

  // The operator enables MIG and resets the GPU: picked up without a restart.
  const Status enable = fake_->SetMigMode(GpuIndex(1), driver::MigMode::kEnabled);
  EXPECT_THAT(enable.message(), HasSubstr("RESET_REQUIRED")) << enable;
  fake_->Reboot();
  EXPECT_EQ(Reconcile().gpus_discovered, 1u);
  ASSERT_NE(FindGpu(1), nullptr);
  EXPECT_NE(FindGpu(1)->model, nullptr);
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("a", {Spec("1g.6gb", 1)})));
  EXPECT_EQ(a.instances[0].gpu, GpuIndex(1));
  Consistent();
}

TEST_F(RediscoveryTest, ProfileTableUnreadableLeavesGpuUnmanagedUntilItReads) {
  Machine("a100-40gb:1");
  flaky_->NoMig(0, 1);
  StartFlaky();
  faults_->FailNthCall(driver::FaultInjectingDriver::Method::kGetGiProfiles, 1,
                       UnavailableError("NVML_ERROR_TIMEOUT (Timeout)"));
  ReconcileReport r = Reconcile();
  EXPECT_EQ(r.gpus_discovered, 0u);
  EXPECT_EQ(r.gpus_unmanaged, 1u);
  EXPECT_EQ(mgr_->ModelOf(GpuIndex(0)), nullptr);
  faults_->FailNthCall(driver::FaultInjectingDriver::Method::kListGpuInstances, 1,
                       UnavailableError("NVML_ERROR_TIMEOUT (Timeout)"));
  r = Reconcile();
  EXPECT_EQ(r.gpus_discovered, 0u);
  EXPECT_EQ(mgr_->ModelOf(GpuIndex(0)), nullptr);
  EXPECT_EQ(Reconcile().gpus_discovered, 1u);
  EXPECT_NE(mgr_->ModelOf(GpuIndex(0)), nullptr);
}

// The takeover publishes a GPU while other threads plan, allocate and read
// the GPU list (run under TSan by make test-tsan).
TEST_F(RediscoveryTest, TakeOverRacesWithAllocateAndReaders) {
  Machine("a100-40gb:2");
  flaky_->NoMig(1, 1);
  StartFlaky();
  std::atomic<bool> stop{false};
  std::atomic<int> saw_gpu1{0};
  std::thread reader([&] {
    while (!stop.load()) {
      for (const GpuView& g : mgr_->Gpus()) {
        if (g.info.index == GpuIndex(1) && g.model != nullptr) {
          saw_gpu1.store(1);
          EXPECT_NE(g.model->FindProfileByName("1g.5gb"), nullptr);
        }
      }
      (void)mgr_->List();
      (void)mgr_->Plan({Spec("1g.5gb")});
    }
  });
  std::thread allocator([&] {
    for (int i = 0; i < 30; ++i) {
      const std::string id = "r" + std::to_string(i);
      StatusOr<Allocation> a = mgr_->Allocate(OpaqueReq(id, {Spec("1g.5gb")}));
      if (a.ok()) {
        EXPECT_TRUE(mgr_->Release(id).ok());
      }
    }
  });
  const ReconcileReport r = Reconcile();
  allocator.join();
  stop.store(true);
  reader.join();
  EXPECT_EQ(r.gpus_discovered, 1u);
  EXPECT_NE(mgr_->ModelOf(GpuIndex(1)), nullptr);
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("last", {Spec("1g.5gb", 1)})));
  EXPECT_EQ(a.instances[0].gpu, GpuIndex(1));
  Consistent();
}

// Today's startup behaviour, kept: records of a GPU that cannot be managed at
// startup fail startup (closed: nothing changed), whatever made it
// unmanageable.
TEST_F(RediscoveryTest, StartupWithRecordsOfAnUnmanageableGpuStillFailsClosed) {
  Machine("a100-40gb:2");
  StartFlaky();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("a", {Spec("1g.5gb", 1)})));
  mgr_.reset();
  const auto layout = testing::LiveLayout(*fake_);
  flaky_->NoMig(1, 1);
  EXPECT_THAT(MakeFlaky().status(), StatusIs(StatusCode::kFailedPrecondition,
                                             HasSubstr("nothing on the hardware was changed")));
  EXPECT_EQ(testing::LiveLayout(*fake_), layout);
  // The next start (the fault was one-shot) recovers it.
  StartFlaky();
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kActive);
}

// Records of a GPU that becomes manageable only later (here put back into the
// state dir while the GPU was unmanaged) are verified as startup would.
class RediscoveryRecordsTest : public RediscoveryTest {
 protected:
  // Allocates an Active instance ("a") and an Idle one on GPU 1, then
  // restarts with GPU 1 unmanaged and its records moved out of the store.
  void SetUpGpu1(bool adopt = false) {
    Machine("a100-40gb:2");
    StartFlaky();
    MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("a", {Spec("2g.10gb", 1)})));
    MIGD_ASSERT_OK_AND_ASSIGN(Allocation i, mgr_->Allocate(OpaqueReq("i", {Spec("1g.5gb", 1)})));
    ENGINE_ASSERT_OK(mgr_->Release("i"));
    active_ = a.instances[0].mig_uuid;
    idle_ = i.instances[0].mig_uuid;
    gpu1_ = a.instances[0].gpu_uuid;
    mgr_.reset();
    MIGD_ASSERT_OK_AND_ASSIGN(store::LoadResult loaded, store_->LoadAll());
    for (const store::Record& r : loaded.records) {
      ASSERT_EQ(r.key.gpu_uuid, gpu1_);
      saved_.push_back(r);
      ENGINE_ASSERT_OK(store_->Remove(r.key));
    }
    ASSERT_EQ(saved_.size(), 2u);
    opts_.adopt_existing_mig_instances = adopt;
    flaky_->NoMig(1, 1);
    StartFlaky();
    ASSERT_EQ(mgr_->ModelOf(GpuIndex(1)), nullptr);
    ASSERT_TRUE(mgr_->List().instances.empty());
  }
  void PutBack(const store::Record& r) {
    store::Record copy = r;
    ENGINE_ASSERT_OK(store_->Put(copy));
  }

  MigUuid active_;
  MigUuid idle_;
  GpuUuid gpu1_;
  std::vector<store::Record> saved_;
};

TEST_F(RediscoveryRecordsTest, ActiveInstanceIsRecoveredWithItsMigUuid) {
  SetUpGpu1();
  for (const store::Record& r : saved_) PutBack(r);
  const int publishes = obs_.publishes();
  EXPECT_EQ(Reconcile().gpus_discovered, 1u);
  EXPECT_EQ(Get(active_).state, InstanceState::kActive);
  EXPECT_EQ(Get(active_).request_id, "a");
  EXPECT_EQ(Get(active_).gpu, GpuIndex(1));
  EXPECT_EQ(Get(idle_).state, InstanceState::kIdle);
  EXPECT_EQ(obs_.publishes(), publishes + 2);
  // The allocation is known again: replay and release work.
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation again, mgr_->Allocate(OpaqueReq("a", {Spec("2g.10gb", 1)})));
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(again.instances[0].mig_uuid, active_);
  // The Idle one is reused, nothing created.
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(OpaqueReq("b", {Spec("1g.5gb", 1)})));
  EXPECT_EQ(b.instances[0].mig_uuid, idle_);
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  Consistent();
}

TEST_F(RediscoveryRecordsTest, MismatchingRecordFailsClosedForThatGpu) {
  SetUpGpu1();
  store::Record bad;
  for (const store::Record& r : saved_) {
    if (r.mig_uuid == active_) {
      bad = r;
      bad.mig_uuid = MigUuid("MIG-00000000-0000-0000-0000-000000000000");
    } else {
      PutBack(r);
    }
  }
  PutBack(bad);
  const auto layout_before = testing::LiveLayout(*fake_);
  // The record's owner holds a MIG UUID that does not exist on the GPU.
  ScopedLogCounter probe_lines("verification failed, GPU left unmanaged");
  for (int pass = 0; pass < 3; ++pass) {
    const ReconcileReport r = Reconcile();
    EXPECT_EQ(r.gpus_discovered, 0u);
    EXPECT_EQ(r.gpus_unmanaged, 1u);
  }
  EXPECT_EQ(probe_lines.count(), 1);
  // Nothing changed: GPU unmanaged, no instance taken, hardware and records
  // as they were.
  EXPECT_EQ(mgr_->ModelOf(GpuIndex(1)), nullptr);
  EXPECT_TRUE(mgr_->List().instances.empty());
  EXPECT_TRUE(mgr_->List().foreign.empty());
  EXPECT_EQ(testing::LiveLayout(*fake_), layout_before);
  EXPECT_EQ(RecordsOn(gpu1_), 2u);
  EXPECT_FALSE(mgr_->Allocate(OpaqueReq("x", {Spec("1g.5gb", 1)})).ok());
  // GPU 0 is unaffected.
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation g0, mgr_->Allocate(OpaqueReq("g0", {Spec("1g.5gb", 0)})));
  EXPECT_EQ(g0.instances[0].gpu, GpuIndex(0));
  // Corrected record: taken over at the next pass.
  ENGINE_ASSERT_OK(store_->Remove(bad.key));
  for (const store::Record& r : saved_) {
    if (r.mig_uuid == active_) PutBack(r);
  }
  EXPECT_EQ(Reconcile().gpus_discovered, 1u);
  EXPECT_EQ(Get(active_).state, InstanceState::kActive);
}

TEST_F(RediscoveryRecordsTest, LiveInstancesWithoutRecordsBecomeForeignNothingDestroyed) {
  SetUpGpu1();  // records not put back: both live GIs are unknown now
  const auto layout_before = testing::LiveLayout(*fake_);
  EXPECT_EQ(Reconcile().gpus_discovered, 1u);
  EXPECT_EQ(mgr_->List().foreign.size(), 2u);
  EXPECT_TRUE(mgr_->List().instances.empty());
  EXPECT_EQ(testing::LiveLayout(*fake_), layout_before);
  // Their slices are blocked; the rest of the GPU is free.
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation c, mgr_->Allocate(OpaqueReq("c", {Spec("1g.5gb", 1)})));
  EXPECT_EQ(c.instances[0].gpu, GpuIndex(1));
  for (const ForeignInstance& f : mgr_->List().foreign) {
    EXPECT_FALSE(f.placement.Overlaps(c.instances[0].placement));
  }
  Consistent();
}

// What startup would destroy (here an interrupted deletion) is taken in
// Error by the takeover and destroyed by the reconciler's Error retry, as any
// Error instance; the takeover itself changes nothing on the hardware.
TEST_F(RediscoveryRecordsTest, InterruptedDeletionIsTakenInErrorAndRetried) {
  SetUpGpu1();
  for (store::Record r : saved_) {
    if (r.mig_uuid == idle_) r.state = store::RecordState::kDeleting;
    PutBack(r);
  }
  const int destroys = faults_->CallCount(driver::FaultInjectingDriver::Method::kDestroyGi);
  faults_->FailAlways(driver::FaultInjectingDriver::Method::kDestroyGi,
                      UnavailableError("NVML_ERROR_TIMEOUT (Timeout)"));
  ReconcileReport r = Reconcile();
  EXPECT_EQ(r.gpus_discovered, 1u);
  EXPECT_EQ(r.errors_remaining, 1u);  // the retry in the same pass was refused
  EXPECT_EQ(Get(idle_).state, InstanceState::kError);
  EXPECT_EQ(Get(active_).state, InstanceState::kActive);
  EXPECT_EQ(faults_->CallCount(driver::FaultInjectingDriver::Method::kDestroyGi), destroys + 1);
  faults_->ClearAll();
  r = Reconcile();
  EXPECT_EQ(r.errors_cleaned, 1u);
  EXPECT_EQ(Get(idle_).state, InstanceState::kNone);
  EXPECT_EQ(RecordsOn(gpu1_), 1u);
  Consistent();
}

// With adoptExistingMIGInstances, unknown complete pairs are adopted Idle as
// at startup; an orphan GI (no CI) stays foreign instead of being destroyed.
TEST_F(RediscoveryRecordsTest, AdoptionClaimsPairsButDestroysNoOrphan) {
  SetUpGpu1(/*adopt=*/true);
  bool orphan = false;
  for (uint32_t start = 0; start < 7 && !orphan; ++start) {
    orphan = fake_->CreateGi(GpuIndex(1), GiProfileId(19), {start, 1}).ok();
  }
  ASSERT_TRUE(orphan);
  const auto layout_before = testing::LiveLayout(*fake_);
  EXPECT_EQ(Reconcile().gpus_discovered, 1u);
  EXPECT_EQ(testing::LiveLayout(*fake_), layout_before);
  EXPECT_EQ(Get(active_).state, InstanceState::kIdle);  // no record: nobody owns it
  EXPECT_EQ(Get(idle_).state, InstanceState::kIdle);
  EXPECT_EQ(mgr_->List().foreign.size(), 1u);
  EXPECT_EQ(RecordsOn(gpu1_), 2u);
  Consistent();
}

}  // namespace
}  // namespace migd::engine
