// NvmlDriver against the simulator's NVML library (libnvidia-ml-sim.so),
// loaded by path through NvmlLibrary exactly like libnvidia-ml.so.1, on a
// fresh simulated machine per test (one A100-40GB unless a test says
// otherwise). These pin down the call sequences, fallbacks and rollbacks;
// tests/nvml_driver_sim_test.cc covers every GPU model and layout.
//
// Injected faults use MIGD_SIM_FAULTS "@N", which numbers the calls of a
// process: those tests run in a process of their own
// (MIGD_RUN_IN_FRESH_PROCESS).
#include "driver/nvml/nvml_driver.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "driver/nvml/nvml_sim_testing.h"
#include "mig/catalog.h"
#include "testing/status_matchers.h"

namespace migd::driver {
namespace {

using ::migd::driver::sim_testing::CallCounts;
using ::migd::driver::sim_testing::Delta;
using ::migd::driver::sim_testing::SimMachine;
using ::migd::driver::sim_testing::ToCallCounts;
using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

constexpr const char* kA100 = "a100-40gb:1";

const mig::GpuModel& A100() { return *mig::Catalog::Default().FindModel("a100-40gb"); }

class NvmlDriverTest : public ::testing::Test {
 protected:
  void TearDown() override { Stop(); }

  // A fresh machine `gpus` with `env`, and a session on `lib` (the simulator
  // loaded by path when null).
  void Start(const std::string& gpus = kA100, const std::map<std::string, std::string>& env = {},
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
  }
  void Stop() {
    driver_.reset();
    if (session_ != nullptr) {
      EXPECT_THAT(session_->Close(), IsOk());
    }
    session_.reset();
    sim_.reset();
  }

  uint64_t library_calls(std::string_view function) const {
    uint64_t n = 0;
    for (const NvmlCallCount& c : driver_->CallCounts()) {
      if (c.function == function) n += c.count;
    }
    return n;
  }
  CallCounts OurCounts() const { return ToCallCounts(driver_->CallCounts()); }

  const GpuIndex gpu0_{0};
  std::unique_ptr<SimMachine> sim_;
  std::shared_ptr<NvmlSession> session_;
  std::unique_ptr<NvmlDriver> driver_;
};

TEST_F(NvmlDriverTest, ListsGpuIdentity) {
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, driver_->ListGpus());
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].index, GpuIndex(0));
  EXPECT_EQ(gpus[0].uuid.value(), sim_->GpuUuid(0));
  EXPECT_TRUE(IsValidGpuUuid(gpus[0].uuid.value())) << gpus[0].uuid;
  EXPECT_EQ(gpus[0].name, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(gpus[0].minor, 0u);
  EXPECT_EQ(gpus[0].pci_bus_id, "00000000:17:00.0");
  EXPECT_EQ(gpus[0].pci_device_id, 0x20B010DEu);
  EXPECT_EQ(gpus[0].memory_total_mib, 40960u);
  EXPECT_TRUE(gpus[0].mig.supported);
  EXPECT_EQ(gpus[0].mig.current, MigMode::kEnabled);
  MIGD_ASSERT_OK_AND_ASSIGN(auto v, driver_->GetVersions());
  EXPECT_EQ(v.driver, "580.95.05");
  EXPECT_EQ(v.nvml, "13.580.95.05");
}

TEST_F(NvmlDriverTest, SkipsALostGpuAndListsItAgainWhenItAnswers) {
  Start("a100-40gb:3");
  ASSERT_EQ(sim_testing::InjectEvents(MIGD_SIM_LIBRARY, "gpu-lost@1"), NVML_SUCCESS);
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, driver_->ListGpus());
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].index, GpuIndex(0));
  EXPECT_EQ(gpus[1].index, GpuIndex(2));
  EXPECT_THAT(driver_->SkippedGpus(), ElementsAre(GpuIndex(1)));
  EXPECT_EQ(sim_->Count("nvmlDeviceGetHandleByIndex_v2", "ERROR_GPU_IS_LOST"), 1u);
  ASSERT_EQ(sim_testing::InjectEvents(MIGD_SIM_LIBRARY, "gpu-back@1"), NVML_SUCCESS);
  MIGD_ASSERT_OK_AND_ASSIGN(gpus, driver_->ListGpus());
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[1].uuid.value(), sim_->GpuUuid(1));
  EXPECT_TRUE(driver_->SkippedGpus().empty());
}

TEST_F(NvmlDriverTest, SkipsGpusWithoutPermission) {
  Start("a100-40gb:1,a100-40gb:1:no-permission,a100-40gb:1");
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, driver_->ListGpus());
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].index, GpuIndex(0));
  EXPECT_EQ(gpus[1].index, GpuIndex(2));
  EXPECT_EQ(gpus[1].uuid.value(), sim_->GpuUuid(2));
  EXPECT_EQ(sim_->Count("nvmlDeviceGetHandleByIndex_v2", "ERROR_NO_PERMISSION"), 1u);
  // Remembered for the engine's rediscovery, without another NVML call.
  const uint64_t calls = driver_->TotalCalls();
  EXPECT_THAT(driver_->SkippedGpus(), ElementsAre(GpuIndex(1)));
  EXPECT_EQ(driver_->TotalCalls(), calls);
  // Probing the skipped index is refused by the handle lookup: one call.
  EXPECT_THAT(driver_->GetMigMode(GpuIndex(1)), StatusIs(StatusCode::kPermissionDenied,
                                                         HasSubstr("NVML_ERROR_NO_PERMISSION")));
  EXPECT_EQ(driver_->TotalCalls(), calls + 1);
}

TEST_F(NvmlDriverTest, OneShotNotSupportedFromProfileInfoDoesNotDropTheProfile) {
  MIGD_RUN_IN_FRESH_PROCESS();  // the simulator numbers calls per process
  Start(kA100, {{"MIGD_SIM_FAULTS", "nvmlDeviceGetGpuInstanceProfileInfoV=NOT_SUPPORTED@1"}});
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfiles(gpu0_));
  ASSERT_EQ(profiles.size(), 7u);
  EXPECT_EQ(profiles[0].name, "1g.5gb");
}

TEST_F(NvmlDriverTest, WalksProfilesWithV3AndStripsNames) {
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfiles(gpu0_));
  // Sorted by index: 0 (1g.5gb), 1 (2g.10gb), 2 (3g.20gb), 3 (4g.20gb),
  // 4 (7g.40gb), 7 (1g.5gb+me), 9 (1g.10gb).
  ASSERT_EQ(profiles.size(), A100().gi_profiles.size());
  ASSERT_EQ(profiles.size(), 7u);
  EXPECT_EQ(profiles[0].index, GiProfileIndex(0));
  EXPECT_EQ(profiles[0].id, GiProfileId(19));
  EXPECT_EQ(profiles[0].name, "1g.5gb");
  EXPECT_EQ(profiles[0].info_version, 3);
  EXPECT_EQ(profiles[0].slice_count, 1u);
  EXPECT_EQ(profiles[0].instance_count, 7u);
  EXPECT_EQ(profiles[0].memory_mib, 4864u);
  EXPECT_FALSE(profiles[0].p2p_supported);  // the simulator reports no P2P
  EXPECT_EQ(profiles[0].placements.size(), 7u);
  EXPECT_EQ(profiles[2].id, GiProfileId(9));
  EXPECT_EQ(profiles[2].name, "3g.20gb");
  EXPECT_THAT(profiles[2].placements, ElementsAre(mig::Placement{0, 4}, mig::Placement{4, 4}));
  EXPECT_EQ(profiles[5].index, GiProfileIndex(7));
  EXPECT_EQ(profiles[5].name, "1g.5gb+me");
  EXPECT_EQ(profiles[6].index, GiProfileIndex(9));
  EXPECT_EQ(profiles[6].id, GiProfileId(15));
  for (const GiProfileInfo& p : profiles) {
    SCOPED_TRACE(p.name);
    const mig::GiProfile* k = A100().FindProfileById(p.id);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(p.index, k->index);
    EXPECT_EQ(p.placements, k->placements);
  }
  // One query per index 0..0x12 (INVALID_ARGUMENT past 0x11 ends the walk;
  // v3 was accepted, so no v2 retry), a second one for each of the 0x12 - 7
  // indices that answer NOT_SUPPORTED (asked twice before the profile counts
  // as absent), plus 2 placement calls per profile.
  EXPECT_EQ(library_calls("nvmlDeviceGetGpuInstanceProfileInfoV"), 0x13u + (0x12u - 7u));
  EXPECT_EQ(library_calls("nvmlDeviceGetGpuInstancePossiblePlacements_v2"), 14u);
  const CallCounts sim = sim_->Counts();
  EXPECT_EQ(sim_testing::Get(sim, "nvmlDeviceGetGpuInstanceProfileInfoV", "SUCCESS"), 7u);
  EXPECT_EQ(sim_testing::Get(sim, "nvmlDeviceGetGpuInstanceProfileInfoV", "ERROR_NOT_SUPPORTED"),
            2 * (0x12u - 7u));
  EXPECT_EQ(
      sim_testing::Get(sim, "nvmlDeviceGetGpuInstanceProfileInfoV", "ERROR_INVALID_ARGUMENT"), 1u);
}

TEST_F(NvmlDriverTest, FallsBackToV2ProfileInfo) {
  Start(kA100, {{"MIGD_SIM_PROFILE_INFO_MAX_VERSION", "2"}});
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfiles(gpu0_));
  ASSERT_EQ(profiles.size(), 7u);
  for (const GiProfileInfo& p : profiles) {
    EXPECT_EQ(p.info_version, 2) << p.name;
  }
  // Decoded with the v2 layout (isP2pSupported shifts every later field).
  EXPECT_EQ(profiles[2].id, GiProfileId(9));
  EXPECT_EQ(profiles[2].name, "3g.20gb");
  EXPECT_EQ(profiles[2].slice_count, 3u);
  EXPECT_EQ(profiles[2].memory_mib, 19968u);
  EXPECT_EQ(profiles[2].multiprocessor_count, 42u);
  EXPECT_EQ(profiles[2].decoders, 2u);
  // v3 rejected once, then v2 for every index: 1 + 0x13 calls, and a second
  // one for each of the 0x12 - 7 indices that answer NOT_SUPPORTED.
  EXPECT_EQ(library_calls("nvmlDeviceGetGpuInstanceProfileInfoV"), 0x14u + (0x12u - 7u));
  EXPECT_EQ(sim_->Count("nvmlDeviceGetGpuInstanceProfileInfoV", "ERROR_INVALID_ARGUMENT"), 2u);
  // The CI profile info falls back the same way.
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(9), {0, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto cis, driver_->GetCiProfiles(gpu0_, gi.id));
  ASSERT_EQ(cis.size(), 3u);
  for (const CiProfileInfo& c : cis) EXPECT_EQ(c.info_version, 2);
  EXPECT_EQ(cis[2].name, "3g.20gb");
}

TEST_F(NvmlDriverTest, FallsBackToV1FunctionsWhenVSymbolsAreAbsent) {
  // The simulator's own functions, minus the newer variants.
  MIGD_ASSERT_OK_AND_ASSIGN(
      auto lib, sim_testing::LoadSimWithSymbols(
                    MIGD_SIM_LIBRARY, {"nvmlDeviceGetGpuInstanceProfileInfoV",
                                       "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
                                       "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
                                       "nvmlComputeInstanceGetInfo_v2",
                                       "nvmlDeviceGetComputeRunningProcesses_v3",
                                       "nvmlDeviceGetComputeRunningProcesses_v2"}));
  Start(kA100, {}, lib);
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfiles(gpu0_));
  ASSERT_EQ(profiles.size(), 7u);
  EXPECT_EQ(profiles[2].id, GiProfileId(9));
  EXPECT_EQ(profiles[2].info_version, 1);
  EXPECT_EQ(profiles[2].name, "");  // the v1 struct has no name
  EXPECT_EQ(profiles[2].slice_count, 3u);
  EXPECT_EQ(profiles[2].memory_mib, 19968u);
  // v1 placements: the buffer is sized without a count query.
  EXPECT_THAT(profiles[2].placements, ElementsAre(mig::Placement{0, 4}, mig::Placement{4, 4}));
  EXPECT_EQ(profiles[0].placements.size(), 7u);

  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(9), {4, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  EXPECT_EQ(ci.profile_id, CiProfileId(2));
  EXPECT_EQ(ci.placement.size, 0u);  // the v1 CI info has no placement
  EXPECT_TRUE(IsValidMigUuid(ci.mig_uuid.value())) << ci.mig_uuid;
  MIGD_ASSERT_OK_AND_ASSIGN(auto cis, driver_->GetCiProfiles(gpu0_, gi.id));
  for (const CiProfileInfo& c : cis) EXPECT_EQ(c.info_version, 1);
  ASSERT_EQ(sim_testing::AttachProcess(MIGD_SIM_LIBRARY, ci.mig_uuid.value(), 4242, 5ull << 20),
            NVML_SUCCESS);
  MIGD_ASSERT_OK_AND_ASSIGN(auto procs, driver_->ListProcesses(gpu0_, gi.id, ci.id));
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].pid, 4242u);
  EXPECT_EQ(procs[0].used_gpu_memory_bytes, 5ull << 20);  // the 16-byte v1 struct
  MIGD_ASSERT_OK_AND_ASSIGN(auto listed, driver_->ListGpuInstances(gpu0_));
  ASSERT_EQ(listed.size(), 1u);
  ASSERT_EQ(listed[0].compute_instances.size(), 1u);
  EXPECT_EQ(listed[0].compute_instances[0].mig_uuid, ci.mig_uuid);

  const CallCounts sim = sim_->Counts();
  for (const char* v1 :
       {"nvmlDeviceGetGpuInstanceProfileInfo", "nvmlGpuInstanceGetComputeInstanceProfileInfo",
        "nvmlDeviceGetGpuInstancePossiblePlacements", "nvmlComputeInstanceGetInfo",
        "nvmlDeviceGetComputeRunningProcesses"}) {
    EXPECT_GT(library_calls(v1), 0u) << v1;
    EXPECT_GT(sim_testing::Get(sim, v1, "SUCCESS"), 0u) << v1;
  }
  for (const auto& [key, n] : sim) {
    EXPECT_TRUE(key.first != "nvmlDeviceGetGpuInstanceProfileInfoV" &&
                key.first != "nvmlGpuInstanceGetComputeInstanceProfileInfoV" &&
                key.first != "nvmlDeviceGetGpuInstancePossiblePlacements_v2" &&
                key.first != "nvmlComputeInstanceGetInfo_v2" &&
                key.first != "nvmlDeviceGetComputeRunningProcesses_v3" &&
                key.first != "nvmlDeviceGetComputeRunningProcesses_v2")
        << "a hidden symbol ran: " << key.first;
  }
}

TEST_F(NvmlDriverTest, LegacyR470LibraryWorksThroughItsFallbacks) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto lib, NvmlLibrary::Load(MIGD_SIM_LEGACY_LIBRARY));
  Start(kA100, {}, lib);
  MIGD_ASSERT_OK_AND_ASSIGN(auto v, driver_->GetVersions());
  EXPECT_THAT(v.driver, ::testing::StartsWith("470."));
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfiles(gpu0_));
  // The 11.4 header knows profile indices 0..7: no 1g.10gb (index 9) on R470.
  ASSERT_EQ(profiles.size(), 6u);
  for (const GiProfileInfo& p : profiles) EXPECT_EQ(p.info_version, 1) << p.id;
  EXPECT_EQ(profiles.back().index, GiProfileIndex(7));
  EXPECT_THAT(driver_->CreateGi(gpu0_, GiProfileId(15), {6, 2}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("NVML_ERROR_INVALID_ARGUMENT")));
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(20), {6, 1}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  EXPECT_EQ(ci.profile_id, CiProfileId(0));
  EXPECT_EQ(ci.placement, (mig::Placement{0, 1}));  // 11.4 has GetInfo_v2
  EXPECT_THAT(ci.mig_uuid.value(), ::testing::StartsWith("MIG-"));
  ASSERT_EQ(sim_testing::AttachProcess(MIGD_SIM_LEGACY_LIBRARY, ci.mig_uuid.value(), 7, 1 << 20),
            NVML_SUCCESS);
  MIGD_ASSERT_OK_AND_ASSIGN(auto procs, driver_->ListProcesses(gpu0_, gi.id, ci.id));
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].pid, 7u);
  EXPECT_GT(sim_->Count("nvmlDeviceGetComputeRunningProcesses_v2", "SUCCESS"), 0u);
  EXPECT_EQ(sim_->Count("nvmlDeviceGetGpuInstanceProfileInfoV", "SUCCESS"), 0u);
}

TEST_F(NvmlDriverTest, MigDisabledIsFailedPrecondition) {
  Start("a100-40gb:1:mig-off");
  MIGD_ASSERT_OK_AND_ASSIGN(auto mode, driver_->GetMigMode(gpu0_));
  EXPECT_TRUE(mode.supported);
  EXPECT_EQ(mode.current, MigMode::kDisabled);
  EXPECT_EQ(mode.pending, MigMode::kDisabled);
  EXPECT_THAT(driver_->GetGiProfiles(gpu0_),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("MIG mode is disabled")));
  EXPECT_THAT(driver_->ListGpuInstances(gpu0_),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("MIG mode is disabled")));
  EXPECT_THAT(driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("NVML_ERROR_NOT_SUPPORTED")));
  EXPECT_EQ(sim_->GiCount(), 0);
}

TEST_F(NvmlDriverTest, ProfilesWithoutMigComeFromTheUnversionedCall) {
  Start("a100-40gb:1:mig-off");
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfilesWithoutMig(gpu0_));
  ASSERT_EQ(profiles.size(), 7u);
  EXPECT_EQ(profiles[4].index, GiProfileIndex(4));
  EXPECT_EQ(profiles[4].id, GiProfileId(0));
  EXPECT_EQ(profiles[4].info_version, 1);
  EXPECT_THAT(profiles[4].placements, ElementsAre(mig::Placement{0, 8}));
  EXPECT_EQ(library_calls("nvmlDeviceGetGpuInstanceProfileInfoV"), 0u);
  EXPECT_GT(sim_->Count("nvmlDeviceGetGpuInstanceProfileInfo", "SUCCESS"), 0u);
  EXPECT_THAT(driver_->GetGiProfiles(gpu0_),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
}

TEST_F(NvmlDriverTest, ExactCallCountsForCreateAndDestroy) {
  // The budget of a CI the walk sees at once; see CiHiddenFromTheFirstWalks...
  Start(kA100, {{"MIGD_SIM_NEW_CI_VISIBILITY", "immediate"}});
  // Warm the GPU handle, the GI profile cache and the CI profile cache.
  ASSERT_THAT(driver_->GetGiProfiles(gpu0_), IsOk());
  MIGD_ASSERT_OK_AND_ASSIGN(auto warm, driver_->CreateGi(gpu0_, GiProfileId(9), {0, 4}));
  ASSERT_THAT(driver_->CreateCi(gpu0_, warm.id), IsOk());

  CallCounts ours = OurCounts();
  CallCounts sim = sim_->Counts();
  const uint64_t total_before = driver_->TotalCalls();
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(9), {4, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  EXPECT_EQ(gi.placement, (mig::Placement{4, 4}));
  EXPECT_EQ(ci.profile_id, CiProfileId(2));
  EXPECT_EQ(ci.placement, (mig::Placement{0, 3}));
  const CallCounts create = {
      {{"nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS"}, 1},
      {{"nvmlGpuInstanceGetInfo", "SUCCESS"}, 2},
      {{"nvmlDeviceGetGpuInstanceById", "SUCCESS"}, 1},
      {{"nvmlGpuInstanceCreateComputeInstance", "SUCCESS"}, 1},
      {{"nvmlComputeInstanceGetInfo_v2", "SUCCESS"}, 1},
      // The walk: every index of the A100's 7, the ids of the 2 CIs now on
      // the GPU, then the new MIG device's UUID.
      {{"nvmlDeviceGetMigDeviceHandleByIndex", "SUCCESS"}, 2},
      {{"nvmlDeviceGetMigDeviceHandleByIndex", "ERROR_NOT_FOUND"}, 5},
      {{"nvmlDeviceGetGpuInstanceId", "SUCCESS"}, 2},
      {{"nvmlDeviceGetComputeInstanceId", "SUCCESS"}, 2},
      {{"nvmlDeviceGetUUID", "SUCCESS"}, 1},
  };
  EXPECT_EQ(Delta(ours, OurCounts()), create);
  EXPECT_EQ(Delta(sim, sim_->Counts()), create);  // the simulator saw the same calls
  EXPECT_EQ(driver_->TotalCalls() - total_before, 18u);

  ours = OurCounts();
  sim = sim_->Counts();
  ASSERT_THAT(driver_->DestroyCi(gpu0_, gi.id, ci.id), IsOk());
  ASSERT_THAT(driver_->DestroyGi(gpu0_, gi.id), IsOk());
  const CallCounts destroy = {
      {{"nvmlDeviceGetGpuInstanceById", "SUCCESS"}, 2},
      {{"nvmlGpuInstanceGetComputeInstanceById", "SUCCESS"}, 1},
      {{"nvmlComputeInstanceDestroy", "SUCCESS"}, 1},
      {{"nvmlGpuInstanceDestroy", "SUCCESS"}, 1},
  };
  EXPECT_EQ(Delta(ours, OurCounts()), destroy);
  EXPECT_EQ(Delta(sim, sim_->Counts()), destroy);
  EXPECT_EQ(sim_->GiCount(), 1);  // the warm-up GI
}

TEST_F(NvmlDriverTest, DoubleMemoryGiGetsRev1ComputeInstance) {
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(15), {2, 2}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  EXPECT_EQ(ci.profile_id, CiProfileId(7));
  MIGD_ASSERT_OK_AND_ASSIGN(auto cis, driver_->GetCiProfiles(gpu0_, gi.id));
  ASSERT_EQ(cis.size(), 2u);  // 1c (index 0) and 1c rev1 (index 7)
  EXPECT_EQ(cis[0].index, CiProfileIndex(0));
  EXPECT_EQ(cis[1].index, CiProfileIndex(7));
  MIGD_ASSERT_OK_AND_ASSIGN(auto plain, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto plain_ci, driver_->CreateCi(gpu0_, plain.id));
  EXPECT_EQ(plain_ci.profile_id, CiProfileId(0));
}

TEST_F(NvmlDriverTest, CreateErrorsKeepNvmlNames) {
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(9), {0, 4}));
  EXPECT_THAT(driver_->CreateGi(gpu0_, GiProfileId(19), {1, 1}),
              StatusIs(StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("creating GI profile 19 at 1:1 on GPU 0"),
                             HasSubstr("NVML_ERROR_INSUFFICIENT_RESOURCES (Insufficient "
                                       "Resources)"))));
  EXPECT_THAT(driver_->CreateGi(gpu0_, GiProfileId(9), {2, 4}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("NVML_ERROR_INVALID_ARGUMENT")));
  EXPECT_THAT(driver_->CreateCi(gpu0_, NvmlGiId(12)),
              StatusIs(StatusCode::kNotFound, HasSubstr("looking up GI 12 on GPU 0")));
  EXPECT_THAT(driver_->DestroyGi(gpu0_, NvmlGiId(12)),
              StatusIs(StatusCode::kNotFound, HasSubstr("NVML_ERROR_NOT_FOUND")));
  EXPECT_THAT(driver_->DestroyCi(gpu0_, gi.id, NvmlCiId(0)),
              StatusIs(StatusCode::kNotFound, HasSubstr("looking up CI 0 of GI")));
  EXPECT_EQ(sim_->GiCount(), 1);
  EXPECT_EQ(sim_->Count("nvmlDeviceCreateGpuInstanceWithPlacement",
                        "ERROR_INSUFFICIENT_RESOURCES"),
            1u);
}

TEST_F(NvmlDriverTest, DestroyWithProcessesIsInUse) {
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {3, 1}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  EXPECT_THAT(driver_->DestroyGi(gpu0_, gi.id),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("NVML_ERROR_IN_USE")));
  ASSERT_EQ(sim_testing::AttachProcess(MIGD_SIM_LIBRARY, ci.mig_uuid.value(), 77, 1 << 20),
            NVML_SUCCESS);
  EXPECT_THAT(driver_->DestroyCi(gpu0_, gi.id, ci.id),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("NVML_ERROR_IN_USE (In use by another client)")));
  EXPECT_EQ(sim_->CiCount(), 1);
  ASSERT_EQ(sim_testing::DetachProcess(MIGD_SIM_LIBRARY, ci.mig_uuid.value(), 77), NVML_SUCCESS);
  EXPECT_THAT(driver_->DestroyCi(gpu0_, gi.id, ci.id), IsOk());
  EXPECT_THAT(driver_->DestroyGi(gpu0_, gi.id), IsOk());
  EXPECT_EQ(sim_->GiCount(), 0);
}

// ---- Rollbacks, with faults injected at the Nth call of this process -------

TEST_F(NvmlDriverTest, FailedCiInfoDestroysTheNewCi) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Start(kA100, {{"MIGD_SIM_FAULTS", "nvmlComputeInstanceGetInfo_v2=UNKNOWN@1"}});
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  ASSERT_THAT(driver_->GetCiProfiles(gpu0_, gi.id), IsOk());
  const CallCounts before = OurCounts();
  EXPECT_THAT(driver_->CreateCi(gpu0_, gi.id),
              StatusIs(StatusCode::kUnknown,
                       AllOf(HasSubstr("creating CI profile 0 in GI"),
                             HasSubstr("the new CI was destroyed"),
                             HasSubstr("NVML_ERROR_UNKNOWN"))));
  EXPECT_THAT(Delta(before, OurCounts()),
              ::testing::Contains(::testing::Pair(
                  std::pair<std::string, std::string>("nvmlComputeInstanceDestroy", "SUCCESS"),
                  1u)));
  EXPECT_EQ(sim_->Count("nvmlComputeInstanceGetInfo_v2", "ERROR_UNKNOWN"), 1u);
  EXPECT_EQ(sim_->Count("nvmlComputeInstanceDestroy", "SUCCESS"), 1u);
  MIGD_ASSERT_OK_AND_ASSIGN(auto listed, driver_->ListGpuInstances(gpu0_));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_THAT(listed[0].compute_instances, IsEmpty());
  // The GI itself (created by an earlier call) is left alone.
  EXPECT_EQ(sim_->GiCount(), 1);
  EXPECT_EQ(sim_->CiCount(), 0);
  // The fault was @1 only: a second try succeeds.
  EXPECT_THAT(driver_->CreateCi(gpu0_, gi.id), IsOk());
}

TEST_F(NvmlDriverTest, FailedMigUuidDestroysTheNewCi) {
  MIGD_RUN_IN_FRESH_PROCESS();
  // Call 1 reads the parent GPU's UUID (before anything is created), call 2
  // the new MIG device's.
  Start(kA100, {{"MIGD_SIM_FAULTS", "nvmlDeviceGetUUID=GPU_IS_LOST@2"}});
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  ASSERT_THAT(driver_->GetCiProfiles(gpu0_, gi.id), IsOk());
  EXPECT_THAT(driver_->CreateCi(gpu0_, gi.id),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("reading the MIG UUID"),
                             HasSubstr("NVML_ERROR_GPU_IS_LOST"),
                             HasSubstr("the new CI was destroyed"))));
  EXPECT_EQ(sim_->Count("nvmlComputeInstanceDestroy", "SUCCESS"), 1u);
  MIGD_ASSERT_OK_AND_ASSIGN(auto listed, driver_->ListGpuInstances(gpu0_));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_THAT(listed[0].compute_instances, IsEmpty());
}

TEST_F(NvmlDriverTest, FailedRollbackIsReported) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Start(kA100, {{"MIGD_SIM_FAULTS",
                 "nvmlComputeInstanceGetInfo_v2=UNKNOWN@1,nvmlComputeInstanceDestroy=IN_USE@1"}});
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  ASSERT_THAT(driver_->GetCiProfiles(gpu0_, gi.id), IsOk());
  EXPECT_THAT(driver_->CreateCi(gpu0_, gi.id),
              StatusIs(StatusCode::kUnknown,
                       AllOf(HasSubstr("NVML_ERROR_UNKNOWN"), HasSubstr("rolling back"),
                             HasSubstr("NVML_ERROR_IN_USE"))));
  // The CI is left behind, and visible.
  EXPECT_EQ(sim_->CiCount(), 1);
  MIGD_ASSERT_OK_AND_ASSIGN(auto listed, driver_->ListGpuInstances(gpu0_));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].compute_instances.size(), 1u);
}

TEST_F(NvmlDriverTest, FailedGiInfoDestroysTheNewGi) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Start(kA100, {{"MIGD_SIM_FAULTS", "nvmlGpuInstanceGetInfo=UNKNOWN@1"}});
  EXPECT_THAT(driver_->CreateGi(gpu0_, GiProfileId(9), {0, 4}),
              StatusIs(StatusCode::kUnknown, AllOf(HasSubstr("the new GI was destroyed"),
                                                   HasSubstr("reading the new GI's info"))));
  EXPECT_EQ(sim_->GiCount(), 0);
  EXPECT_EQ(sim_->Count("nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS"), 1u);
  EXPECT_EQ(sim_->Count("nvmlGpuInstanceDestroy", "SUCCESS"), 1u);
  EXPECT_THAT(driver_->CreateGi(gpu0_, GiProfileId(9), {0, 4}), IsOk());  // slot is free
  EXPECT_EQ(sim_->GiCount(), 1);
}

// ---- Inventory and processes ---------------------------------------------------

TEST_F(NvmlDriverTest, ListsInstancesOfEveryProfileSortedById) {
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(auto a, driver_->CreateGi(gpu0_, GiProfileId(9), {4, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto b, driver_->CreateGi(gpu0_, GiProfileId(15), {0, 2}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto c, driver_->CreateGi(gpu0_, GiProfileId(19), {2, 1}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto a_ci, driver_->CreateCi(gpu0_, a.id));
  MIGD_ASSERT_OK_AND_ASSIGN(auto b_ci, driver_->CreateCi(gpu0_, b.id));
  MIGD_ASSERT_OK_AND_ASSIGN(auto gis, driver_->ListGpuInstances(gpu0_));
  ASSERT_EQ(gis.size(), 3u);
  // Listed by GI id, whatever the profile order of the walk.
  std::vector<NvmlGiId> ids = {a.id, b.id, c.id};
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(gis[0].id, ids[0]);
  EXPECT_EQ(gis[1].id, ids[1]);
  EXPECT_EQ(gis[2].id, ids[2]);
  std::map<NvmlGiId, GpuInstanceInfo> by_id;
  for (const GpuInstanceInfo& gi : gis) by_id[gi.id] = gi;
  EXPECT_EQ(by_id[a.id].placement, (mig::Placement{4, 4}));
  ASSERT_EQ(by_id[a.id].compute_instances.size(), 1u);
  EXPECT_EQ(by_id[a.id].compute_instances[0].mig_uuid, a_ci.mig_uuid);
  ASSERT_EQ(by_id[b.id].compute_instances.size(), 1u);
  EXPECT_EQ(by_id[b.id].compute_instances[0].profile_id, CiProfileId(7));
  EXPECT_EQ(by_id[b.id].compute_instances[0].mig_uuid, b_ci.mig_uuid);
  EXPECT_EQ(by_id[c.id].placement, (mig::Placement{2, 1}));
  EXPECT_THAT(by_id[c.id].compute_instances, IsEmpty());  // GI without CI is listed
}

// Another process starts on the MIG device between NvmlDriver's size query and
// its fill call: the hook forwards nvmlDeviceGetComputeRunningProcesses_v3 to
// the simulator and, right after the size query, attaches processes through
// the simulator's migdSimAttachProcess, more than the spare room the driver
// allocates, so that the fill call too answers INSUFFICIENT_SIZE.
struct GrowingProcesses {
  static nvmlReturn_t Call(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
    const auto real = reinterpret_cast<nvmlDeviceGetComputeRunningProcesses_fn>(
        sim_testing::LoadedSymbol(MIGD_SIM_LIBRARY, "nvmlDeviceGetComputeRunningProcesses_v3"));
    if (real == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
    const nvmlReturn_t r = real(device, count, infos);
    if (r == NVML_ERROR_INSUFFICIENT_SIZE && infos == nullptr && !mig_uuid.empty()) {
      for (unsigned int pid : extra_pids) {
        if (sim_testing::AttachProcess(MIGD_SIM_LIBRARY, mig_uuid, pid, 1 << 20) !=
            NVML_SUCCESS) {
          ADD_FAILURE() << "attaching pid " << pid;
        }
      }
      mig_uuid.clear();  // once
    }
    return r;
  }
  static inline std::string mig_uuid;  // armed while not empty
  static inline std::vector<unsigned int> extra_pids;
};

TEST_F(NvmlDriverTest, ListProcessesRetriesWhenTheListGrows) {
  MIGD_ASSERT_OK_AND_ASSIGN(
      auto lib, sim_testing::LoadSimWithSymbols(
                    MIGD_SIM_LIBRARY, {},
                    {{"nvmlDeviceGetComputeRunningProcesses_v3",
                      reinterpret_cast<void*>(&GrowingProcesses::Call)}}));
  Start(kA100, {}, lib);
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  MIGD_ASSERT_OK_AND_ASSIGN(auto none, driver_->ListProcesses(gpu0_, gi.id, ci.id));
  EXPECT_THAT(none, IsEmpty());

  ASSERT_EQ(sim_testing::AttachProcess(MIGD_SIM_LIBRARY, ci.mig_uuid.value(), 10, 3ull << 20),
            NVML_SUCCESS);
  std::vector<unsigned int> want = {10};
  GrowingProcesses::extra_pids.clear();
  for (unsigned int pid = 11; pid <= 20; ++pid) {
    GrowingProcesses::extra_pids.push_back(pid);
    want.push_back(pid);
  }
  GrowingProcesses::mig_uuid = ci.mig_uuid.value();
  const CallCounts before = sim_->Counts();
  MIGD_ASSERT_OK_AND_ASSIGN(auto procs, driver_->ListProcesses(gpu0_, gi.id, ci.id));
  EXPECT_TRUE(GrowingProcesses::mig_uuid.empty());  // the hook fired
  std::vector<unsigned int> pids;
  for (const ProcessInfo& p : procs) {
    pids.push_back(p.pid);
    if (p.pid == 10) {
      EXPECT_EQ(p.used_gpu_memory_bytes, 3ull << 20);
    }
  }
  EXPECT_THAT(pids, UnorderedElementsAreArray(want));
  // Size query, a fill that was too small, a second fill.
  EXPECT_EQ(Delta(before, sim_->Counts()),
            (CallCounts{
                // The MIG device of the create's walk, its ids checked again.
                {{"nvmlDeviceGetGpuInstanceId", "SUCCESS"}, 1},
                {{"nvmlDeviceGetComputeInstanceId", "SUCCESS"}, 1},
                {{"nvmlDeviceGetComputeRunningProcesses_v3", "ERROR_INSUFFICIENT_SIZE"}, 2},
                {{"nvmlDeviceGetComputeRunningProcesses_v3", "SUCCESS"}, 1},
                {{"migdSimAttachProcess", "SUCCESS"}, 10},
            }));
}

TEST_F(NvmlDriverTest, ConcurrentMutationsOnDisjointPlacements) {
  Start();
  ASSERT_THAT(driver_->GetGiProfiles(gpu0_), IsOk());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        auto gi = driver_->CreateGi(gpu0_, GiProfileId(19), {t, 1});
        if (!gi.ok()) {
          ++failures;
          continue;
        }
        auto ci = driver_->CreateCi(gpu0_, gi->id);
        if (!ci.ok() || !driver_->GetMigMode(gpu0_).ok() ||
            !driver_->DestroyCi(gpu0_, gi->id, ci->id).ok() ||
            !driver_->DestroyGi(gpu0_, gi->id).ok()) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(sim_->GiCount(), 0);
  EXPECT_EQ(library_calls("nvmlDeviceCreateGpuInstanceWithPlacement"), 100u);
  EXPECT_EQ(sim_->Count("nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS"), 100u);
  EXPECT_EQ(sim_->Count("nvmlGpuInstanceDestroy", "SUCCESS"), 100u);
  EXPECT_EQ(library_calls("nvmlDeviceGetHandleByIndex_v2"), 1u);
}

TEST_F(NvmlDriverTest, NewSessionGenerationDropsCachedHandles) {
  Start();
  ASSERT_THAT(driver_->GetGiProfiles(gpu0_), IsOk());
  ASSERT_THAT(driver_->GetMigMode(gpu0_), IsOk());
  EXPECT_EQ(library_calls("nvmlDeviceGetHandleByIndex_v2"), 1u);  // cached
  ASSERT_THAT(session_->Close(), IsOk());
  EXPECT_THAT(driver_->GetMigMode(gpu0_), StatusIs(StatusCode::kUnavailable, ::testing::_));
  ASSERT_THAT(session_->Open(), IsOk());
  // The simulator invalidated the old handles with the final shutdown: using
  // a cached one now would fail with INVALID_ARGUMENT.
  ASSERT_THAT(driver_->GetMigMode(gpu0_), IsOk());
  EXPECT_EQ(library_calls("nvmlDeviceGetHandleByIndex_v2"), 2u);  // re-resolved
  const uint64_t walks = library_calls("nvmlDeviceGetGpuInstanceProfileInfoV");
  ASSERT_THAT(driver_->ListGpuInstances(gpu0_), IsOk());
  EXPECT_GT(library_calls("nvmlDeviceGetGpuInstanceProfileInfoV"), walks);  // re-walked
  EXPECT_EQ(sim_->Count("nvmlInit_v2", "SUCCESS"), 2u);
  EXPECT_EQ(sim_->Count("nvmlShutdown", "SUCCESS"), 1u);
  EXPECT_EQ(sim_->Count("nvmlDeviceGetMigMode", "ERROR_INVALID_ARGUMENT"), 0u);
}

TEST_F(NvmlDriverTest, OpenWithoutSimulatedDriverIsUnavailable) {
  sim_testing::ClearSimEnv();  // no MIGD_SIM_STATE: no simulated driver
  auto driver = NvmlDriver::Open(MIGD_SIM_LIBRARY);
  EXPECT_THAT(driver, StatusIs(StatusCode::kUnavailable,
                               HasSubstr("NVML_ERROR_DRIVER_NOT_LOADED")));
}

}  // namespace
}  // namespace migd::driver
