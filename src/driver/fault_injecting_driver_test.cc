#include "driver/fault_injecting_driver.h"

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace migd::driver {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;
using Method = FaultInjectingDriver::Method;
using Timing = FaultInjectingDriver::Timing;

// A minimal in-test GpuDriver: counts the calls that reach it, and keeps GIs
// so that "kAfterCall" effects are visible.
class TinyDriver : public GpuDriver {
 public:
  StatusOr<DriverVersions> GetVersions() override { return DriverVersions{"1.0", "1"}; }
  StatusOr<std::vector<GpuInfo>> ListGpus() override {
    ++reached;
    GpuInfo g;
    g.index = GpuIndex(0);
    return std::vector<GpuInfo>{g};
  }
  StatusOr<MigModeInfo> GetMigMode(GpuIndex) override { return MigModeInfo{true, {}, {}}; }
  StatusOr<std::vector<GiProfileInfo>> GetGiProfiles(GpuIndex) override {
    return std::vector<GiProfileInfo>{};
  }
  StatusOr<std::vector<mig::Placement>> GetGiPossiblePlacements(GpuIndex, GiProfileId) override {
    return std::vector<mig::Placement>{{0, 1}};
  }
  StatusOr<GpuInstanceInfo> CreateGi(GpuIndex, GiProfileId profile,
                                     const mig::Placement& placement) override {
    ++reached;
    GpuInstanceInfo gi;
    gi.id = NvmlGiId(static_cast<uint32_t>(gis.size() + 1));
    gi.profile_id = profile;
    gi.placement = placement;
    gis.push_back(gi);
    return gi;
  }
  StatusOr<ComputeInstanceInfo> CreateCi(GpuIndex, NvmlGiId) override {
    ++reached;
    return ComputeInstanceInfo{};
  }
  Status DestroyCi(GpuIndex, NvmlGiId, NvmlCiId) override {
    ++reached;
    return OkStatus();
  }
  Status DestroyGi(GpuIndex, NvmlGiId) override {
    ++reached;
    return OkStatus();
  }
  StatusOr<std::vector<GpuInstanceInfo>> ListGpuInstances(GpuIndex) override { return gis; }
  StatusOr<std::vector<ProcessInfo>> ListProcesses(GpuIndex, NvmlGiId, NvmlCiId) override {
    return std::vector<ProcessInfo>{};
  }

  std::atomic<int> reached{0};
  std::vector<GpuInstanceInfo> gis;
};

TEST(GpuDriverWrapperTest, ForwardsEveryMethod) {
  TinyDriver tiny;
  GpuDriverWrapper w(&tiny);
  EXPECT_EQ(w.target(), &tiny);
  EXPECT_EQ(w.GetVersions()->driver, "1.0");
  EXPECT_EQ(w.ListGpus()->size(), 1u);
  EXPECT_TRUE(w.GetMigMode(GpuIndex(0))->supported);
  EXPECT_THAT(w.GetGiProfiles(GpuIndex(0)), IsOk());
  EXPECT_EQ(w.GetGiPossiblePlacements(GpuIndex(0), GiProfileId(19))->size(), 1u);
  EXPECT_EQ(w.CreateGi(GpuIndex(0), GiProfileId(9), {4, 4})->placement, (mig::Placement{4, 4}));
  EXPECT_THAT(w.CreateCi(GpuIndex(0), NvmlGiId(1)), IsOk());
  EXPECT_THAT(w.DestroyCi(GpuIndex(0), NvmlGiId(1), NvmlCiId(0)), IsOk());
  EXPECT_THAT(w.DestroyGi(GpuIndex(0), NvmlGiId(1)), IsOk());
  EXPECT_EQ(w.ListGpuInstances(GpuIndex(0))->size(), 1u);
  EXPECT_THAT(w.ListProcesses(GpuIndex(0), NvmlGiId(1), NvmlCiId(0)), IsOk());
  EXPECT_EQ(tiny.reached.load(), 5);
}

TEST(FaultInjectingDriverTest, FailsOnlyTheNthCallFromNow) {
  TinyDriver tiny;
  FaultInjectingDriver f(&tiny);
  ASSERT_THAT(f.CreateCi(GpuIndex(0), NvmlGiId(1)), IsOk());  // before arming
  f.FailNthCall(Method::kCreateCi, 2, InternalError("injected"));
  EXPECT_THAT(f.CreateCi(GpuIndex(0), NvmlGiId(1)), IsOk());
  EXPECT_THAT(f.CreateCi(GpuIndex(0), NvmlGiId(1)),
              StatusIs(StatusCode::kInternal, "injected"));
  EXPECT_THAT(f.CreateCi(GpuIndex(0), NvmlGiId(1)), IsOk());  // one-shot
  EXPECT_EQ(f.CallCount(Method::kCreateCi), 4);
  EXPECT_EQ(f.InjectedCount(Method::kCreateCi), 1);
  EXPECT_EQ(tiny.reached.load(), 3);  // the failed call did not reach the target
  EXPECT_EQ(f.CallCount(Method::kCreateGi), 0);
}

TEST(FaultInjectingDriverTest, OpenEventWatchIsForwardedOrFailed) {
  TinyDriver tiny;  // no event API: GpuDriver's default
  FaultInjectingDriver f(&tiny);
  EXPECT_THAT(f.OpenEventWatch().status(),
              StatusIs(StatusCode::kUnimplemented, HasSubstr("delivers no events")));
  f.FailNthCall(Method::kOpenEventWatch, 1, UnavailableError("injected"));
  EXPECT_THAT(f.OpenEventWatch().status(), StatusIs(StatusCode::kUnavailable, "injected"));
  EXPECT_EQ(f.CallCount(Method::kOpenEventWatch), 2);
  EXPECT_EQ(f.InjectedCount(Method::kOpenEventWatch), 1);
  GpuDriverWrapper w(&tiny);
  EXPECT_THAT(w.OpenEventWatch().status(), StatusIs(StatusCode::kUnimplemented, HasSubstr("events")));
}

TEST(FaultInjectingDriverTest, FailsAlwaysUntilCleared) {
  TinyDriver tiny;
  FaultInjectingDriver f(&tiny);
  f.FailAlways(Method::kDestroyGi, FailedPreconditionError("NVML_ERROR_IN_USE"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(f.DestroyGi(GpuIndex(0), NvmlGiId(1)),
                StatusIs(StatusCode::kFailedPrecondition, "NVML_ERROR_IN_USE"));
  }
  EXPECT_THAT(f.DestroyCi(GpuIndex(0), NvmlGiId(1), NvmlCiId(0)), IsOk());  // other method
  f.Clear(Method::kDestroyGi);
  EXPECT_THAT(f.DestroyGi(GpuIndex(0), NvmlGiId(1)), IsOk());
  EXPECT_EQ(f.CallCount(Method::kDestroyGi), 4);
  EXPECT_EQ(f.InjectedCount(Method::kDestroyGi), 3);
}

TEST(FaultInjectingDriverTest, AfterCallTimingForwardsThenFails) {
  TinyDriver tiny;
  FaultInjectingDriver f(&tiny);
  f.FailNthCall(Method::kCreateGi, 1, UnavailableError("lost reply"), Timing::kAfterCall);
  EXPECT_THAT(f.CreateGi(GpuIndex(0), GiProfileId(19), {0, 1}),
              StatusIs(StatusCode::kUnavailable, "lost reply"));
  // The GI exists although the caller saw an error.
  EXPECT_EQ(f.ListGpuInstances(GpuIndex(0))->size(), 1u);
}

TEST(FaultInjectingDriverTest, SeveralRulesAndClearAll) {
  TinyDriver tiny;
  FaultInjectingDriver f(&tiny);
  f.FailNthCall(Method::kListGpus, 1, UnknownError("a"));
  f.FailNthCall(Method::kListGpus, 3, UnknownError("c"));
  f.FailAlways(Method::kGetVersions, UnknownError("v"));
  EXPECT_THAT(f.ListGpus(), StatusIs(StatusCode::kUnknown, "a"));
  EXPECT_THAT(f.ListGpus(), IsOk());
  EXPECT_THAT(f.ListGpus(), StatusIs(StatusCode::kUnknown, "c"));
  EXPECT_THAT(f.GetVersions(), StatusIs(StatusCode::kUnknown, "v"));
  f.ClearAll();
  EXPECT_THAT(f.GetVersions(), IsOk());
  EXPECT_EQ(FaultInjectingDriver::MethodName(Method::kListProcesses), "ListProcesses");
  EXPECT_EQ(FaultInjectingDriver::MethodName(Method::kOpenEventWatch), "OpenEventWatch");
}

TEST(FaultInjectingDriverTest, CountsAreThreadSafe) {
  TinyDriver tiny;
  FaultInjectingDriver f(&tiny);
  f.FailNthCall(Method::kDestroyCi, 50, InternalError("x"));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        if (!f.DestroyCi(GpuIndex(0), NvmlGiId(1), NvmlCiId(0)).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(f.CallCount(Method::kDestroyCi), 400);
  EXPECT_EQ(failures.load(), 1);
  EXPECT_EQ(tiny.reached.load(), 399);
}

}  // namespace
}  // namespace migd::driver
