// NvmlDriver's MIG-device resolution against the simulator's NVML library:
// the MIG UUID comes from the MIG device the index walk finds, never from the
// "Parent device" field of the CI/GI info; one walk serves every CI of a GPU;
// a CI no walk finds is rolled back; a MIG UUID that is not one is refused;
// processes are asked of the MIG device, not the parent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "testing/status_matchers.h"

namespace migd::driver {
namespace {

using ::migd::driver::sim_testing::CallCounts;
using ::migd::driver::sim_testing::Delta;
using ::migd::driver::sim_testing::SimMachine;
using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

class MigDeviceTest : public ::testing::Test {
 protected:
  void TearDown() override { Stop(); }

  void Start(const std::string& gpus, const std::map<std::string, std::string>& env = {},
             std::shared_ptr<NvmlLibrary> lib = nullptr) {
    Stop();
    sim_ = std::make_unique<SimMachine>(gpus, env);
    if (lib == nullptr) {
      auto loaded = NvmlLibrary::Load(MIGD_SIM_LIBRARY);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      lib = *loaded;
    }
    session_ = std::make_shared<NvmlSession>(lib);
    ASSERT_THAT(session_->Open(), IsOk());
    driver_ = std::make_unique<NvmlDriver>(session_);
    ASSERT_THAT(driver_->ListGpus(), IsOk());
  }
  void Stop() {
    driver_.reset();
    if (session_ != nullptr) {
      EXPECT_THAT(session_->Close(), IsOk());
    }
    session_.reset();
    sim_.reset();
  }
  // A 1g GI at `start` with its default CI.
  ComputeInstanceInfo OneSlice(uint32_t start, GiProfileId profile = GiProfileId(19)) {
    auto gi = driver_->CreateGi(gpu0_, profile, {start, 1});
    EXPECT_THAT(gi.status(), IsOk());
    if (!gi.ok()) return {};
    auto ci = driver_->CreateCi(gpu0_, gi->id);
    EXPECT_THAT(ci.status(), IsOk());
    return ci.ok() ? *ci : ComputeInstanceInfo{};
  }

  const GpuIndex gpu0_{0};
  std::unique_ptr<SimMachine> sim_;
  std::shared_ptr<NvmlSession> session_;
  std::unique_ptr<NvmlDriver> driver_;
};

TEST(ValidateMigUuidTest, AcceptsMigUuidsAndRefusesTheParentOrAGpuUuid) {
  const std::string parent = "GPU-11111111-2222-3333-4444-555555555555";
  EXPECT_THAT(ValidateMigUuid("MIG-6f0e1a2b-3c4d-5e6f-8a9b-0c1d2e3f4a5b", parent), IsOk());
  EXPECT_THAT(ValidateMigUuid("MIG-GPU-11111111-2222-3333-4444-555555555555/1/0", parent),
              IsOk());  // the pre-R470 form
  EXPECT_THAT(ValidateMigUuid(parent, parent),
              StatusIs(StatusCode::kInternal, AllOf(HasSubstr("'" + parent + "' as the MIG UUID"),
                                                    HasSubstr("GPU '" + parent + "'"))));
  EXPECT_THAT(ValidateMigUuid("GPU-99999999-2222-3333-4444-555555555555", parent),
              StatusIs(StatusCode::kInternal, HasSubstr("starts with \"MIG-\"")));
  EXPECT_THAT(ValidateMigUuid("", parent), StatusIs(StatusCode::kInternal, ::testing::_));
  // Equal to the parent even in another case.
  EXPECT_THAT(ValidateMigUuid("mig-abc", "MIG-ABC"), StatusIs(StatusCode::kInternal, ::testing::_));
}

TEST_F(MigDeviceTest, EveryCiGetsItsOwnMigUuidNeverTheParents) {
  Start("a100-40gb:1");
  std::set<std::string> seen;
  for (uint32_t s = 0; s < 7; ++s) {
    const ComputeInstanceInfo ci = OneSlice(s);
    EXPECT_THAT(ci.mig_uuid.value(), StartsWith("MIG-"));
    EXPECT_NE(ci.mig_uuid.value(), sim_->GpuUuid(0));
    EXPECT_TRUE(seen.insert(ci.mig_uuid.value()).second) << ci.mig_uuid;
  }
  // Inventory agrees with what each create returned.
  MIGD_ASSERT_OK_AND_ASSIGN(auto gis, driver_->ListGpuInstances(gpu0_));
  std::set<std::string> listed;
  for (const auto& gi : gis) {
    for (const auto& ci : gi.compute_instances) listed.insert(ci.mig_uuid.value());
  }
  EXPECT_EQ(listed, seen);
}

// The same under each MIG device index layout the header allows (dense in
// (GI, CI) order, dense in an order redrawn at every change, sparse).
TEST_F(MigDeviceTest, UuidsAreRightUnderEveryIndexLayout) {
  for (const char* layout : {"dense", "shuffled", "sparse"}) {
    SCOPED_TRACE(layout);
    Start("a30-24gb:1", {{"MIGD_SIM_MIG_INDEX", layout}});
    std::map<std::pair<uint32_t, uint32_t>, std::string> created;
    for (uint32_t s = 0; s < 4; ++s) {
      auto gi = driver_->CreateGi(gpu0_, GiProfileId(14), {s, 1});
      ASSERT_THAT(gi.status(), IsOk());
      MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi->id));
      created[{gi->id.value(), ci.id.value()}] = ci.mig_uuid.value();
    }
    MIGD_ASSERT_OK_AND_ASSIGN(auto gis, driver_->ListGpuInstances(gpu0_));
    std::map<std::pair<uint32_t, uint32_t>, std::string> listed;
    for (const auto& gi : gis) {
      for (const auto& ci : gi.compute_instances) {
        listed[{gi.id.value(), ci.id.value()}] = ci.mig_uuid.value();
      }
    }
    EXPECT_EQ(listed, created);
    // Destroying one renumbers the rest; the others keep their UUIDs.
    const auto first = created.begin()->first;
    ASSERT_THAT(driver_->DestroyCi(gpu0_, NvmlGiId(first.first), NvmlCiId(first.second)), IsOk());
    created.erase(first);
    MIGD_ASSERT_OK_AND_ASSIGN(gis, driver_->ListGpuInstances(gpu0_));
    listed.clear();
    for (const auto& gi : gis) {
      for (const auto& ci : gi.compute_instances) {
        listed[{gi.id.value(), ci.id.value()}] = ci.mig_uuid.value();
      }
    }
    EXPECT_EQ(listed, created);
  }
}

// A new CI the walk does not show at once (MIGD_SIM_NEW_CI_VISIBILITY): each
// missed walk costs one more walk; more misses than kMaxMigWalks - 1 make the
// create fail and roll back.
TEST_F(MigDeviceTest, ACiHiddenFromTheFirstWalksCostsOneWalkEach) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Start("a100-40gb:1", {{"MIGD_SIM_NEW_CI_VISIBILITY", "after-walks:2"}});
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  CallCounts before = sim_->Counts();
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  EXPECT_THAT(ci.mig_uuid.value(), StartsWith("MIG-"));
  CallCounts d = Delta(before, sim_->Counts());
  // Walks 1 and 2 find nothing, walk 3 the new CI: 3 x 7 indices.
  EXPECT_EQ(sim_testing::Get(d, "nvmlDeviceGetMigDeviceHandleByIndex", "ERROR_NOT_FOUND"), 20u);
  EXPECT_EQ(sim_testing::Get(d, "nvmlDeviceGetMigDeviceHandleByIndex", "SUCCESS"), 1u);

  Start("a100-40gb:1", {{"MIGD_SIM_NEW_CI_VISIBILITY", "after-walks:3"}});
  MIGD_ASSERT_OK_AND_ASSIGN(gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  EXPECT_THAT(driver_->CreateCi(gpu0_, gi.id),
              StatusIs(StatusCode::kNotFound,
                       AllOf(HasSubstr("no MIG device of CI 0"), HasSubstr("3 walks"),
                             HasSubstr("the new CI was destroyed"))));
  EXPECT_EQ(sim_->CiCount(), 0);
}

TEST_F(MigDeviceTest, OneWalkServesEveryCiOfTheGpu) {
  Start("a100-40gb:1");
  for (uint32_t s = 0; s < 7; ++s) OneSlice(s);
  const CallCounts before = sim_->Counts();
  MIGD_ASSERT_OK_AND_ASSIGN(auto gis, driver_->ListGpuInstances(gpu0_));
  ASSERT_EQ(gis.size(), 7u);
  const CallCounts d = Delta(before, sim_->Counts());
  // 7 MIG devices on a 7-device GPU: each index answers once, each handle
  // is asked for its ids once, each UUID read once.
  EXPECT_EQ(sim_testing::Get(d, "nvmlDeviceGetMigDeviceHandleByIndex", "SUCCESS"), 7u);
  EXPECT_EQ(sim_testing::Get(d, "nvmlDeviceGetGpuInstanceId", "SUCCESS"), 7u);
  EXPECT_EQ(sim_testing::Get(d, "nvmlDeviceGetComputeInstanceId", "SUCCESS"), 7u);
  EXPECT_EQ(sim_testing::Get(d, "nvmlDeviceGetUUID", "SUCCESS"), 7u);
  EXPECT_EQ(sim_testing::Get(d, "nvmlDeviceGetMaxMigDeviceCount", "SUCCESS"), 0u);  // cached
}

TEST_F(MigDeviceTest, ACiNoWalkFindsIsDestroyedAndReported) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Start("a100-40gb:1", {{"MIGD_SIM_FAULTS", "nvmlDeviceGetMigDeviceHandleByIndex=NOT_FOUND"}});
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  EXPECT_THAT(driver_->CreateCi(gpu0_, gi.id),
              StatusIs(StatusCode::kNotFound,
                       AllOf(HasSubstr("no MIG device of CI 0 of GI " +
                                       std::to_string(gi.id.value()) + " on GPU 0"),
                             HasSubstr("3 walks"), HasSubstr("the new CI was destroyed"))));
  EXPECT_EQ(sim_->CiCount(), 0);
  EXPECT_EQ(sim_->GiCount(), 1);  // the GI is the caller's (the engine rolls it back)
  // Three full walks of the 7 indices.
  EXPECT_EQ(sim_->Count("nvmlDeviceGetMigDeviceHandleByIndex", "ERROR_NOT_FOUND"), 21u);
  EXPECT_EQ(sim_->Count("nvmlComputeInstanceDestroy", "SUCCESS"), 1u);
}

// nvmlDeviceGetUUID answering with the parent GPU's UUID for a MIG device, as
// a driver that read the "Parent device" field would.
struct ParentUuidForMigDevices {
  static nvmlReturn_t Call(nvmlDevice_t device, char* uuid, unsigned int length) {
    const auto real = reinterpret_cast<nvmlDeviceGetString_fn>(
        sim_testing::LoadedSymbol(MIGD_SIM_LIBRARY, "nvmlDeviceGetUUID"));
    const auto is_mig = reinterpret_cast<nvmlDeviceGetUint_fn>(
        sim_testing::LoadedSymbol(MIGD_SIM_LIBRARY, "nvmlDeviceIsMigDeviceHandle"));
    const auto parent =
        reinterpret_cast<nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn>(sim_testing::LoadedSymbol(
            MIGD_SIM_LIBRARY, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle"));
    unsigned int mig = 0;
    nvmlDevice_t gpu = nullptr;
    if (is_mig(device, &mig) == NVML_SUCCESS && mig != 0 && parent(device, &gpu) == NVML_SUCCESS) {
      return real(gpu, uuid, length);
    }
    return real(device, uuid, length);
  }
};

TEST_F(MigDeviceTest, TheParentsUuidAsMigUuidIsRefusedAndTheCiRolledBack) {
  MIGD_ASSERT_OK_AND_ASSIGN(
      auto lib,
      sim_testing::LoadSimWithSymbols(
          MIGD_SIM_LIBRARY, {},
          {{"nvmlDeviceGetUUID", reinterpret_cast<void*>(&ParentUuidForMigDevices::Call)}}));
  Start("a100-40gb:1", {}, lib);
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  const std::string parent = sim_->GpuUuid(0);
  EXPECT_THAT(driver_->CreateCi(gpu0_, gi.id),
              StatusIs(StatusCode::kInternal, AllOf(HasSubstr("'" + parent + "' as the MIG UUID"),
                                                    HasSubstr("GPU '" + parent + "'"),
                                                    HasSubstr("the new CI was destroyed"))));
  EXPECT_EQ(sim_->CiCount(), 0);
}

TEST_F(MigDeviceTest, ProcessesAreAskedOfTheMigDeviceNotTheParent) {
  Start("a100-40gb:1");
  const ComputeInstanceInfo busy = OneSlice(0);
  const ComputeInstanceInfo idle = OneSlice(1);
  ASSERT_EQ(sim_testing::AttachProcess(MIGD_SIM_LIBRARY, busy.mig_uuid.value(), 4242, 1 << 20),
            NVML_SUCCESS);
  MIGD_ASSERT_OK_AND_ASSIGN(auto gis, driver_->ListGpuInstances(gpu0_));
  ASSERT_EQ(gis.size(), 2u);
  for (const auto& gi : gis) {
    ASSERT_EQ(gi.compute_instances.size(), 1u);
    const auto& ci = gi.compute_instances[0];
    MIGD_ASSERT_OK_AND_ASSIGN(auto procs, driver_->ListProcesses(gpu0_, gi.id, ci.id));
    if (ci.mig_uuid == busy.mig_uuid) {
      ASSERT_EQ(procs.size(), 1u);
      EXPECT_EQ(procs[0].pid, 4242u);
    } else {
      EXPECT_EQ(ci.mig_uuid, idle.mig_uuid);
      // The parent handle would list 4242 here: the aggregate of the GPU.
      EXPECT_THAT(procs, IsEmpty());
    }
  }
  EXPECT_THAT(driver_->ListProcesses(gpu0_, NvmlGiId(14), NvmlCiId(0)),
              StatusIs(StatusCode::kNotFound, HasSubstr("no MIG device of CI 0 of GI 14")));
}

}  // namespace
}  // namespace migd::driver
