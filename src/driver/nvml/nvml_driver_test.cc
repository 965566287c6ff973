// NvmlDriver against the in-process fake NVML (fake_nvml.h). The simulator
// tests in tests/nvml_driver_sim_test.cc cover the full hardware model; these
// pin down the call sequences, fallbacks and rollbacks deterministically.
#include "driver/nvml/nvml_driver.h"

#include <atomic>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "driver/nvml/fake_nvml.h"
#include "testing/status_matchers.h"

namespace migd::driver {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// The counters that changed between two snapshots.
std::vector<NvmlCallCount> Delta(const std::vector<NvmlCallCount>& before,
                                 const std::vector<NvmlCallCount>& after) {
  std::vector<NvmlCallCount> out;
  for (const NvmlCallCount& a : after) {
    uint64_t prev = 0;
    for (const NvmlCallCount& b : before) {
      if (b.function == a.function && b.result == a.result) prev = b.count;
    }
    if (a.count != prev) out.push_back({a.function, a.result, a.count - prev});
  }
  return out;
}

class NvmlDriverTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(fake_nvml::Options()); }
  void TearDown() override {
    driver_.reset();
    session_.reset();
  }
  void Start(const fake_nvml::Options& options) {
    driver_.reset();
    session_.reset();
    fake_nvml::Reset(options);
    auto lib = NvmlLibrary::FromResolver(&fake_nvml::Resolve, nullptr, "fake");
    ASSERT_TRUE(lib.ok()) << lib.status();
    session_ = std::make_shared<NvmlSession>(*lib);
    ASSERT_THAT(session_->Open(), IsOk());
    driver_ = std::make_unique<NvmlDriver>(session_);
  }
  uint64_t library_calls(std::string_view function) const {
    uint64_t n = 0;
    for (const NvmlCallCount& c : driver_->CallCounts()) {
      if (c.function == function) n += c.count;
    }
    return n;
  }
  const GpuIndex gpu0_{0};
  std::shared_ptr<NvmlSession> session_;
  std::unique_ptr<NvmlDriver> driver_;
};

TEST_F(NvmlDriverTest, ListsGpuIdentity) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, driver_->ListGpus());
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].index, GpuIndex(0));
  EXPECT_EQ(gpus[0].uuid.value(), "GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(gpus[0].name, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(gpus[0].pci_bus_id, "00000000:17:00.0");
  EXPECT_EQ(gpus[0].pci_device_id, 0x20B010DEu);
  EXPECT_EQ(gpus[0].memory_total_mib, 40960u);
  EXPECT_TRUE(gpus[0].mig.supported);
  EXPECT_EQ(gpus[0].mig.current, MigMode::kEnabled);
  MIGD_ASSERT_OK_AND_ASSIGN(auto v, driver_->GetVersions());
  EXPECT_EQ(v.driver, "580.95.05");
  EXPECT_EQ(v.nvml, "13.580.95.05");
}

TEST_F(NvmlDriverTest, SkipsGpusWithoutPermission) {
  fake_nvml::Options o;
  o.gpu_count = 3;
  o.no_permission_gpu = 1;
  Start(o);
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, driver_->ListGpus());
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].index, GpuIndex(0));
  EXPECT_EQ(gpus[1].index, GpuIndex(2));
}

TEST_F(NvmlDriverTest, WalksProfilesWithV3AndStripsNames) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfiles(gpu0_));
  ASSERT_EQ(profiles.size(), 4u);
  EXPECT_EQ(profiles[0].index, GiProfileIndex(0));
  EXPECT_EQ(profiles[0].id, GiProfileId(19));
  EXPECT_EQ(profiles[0].name, "1g.5gb");
  EXPECT_EQ(profiles[0].info_version, 3);
  EXPECT_EQ(profiles[0].slice_count, 1u);
  EXPECT_EQ(profiles[0].instance_count, 7u);
  EXPECT_EQ(profiles[0].memory_mib, 4864u);
  EXPECT_TRUE(profiles[0].p2p_supported);
  EXPECT_EQ(profiles[0].placements.size(), 7u);
  EXPECT_EQ(profiles[1].id, GiProfileId(9));
  EXPECT_THAT(profiles[1].placements,
              ElementsAre(mig::Placement{0, 4}, mig::Placement{4, 4}));
  EXPECT_EQ(profiles[3].index, GiProfileIndex(9));
  EXPECT_EQ(profiles[3].id, GiProfileId(15));
  // One query per index 0..0x12 (INVALID_ARGUMENT ends the walk; v3 was
  // accepted, so no v2 retry), plus 2 placement calls per profile, plus the
  // MIG mode check.
  EXPECT_EQ(library_calls("nvmlDeviceGetGpuInstanceProfileInfoV"), 0x13u);
  EXPECT_EQ(library_calls("nvmlDeviceGetGpuInstancePossiblePlacements_v2"), 8u);
}

TEST_F(NvmlDriverTest, FallsBackToV2ProfileInfo) {
  fake_nvml::Options o;
  o.max_profile_info_version = 2;
  Start(o);
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfiles(gpu0_));
  ASSERT_EQ(profiles.size(), 4u);
  for (const GiProfileInfo& p : profiles) {
    EXPECT_EQ(p.info_version, 2) << p.name;
  }
  // Decoded with the v2 layout (isP2pSupported shifts every later field).
  EXPECT_EQ(profiles[1].name, "3g.20gb");
  EXPECT_EQ(profiles[1].slice_count, 3u);
  EXPECT_EQ(profiles[1].memory_mib, 19968u);
  EXPECT_EQ(profiles[1].multiprocessor_count, 42u);
  // v3 rejected once, then v2 for every index: 1 + 0x13 calls.
  EXPECT_EQ(library_calls("nvmlDeviceGetGpuInstanceProfileInfoV"), 0x14u);
}

TEST_F(NvmlDriverTest, FallsBackToV1FunctionsWhenVSymbolsAreAbsent) {
  fake_nvml::Options o;
  o.hidden_symbols = {"nvmlDeviceGetGpuInstanceProfileInfoV",
                      "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
                      "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
                      "nvmlComputeInstanceGetInfo_v2",
                      "nvmlDeviceGetComputeRunningProcesses_v3"};
  Start(o);
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfiles(gpu0_));
  ASSERT_EQ(profiles.size(), 4u);
  EXPECT_EQ(profiles[1].info_version, 1);
  EXPECT_EQ(profiles[1].name, "");
  EXPECT_EQ(profiles[1].slice_count, 3u);
  EXPECT_THAT(profiles[1].placements, ElementsAre(mig::Placement{0, 4}, mig::Placement{4, 4}));

  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(9), {4, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  EXPECT_EQ(ci.profile_id, CiProfileId(2));
  EXPECT_EQ(ci.placement.size, 0u);  // the v1 CI info has no placement
  EXPECT_TRUE(IsValidMigUuid(ci.mig_uuid.value())) << ci.mig_uuid;
  fake_nvml::AttachProcess(gi.id.value(), ci.id.value(), 4242);
  MIGD_ASSERT_OK_AND_ASSIGN(auto procs, driver_->ListProcesses(gpu0_, gi.id, ci.id));
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].pid, 4242u);
  EXPECT_GT(library_calls("nvmlDeviceGetComputeRunningProcesses"), 0u);
  EXPECT_GT(library_calls("nvmlComputeInstanceGetInfo"), 0u);
}

TEST_F(NvmlDriverTest, MigDisabledIsFailedPrecondition) {
  fake_nvml::Options o;
  o.mig_enabled = false;
  Start(o);
  EXPECT_THAT(driver_->GetGiProfiles(gpu0_),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("MIG mode is disabled")));
  EXPECT_THAT(driver_->ListGpuInstances(gpu0_), StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("NVML_ERROR_NOT_SUPPORTED")));
}

TEST_F(NvmlDriverTest, ProfilesWithoutMigComeFromTheUnversionedCall) {
  fake_nvml::Options o;
  o.mig_enabled = false;
  Start(o);
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfilesWithoutMig(gpu0_));
  ASSERT_EQ(profiles.size(), 4u);
  EXPECT_EQ(profiles[2].id, GiProfileId(0));
  EXPECT_EQ(profiles[2].info_version, 1);
  EXPECT_THAT(profiles[2].placements, ElementsAre(mig::Placement{0, 8}));
  EXPECT_EQ(library_calls("nvmlDeviceGetGpuInstanceProfileInfoV"), 0u);
  EXPECT_THAT(driver_->GetGiProfiles(gpu0_), StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
}

TEST_F(NvmlDriverTest, ExactCallCountsForCreateAndDestroy) {
  // Warm the GPU handle, the GI profile cache and the CI profile cache.
  ASSERT_THAT(driver_->GetGiProfiles(gpu0_), IsOk());
  MIGD_ASSERT_OK_AND_ASSIGN(auto warm, driver_->CreateGi(gpu0_, GiProfileId(9), {0, 4}));
  ASSERT_THAT(driver_->CreateCi(gpu0_, warm.id), IsOk());

  auto before = driver_->CallCounts();
  const uint64_t total_before = driver_->TotalCalls();
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(9), {4, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  EXPECT_EQ(gi.placement, (mig::Placement{4, 4}));
  EXPECT_EQ(ci.profile_id, CiProfileId(2));
  EXPECT_EQ(ci.placement, (mig::Placement{0, 3}));
  EXPECT_THAT(Delta(before, driver_->CallCounts()),
              UnorderedElementsAre(
                  NvmlCallCount{"nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS", 1},
                  NvmlCallCount{"nvmlGpuInstanceGetInfo", "SUCCESS", 2},
                  NvmlCallCount{"nvmlDeviceGetGpuInstanceById", "SUCCESS", 1},
                  NvmlCallCount{"nvmlGpuInstanceCreateComputeInstance", "SUCCESS", 1},
                  NvmlCallCount{"nvmlComputeInstanceGetInfo_v2", "SUCCESS", 1},
                  NvmlCallCount{"nvmlDeviceGetUUID", "SUCCESS", 1}));
  EXPECT_EQ(driver_->TotalCalls() - total_before, 7u);

  before = driver_->CallCounts();
  ASSERT_THAT(driver_->DestroyCi(gpu0_, gi.id, ci.id), IsOk());
  ASSERT_THAT(driver_->DestroyGi(gpu0_, gi.id), IsOk());
  EXPECT_THAT(Delta(before, driver_->CallCounts()),
              UnorderedElementsAre(
                  NvmlCallCount{"nvmlDeviceGetGpuInstanceById", "SUCCESS", 2},
                  NvmlCallCount{"nvmlGpuInstanceGetComputeInstanceById", "SUCCESS", 1},
                  NvmlCallCount{"nvmlComputeInstanceDestroy", "SUCCESS", 1},
                  NvmlCallCount{"nvmlGpuInstanceDestroy", "SUCCESS", 1}));
}

TEST_F(NvmlDriverTest, DoubleMemoryGiGetsRev1ComputeInstance) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(15), {2, 2}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  EXPECT_EQ(ci.profile_id, CiProfileId(7));
  MIGD_ASSERT_OK_AND_ASSIGN(auto cis, driver_->GetCiProfiles(gpu0_, gi.id));
  ASSERT_EQ(cis.size(), 2u);  // 1c (index 0) and 1c rev1 (index 7)
  EXPECT_EQ(cis[1].index, CiProfileIndex(7));
  MIGD_ASSERT_OK_AND_ASSIGN(auto plain, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto plain_ci, driver_->CreateCi(gpu0_, plain.id));
  EXPECT_EQ(plain_ci.profile_id, CiProfileId(0));
}

TEST_F(NvmlDriverTest, CreateErrorsKeepNvmlNames) {
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
}

TEST_F(NvmlDriverTest, DestroyWithProcessesIsInUse) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {3, 1}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  EXPECT_THAT(driver_->DestroyGi(gpu0_, gi.id),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("NVML_ERROR_IN_USE")));
  fake_nvml::AttachProcess(gi.id.value(), ci.id.value(), 77);
  EXPECT_THAT(driver_->DestroyCi(gpu0_, gi.id, ci.id),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("NVML_ERROR_IN_USE (In use by another client)")));
}

TEST_F(NvmlDriverTest, FailedCiInfoDestroysTheNewCi) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  ASSERT_THAT(driver_->GetCiProfiles(gpu0_, gi.id), IsOk());
  fake_nvml::FailNext("nvmlComputeInstanceGetInfo_v2", NVML_ERROR_UNKNOWN);
  const auto before = driver_->CallCounts();
  EXPECT_THAT(driver_->CreateCi(gpu0_, gi.id),
              StatusIs(StatusCode::kUnknown,
                       AllOf(HasSubstr("creating CI profile 0 in GI"),
                             HasSubstr("the new CI was destroyed"),
                             HasSubstr("NVML_ERROR_UNKNOWN"))));
  EXPECT_THAT(Delta(before, driver_->CallCounts()),
              ::testing::Contains(NvmlCallCount{"nvmlComputeInstanceDestroy", "SUCCESS", 1}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto listed, driver_->ListGpuInstances(gpu0_));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_THAT(listed[0].compute_instances, IsEmpty());
  // The GI itself (created by an earlier call) is left alone.
  EXPECT_EQ(fake_nvml::LiveGiCount(), 1);
}

TEST_F(NvmlDriverTest, FailedMigUuidDestroysTheNewCi) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  ASSERT_THAT(driver_->GetCiProfiles(gpu0_, gi.id), IsOk());
  fake_nvml::FailNext("nvmlDeviceGetUUID", NVML_ERROR_GPU_IS_LOST);
  EXPECT_THAT(driver_->CreateCi(gpu0_, gi.id),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("NVML_ERROR_GPU_IS_LOST")));
  MIGD_ASSERT_OK_AND_ASSIGN(auto listed, driver_->ListGpuInstances(gpu0_));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_THAT(listed[0].compute_instances, IsEmpty());
}

TEST_F(NvmlDriverTest, FailedRollbackIsReported) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  ASSERT_THAT(driver_->GetCiProfiles(gpu0_, gi.id), IsOk());
  fake_nvml::FailNext("nvmlComputeInstanceGetInfo_v2", NVML_ERROR_UNKNOWN);
  fake_nvml::FailNext("nvmlComputeInstanceDestroy", NVML_ERROR_IN_USE);
  EXPECT_THAT(driver_->CreateCi(gpu0_, gi.id),
              StatusIs(StatusCode::kUnknown,
                       AllOf(HasSubstr("rolling back"), HasSubstr("NVML_ERROR_IN_USE"))));
}

TEST_F(NvmlDriverTest, FailedGiInfoDestroysTheNewGi) {
  fake_nvml::FailNext("nvmlGpuInstanceGetInfo", NVML_ERROR_UNKNOWN);
  EXPECT_THAT(driver_->CreateGi(gpu0_, GiProfileId(9), {0, 4}),
              StatusIs(StatusCode::kUnknown, AllOf(HasSubstr("the new GI was destroyed"),
                                                   HasSubstr("reading the new GI's info"))));
  EXPECT_EQ(fake_nvml::LiveGiCount(), 0);
  EXPECT_THAT(driver_->CreateGi(gpu0_, GiProfileId(9), {0, 4}), IsOk());  // slot is free
}

TEST_F(NvmlDriverTest, ListsInstancesOfEveryProfileSortedById) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto a, driver_->CreateGi(gpu0_, GiProfileId(9), {4, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto b, driver_->CreateGi(gpu0_, GiProfileId(15), {0, 2}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto c, driver_->CreateGi(gpu0_, GiProfileId(19), {2, 1}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto a_ci, driver_->CreateCi(gpu0_, a.id));
  MIGD_ASSERT_OK_AND_ASSIGN(auto b_ci, driver_->CreateCi(gpu0_, b.id));
  MIGD_ASSERT_OK_AND_ASSIGN(auto gis, driver_->ListGpuInstances(gpu0_));
  ASSERT_EQ(gis.size(), 3u);
  EXPECT_EQ(gis[0].id, a.id);
  EXPECT_EQ(gis[1].id, b.id);
  EXPECT_EQ(gis[2].id, c.id);
  EXPECT_EQ(gis[0].placement, (mig::Placement{4, 4}));
  ASSERT_EQ(gis[0].compute_instances.size(), 1u);
  EXPECT_EQ(gis[0].compute_instances[0].mig_uuid, a_ci.mig_uuid);
  ASSERT_EQ(gis[1].compute_instances.size(), 1u);
  EXPECT_EQ(gis[1].compute_instances[0].profile_id, CiProfileId(7));
  EXPECT_EQ(gis[1].compute_instances[0].mig_uuid, b_ci.mig_uuid);
  EXPECT_THAT(gis[2].compute_instances, IsEmpty());  // GI without CI is listed
}

TEST_F(NvmlDriverTest, ListProcessesRetriesWhenTheListGrows) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(gpu0_, GiProfileId(19), {0, 1}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(gpu0_, gi.id));
  MIGD_ASSERT_OK_AND_ASSIGN(auto none, driver_->ListProcesses(gpu0_, gi.id, ci.id));
  EXPECT_THAT(none, IsEmpty());
  fake_nvml::AttachProcess(gi.id.value(), ci.id.value(), 10);
  fake_nvml::GrowProcessesAfterCountQuery(11);
  MIGD_ASSERT_OK_AND_ASSIGN(auto procs, driver_->ListProcesses(gpu0_, gi.id, ci.id));
  ASSERT_EQ(procs.size(), 2u);
  EXPECT_EQ(procs[0].pid, 10u);
  EXPECT_EQ(procs[1].pid, 11u);
  EXPECT_EQ(procs[0].used_gpu_memory_bytes, 1u << 20);
}

TEST_F(NvmlDriverTest, ConcurrentMutationsOnDisjointPlacements) {
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
  EXPECT_EQ(fake_nvml::LiveGiCount(), 0);
  EXPECT_EQ(library_calls("nvmlDeviceCreateGpuInstanceWithPlacement"), 100u);
  EXPECT_EQ(library_calls("nvmlDeviceGetHandleByIndex_v2"), 1u);
}

TEST_F(NvmlDriverTest, NewSessionGenerationDropsCachedHandles) {
  ASSERT_THAT(driver_->GetGiProfiles(gpu0_), IsOk());
  ASSERT_THAT(driver_->GetMigMode(gpu0_), IsOk());
  EXPECT_EQ(library_calls("nvmlDeviceGetHandleByIndex_v2"), 1u);  // cached
  ASSERT_THAT(session_->Close(), IsOk());
  EXPECT_THAT(driver_->GetMigMode(gpu0_), StatusIs(StatusCode::kUnavailable, ::testing::_));
  ASSERT_THAT(session_->Open(), IsOk());
  ASSERT_THAT(driver_->GetMigMode(gpu0_), IsOk());
  EXPECT_EQ(library_calls("nvmlDeviceGetHandleByIndex_v2"), 2u);  // re-resolved
  const uint64_t walks = library_calls("nvmlDeviceGetGpuInstanceProfileInfoV");
  ASSERT_THAT(driver_->ListGpuInstances(gpu0_), IsOk());
  EXPECT_GT(library_calls("nvmlDeviceGetGpuInstanceProfileInfoV"), walks);  // re-walked
  EXPECT_EQ(fake_nvml::InitCalls(), 2);
  EXPECT_EQ(fake_nvml::ShutdownCalls(), 1);
}

}  // namespace
}  // namespace migd::driver
