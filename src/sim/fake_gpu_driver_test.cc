#include "sim/fake_gpu_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "testing/status_matchers.h"

namespace migd::sim {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

constexpr GpuIndex kGpu0(0);

std::unique_ptr<FakeGpuDriver> Make(std::string_view gpus) {
  StatusOr<std::unique_ptr<FakeGpuDriver>> d = FakeGpuDriver::Create(gpus, {}, 1);
  EXPECT_TRUE(d.ok()) << d.status();
  return std::move(d).value();
}

TEST(FakeGpuDriverTest, ListsAccessibleGpus) {
  auto d = Make("h100-80gb:1,a30-24gb:1:mig-off,a100-40gb:1:no-permission");
  StatusOr<std::vector<driver::GpuInfo>> gpus = d->ListGpus();
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 2u);  // the no-permission GPU is skipped
  EXPECT_EQ((*gpus)[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ((*gpus)[0].pci_device_id, 0x233010DEu);
  EXPECT_EQ((*gpus)[0].memory_total_mib, 81559u);
  EXPECT_EQ((*gpus)[0].mig.current, driver::MigMode::kEnabled);
  EXPECT_EQ((*gpus)[1].index, GpuIndex(1));
  EXPECT_EQ((*gpus)[1].mig.current, driver::MigMode::kDisabled);
  EXPECT_TRUE(IsValidGpuUuid((*gpus)[1].uuid.value()));
  EXPECT_THAT(d->GetMigMode(GpuIndex(2)), StatusIs(StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(d->GetMigMode(GpuIndex(3)), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  StatusOr<driver::DriverVersions> v = d->GetVersions();
  EXPECT_EQ(v->driver, "580.95.05");
}

TEST(FakeGpuDriverTest, ProfilesAndPlacements) {
  auto d = Make("rtx-pro-6000-blackwell:1,a30-24gb:1:mig-off");
  StatusOr<std::vector<driver::GiProfileInfo>> p = d->GetGiProfiles(kGpu0);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 11u);
  EXPECT_EQ((*p)[0].index, GiProfileIndex(0));
  EXPECT_EQ((*p)[0].id, GiProfileId(14));
  EXPECT_EQ((*p)[0].name, "1g.24gb");
  EXPECT_EQ((*p)[0].placements.size(), 4u);
  bool saw_gfx = false;
  for (const auto& info : *p) {
    if (info.id == GiProfileId(47)) {
      saw_gfx = true;
      EXPECT_TRUE(info.gfx_capable);
    }
  }
  EXPECT_TRUE(saw_gfx);
  EXPECT_THAT(d->GetGiProfiles(GpuIndex(1)),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("NVML_ERROR_NOT_SUPPORTED")));
  StatusOr<std::vector<mig::Placement>> pl = d->GetGiPossiblePlacements(kGpu0, GiProfileId(5));
  ASSERT_TRUE(pl.ok());
  EXPECT_THAT(*pl, ::testing::ElementsAre(mig::Placement{0, 6}, mig::Placement{6, 6}));
  EXPECT_THAT(d->GetGiPossiblePlacements(kGpu0, GiProfileId(19)),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
}

TEST(FakeGpuDriverTest, CreateDestroyLifecycleAndErrors) {
  auto d = Make("h100-80gb:1");
  StatusOr<driver::GpuInstanceInfo> gi = d->CreateGi(kGpu0, GiProfileId(9), {4, 4});
  ASSERT_TRUE(gi.ok()) << gi.status();
  EXPECT_EQ(gi->id, NvmlGiId(2));
  EXPECT_TRUE(gi->compute_instances.empty());
  EXPECT_THAT(d->CreateGi(kGpu0, GiProfileId(9), {4, 4}),
              StatusIs(StatusCode::kResourceExhausted,
                       HasSubstr("creating GI profile 9 at 4:4 on GPU 0: "
                                 "NVML_ERROR_INSUFFICIENT_RESOURCES (Insufficient Resources)")));
  EXPECT_THAT(d->CreateGi(kGpu0, GiProfileId(9), {2, 4}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("NVML_ERROR_INVALID_ARGUMENT")));
  EXPECT_THAT(d->CreateGi(kGpu0, GiProfileId(47), {0, 1}),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));

  StatusOr<driver::ComputeInstanceInfo> ci = d->CreateCi(kGpu0, gi->id);
  ASSERT_TRUE(ci.ok()) << ci.status();
  EXPECT_EQ(ci->id, NvmlCiId(0));
  EXPECT_EQ(ci->profile_id, CiProfileId(2));  // default CI of a 3g
  EXPECT_EQ(ci->placement, (mig::Placement{0, 3}));
  EXPECT_TRUE(IsValidMigUuid(ci->mig_uuid.value()));
  EXPECT_THAT(d->CreateCi(kGpu0, gi->id), StatusIs(StatusCode::kResourceExhausted, ::testing::_));
  EXPECT_THAT(d->CreateCi(kGpu0, NvmlGiId(9)), StatusIs(StatusCode::kNotFound, ::testing::_));

  StatusOr<std::vector<driver::GpuInstanceInfo>> list = d->ListGpuInstances(kGpu0);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  ASSERT_EQ((*list)[0].compute_instances.size(), 1u);
  EXPECT_EQ((*list)[0].compute_instances[0].mig_uuid, ci->mig_uuid);

  EXPECT_THAT(d->DestroyGi(kGpu0, gi->id),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("NVML_ERROR_IN_USE")));
  ASSERT_THAT(d->AttachProcess(ci->mig_uuid, 31337, 5 << 20), IsOk());
  StatusOr<std::vector<driver::ProcessInfo>> procs = d->ListProcesses(kGpu0, gi->id, ci->id);
  ASSERT_TRUE(procs.ok());
  ASSERT_EQ(procs->size(), 1u);
  EXPECT_EQ((*procs)[0].pid, 31337u);
  EXPECT_EQ((*procs)[0].used_gpu_memory_bytes, 5u << 20);
  EXPECT_THAT(d->DestroyCi(kGpu0, gi->id, ci->id),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("In use by another client")));
  ASSERT_THAT(d->DetachProcess(ci->mig_uuid, 31337), IsOk());
  EXPECT_THAT(d->DestroyCi(kGpu0, gi->id, ci->id), IsOk());
  EXPECT_THAT(d->DestroyCi(kGpu0, gi->id, ci->id), StatusIs(StatusCode::kNotFound, ::testing::_));
  EXPECT_THAT(d->ListProcesses(kGpu0, gi->id, ci->id),
              StatusIs(StatusCode::kNotFound, ::testing::_));
  EXPECT_THAT(d->DestroyGi(kGpu0, gi->id), IsOk());
  EXPECT_THAT(d->DestroyGi(kGpu0, gi->id), StatusIs(StatusCode::kNotFound, ::testing::_));

  const SimState s = d->Snapshot();
  EXPECT_EQ(s.counters.at("CreateGi").at("SUCCESS"), 1u);
  EXPECT_EQ(s.counters.at("CreateGi").at("ERROR_INSUFFICIENT_RESOURCES"), 1u);
  EXPECT_EQ(s.counters.at("DestroyGi").at("ERROR_IN_USE"), 1u);
}

TEST(FakeGpuDriverTest, DoubleMemoryOneSliceGetsCiSeven) {
  auto d = Make("h100-80gb:1");
  StatusOr<driver::GpuInstanceInfo> gi = d->CreateGi(kGpu0, GiProfileId(15), {6, 2});
  ASSERT_TRUE(gi.ok());
  StatusOr<driver::ComputeInstanceInfo> ci = d->CreateCi(kGpu0, gi->id);
  ASSERT_TRUE(ci.ok());
  EXPECT_EQ(ci->profile_id, CiProfileId(7));
}

TEST(FakeGpuDriverTest, MigOffAndRebootAndMigMode) {
  auto d = Make("a100-40gb:1:mig-off");
  EXPECT_THAT(d->CreateGi(kGpu0, GiProfileId(19), {0, 1}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("NOT_SUPPORTED")));
  EXPECT_THAT(d->ListGpuInstances(kGpu0), StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(d->SetMigMode(kGpu0, driver::MigMode::kEnabled),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("RESET_REQUIRED")));
  EXPECT_EQ(d->GetMigMode(kGpu0)->pending, driver::MigMode::kEnabled);
  EXPECT_EQ(d->GetMigMode(kGpu0)->current, driver::MigMode::kDisabled);
  d->Reboot();
  EXPECT_EQ(d->GetMigMode(kGpu0)->current, driver::MigMode::kEnabled);
  ASSERT_THAT(d->CreateGi(kGpu0, GiProfileId(19), {0, 1}), IsOk());
  d->Reboot();
  EXPECT_TRUE(d->ListGpuInstances(kGpu0)->empty());
  EXPECT_EQ(d->Snapshot().boot_count, 2u);
}

TEST(FakeGpuDriverTest, FromStateValidates) {
  auto d = Make("a100-40gb:1");
  ASSERT_THAT(d->CreateGi(kGpu0, GiProfileId(9), {0, 4}), IsOk());
  SimState s = d->Snapshot();
  StatusOr<std::unique_ptr<FakeGpuDriver>> copy = FakeGpuDriver::FromState(s);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ((*copy)->ListGpuInstances(kGpu0)->size(), 1u);
  s.gpus[0].gpu_instances[0].placement = {1, 4};
  EXPECT_THAT(FakeGpuDriver::FromState(s), StatusIs(StatusCode::kDataLoss, ::testing::_));
  EXPECT_THAT(FakeGpuDriver::Create("z:1"), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

TEST(FakeGpuDriverTest, WithMachineChangesLayoutBehindTheDriversBack) {
  auto d = Make("a100-40gb:1");
  d->WithMachine(
      [](Machine& m) { EXPECT_TRUE(m.CreateGi(kGpu0, GiProfileId(0), std::nullopt).ok()); });
  EXPECT_THAT(d->CreateGi(kGpu0, GiProfileId(19), {0, 1}),
              StatusIs(StatusCode::kResourceExhausted, ::testing::_));
}

TEST(FakeGpuDriverTest, ConcurrentCallsAreSafe) {
  auto d = Make("h100-80gb:1");
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 7; ++t) {
    threads.emplace_back([&d, t] {
      for (int i = 0; i < 20; ++i) {
        StatusOr<driver::GpuInstanceInfo> gi = d->CreateGi(kGpu0, GiProfileId(19), {t, 1});
        ASSERT_TRUE(gi.ok()) << gi.status();
        StatusOr<driver::ComputeInstanceInfo> ci = d->CreateCi(kGpu0, gi->id);
        ASSERT_TRUE(ci.ok()) << ci.status();
        ASSERT_THAT(d->ListGpuInstances(kGpu0), IsOk());
        ASSERT_THAT(d->DestroyCi(kGpu0, gi->id, ci->id), IsOk());
        ASSERT_THAT(d->DestroyGi(kGpu0, gi->id), IsOk());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(d->ListGpuInstances(kGpu0)->empty());
  EXPECT_EQ(d->Snapshot().counters.at("CreateGi").at("SUCCESS"), 140u);
}

}  // namespace
}  // namespace migd::sim
