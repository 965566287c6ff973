#include "driver/nvml/nvml_library.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "driver/nvml/fake_nvml.h"
#include "driver/nvml/nvml_session.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::driver {
namespace {

using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;

NvmlBinding BindingOf(const NvmlLibrary& lib, std::string_view function) {
  for (const NvmlBinding& b : lib.Bindings()) {
    if (b.function == function) return b;
  }
  ADD_FAILURE() << "no binding for " << function;
  return {};
}

TEST(NvmlLibraryTest, MissingLibraryIsUnavailableNamingPathAndFix) {
  auto lib = NvmlLibrary::Load("/nonexistent/dir/libnvidia-ml.so.1");
  EXPECT_THAT(lib, StatusIs(StatusCode::kUnavailable,
                            AllOf(HasSubstr("/nonexistent/dir/libnvidia-ml.so.1 not found: "),
                                  HasSubstr("install the NVIDIA driver or pass --nvml-library"))));
}

TEST(NvmlLibraryTest, LibraryWithoutNvmlSymbolsIsUnavailableNamingInit) {
  auto lib = NvmlLibrary::Load("libm.so.6");
  EXPECT_THAT(lib, StatusIs(StatusCode::kUnavailable,
                            AllOf(HasSubstr("libm.so.6"), HasSubstr("nvmlInit_v2 or nvmlInit"),
                                  HasSubstr("nvmlDeviceCreateGpuInstanceWithPlacement"))));
}

TEST(NvmlLibraryTest, TooOldDriverNamesMissingSymbolAndDriverVersion) {
  auto lib = NvmlLibrary::Load(MIGD_TEST_TOO_OLD_NVML);
  ASSERT_FALSE(lib.ok());
  EXPECT_THAT(lib, StatusIs(StatusCode::kUnavailable,
                            AllOf(HasSubstr("missing required symbol "),
                                  HasSubstr("nvmlDeviceCreateGpuInstanceWithPlacement"),
                                  HasSubstr("driver 450.80.02"), HasSubstr("R460"))));
  // Everything else the stub exports (with v1 fallbacks) is acceptable.
  EXPECT_THAT(std::string(lib.status().message()),
              ::testing::Not(HasSubstr("nvmlDeviceGetGpuInstanceProfileInfoV")));
}

TEST(NvmlLibraryTest, BindsPreferredVariantsAndRecordsThem) {
  fake_nvml::Reset();
  MIGD_ASSERT_OK_AND_ASSIGN(auto lib, NvmlLibrary::FromResolver(&fake_nvml::Resolve, nullptr,
                                                                "fake"));
  EXPECT_EQ(lib->path(), "fake");
  EXPECT_EQ(BindingOf(*lib, "nvmlInit_v2").bound, "nvmlInit_v2");
  EXPECT_EQ(BindingOf(*lib, "nvmlDeviceGetGpuInstanceProfileInfoV").bound,
            "nvmlDeviceGetGpuInstanceProfileInfoV");
  EXPECT_EQ(BindingOf(*lib, "nvmlDeviceGetComputeRunningProcesses_v3").bound,
            "nvmlDeviceGetComputeRunningProcesses_v3");
  // Optional features the fake lacks are reported unbound, not fatal.
  const NvmlBinding by_id = BindingOf(*lib, "nvmlDeviceGetGpuInstanceProfileInfoByIdV");
  EXPECT_EQ(by_id.bound, "");
  EXPECT_FALSE(by_id.required);
  EXPECT_TRUE(BindingOf(*lib, "nvmlDeviceCreateGpuInstanceWithPlacement").required);
  EXPECT_EQ(lib->Bindings().size(), NvmlFunctionSpecs().size());
}

TEST(NvmlLibraryTest, FallsBackToOlderVariants) {
  fake_nvml::Options o;
  o.hidden_symbols = {"nvmlDeviceGetGpuInstanceProfileInfoV",
                      "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
                      "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
                      "nvmlComputeInstanceGetInfo_v2",
                      "nvmlDeviceGetComputeRunningProcesses_v3"};
  fake_nvml::Reset(o);
  MIGD_ASSERT_OK_AND_ASSIGN(auto lib, NvmlLibrary::FromResolver(&fake_nvml::Resolve, nullptr,
                                                                "fake-legacy"));
  EXPECT_EQ(BindingOf(*lib, "nvmlDeviceGetGpuInstanceProfileInfoV").bound,
            "nvmlDeviceGetGpuInstanceProfileInfo");
  EXPECT_EQ(BindingOf(*lib, "nvmlGpuInstanceGetComputeInstanceProfileInfoV").bound,
            "nvmlGpuInstanceGetComputeInstanceProfileInfo");
  EXPECT_EQ(BindingOf(*lib, "nvmlDeviceGetGpuInstancePossiblePlacements_v2").bound,
            "nvmlDeviceGetGpuInstancePossiblePlacements");
  EXPECT_EQ(BindingOf(*lib, "nvmlComputeInstanceGetInfo_v2").bound,
            "nvmlComputeInstanceGetInfo");
  EXPECT_EQ(BindingOf(*lib, "nvmlDeviceGetComputeRunningProcesses_v3").bound,
            "nvmlDeviceGetComputeRunningProcesses");
  fake_nvml::Reset();
}

TEST(NvmlLibraryTest, RequiredSymbolWithoutFallbackFailsFromResolverToo) {
  fake_nvml::Options o;
  o.hidden_symbols = {"nvmlDeviceCreateGpuInstanceWithPlacement"};
  fake_nvml::Reset(o);
  // The fake answers nvmlSystemGetDriverVersion only after init, like the real
  // NVML: the version then comes from /proc or is reported unknown.
  auto lib = NvmlLibrary::FromResolver(&fake_nvml::Resolve, nullptr, "fake-old");
  EXPECT_THAT(lib, StatusIs(StatusCode::kUnavailable,
                            AllOf(HasSubstr("fake-old"),
                                  HasSubstr("nvmlDeviceCreateGpuInstanceWithPlacement"),
                                  HasSubstr("(driver "))));
  fake_nvml::Reset();
}

TEST(NvmlLibraryTest, CountsCallsPerFunctionAndResult) {
  fake_nvml::Reset();
  MIGD_ASSERT_OK_AND_ASSIGN(auto lib, NvmlLibrary::FromResolver(&fake_nvml::Resolve, nullptr,
                                                                "fake"));
  EXPECT_EQ(lib->TotalCalls(), 0u);
  unsigned int n = 0;
  // Not initialised: the fake answers UNINITIALIZED.
  EXPECT_EQ(lib->Call<nvmlDeviceGetCount_fn>(NvmlSymbol::kDeviceGetCountV2, &n),
            NVML_ERROR_UNINITIALIZED);
  {
    NvmlSession session(lib);  // init and shutdown go through the session only
    ASSERT_THAT(session.Open(), migd::testing::IsOk());
    EXPECT_EQ(lib->Call<nvmlDeviceGetCount_fn>(NvmlSymbol::kDeviceGetCountV2, &n), NVML_SUCCESS);
    EXPECT_EQ(lib->Call<nvmlDeviceGetCount_fn>(NvmlSymbol::kDeviceGetCountV2, &n), NVML_SUCCESS);
  }
  EXPECT_EQ(lib->TotalCalls(), 5u);
  EXPECT_EQ(lib->CallCount(NvmlSymbol::kDeviceGetCountV2, NVML_SUCCESS), 2u);
  EXPECT_THAT(lib->CallCounts(),
              ElementsAre(NvmlCallCount{"nvmlInit_v2", "SUCCESS", 1},
                          NvmlCallCount{"nvmlShutdown", "SUCCESS", 1},
                          NvmlCallCount{"nvmlDeviceGetCount_v2", "SUCCESS", 2},
                          NvmlCallCount{"nvmlDeviceGetCount_v2", "ERROR_UNINITIALIZED", 1}));
  EXPECT_STREQ(lib->ErrorString(NVML_ERROR_IN_USE), "In use by another client");
}

TEST(NvmlLibraryTest, ReadsKernelDriverVersionFromProcFile) {
  migd::testing::TempDir dir;
  migd::testing::WriteFileOrDie(
      dir.Join("version"),
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
      "GCC version:  gcc version 12.2.0\n");
  EXPECT_EQ(ReadKernelDriverVersion(dir.Join("version")), "535.104.05");
  EXPECT_EQ(ReadKernelDriverVersion(dir.Join("absent")), "");
}

TEST(NvmlLibraryTest, SymbolNamesAreTheExportedSuffixedNames) {
  EXPECT_EQ(NvmlSymbolName(NvmlSymbol::kDeviceGetPciInfoV3), "nvmlDeviceGetPciInfo_v3");
  EXPECT_EQ(NvmlSymbolName(NvmlSymbol::kComputeInstanceGetInfoV2),
            "nvmlComputeInstanceGetInfo_v2");
  EXPECT_EQ(NvmlSymbolName(NvmlSymbol::kDeviceGetGpuInstanceProfileInfoByIdV),
            "nvmlDeviceGetGpuInstanceProfileInfoByIdV");
  // Every symbol belongs to exactly one function spec.
  std::vector<int> seen(kNvmlSymbolCount, 0);
  for (const NvmlFunctionSpec& spec : NvmlFunctionSpecs()) {
    for (NvmlSymbol s : spec.chain) ++seen[static_cast<int>(s)];
  }
  for (int i = 0; i < kNvmlSymbolCount; ++i) {
    EXPECT_EQ(seen[i], 1) << NvmlSymbolName(static_cast<NvmlSymbol>(i));
  }
}

}  // namespace
}  // namespace migd::driver
