// sim_abi_instances_test: the simulated NVML library through dlopen()/dlsym()
// only (sim/sim_abi_testing.h): GI/CI create and destroy semantics, processes,
// stale handles, UUID lookups, MIG mode, faults, crash hooks, latency, the
// /proc tree, the GI id policy.
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

TEST_F(SimAbiTest, GiCreateCodesAutoPlacementAndListing) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("h100-80gb:1,a100-40gb:1:mig-off");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    nvmlDevice_t off = nullptr;
    n.by_index(0, &gpu);
    n.by_index(1, &off);
    nvmlGpuInstance_t gi = nullptr;
    nvmlGpuInstancePlacement_t p{1, 4};
    CHECK_EQ(n.create_gi(gpu, 9, &p, &gi), NVML_ERROR_INVALID_ARGUMENT);  // unlisted
    p = {0, 1};
    CHECK_EQ(n.create_gi(gpu, 4242, &p, &gi), NVML_ERROR_INVALID_ARGUMENT);  // unknown id
    CHECK_EQ(n.create_gi(off, 19, &p, &gi), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(n.create_gi(gpu, 19, nullptr, &gi), NVML_ERROR_INVALID_ARGUMENT);
    unsigned int cap = 0;
    CHECK_EQ(n.capacity(off, 19, &cap), NVML_ERROR_NOT_SUPPORTED);

    // H100 7x1g auto-placed: starts 6,4,5,0,1,2,3, ids 13,11,12,7,8,9,10.
    const unsigned int want_start[] = {6, 4, 5, 0, 1, 2, 3};
    const unsigned int want_id[] = {13, 11, 12, 7, 8, 9, 10};
    nvmlGpuInstance_t ones[7] = {};
    for (int i = 0; i < 7; ++i) {
      CHECK_EQ(n.create_gi_auto(gpu, 19, &ones[i]), NVML_SUCCESS);
      nvmlGpuInstanceInfo_t info{};
      CHECK_EQ(n.gi_info(ones[i], &info), NVML_SUCCESS);
      CHECK_EQ(info.placement.start, want_start[i]);
      CHECK_EQ(info.id, want_id[i]);
      CHECK_EQ(info.profileId, 19u);
      CHECK_EQ(info.device, gpu);
    }
    CHECK_EQ(n.create_gi_auto(gpu, 19, &gi), NVML_ERROR_INSUFFICIENT_RESOURCES);
    CHECK_EQ(n.capacity(gpu, 19, &cap), NVML_SUCCESS);
    CHECK_EQ(cap, 0u);
    nvmlGpuInstance_t list[7] = {};
    unsigned int count = 0;
    CHECK_EQ(n.gis(gpu, 19, list, &count), NVML_SUCCESS);
    CHECK_EQ(count, 7u);
    CHECK_EQ(n.gis(gpu, 9, list, &count), NVML_SUCCESS);
    CHECK_EQ(count, 0u);
    CHECK_EQ(n.gis(gpu, 4242, list, &count), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.gis(off, 19, list, &count), NVML_ERROR_NOT_SUPPORTED);
    nvmlGpuInstance_t found = nullptr;
    CHECK_EQ(n.gi_by_id(gpu, 13, &found), NVML_SUCCESS);
    CHECK_EQ(found, ones[0]);
    CHECK_EQ(n.gi_by_id(gpu, 3, &found), NVML_ERROR_NOT_FOUND);
    CHECK_EQ(n.gi_by_id(off, 3, &found), NVML_ERROR_NOT_SUPPORTED);
    for (nvmlGpuInstance_t g : ones) CHECK_EQ(n.destroy_gi(g), NVML_SUCCESS);

    n.shutdown();
  }));
  const SimState s = ReadState();
  EXPECT_TRUE(s.gpus[0].gpu_instances.empty());
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstance", "SUCCESS"), 7u);
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstance", "ERROR_INSUFFICIENT_RESOURCES"), 1u);
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstanceWithPlacement", "ERROR_INVALID_ARGUMENT"), 3u);
  EXPECT_EQ(Count(s, "nvmlGpuInstanceDestroy", "SUCCESS"), 7u);
}

// The MIG device of the H100's 3g GI 1 / CI 0: reached by the walk, not
// through the CI info's "Parent device".
void CheckTheMigDevice(Checks& c, const Nvml& n, nvmlDevice_t gpu, nvmlDevice_t off,
                       const nvmlComputeInstanceInfo_t& info) {
  // The CI info's device is the parent GPU ("Parent device"); the MIG
  // device is only reachable through the walk (or its UUID).
  CHECK_EQ(info.device, gpu);
  CHECK_EQ(Uuid(n, info.device), Uuid(n, gpu));
  nvmlDevice_t mig = MigDevice(n, gpu, 1, 0);
  CHECK_TRUE(mig != nullptr);
  unsigned int v = 0;
  CHECK_EQ(n.is_mig(mig, &v), NVML_SUCCESS);
  CHECK_EQ(v, 1u);
  nvmlDevice_t parent = nullptr;
  CHECK_EQ(n.parent(mig, &parent), NVML_SUCCESS);
  CHECK_EQ(parent, gpu);
  CHECK_EQ(n.gi_id(mig, &v), NVML_SUCCESS);
  CHECK_EQ(v, 1u);
  CHECK_EQ(n.ci_id(mig, &v), NVML_SUCCESS);
  CHECK_EQ(v, 0u);
  char name[96];
  CHECK_EQ(n.name(mig, name, sizeof(name)), NVML_SUCCESS);
  CHECK_EQ(std::string(name), "NVIDIA H100 80GB HBM3 MIG 3g.40gb");
  nvmlMemory_t mem{};
  CHECK_EQ(n.memory(mig, &mem), NVML_SUCCESS);
  CHECK_EQ(mem.total, 40448ull << 20);
  CHECK_EQ(n.minor(mig, &v), NVML_ERROR_NOT_SUPPORTED);
  const std::string uuid = Uuid(n, mig);
  CHECK_TRUE(IsValidMigUuid(uuid));
  CHECK_EQ(uuid[18], '5');
  char small_buf[8];
  CHECK_EQ(n.uuid(mig, small_buf, sizeof(small_buf)), NVML_ERROR_INSUFFICIENT_SIZE);

  // The MIG device walk finds it at the index GetIndex reports.
  CHECK_EQ(n.index(mig, &v), NVML_SUCCESS);
  nvmlDevice_t walked = nullptr;
  CHECK_EQ(n.mig_by_index(gpu, v, &walked), NVML_SUCCESS);
  CHECK_EQ(walked, mig);
  CHECK_EQ(n.mig_by_index(gpu, 1, &walked), NVML_ERROR_NOT_FOUND);
  CHECK_EQ(n.mig_by_index(gpu, 7, &walked), NVML_ERROR_INVALID_ARGUMENT);
  CHECK_EQ(n.max_mig(off, &v), NVML_SUCCESS);
  CHECK_EQ(v, 0u);

}

TEST_F(SimAbiTest, OverlapCapsEngineBudgetCisAndTheMigDevice) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("h100-80gb:1,a100-40gb:1:mig-off");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    nvmlDevice_t off = nullptr;
    n.by_index(0, &gpu);
    n.by_index(1, &off);
    nvmlGpuInstance_t gi = nullptr;
    nvmlGpuInstancePlacement_t p{0, 4};
    unsigned int cap = 0;
    unsigned int count = 0;
    // Overlap, instance cap, engine budget.
    p = {0, 4};
    CHECK_EQ(n.create_gi(gpu, 9, &p, &gi), NVML_SUCCESS);
    CHECK_EQ(n.create_gi(gpu, 5, &p, &gi), NVML_ERROR_INSUFFICIENT_RESOURCES);
    p = {4, 1};
    nvmlGpuInstance_t me = nullptr;
    CHECK_EQ(n.create_gi(gpu, 20, &p, &me), NVML_SUCCESS);
    p = {5, 1};
    CHECK_EQ(n.create_gi(gpu, 20, &p, &me), NVML_ERROR_INSUFFICIENT_RESOURCES);
    CHECK_EQ(n.capacity(gpu, 19, &cap), NVML_SUCCESS);
    CHECK_EQ(cap, 2u);  // 1g at 5 and 6

    // CIs: default full-size CI, then a MIG device.
    nvmlComputeInstance_t ci = nullptr;
    CHECK_EQ(n.ci_capacity(gi, 0, &cap), NVML_SUCCESS);
    CHECK_EQ(cap, 3u);
    nvmlComputeInstancePlacement_t cp{1, 1};
    nvmlComputeInstance_t small = nullptr;
    CHECK_EQ(n.create_ci_at(gi, 0, &cp, &small), NVML_SUCCESS);
    CHECK_EQ(n.create_ci(gi, 2, &ci), NVML_ERROR_INSUFFICIENT_RESOURCES);  // overlaps 1c@1
    cp = {0, 2};
    CHECK_EQ(n.create_ci_at(gi, 0, &cp, &ci), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.create_ci(gi, 4, &ci), NVML_ERROR_NOT_SUPPORTED);
    CHECK_EQ(n.destroy_ci(small), NVML_SUCCESS);
    CHECK_EQ(n.create_ci(gi, 2, &ci), NVML_SUCCESS);
    nvmlComputeInstanceInfo_t info{};
    CHECK_EQ(n.ci_info(ci, &info), NVML_SUCCESS);
    CHECK_EQ(info.id, 0u);
    CHECK_EQ(info.profileId, 2u);
    CHECK_EQ(info.placement.start, 0u);
    CHECK_EQ(info.placement.size, 3u);
    CHECK_EQ(info.gpuInstance, gi);
    // The unsuffixed call writes only the 24-byte 11.1 layout.
    unsigned char raw[sizeof(nvmlComputeInstanceInfo_t)];
    std::memset(raw, 0xAB, sizeof(raw));
    CHECK_EQ(n.ci_info_v1(ci, reinterpret_cast<nvmlComputeInstanceInfo_t*>(raw)), NVML_SUCCESS);
    CHECK_EQ(raw[24], 0xAB);
    CHECK_EQ(raw[31], 0xAB);
    CHECK_TRUE(std::memcmp(raw, &info, 24) == 0);

    nvmlComputeInstance_t cis[4] = {};
    CHECK_EQ(n.cis(gi, 2, cis, &count), NVML_SUCCESS);
    CHECK_EQ(count, 1u);
    CHECK_EQ(cis[0], ci);
    // nvml.h: NOT_SUPPORTED "If profileId isn't supported" (7: not in a 3g GI).
    CHECK_EQ(n.cis(gi, 7, cis, &count), NVML_ERROR_NOT_SUPPORTED);
    nvmlComputeInstance_t by_id = nullptr;
    CHECK_EQ(n.ci_by_id(gi, 0, &by_id), NVML_SUCCESS);
    CHECK_EQ(by_id, ci);
    CHECK_EQ(n.ci_by_id(gi, 5, &by_id), NVML_ERROR_NOT_FOUND);

    CheckTheMigDevice(c, n, gpu, off, info);

    // Destroy ordering.
    CHECK_EQ(n.destroy_gi(gi), NVML_ERROR_IN_USE);
    CHECK_EQ(n.destroy_ci(ci), NVML_SUCCESS);
    CHECK_EQ(n.destroy_gi(gi), NVML_SUCCESS);
    CHECK_EQ(n.destroy_gi(me), NVML_SUCCESS);
    n.shutdown();
  }));
  const SimState s = ReadState();
  EXPECT_TRUE(s.gpus[0].gpu_instances.empty());
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstanceWithPlacement", "ERROR_INSUFFICIENT_RESOURCES"),
            2u);
  EXPECT_EQ(Count(s, "nvmlGpuInstanceDestroy", "ERROR_IN_USE"), 1u);
  EXPECT_EQ(Count(s, "nvmlGpuInstanceDestroy", "SUCCESS"), 2u);
}

TEST_F(SimAbiTest, ProcessesMakeDestroyInUse) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    n.by_index(0, &gpu);
    nvmlGpuInstancePlacement_t p{2, 2};
    nvmlGpuInstance_t gi = nullptr;
    CHECK_EQ(n.create_gi(gpu, 14, &p, &gi), NVML_SUCCESS);
    nvmlComputeInstance_t ci = nullptr;
    CHECK_EQ(n.create_ci(gi, 1, &ci), NVML_SUCCESS);
    nvmlGpuInstanceInfo_t gi_info{};
    n.gi_info(gi, &gi_info);
    nvmlComputeInstanceInfo_t ci_info{};
    n.ci_info(ci, &ci_info);
    const nvmlDevice_t mig = MigDevice(n, gpu, gi_info.id, ci_info.id);
    const std::string uuid = Uuid(n, mig);

    unsigned int count = 0;
    CHECK_EQ(n.procs_v3(mig, &count, nullptr), NVML_SUCCESS);  // nothing runs
    CHECK_EQ(count, 0u);
    CHECK_EQ(n.attach(uuid.c_str(), 4242, 3ull << 30), NVML_SUCCESS);
    CHECK_EQ(n.attach(uuid.c_str(), 4243, 1ull << 30), NVML_SUCCESS);
    CHECK_EQ(n.attach("MIG-00000000-0000-5000-8000-000000000000", 1, 1), NVML_ERROR_NOT_FOUND);
    count = 0;
    CHECK_EQ(n.procs_v3(mig, &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
    CHECK_EQ(count, 2u);
    nvmlProcessInfo_t procs[4] = {};
    count = 4;
    CHECK_EQ(n.procs_v3(mig, &count, procs), NVML_SUCCESS);
    CHECK_EQ(count, 2u);
    CHECK_EQ(procs[0].pid, 4242u);
    CHECK_EQ(procs[0].usedGpuMemory, 3ull << 30);
    CHECK_EQ(procs[0].gpuInstanceId, 4u);
    CHECK_EQ(procs[0].computeInstanceId, 0u);
    count = 4;
    CHECK_EQ(n.procs_v2(gpu, &count, procs), NVML_SUCCESS);  // parent: the aggregate
    CHECK_EQ(count, 2u);
    nvmlProcessInfo_v1_t v1[4] = {};
    count = 4;
    CHECK_EQ(n.procs_v1(mig, &count, v1), NVML_SUCCESS);
    CHECK_EQ(count, 2u);
    CHECK_EQ(v1[1].pid, 4243u);
    CHECK_EQ(v1[1].usedGpuMemory, 1ull << 30);
    count = 4;
    CHECK_EQ(n.graphics_v3(mig, &count, procs), NVML_SUCCESS);
    CHECK_EQ(count, 0u);
    nvmlMemory_t mem{};
    CHECK_EQ(n.memory(mig, &mem), NVML_SUCCESS);
    CHECK_EQ(mem.used, 4ull << 30);
    CHECK_EQ(mem.total, 9856ull << 20);

    CHECK_EQ(n.destroy_ci(ci), NVML_ERROR_IN_USE);
    CHECK_EQ(n.destroy_gi(gi), NVML_ERROR_IN_USE);
    CHECK_EQ(n.detach(uuid.c_str(), 4242), NVML_SUCCESS);
    CHECK_EQ(n.detach(uuid.c_str(), 4242), NVML_ERROR_NOT_FOUND);
    CHECK_EQ(n.destroy_ci(ci), NVML_ERROR_IN_USE);
    CHECK_EQ(n.detach(uuid.c_str(), 4243), NVML_SUCCESS);
    CHECK_EQ(n.destroy_ci(ci), NVML_SUCCESS);
    CHECK_EQ(n.destroy_gi(gi), NVML_SUCCESS);
    n.shutdown();
  }));
}

TEST_F(SimAbiTest, ProcessMarkingWorksFromAnotherProcessWithoutInit) {
  std::string uuid;
  {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    ExpectPassed(InChild([&](Checks& c) {
      Env("a100-40gb:1");
      Nvml n(MIGD_SIM_LIBRARY);
      CHECK_EQ(n.init(), NVML_SUCCESS);
      nvmlDevice_t gpu = nullptr;
      n.by_index(0, &gpu);
      nvmlGpuInstancePlacement_t p{0, 8};
      nvmlGpuInstance_t gi = nullptr;
      CHECK_EQ(n.create_gi(gpu, 0, &p, &gi), NVML_SUCCESS);
      nvmlComputeInstance_t ci = nullptr;
      CHECK_EQ(n.create_ci(gi, 4, &ci), NVML_SUCCESS);
      const std::string u = Uuid(n, MigDevice(n, gpu, 0, 0));
      CHECK_TRUE(::write(fds[1], u.data(), u.size()) == static_cast<ssize_t>(u.size()));
      n.shutdown();
    }));
    ::close(fds[1]);
    char buf[128] = {};
    ASSERT_GT(::read(fds[0], buf, sizeof(buf) - 1), 0);
    ::close(fds[0]);
    uuid = buf;
  }
  // A second process (as migctl would) marks a process without nvmlInit.
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.attach(uuid.c_str(), 99, 1024), NVML_SUCCESS);
  }));
  EXPECT_EQ(ReadState().gpus[0].gpu_instances[0].compute_instances[0].processes.size(), 1u);
  // A third sees it and cannot destroy the CI.
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t mig = nullptr;
    CHECK_EQ(n.by_uuid(uuid.c_str(), &mig), NVML_SUCCESS);
    unsigned int count = 4;
    nvmlProcessInfo_t procs[4];
    CHECK_EQ(n.procs_v3(mig, &count, procs), NVML_SUCCESS);
    CHECK_EQ(count, 1u);
    CHECK_EQ(procs[0].pid, 99u);
    nvmlDevice_t gpu = nullptr;
    n.by_index(0, &gpu);
    nvmlGpuInstance_t gi = nullptr;
    CHECK_EQ(n.gi_by_id(gpu, 0, &gi), NVML_SUCCESS);
    nvmlComputeInstance_t ci = nullptr;
    CHECK_EQ(n.ci_by_id(gi, 0, &ci), NVML_SUCCESS);
    CHECK_EQ(n.destroy_ci(ci), NVML_ERROR_IN_USE);
    n.shutdown();
  }));
}

TEST_F(SimAbiTest, StaleHandlesAreInvalidArgument) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("a30-24gb:1");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    n.by_index(0, &gpu);
    nvmlGpuInstancePlacement_t p{0, 1};
    nvmlGpuInstance_t gi = nullptr;
    CHECK_EQ(n.create_gi(gpu, 14, &p, &gi), NVML_SUCCESS);
    nvmlComputeInstance_t ci = nullptr;
    CHECK_EQ(n.create_ci(gi, 0, &ci), NVML_SUCCESS);
    nvmlComputeInstanceInfo_t info{};
    n.ci_info(ci, &info);
    nvmlDevice_t mig = MigDevice(n, gpu, 3, 0);
    const std::string first_uuid = Uuid(n, mig);
    CHECK_TRUE(IsValidMigUuid(first_uuid));
    CHECK_EQ(n.destroy_ci(ci), NVML_SUCCESS);
    CHECK_EQ(n.ci_info(ci, &info), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.destroy_ci(ci), NVML_ERROR_INVALID_ARGUMENT);
    char buf[96];
    CHECK_EQ(n.uuid(mig, buf, sizeof(buf)), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.destroy_gi(gi), NVML_SUCCESS);
    nvmlGpuInstanceInfo_t gi_info{};
    CHECK_EQ(n.gi_info(gi, &gi_info), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.destroy_gi(gi), NVML_ERROR_INVALID_ARGUMENT);

    // Re-created at the same place with the same ids: old handles stay stale,
    // the MIG UUID is new.
    nvmlGpuInstance_t gi2 = nullptr;
    CHECK_EQ(n.create_gi(gpu, 14, &p, &gi2), NVML_SUCCESS);
    CHECK_EQ(n.gi_info(gi2, &gi_info), NVML_SUCCESS);
    CHECK_EQ(gi_info.id, 3u);
    CHECK_TRUE(gi2 != gi);
    CHECK_EQ(n.gi_info(gi, &gi_info), NVML_ERROR_INVALID_ARGUMENT);
    nvmlComputeInstance_t ci2 = nullptr;
    CHECK_EQ(n.create_ci(gi2, 0, &ci2), NVML_SUCCESS);
    CHECK_EQ(n.ci_info(ci2, &info), NVML_SUCCESS);
    CHECK_EQ(info.id, 0u);
    const std::string second_uuid = Uuid(n, MigDevice(n, gpu, 3, 0));
    CHECK_TRUE(IsValidMigUuid(second_uuid));
    CHECK_TRUE(second_uuid != first_uuid);
    CHECK_EQ(n.uuid(mig, buf, sizeof(buf)), NVML_ERROR_INVALID_ARGUMENT);

    // A simulated reboot makes every GI/CI handle stale.
    CHECK_EQ(n.reboot(), NVML_SUCCESS);
    CHECK_EQ(n.gi_info(gi2, &gi_info), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.ci_info(ci2, &info), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.gi_by_id(gpu, 3, &gi), NVML_ERROR_NOT_FOUND);
    // Garbage pointers are rejected, never dereferenced.
    int junk = 0;
    CHECK_EQ(n.gi_info(reinterpret_cast<nvmlGpuInstance_t>(&junk), &gi_info),
             NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.uuid(nullptr, buf, sizeof(buf)), NVML_ERROR_INVALID_ARGUMENT);
    n.shutdown();
  }));
  EXPECT_EQ(ReadState().boot_count, 1u);
}

TEST_F(SimAbiTest, GetHandleByUuidAcceptsMigUuidsInBothFormats) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("h100-80gb:1");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    n.by_index(0, &gpu);
    nvmlGpuInstancePlacement_t p{4, 4};
    nvmlGpuInstance_t gi = nullptr;
    CHECK_EQ(n.create_gi(gpu, 9, &p, &gi), NVML_SUCCESS);  // GI 2
    nvmlComputeInstance_t ci = nullptr;
    CHECK_EQ(n.create_ci(gi, 0, &ci), NVML_SUCCESS);  // CI 0
    CHECK_EQ(n.create_ci(gi, 0, &ci), NVML_SUCCESS);  // CI 1
    nvmlDevice_t mig = MigDevice(n, gpu, 2, 1);
    const std::string uuid = Uuid(n, mig);
    nvmlDevice_t found = nullptr;
    CHECK_EQ(n.by_uuid(uuid.c_str(), &found), NVML_SUCCESS);
    CHECK_EQ(found, mig);
    std::string upper = uuid;
    for (size_t i = 4; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
    CHECK_EQ(n.by_uuid(upper.c_str(), &found), NVML_SUCCESS);
    CHECK_EQ(found, mig);
    const std::string legacy = "MIG-" + Uuid(n, gpu) + "/2/1";
    CHECK_EQ(n.by_uuid(legacy.c_str(), &found), NVML_SUCCESS);
    CHECK_EQ(found, mig);
    CHECK_EQ(n.by_uuid(("MIG-" + Uuid(n, gpu) + "/2/5").c_str(), &found), NVML_ERROR_NOT_FOUND);
    CHECK_EQ(n.by_uuid("MIG-00000000-0000-5000-8000-000000000000", &found), NVML_ERROR_NOT_FOUND);
    CHECK_EQ(n.by_uuid(nullptr, &found), NVML_ERROR_INVALID_ARGUMENT);
    n.shutdown();
  }));
}

// The behaviours nvml.h leaves open (docs/simulator.md §1.4), one knob each.
TEST_F(SimAbiTest, MigModeChangesAtReboot) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1:mig-off,a100-40gb:1");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t off = nullptr;
    nvmlDevice_t on = nullptr;
    n.by_index(0, &off);
    n.by_index(1, &on);
    nvmlReturn_t activation = NVML_SUCCESS;
    CHECK_EQ(n.set_mig_mode(off, 1, &activation), NVML_SUCCESS);
    CHECK_EQ(activation, NVML_ERROR_RESET_REQUIRED);
    unsigned int cur = 9;
    unsigned int pend = 9;
    n.get_mig_mode(off, &cur, &pend);
    CHECK_EQ(cur, 0u);
    CHECK_EQ(pend, 1u);
    nvmlGpuInstancePlacement_t p{0, 8};
    nvmlGpuInstance_t gi = nullptr;
    CHECK_EQ(n.create_gi(on, 0, &p, &gi), NVML_SUCCESS);
    CHECK_EQ(n.set_mig_mode(on, 0, &activation), NVML_SUCCESS);
    CHECK_EQ(activation, NVML_ERROR_IN_USE);
    CHECK_EQ(n.set_mig_mode(on, 7, &activation), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(n.reboot(), NVML_SUCCESS);
    n.get_mig_mode(off, &cur, &pend);
    CHECK_EQ(cur, 1u);
    n.get_mig_mode(on, &cur, &pend);
    CHECK_EQ(cur, 0u);
    n.shutdown();
  }));
  const SimState s = ReadState();
  EXPECT_TRUE(s.gpus[0].mig_current);
  EXPECT_FALSE(s.gpus[1].mig_current);
  EXPECT_TRUE(s.gpus[1].gpu_instances.empty());
}

TEST_F(SimAbiTest, FaultInjectionNthCall) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1", "MIGD_SIM_FAULTS",
        "nvmlDeviceCreateGpuInstanceWithPlacement=IN_USE@2,nvmlGpuInstanceDestroy=GPU_IS_LOST@2+,"
        "nvmlDeviceGetCount_v2=17");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    unsigned int count = 0;
    CHECK_EQ(n.count(&count), NVML_ERROR_OPERATING_SYSTEM);
    CHECK_EQ(n.count(&count), NVML_ERROR_OPERATING_SYSTEM);
    nvmlDevice_t gpu = nullptr;
    n.by_index(0, &gpu);
    nvmlGpuInstance_t g[3] = {};
    nvmlGpuInstancePlacement_t p{0, 1};
    CHECK_EQ(n.create_gi(gpu, 19, &p, &g[0]), NVML_SUCCESS);
    p = {1, 1};
    CHECK_EQ(n.create_gi(gpu, 19, &p, &g[1]), NVML_ERROR_IN_USE);  // injected: no effect
    CHECK_EQ(n.create_gi(gpu, 19, &p, &g[1]), NVML_SUCCESS);
    p = {2, 1};
    CHECK_EQ(n.create_gi(gpu, 19, &p, &g[2]), NVML_SUCCESS);
    CHECK_EQ(n.destroy_gi(g[0]), NVML_SUCCESS);
    CHECK_EQ(n.destroy_gi(g[1]), NVML_ERROR_GPU_IS_LOST);
    CHECK_EQ(n.destroy_gi(g[2]), NVML_ERROR_GPU_IS_LOST);
    n.shutdown();
  }));
  const SimState s = ReadState();
  EXPECT_EQ(s.gpus[0].gpu_instances.size(), 2u);  // 1:1 and 2:1 survived the faulted destroys
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstanceWithPlacement", "ERROR_IN_USE"), 1u);
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS"), 3u);
  EXPECT_EQ(Count(s, "nvmlGpuInstanceDestroy", "ERROR_GPU_IS_LOST"), 2u);
  EXPECT_EQ(Count(s, "nvmlDeviceGetCount_v2", "ERROR_OPERATING_SYSTEM"), 2u);
}

TEST_F(SimAbiTest, CrashHooksKillTheProcessAtTheRightPoint) {
  ChildResult before = InChild([&](Checks& c) {
    Env("a100-40gb:1", "MIGD_SIM_FAULTS", "nvmlDeviceCreateGpuInstanceWithPlacement=CRASH@2");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    n.by_index(0, &gpu);
    nvmlGpuInstance_t gi = nullptr;
    nvmlGpuInstancePlacement_t p{0, 4};
    CHECK_EQ(n.create_gi(gpu, 9, &p, &gi), NVML_SUCCESS);
    p = {4, 4};
    n.create_gi(gpu, 9, &p, &gi);  // killed here, before any effect
    c.Expect(false, "survived CRASH", __LINE__);
  });
  EXPECT_EQ(before.term_signal, SIGKILL);
  SimState s = ReadState();
  EXPECT_EQ(s.gpus[0].gpu_instances.size(), 1u);
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstanceWithPlacement", "CRASH"), 1u);

  ChildResult after = InChild([&](Checks& c) {
    Env("a100-40gb:1", "MIGD_SIM_FAULTS", "nvmlDeviceCreateGpuInstanceWithPlacement=CRASH_AFTER");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    n.by_index(0, &gpu);
    nvmlGpuInstance_t gi = nullptr;
    nvmlGpuInstancePlacement_t p{4, 4};
    n.create_gi(gpu, 9, &p, &gi);  // killed right after the GI is durable
    c.Expect(false, "survived CRASH_AFTER", __LINE__);
  });
  EXPECT_EQ(after.term_signal, SIGKILL);
  s = ReadState();
  EXPECT_EQ(s.gpus[0].gpu_instances.size(), 2u);
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS"), 2u);
}

TEST_F(SimAbiTest, LatencyKnobIsAccepted) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1", "MIGD_SIM_LATENCY_MS", "nvmlDeviceGetCount_v2=1,*=0");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    unsigned int count = 0;
    CHECK_EQ(n.count(&count), NVML_SUCCESS);
    CHECK_EQ(count, 1u);
    n.shutdown();
  }));
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:1", "MIGD_SIM_LATENCY_MS", "nvmlDeviceGetCount_v2=soon");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_TRUE(n.init() != NVML_SUCCESS);
  }));
}

TEST_F(SimAbiTest, ProcRootFilesFollowInstances) {
  const std::string proc = dir_.Join("proc");
  ExpectPassed(InChild([&](Checks& c) {
    Env("a100-40gb:2", "MIGD_SIM_PROC_ROOT", proc);
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    CHECK_TRUE(std::filesystem::exists(proc + "/driver/nvidia-caps/mig-minors"));
    CHECK_TRUE(std::filesystem::exists(proc + "/devices"));
    nvmlDevice_t gpu = nullptr;
    n.by_index(1, &gpu);
    nvmlGpuInstancePlacement_t p{4, 4};
    nvmlGpuInstance_t gi = nullptr;
    CHECK_EQ(n.create_gi(gpu, 9, &p, &gi), NVML_SUCCESS);  // GI 2
    nvmlComputeInstance_t ci = nullptr;
    CHECK_EQ(n.create_ci(gi, 2, &ci), NVML_SUCCESS);
    const std::string gi_dir = proc + "/driver/nvidia/capabilities/gpu1/mig/gi2";
    StatusOr<std::string> access = ReadFileToString(gi_dir + "/access");
    CHECK_TRUE(access.ok());
    CHECK_EQ(access.value_or(""),
             std::string("DeviceFileMinor: 156\nDeviceFileMode: 292\nDeviceFileModify: 1\n"));
    access = ReadFileToString(gi_dir + "/ci0/access");
    CHECK_EQ(access.value_or(""),
             std::string("DeviceFileMinor: 157\nDeviceFileMode: 292\nDeviceFileModify: 1\n"));
    CHECK_EQ(n.destroy_ci(ci), NVML_SUCCESS);
    CHECK_TRUE(!std::filesystem::exists(gi_dir + "/ci0"));
    CHECK_EQ(n.destroy_gi(gi), NVML_SUCCESS);
    CHECK_TRUE(!std::filesystem::exists(gi_dir));
    CHECK_EQ(n.create_gi(gpu, 9, &p, &gi), NVML_SUCCESS);
    CHECK_TRUE(std::filesystem::exists(gi_dir + "/access"));
    CHECK_EQ(n.reboot(), NVML_SUCCESS);
    CHECK_TRUE(!std::filesystem::exists(gi_dir));
    n.shutdown();
  }));
}

TEST_F(SimAbiTest, ShufflePolicyKnob) {
  ExpectPassed(InChild([&](Checks& c) {
    Env("h100-80gb:1", "MIGD_SIM_GI_IDS", "shuffle:1234");
    Nvml n(MIGD_SIM_LIBRARY);
    CHECK_EQ(n.init(), NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr;
    n.by_index(0, &gpu);
    for (unsigned int s = 0; s < 7; ++s) {
      nvmlGpuInstancePlacement_t p{s, 1};
      nvmlGpuInstance_t gi = nullptr;
      CHECK_EQ(n.create_gi(gpu, 19, &p, &gi), NVML_SUCCESS);
      nvmlGpuInstanceInfo_t info{};
      n.gi_info(gi, &info);
      CHECK_TRUE(info.id >= 7 && info.id <= 14);
    }
    n.shutdown();
  }));
  EXPECT_EQ(ReadState().gi_id_policy, (GiIdPolicy{GiIdMode::kShuffle, 1234}));
}

}  // namespace
}  // namespace migd::sim
