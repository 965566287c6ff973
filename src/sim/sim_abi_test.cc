// sim_abi_test: the simulated NVML libraries through dlopen()/dlsym() only
// (sim/sim_abi_testing.h): exports, init, identity, profile info,
// placements, the header-open knobs, the R470 library.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/file_util.h"
#include "driver/nvml/nvml_abi.h"
#include "mig/catalog.h"
#include "sim/nvml_names.h"
#include "sim/sim_abi_testing.h"
#include "sim/state.h"

namespace migd::sim {
namespace {

using ::testing::HasSubstr;
using abi_testing::Checks;
using abi_testing::ChildResult;
using abi_testing::ExpectPassed;
using abi_testing::InChild;
using abi_testing::MigDevice;
using abi_testing::Nvml;
using abi_testing::SimAbiTest;
using abi_testing::Uuid;
using abi_testing::Walk;
using abi_testing::Walked;

TEST_F(SimAbiTest, ExportsOnlyNvmlAndMigdSimSymbols) {
  ExpectPassed(InChild([&](Checks& c) {
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_TRUE(n.lib != nullptr);
    CHECK_TRUE(n.Has("nvmlInit_v2") && n.Has("nvmlInit") && n.Has("nvmlInitWithFlags"));
    CHECK_TRUE(n.Has("nvmlDeviceGetGpuInstanceProfileInfoV"));
    CHECK_TRUE(n.Has("migdSimReboot"));
    CHECK_TRUE(!n.Has("_ZN4migd3sim12NvmlErrorTextE12nvmlReturn_enum"));
    CHECK_TRUE(!n.Has("_ZN4migd3mig7Catalog7DefaultEv"));
  }));
}

// Both libraries export exactly the functions of driver/nvml/nvml_functions.h
// they should: the full one all of them, the R470 one those of the 11.4
// header (sim/nvml_names.h derives both lists from it).
TEST_F(SimAbiTest, ExportsEveryListedFunction) {
  ExpectPassed(InChild([&](Checks& c) {
    Nvml full(MIGD_SIM_LIBRARY);
    Nvml legacy(MIGD_SIM_LEGACY_LIBRARY);
    CHECK_EQ(SimulatedNvmlFunctions().size(), 62u);  // 57 + the five event functions
    size_t newer = 0;
    for (std::string_view fn : SimulatedNvmlFunctions()) {
      const std::string name(fn);
      c.Expect(full.Has(name.c_str()), "full library lacks " + name, __LINE__);
      const bool post_r470 = IsPostR470Function(fn);
      newer += post_r470 ? 1 : 0;
      c.Expect(legacy.Has(name.c_str()) != post_r470,
               "legacy library " + std::string(post_r470 ? "exports " : "lacks ") + name,
               __LINE__);
    }
    CHECK_EQ(newer, 8u);
  }));
}

TEST_F(SimAbiTest, InitIsReferenceCounted) {
  ExpectPassed(InChild([&](Checks& c) {
    ::unsetenv("MIGD_SIM_STATE");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_ERROR_DRIVER_NOT_LOADED);
    Env("a100-40gb:1");
    unsigned int count = 0;
    CHECK_EQ(n.count(&count), NVML_ERROR_UNINITIALIZED);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    CHECK_EQ(n.shutdown(), NVML_SUCCESS);
    CHECK_EQ(n.count(&count), NVML_SUCCESS);
    CHECK_EQ(count, 1u);
    nvmlDevice_t gpu = nullptr;
    CHECK_EQ(n.by_index(0, &gpu), NVML_SUCCESS);
    CHECK_EQ(n.shutdown(), NVML_SUCCESS);
    CHECK_EQ(n.count(&count), NVML_ERROR_UNINITIALIZED);
    CHECK_EQ(n.shutdown(), NVML_SUCCESS);  // extra shutdown: no error
    CHECK_EQ(n.init(), NVML_SUCCESS);
    char buf[96];
    CHECK_EQ(n.uuid(gpu, buf, sizeof(buf)), NVML_ERROR_INVALID_ARGUMENT);  // old session's handle
    nvmlDevice_t again = nullptr;
    CHECK_EQ(n.by_index(0, &again), NVML_SUCCESS);
    CHECK_EQ(n.uuid(again, buf, sizeof(buf)), NVML_SUCCESS);
    CHECK_EQ(std::string(n.error_string(NVML_ERROR_IN_USE)), "In use by another client");
    CHECK_EQ(std::string(n.error_string(NVML_ERROR_INSUFFICIENT_RESOURCES)),
             "Insufficient Resources");
    CHECK_EQ(n.shutdown(), NVML_SUCCESS);
  }));
  const SimState s = ReadState();
  EXPECT_EQ(Count(s, "nvmlInit_v2", "SUCCESS"), 3u);
  EXPECT_EQ(Count(s, "nvmlShutdown", "SUCCESS"), 4u);
  // The first call before init had no state file to count in; the second did.
  EXPECT_EQ(Count(s, "nvmlDeviceGetCount_v2", "ERROR_UNINITIALIZED"), 1u);
  EXPECT_EQ(Count(s, "nvmlDeviceGetUUID", "ERROR_INVALID_ARGUMENT"), 1u);
}

TEST_F(SimAbiTest, InitFailsWithoutMachineOrWithBadKnobs) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1");
    ::unsetenv("MIGD_SIM_GPUS");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_ERROR_DRIVER_NOT_LOADED);  // no file, nothing to create it from
    CHECK_TRUE(!std::filesystem::exists(State()));
  }));
  const std::string err = dir_.Join("stderr.txt");
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1", "MIGD_SIM_FAULTS", "nvmlGpuInstanceDestroy=SOMETIMES");
    CHECK_TRUE(std::freopen(err.c_str(), "w", stderr) != nullptr);
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_TRUE(n.init() != NVML_SUCCESS);
    std::fflush(stderr);
  }));
  StatusOr<std::string> text = ReadFileToString(err);
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, HasSubstr("MIGD_SIM_FAULTS"));
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1", "MIGD_SIM_GPUS", "a100-40gb:1:warp");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_TRUE(n.init() != NVML_SUCCESS);
  }));
}

TEST_F(SimAbiTest, CorruptStateFileFailsInit) {
  ASSERT_TRUE(AtomicWriteFile(State(), "{\"schemaVersion\": 1}").ok());
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_ERROR_UNKNOWN);
  }));
  EXPECT_EQ(*ReadFileToString(State()), "{\"schemaVersion\": 1}");  // never reset
}

TEST_F(SimAbiTest, SystemAndIdentityQueries) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("h100-80gb:1,a100-40gb:1:mig-off:no-permission", "MIGD_SIM_NONCE", "5");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    char buf[96];
    CHECK_EQ(n.driver_version(buf, sizeof(buf)), NVML_SUCCESS);
    CHECK_EQ(std::string(buf), "580.95.05");
    CHECK_EQ(n.nvml_version(buf, sizeof(buf)), NVML_SUCCESS);
    CHECK_EQ(std::string(buf), "13.580.95.05");
    CHECK_EQ(n.nvml_version(buf, 5), NVML_ERROR_INSUFFICIENT_SIZE);
    unsigned int count = 0;
    CHECK_EQ(n.count(&count), NVML_SUCCESS);
    CHECK_EQ(count, 2u);  // the no-permission GPU is counted...
    nvmlDevice_t gpu = nullptr;
    nvmlDevice_t other = nullptr;
    CHECK_EQ(n.by_index(1, &other), NVML_ERROR_NO_PERMISSION);  // ...but refused
    CHECK_EQ(n.by_index(2, &other), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.by_index(0, &gpu), NVML_SUCCESS);
    CHECK_EQ(n.name(gpu, buf, sizeof(buf)), NVML_SUCCESS);
    CHECK_EQ(std::string(buf), "NVIDIA H100 80GB HBM3");
    const std::string uuid = Uuid(n, gpu);
    CHECK_TRUE(IsValidGpuUuid(uuid));
    CHECK_EQ(n.by_uuid(uuid.c_str(), &other), NVML_SUCCESS);
    CHECK_EQ(other, gpu);  // handles are interned
    CHECK_EQ(n.by_uuid("GPU-00000000-0000-0000-0000-000000000000", &other), NVML_ERROR_NOT_FOUND);
    unsigned int v = 99;
    CHECK_EQ(n.index(gpu, &v), NVML_SUCCESS);
    CHECK_EQ(v, 0u);
    CHECK_EQ(n.minor(gpu, &v), NVML_SUCCESS);
    CHECK_EQ(v, 0u);
    nvmlPciInfo_t pci{};
    CHECK_EQ(n.pci_v3(gpu, &pci), NVML_SUCCESS);
    CHECK_EQ(std::string(pci.busId), "00000000:17:00.0");
    CHECK_EQ(std::string(pci.busIdLegacy), "0000:17:00.0");
    CHECK_EQ(pci.bus, 0x17u);
    CHECK_EQ(pci.pciDeviceId, 0x233010DEu);
    CHECK_EQ(n.by_pci("0000:17:00.0", &other), NVML_SUCCESS);
    CHECK_EQ(other, gpu);
    CHECK_EQ(n.by_pci("00000000:37:00.0", &other), NVML_ERROR_NO_PERMISSION);
    CHECK_EQ(n.by_pci("00000000:99:00.0", &other), NVML_ERROR_NOT_FOUND);
    nvmlMemory_t mem{};
    CHECK_EQ(n.memory(gpu, &mem), NVML_SUCCESS);
    CHECK_EQ(mem.total, 81559ull << 20);
    CHECK_EQ(mem.free, mem.total);
    unsigned int cur = 9;
    unsigned int pend = 9;
    CHECK_EQ(n.get_mig_mode(gpu, &cur, &pend), NVML_SUCCESS);
    CHECK_EQ(cur, 1u);
    CHECK_EQ(pend, 1u);
    CHECK_EQ(n.max_mig(gpu, &v), NVML_SUCCESS);
    CHECK_EQ(v, 7u);
    CHECK_EQ(n.is_mig(gpu, &v), NVML_SUCCESS);
    CHECK_EQ(v, 0u);
    CHECK_EQ(n.gi_id(gpu, &v), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(n.parent(gpu, &other), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.shutdown(), NVML_SUCCESS);
  }));
}

TEST_F(SimAbiTest, ProfileInfoVersionsAndCodes) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("h100-80gb:1,rtx-pro-6000-blackwell:1,a100-40gb:1:mig-off");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t h100 = nullptr;
    nvmlDevice_t rtx = nullptr;
    nvmlDevice_t off = nullptr;
    n.by_index(0, &h100);
    n.by_index(1, &rtx);
    n.by_index(2, &off);
    nvmlGpuInstanceProfileInfo_t v1{};
    CHECK_EQ(n.profile_v1(h100, nvml_abi::kGiProfile1SliceRev2, &v1), NVML_SUCCESS);
    CHECK_EQ(v1.id, 15u);
    CHECK_EQ(v1.multiprocessorCount, 26u);
    CHECK_EQ(v1.memorySizeMB, 20096u);
    CHECK_EQ(v1.instanceCount, 4u);
    CHECK_EQ(n.profile_v1(h100, 0x05, &v1), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(n.profile_v1(h100, 0x12, &v1), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.profile_v1(off, 0, &v1), NVML_SUCCESS);  // v1 answers with MIG off

    nvmlGpuInstanceProfileInfo_v2_t v2{};
    v2.version = nvml_abi::kGpuInstanceProfileInfoV2;
    CHECK_EQ(n.profile_v(h100, 0, &v2), NVML_SUCCESS);
    CHECK_EQ(v2.id, 19u);
    CHECK_EQ(v2.sliceCount, 1u);
    CHECK_EQ(v2.memorySizeMB, 9984u);
    CHECK_EQ(std::string(v2.name), "MIG 1g.10gb");
    CHECK_EQ(v2.version, nvml_abi::kGpuInstanceProfileInfoV2);

    nvmlGpuInstanceProfileInfo_v3_t v3{};
    v3.version = nvml_abi::kGpuInstanceProfileInfoV3;
    CHECK_EQ(n.profile_v(rtx, nvml_abi::kGiProfile1SliceGfx,
                         reinterpret_cast<nvmlGpuInstanceProfileInfo_v2_t*>(&v3)),
             NVML_SUCCESS);
    CHECK_EQ(v3.id, 47u);
    CHECK_EQ(v3.sliceCount, 1u);
    CHECK_EQ(std::string(v3.name), "MIG 1g.24gb+gfx");
    CHECK_EQ(v3.capabilities & nvml_abi::kGiCapsGfx, nvml_abi::kGiCapsGfx);
    v3 = {};
    v3.version = nvml_abi::kGpuInstanceProfileInfoV3;
    CHECK_EQ(n.profile_v(rtx, 0, reinterpret_cast<nvmlGpuInstanceProfileInfo_v2_t*>(&v3)),
             NVML_SUCCESS);
    CHECK_EQ(v3.capabilities, 0u);
    CHECK_EQ(n.profile_by_id(rtx, 35, reinterpret_cast<nvmlGpuInstanceProfileInfo_v2_t*>(&v3)),
             NVML_SUCCESS);
    CHECK_EQ(std::string(v3.name), "MIG 2g.48gb+gfx");
    CHECK_EQ(n.profile_by_id(rtx, 19, reinterpret_cast<nvmlGpuInstanceProfileInfo_v2_t*>(&v3)),
             NVML_ERROR_NOT_SUPPORTED);

    v2 = {};
    v2.version = 0x01000098;
    CHECK_EQ(n.profile_v(h100, 0, &v2), NVML_ERROR_INVALID_ARGUMENT);
    v2.version = nvml_abi::kGpuInstanceProfileInfoV2;
    CHECK_EQ(n.profile_v(h100, 0x12, &v2), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.profile_v(h100, 0x11, &v2), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(n.profile_v(off, 0, &v2), NVML_ERROR_NOT_SUPPORTED);

    CHECK_EQ(n.shutdown(), NVML_SUCCESS);
  }));
}

TEST_F(SimAbiTest, CiProfileInfoVersionsAndCodes) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("h100-80gb:1");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t h100 = nullptr;
    n.by_index(0, &h100);
    // CI profiles of a 3g GI on H100: 1c.3g (index 0) and 3g (index 2).
    nvmlGpuInstancePlacement_t p{0, 4};
    nvmlGpuInstance_t gi = nullptr;
    CHECK_EQ(n.create_gi(h100, 9, &p, &gi), NVML_SUCCESS);
    nvmlComputeInstanceProfileInfo_t ci1{};
    CHECK_EQ(n.ci_profile_v1(gi, 0, 0, &ci1), NVML_SUCCESS);
    CHECK_EQ(ci1.sliceCount, 1u);
    CHECK_EQ(ci1.instanceCount, 3u);
    CHECK_EQ(ci1.multiprocessorCount, 20u);                               // 60 SMs x 1/3
    CHECK_EQ(n.ci_profile_v1(gi, 4, 0, &ci1), NVML_ERROR_NOT_SUPPORTED);  // 7c > 3g
    CHECK_EQ(n.ci_profile_v1(gi, 9, 0, &ci1), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.ci_profile_v1(gi, 0, 1, &ci1), NVML_ERROR_INVALID_ARGUMENT);
    nvmlComputeInstanceProfileInfo_v2_t civ2{};
    civ2.version = nvml_abi::kComputeInstanceProfileInfoV2;
    CHECK_EQ(n.ci_profile_v(gi, 0, 0, &civ2), NVML_SUCCESS);
    CHECK_EQ(std::string(civ2.name), "MIG 1c.3g.40gb");
    nvmlComputeInstanceProfileInfo_v3_t civ3{};
    civ3.version = nvml_abi::kComputeInstanceProfileInfoV3;
    CHECK_EQ(
        n.ci_profile_v(gi, 2, 0, reinterpret_cast<nvmlComputeInstanceProfileInfo_v2_t*>(&civ3)),
        NVML_SUCCESS);
    CHECK_EQ(std::string(civ3.name), "MIG 3g.40gb");
    CHECK_EQ(civ3.id, 2u);
    CHECK_EQ(civ3.multiprocessorCount, 60u);
    civ2.version = 0x01000088;
    CHECK_EQ(n.ci_profile_v(gi, 0, 0, &civ2), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.shutdown(), NVML_SUCCESS);
  }));
}

TEST_F(SimAbiTest, ProfileInfoMaxVersionTwoRejectsV3) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1", "MIGD_SIM_PROFILE_INFO_MAX_VERSION", "2");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    n.by_index(0, &gpu);
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvml_abi::kGpuInstanceProfileInfoV3;
    CHECK_EQ(n.profile_v(gpu, 0, &info), NVML_ERROR_INVALID_ARGUMENT);
    info.version = nvml_abi::kGpuInstanceProfileInfoV2;
    CHECK_EQ(n.profile_v(gpu, 0, &info), NVML_SUCCESS);
    CHECK_EQ(info.id, 19u);
    nvmlGpuInstancePlacement_t p{0, 8};
    nvmlGpuInstance_t gi = nullptr;
    CHECK_EQ(n.create_gi(gpu, 0, &p, &gi), NVML_SUCCESS);
    nvmlComputeInstanceProfileInfo_v3_t civ3{};
    civ3.version = nvml_abi::kComputeInstanceProfileInfoV3;
    CHECK_EQ(
        n.ci_profile_v(gi, 4, 0, reinterpret_cast<nvmlComputeInstanceProfileInfo_v2_t*>(&civ3)),
        NVML_ERROR_INVALID_ARGUMENT);
    n.shutdown();
  }));
}

TEST_F(SimAbiTest, PossiblePlacements) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1,a100-40gb:1:mig-off");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    nvmlDevice_t off = nullptr;
    n.by_index(0, &gpu);
    n.by_index(1, &off);
    unsigned int count = 0;
    CHECK_EQ(n.placements_v2(gpu, 19, nullptr, &count), NVML_SUCCESS);
    CHECK_EQ(count, 7u);
    nvmlGpuInstancePlacement_t buf[8] = {};
    // *count is output only: the buffer must hold every placement.
    count = 3;
    CHECK_EQ(n.placements_v2(gpu, 19, buf, &count), NVML_SUCCESS);
    CHECK_EQ(count, 7u);
    count = 8;
    CHECK_EQ(n.placements_v2(gpu, 15, buf, &count), NVML_SUCCESS);
    CHECK_EQ(count, 4u);
    CHECK_EQ(buf[3].start, 6u);
    CHECK_EQ(buf[3].size, 2u);
    count = 8;
    CHECK_EQ(n.placements_v2(off, 9, buf, &count), NVML_SUCCESS);  // works with MIG off
    CHECK_EQ(count, 2u);
    CHECK_EQ(n.placements_v2(gpu, 47, buf, &count), NVML_ERROR_NOT_SUPPORTED);
    // Placements ignore occupancy.
    nvmlGpuInstancePlacement_t p{0, 8};
    nvmlGpuInstance_t gi = nullptr;
    CHECK_EQ(n.create_gi(gpu, 0, &p, &gi), NVML_SUCCESS);
    count = 8;
    CHECK_EQ(n.placements_v2(gpu, 19, buf, &count), NVML_SUCCESS);
    CHECK_EQ(count, 7u);
    // v1: MIG must be on; no NULL count query; *count output only.
    count = 8;
    CHECK_EQ(n.placements_v1(gpu, 9, buf, &count), NVML_SUCCESS);
    CHECK_EQ(count, 2u);
    CHECK_EQ(n.placements_v1(gpu, 9, nullptr, &count), NVML_ERROR_INVALID_ARGUMENT);
    count = 0;
    CHECK_EQ(n.placements_v1(gpu, 9, buf, &count), NVML_SUCCESS);
    CHECK_EQ(count, 2u);
    count = 8;
    CHECK_EQ(n.placements_v1(off, 9, buf, &count), NVML_ERROR_NOT_SUPPORTED);
    // CI placements, relative to the GI's compute slices.
    count = 0;
    CHECK_EQ(n.ci_placements(gi, 1, nullptr, &count), NVML_SUCCESS);  // 2c in 7g: {0,2,4}:2
    CHECK_EQ(count, 3u);
    nvmlComputeInstancePlacement_t cbuf[8] = {};
    count = 8;
    CHECK_EQ(n.ci_placements(gi, 2, cbuf, &count), NVML_SUCCESS);  // 3c: {0,4}:3
    CHECK_EQ(count, 2u);
    CHECK_EQ(cbuf[1].start, 4u);
    CHECK_EQ(cbuf[1].size, 3u);
    CHECK_EQ(n.ci_placements(gi, 7, cbuf, &count), NVML_ERROR_NOT_SUPPORTED);
    count = 0;  // output only
    CHECK_EQ(n.ci_placements(gi, 2, cbuf, &count), NVML_SUCCESS);
    CHECK_EQ(count, 2u);
    n.shutdown();
  }));
}

TEST_F(SimAbiTest, LegacyMigUuidLookupKnob) {
  for (const auto& [value, want] :
       std::vector<std::pair<std::string, nvmlReturn_t>>{
           {"accepted", NVML_SUCCESS},
           {"not-found", NVML_ERROR_NOT_FOUND},
           {"invalid-argument", NVML_ERROR_INVALID_ARGUMENT}}) {
    SCOPED_TRACE(value);
    std::filesystem::remove(State());
    ExpectPassed(InChild([&, value = value, want = want](Checks& c) {
      Env("a30-24gb:1", "MIGD_SIM_LEGACY_MIG_UUID", value);
      Nvml n(MIGD_SIM_LIBRARY);
      CHECK_EQ(n.init(), NVML_SUCCESS);
      nvmlDevice_t gpu = nullptr;
      n.by_index(0, &gpu);
      nvmlGpuInstancePlacement_t p{0, 1};
      nvmlGpuInstance_t gi = nullptr;
      CHECK_EQ(n.create_gi(gpu, 14, &p, &gi), NVML_SUCCESS);  // GI 3
      nvmlComputeInstance_t ci = nullptr;
      CHECK_EQ(n.create_ci(gi, 0, &ci), NVML_SUCCESS);
      nvmlDevice_t found = nullptr;
      CHECK_EQ(n.by_uuid(("MIG-" + Uuid(n, gpu) + "/3/0").c_str(), &found), want);
      // The R470+ form is found whatever the knob says.
      const std::string uuid = Uuid(n, MigDevice(n, gpu, 3, 0));
      CHECK_EQ(n.by_uuid(uuid.c_str(), &found), NVML_SUCCESS);
      n.shutdown();
    }));
  }
}

TEST_F(SimAbiTest, ParentInstanceIdKnob) {
  for (const auto& [value, want] :
       std::vector<std::pair<std::string, nvmlReturn_t>>{
           {"not-supported", NVML_ERROR_NOT_SUPPORTED},
           {"invalid-argument", NVML_ERROR_INVALID_ARGUMENT}}) {
    SCOPED_TRACE(value);
    ExpectPassed(InChild([&, value = value, want = want](Checks& c) {
      Env("a30-24gb:1", "MIGD_SIM_PARENT_INSTANCE_ID", value);
      Nvml n(MIGD_SIM_LIBRARY);
      CHECK_EQ(n.init(), NVML_SUCCESS);
      nvmlDevice_t gpu = nullptr;
      n.by_index(0, &gpu);
      unsigned int id = 77;
      CHECK_EQ(n.gi_id(gpu, &id), want);
      CHECK_EQ(n.ci_id(gpu, &id), want);
      CHECK_EQ(id, 77u);  // untouched
      n.shutdown();
    }));
  }
}

TEST_F(SimAbiTest, MigIndexLayoutKnob) {
  // Four 1g CIs on an A30 (4 MIG device indices): every layout shows each
  // exactly once, below the maximum; dense ones fill 0..3.
  for (const char* layout : {"shuffled", "dense", "sparse"}) {
    SCOPED_TRACE(layout);
    std::filesystem::remove(State());
    ExpectPassed(InChild([&](Checks& c) {
      Env("a30-24gb:1", "MIGD_SIM_MIG_INDEX", layout);
      Nvml n(MIGD_SIM_LIBRARY);
      CHECK_EQ(n.init(), NVML_SUCCESS);
      nvmlDevice_t gpu = nullptr;
      n.by_index(0, &gpu);
      std::set<std::pair<unsigned, unsigned>> want;
      for (unsigned int s = 0; s < 3; ++s) {
        nvmlGpuInstancePlacement_t p{s, 1};
        nvmlGpuInstance_t gi = nullptr;
        CHECK_EQ(n.create_gi(gpu, 14, &p, &gi), NVML_SUCCESS);
        nvmlComputeInstance_t ci = nullptr;
        CHECK_EQ(n.create_ci(gi, 0, &ci), NVML_SUCCESS);
        nvmlGpuInstanceInfo_t info{};
        n.gi_info(gi, &info);
        want.insert({info.id, 0});
      }
      const std::vector<Walked> walk = Walk(n, gpu);
      std::set<std::pair<unsigned, unsigned>> seen;
      std::set<unsigned int> indices;
      for (const Walked& w : walk) {
        CHECK_TRUE(seen.insert({w.gi, w.ci}).second);
        indices.insert(w.index);
        unsigned int index = 99;
        CHECK_EQ(n.index(w.handle, &index), NVML_SUCCESS);  // GetIndex agrees
        CHECK_EQ(index, w.index);
      }
      CHECK_TRUE(seen == want);
      if (std::string(layout) != "sparse") {
        CHECK_TRUE((indices == std::set<unsigned int>{0, 1, 2}));
      } else {
        CHECK_TRUE(*indices.rbegin() < 4u);
      }
      if (std::string(layout) == "dense") {
        // Ordered by (GI id, CI id).
        for (size_t i = 1; i < walk.size(); ++i) CHECK_TRUE(walk[i - 1].gi < walk[i].gi);
      }
      n.shutdown();
    }));
  }
}

TEST_F(SimAbiTest, NewCiVisibilityKnob) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("a30-24gb:1", "MIGD_SIM_NEW_CI_VISIBILITY", "after-walks:2");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    n.by_index(0, &gpu);
    nvmlGpuInstancePlacement_t p{0, 1};
    nvmlGpuInstance_t gi = nullptr;
    CHECK_EQ(n.create_gi(gpu, 14, &p, &gi), NVML_SUCCESS);
    nvmlComputeInstance_t ci = nullptr;
    CHECK_EQ(n.create_ci(gi, 0, &ci), NVML_SUCCESS);
    // Not in walks 1 and 2; GetIndex says NOT_FOUND meanwhile; in walk 3.
    const std::string uuid = Uuid(n, MigDevice(n, gpu, 3, 0));  // walk 1
    CHECK_EQ(uuid, "");
    nvmlDevice_t by_uuid = nullptr;
    nvmlDevice_t dummy = nullptr;
    CHECK_EQ(n.mig_by_index(gpu, 0, &dummy), NVML_ERROR_NOT_FOUND);  // walk 2
    unsigned int cis_count = 0;
    nvmlComputeInstance_t cis[1];
    CHECK_EQ(n.cis(gi, 0, cis, &cis_count), NVML_SUCCESS);  // the CI itself exists
    CHECK_EQ(cis_count, 1u);
    nvmlDevice_t mig = MigDevice(n, gpu, 3, 0);  // walk 3
    CHECK_TRUE(mig != nullptr);
    CHECK_EQ(n.by_uuid(Uuid(n, mig).c_str(), &by_uuid), NVML_SUCCESS);
    // A CI created by another process is not hidden from this one: the knob
    // models this process's own create.
    n.shutdown();
  }));
}

TEST_F(SimAbiTest, LegacyLibraryKnowsEightProfilesAndNeedsMigForProfileQueries) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1,a100-40gb:1:mig-off");
    Nvml n(MIGD_SIM_LEGACY_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    nvmlDevice_t off = nullptr;
    n.by_index(0, &gpu);
    n.by_index(1, &off);
    nvmlGpuInstanceProfileInfo_t v1{};
    CHECK_EQ(n.profile_v1(gpu, 7, &v1), NVML_SUCCESS);  // 1g.5gb+me
    CHECK_EQ(v1.id, 20u);
    CHECK_EQ(n.profile_v1(gpu, 8, &v1), NVML_ERROR_INVALID_ARGUMENT);  // past 0x7
    CHECK_EQ(n.profile_v1(gpu, 9, &v1), NVML_ERROR_INVALID_ARGUMENT);
    // 11.4 doc: NOT_SUPPORTED "If device doesn't have MIG mode enabled".
    CHECK_EQ(n.profile_v1(off, 0, &v1), NVML_ERROR_NOT_SUPPORTED);
    unsigned int count = 0;
    CHECK_EQ(n.placements_v2(off, 19, nullptr, &count), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(n.placements_v2(gpu, 19, nullptr, &count), NVML_SUCCESS);
    CHECK_EQ(count, 7u);
    // A100's 1g.10gb (id 15, index 9) is unknown to R470.
    CHECK_EQ(n.placements_v2(gpu, 15, nullptr, &count), NVML_ERROR_NOT_SUPPORTED);
    nvmlGpuInstancePlacement_t p{0, 2};
    nvmlGpuInstance_t gi = nullptr;
    CHECK_EQ(n.create_gi(gpu, 15, &p, &gi), NVML_ERROR_INVALID_ARGUMENT);
    unsigned int cap = 0;
    CHECK_EQ(n.capacity(gpu, 15, &cap), NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuInstance_t list[4];
    CHECK_EQ(n.gis(gpu, 15, list, &count), NVML_ERROR_INVALID_ARGUMENT);
    n.shutdown();
  }));
  // The full library answers both with MIG off (13.x doc) and knows index 9.
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1,a100-40gb:1:mig-off");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    nvmlDevice_t off = nullptr;
    n.by_index(0, &gpu);
    n.by_index(1, &off);
    nvmlGpuInstanceProfileInfo_t v1{};
    CHECK_EQ(n.profile_v1(off, 0, &v1), NVML_SUCCESS);
    CHECK_EQ(n.profile_v1(gpu, 9, &v1), NVML_SUCCESS);
    CHECK_EQ(v1.id, 15u);
    unsigned int count = 0;
    CHECK_EQ(n.placements_v2(off, 19, nullptr, &count), NVML_SUCCESS);
    n.shutdown();
  }));
}

TEST_F(SimAbiTest, LegacyLibraryLacksPostR470Symbols) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1");
    Nvml n(MIGD_SIM_LEGACY_LIBRARY);
    CHECK_TRUE(n.lib != nullptr);
    for (const char* missing :
         {"nvmlDeviceGetGpuInstanceProfileInfoV", "nvmlDeviceGetGpuInstanceProfileInfoByIdV",
          "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
          "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3",
          "nvmlGpuInstanceGetComputeInstancePossiblePlacements",
          "nvmlGpuInstanceCreateComputeInstanceWithPlacement", "nvmlDeviceGetMemoryInfo_v2"}) {
      c.Expect(!n.Has(missing), std::string("legacy exports ") + missing, __LINE__);
    }
    for (const char* present :
         {"nvmlInit_v2", "nvmlDeviceGetGpuInstanceProfileInfo",
          "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
          "nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlComputeInstanceGetInfo_v2",
          "nvmlDeviceGetComputeRunningProcesses_v2", "migdSimAttachProcess"}) {
      c.Expect(n.Has(present), std::string("legacy lacks ") + present, __LINE__);
    }
    CHECK_EQ(n.init(), NVML_SUCCESS);
    char buf[80];
    CHECK_EQ(n.driver_version(buf, sizeof(buf)), NVML_SUCCESS);
    CHECK_EQ(std::string(buf), "470.256.02");
    nvmlDevice_t gpu = nullptr;
    n.by_index(0, &gpu);
    nvmlGpuInstanceProfileInfo_t v1{};
    CHECK_EQ(n.profile_v1(gpu, 2, &v1), NVML_SUCCESS);
    CHECK_EQ(v1.id, 9u);
    n.shutdown();
  }));
}

}  // namespace
}  // namespace migd::sim
