#include "driver/nvml/nvml_library.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "driver/nvml/nvml_session.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::driver {
namespace {

using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
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
  MIGD_ASSERT_OK_AND_ASSIGN(auto lib, NvmlLibrary::Load(MIGD_SIM_LIBRARY));
  EXPECT_EQ(lib->path(), MIGD_SIM_LIBRARY);
  EXPECT_EQ(BindingOf(*lib, "nvmlInit_v2").bound, "nvmlInit_v2");
  EXPECT_EQ(BindingOf(*lib, "nvmlDeviceGetGpuInstanceProfileInfoV").bound,
            "nvmlDeviceGetGpuInstanceProfileInfoV");
  EXPECT_EQ(BindingOf(*lib, "nvmlDeviceGetComputeRunningProcesses_v3").bound,
            "nvmlDeviceGetComputeRunningProcesses_v3");
  EXPECT_EQ(BindingOf(*lib, "nvmlDeviceGetGpuInstanceProfileInfoByIdV").bound,
            "nvmlDeviceGetGpuInstanceProfileInfoByIdV");
  EXPECT_TRUE(BindingOf(*lib, "nvmlDeviceCreateGpuInstanceWithPlacement").required);
  // The simulator exports every symbol migd binds.
  for (const NvmlBinding& b : lib->Bindings()) {
    EXPECT_EQ(b.bound, b.function) << b.function;
  }
  EXPECT_EQ(lib->Bindings().size(), NvmlFunctionSpecs().size());
}

TEST(NvmlLibraryTest, LegacyR470LibraryBindsItsVariantsAndLeavesOptionalOnesUnbound) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto lib, NvmlLibrary::Load(MIGD_SIM_LEGACY_LIBRARY));
  EXPECT_EQ(BindingOf(*lib, "nvmlDeviceGetGpuInstanceProfileInfoV").bound,
            "nvmlDeviceGetGpuInstanceProfileInfo");
  EXPECT_EQ(BindingOf(*lib, "nvmlGpuInstanceGetComputeInstanceProfileInfoV").bound,
            "nvmlGpuInstanceGetComputeInstanceProfileInfo");
  EXPECT_EQ(BindingOf(*lib, "nvmlDeviceGetComputeRunningProcesses_v3").bound,
            "nvmlDeviceGetComputeRunningProcesses_v2");
  // 11.4 has these.
  EXPECT_EQ(BindingOf(*lib, "nvmlDeviceGetGpuInstancePossiblePlacements_v2").bound,
            "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  EXPECT_EQ(BindingOf(*lib, "nvmlComputeInstanceGetInfo_v2").bound,
            "nvmlComputeInstanceGetInfo_v2");
  // Optional features the library lacks are reported unbound, not fatal.
  for (const char* optional :
       {"nvmlDeviceGetGpuInstanceProfileInfoByIdV",
        "nvmlGpuInstanceGetComputeInstancePossiblePlacements",
        "nvmlGpuInstanceCreateComputeInstanceWithPlacement"}) {
    const NvmlBinding b = BindingOf(*lib, optional);
    EXPECT_EQ(b.bound, "") << optional;
    EXPECT_FALSE(b.required) << optional;
  }
}

TEST(NvmlLibraryTest, FallsBackToOlderVariants) {
  // The simulator's own symbols, minus the newer variants (an 11.1-era
  // export table).
  MIGD_ASSERT_OK_AND_ASSIGN(
      auto lib, sim_testing::LoadSimWithSymbols(
                    MIGD_SIM_LIBRARY, {"nvmlDeviceGetGpuInstanceProfileInfoV",
                                       "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
                                       "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
                                       "nvmlComputeInstanceGetInfo_v2",
                                       "nvmlDeviceGetComputeRunningProcesses_v3",
                                       "nvmlDeviceGetComputeRunningProcesses_v2"}));
  EXPECT_EQ(lib->path(), MIGD_SIM_LIBRARY);
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
}

TEST(NvmlLibraryTest, RequiredSymbolWithoutFallbackFailsFromResolverToo) {
  sim_testing::SimMachine sim("a100-40gb:1");
  auto lib = sim_testing::LoadSimWithSymbols(MIGD_SIM_LIBRARY,
                                             {"nvmlDeviceCreateGpuInstanceWithPlacement"});
  // The simulator, like the real NVML, answers nvmlSystemGetDriverVersion
  // only after init: the version then comes from /proc or is reported unknown.
  EXPECT_THAT(lib, StatusIs(StatusCode::kUnavailable,
                            AllOf(HasSubstr(MIGD_SIM_LIBRARY),
                                  HasSubstr("missing required symbol "
                                            "nvmlDeviceCreateGpuInstanceWithPlacement"),
                                  HasSubstr("(driver "))));
  EXPECT_FALSE(sim.exists());  // no init happened
}

TEST(NvmlLibraryTest, CountsCallsPerFunctionAndResult) {
  sim_testing::SimMachine sim("a100-40gb:1");
  MIGD_ASSERT_OK_AND_ASSIGN(auto lib, NvmlLibrary::Load(MIGD_SIM_LIBRARY));
  EXPECT_EQ(lib->TotalCalls(), 0u);
  unsigned int n = 0;
  // Not initialised: the library answers UNINITIALIZED.
  EXPECT_EQ(lib->Call<nvmlDeviceGetCount_fn>(NvmlSymbol::kDeviceGetCountV2, &n),
            NVML_ERROR_UNINITIALIZED);
  {
    NvmlSession session(lib);  // init and shutdown go through the session only
    ASSERT_THAT(session.Open(), migd::testing::IsOk());
    EXPECT_EQ(lib->Call<nvmlDeviceGetCount_fn>(NvmlSymbol::kDeviceGetCountV2, &n), NVML_SUCCESS);
    EXPECT_EQ(n, 1u);
    EXPECT_EQ(lib->Call<nvmlDeviceGetCount_fn>(NvmlSymbol::kDeviceGetCountV2, &n), NVML_SUCCESS);
  }
  // After the final shutdown: UNINITIALIZED again, and the simulator counts it
  // in this machine's state too.
  EXPECT_EQ(lib->Call<nvmlDeviceGetCount_fn>(NvmlSymbol::kDeviceGetCountV2, &n),
            NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(lib->TotalCalls(), 6u);
  EXPECT_EQ(lib->CallCount(NvmlSymbol::kDeviceGetCountV2, NVML_SUCCESS), 2u);
  EXPECT_THAT(lib->CallCounts(),
              ElementsAre(NvmlCallCount{"nvmlInit_v2", "SUCCESS", 1},
                          NvmlCallCount{"nvmlShutdown", "SUCCESS", 1},
                          NvmlCallCount{"nvmlDeviceGetCount_v2", "SUCCESS", 2},
                          NvmlCallCount{"nvmlDeviceGetCount_v2", "ERROR_UNINITIALIZED", 2}));
  // The simulator saw the same calls, except the one made before its state
  // file was known.
  EXPECT_EQ(sim.Counts(), (sim_testing::CallCounts{
                              {{"nvmlInit_v2", "SUCCESS"}, 1},
                              {{"nvmlShutdown", "SUCCESS"}, 1},
                              {{"nvmlDeviceGetCount_v2", "SUCCESS"}, 2},
                              {{"nvmlDeviceGetCount_v2", "ERROR_UNINITIALIZED"}, 1},
                          }));
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
