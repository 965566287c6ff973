// sim_abi_test: drives the built libnvidia-ml-sim.so (and the legacy
// variant) only through dlopen()/dlsym() of its C symbols, as NvmlDriver
// does. Every scenario runs in a fork()ed child with its own environment, so
// that each gets a fresh library (env vars are read at nvmlInit) and crash
// hooks can kill it; the parent checks the child's report and the state file.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "driver/nvml/nvml_abi.h"
#include "mig/catalog.h"
#include "sim/state.h"
#include "testing/temp_dir.h"

namespace migd::sim {
namespace {

using ::testing::HasSubstr;

// Failures collected in a child and reported to the parent.
class Checks {
 public:
  void Expect(bool ok, const std::string& what, int line) {
    if (!ok) report_ += "line " + std::to_string(line) + ": " + what + "\n";
  }
  const std::string& report() const { return report_; }

 private:
  std::string report_;
};

// Each argument is evaluated exactly once (they are mostly NVML calls).
#define CHECK_TRUE(cond) c.Expect(static_cast<bool>(cond), #cond, __LINE__)
#define CHECK_EQ(a, b)                                                                             \
  do {                                                                                             \
    const auto& check_a_ = (a);                                                                    \
    const auto& check_b_ = (b);                                                                    \
    const bool check_ok_ = check_a_ == check_b_;                                                   \
    c.Expect(check_ok_,                                                                            \
             check_ok_ ? std::string()                                                             \
                       : std::string(#a " == " #b " (got ") + ::testing::PrintToString(check_a_) + \
                             " vs " + ::testing::PrintToString(check_b_) + ")",                    \
             __LINE__);                                                                            \
  } while (0)

struct ChildResult {
  std::string report;   // the child's failures; "" if it passed
  int term_signal = 0;  // non-zero if the child was killed
};

// Runs `fn` in a child process; the child writes its report and exits 0.
ChildResult InChild(const std::function<void(Checks&)>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) return {"pipe failed", 0};
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    Checks c;
    fn(c);
    const std::string& r = c.report();
    size_t off = 0;
    while (off < r.size()) {
      ssize_t n = ::write(fds[1], r.data() + off, r.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildResult result;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) {
    result.report.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    result.report += "child exited with " + std::to_string(WEXITSTATUS(status));
  }
  return result;
}

void ExpectPassed(const ChildResult& r) {
  EXPECT_EQ(r.term_signal, 0) << "child killed by signal " << r.term_signal;
  EXPECT_EQ(r.report, "");
}

// The library's symbols, resolved by name with dlsym.
struct Nvml {
  explicit Nvml(const char* path) : lib(::dlopen(path, RTLD_NOW | RTLD_LOCAL)) {}
  ~Nvml() {
    if (lib != nullptr) ::dlclose(lib);
  }
  template <typename Fn>
  Fn Get(const char* symbol) const {
    return reinterpret_cast<Fn>(::dlsym(lib, symbol));
  }
  bool Has(const char* symbol) const { return ::dlsym(lib, symbol) != nullptr; }

  void* lib;
  nvmlInit_fn init = Get<nvmlInit_fn>("nvmlInit_v2");
  nvmlShutdown_fn shutdown = Get<nvmlShutdown_fn>("nvmlShutdown");
  nvmlErrorString_fn error_string = Get<nvmlErrorString_fn>("nvmlErrorString");
  nvmlSystemGetDriverVersion_fn driver_version =
      Get<nvmlSystemGetDriverVersion_fn>("nvmlSystemGetDriverVersion");
  nvmlSystemGetNVMLVersion_fn nvml_version =
      Get<nvmlSystemGetNVMLVersion_fn>("nvmlSystemGetNVMLVersion");
  nvmlDeviceGetCount_fn count = Get<nvmlDeviceGetCount_fn>("nvmlDeviceGetCount_v2");
  nvmlDeviceGetHandleByIndex_fn by_index =
      Get<nvmlDeviceGetHandleByIndex_fn>("nvmlDeviceGetHandleByIndex_v2");
  nvmlDeviceGetHandleByUUID_fn by_uuid =
      Get<nvmlDeviceGetHandleByUUID_fn>("nvmlDeviceGetHandleByUUID");
  nvmlDeviceGetHandleByUUID_fn by_pci =
      Get<nvmlDeviceGetHandleByUUID_fn>("nvmlDeviceGetHandleByPciBusId_v2");
  nvmlDeviceGetString_fn uuid = Get<nvmlDeviceGetString_fn>("nvmlDeviceGetUUID");
  nvmlDeviceGetString_fn name = Get<nvmlDeviceGetString_fn>("nvmlDeviceGetName");
  nvmlDeviceGetUint_fn index = Get<nvmlDeviceGetUint_fn>("nvmlDeviceGetIndex");
  nvmlDeviceGetUint_fn minor = Get<nvmlDeviceGetUint_fn>("nvmlDeviceGetMinorNumber");
  nvmlDeviceGetPciInfo_fn pci_v3 = Get<nvmlDeviceGetPciInfo_fn>("nvmlDeviceGetPciInfo_v3");
  nvmlDeviceGetMemoryInfo_fn memory = Get<nvmlDeviceGetMemoryInfo_fn>("nvmlDeviceGetMemoryInfo");
  nvmlDeviceGetMigMode_fn get_mig_mode = Get<nvmlDeviceGetMigMode_fn>("nvmlDeviceGetMigMode");
  nvmlReturn_t (*set_mig_mode)(nvmlDevice_t, unsigned int, nvmlReturn_t*) =
      Get<nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlReturn_t*)>("nvmlDeviceSetMigMode");
  nvmlDeviceGetUint_fn max_mig = Get<nvmlDeviceGetUint_fn>("nvmlDeviceGetMaxMigDeviceCount");
  nvmlDeviceGetMigDeviceHandleByIndex_fn mig_by_index =
      Get<nvmlDeviceGetMigDeviceHandleByIndex_fn>("nvmlDeviceGetMigDeviceHandleByIndex");
  nvmlDeviceGetUint_fn is_mig = Get<nvmlDeviceGetUint_fn>("nvmlDeviceIsMigDeviceHandle");
  nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn parent =
      Get<nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn>(
          "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  nvmlDeviceGetUint_fn gi_id = Get<nvmlDeviceGetUint_fn>("nvmlDeviceGetGpuInstanceId");
  nvmlDeviceGetUint_fn ci_id = Get<nvmlDeviceGetUint_fn>("nvmlDeviceGetComputeInstanceId");
  nvmlDeviceGetGpuInstanceProfileInfo_fn profile_v1 =
      Get<nvmlDeviceGetGpuInstanceProfileInfo_fn>("nvmlDeviceGetGpuInstanceProfileInfo");
  nvmlDeviceGetGpuInstanceProfileInfoV_fn profile_v =
      Get<nvmlDeviceGetGpuInstanceProfileInfoV_fn>("nvmlDeviceGetGpuInstanceProfileInfoV");
  nvmlDeviceGetGpuInstanceProfileInfoV_fn profile_by_id =
      Get<nvmlDeviceGetGpuInstanceProfileInfoV_fn>("nvmlDeviceGetGpuInstanceProfileInfoByIdV");
  nvmlDeviceGetGpuInstancePossiblePlacements_fn placements_v2 =
      Get<nvmlDeviceGetGpuInstancePossiblePlacements_fn>(
          "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  nvmlDeviceGetGpuInstancePossiblePlacements_fn placements_v1 =
      Get<nvmlDeviceGetGpuInstancePossiblePlacements_fn>(
          "nvmlDeviceGetGpuInstancePossiblePlacements");
  nvmlDeviceGetGpuInstanceRemainingCapacity_fn capacity =
      Get<nvmlDeviceGetGpuInstanceRemainingCapacity_fn>(
          "nvmlDeviceGetGpuInstanceRemainingCapacity");
  nvmlDeviceCreateGpuInstance_fn create_gi_auto =
      Get<nvmlDeviceCreateGpuInstance_fn>("nvmlDeviceCreateGpuInstance");
  nvmlDeviceCreateGpuInstanceWithPlacement_fn create_gi =
      Get<nvmlDeviceCreateGpuInstanceWithPlacement_fn>("nvmlDeviceCreateGpuInstanceWithPlacement");
  nvmlGpuInstanceDestroy_fn destroy_gi = Get<nvmlGpuInstanceDestroy_fn>("nvmlGpuInstanceDestroy");
  nvmlDeviceGetGpuInstances_fn gis = Get<nvmlDeviceGetGpuInstances_fn>("nvmlDeviceGetGpuInstances");
  nvmlDeviceGetGpuInstanceById_fn gi_by_id =
      Get<nvmlDeviceGetGpuInstanceById_fn>("nvmlDeviceGetGpuInstanceById");
  nvmlGpuInstanceGetInfo_fn gi_info = Get<nvmlGpuInstanceGetInfo_fn>("nvmlGpuInstanceGetInfo");
  nvmlGpuInstanceGetComputeInstanceProfileInfo_fn ci_profile_v1 =
      Get<nvmlGpuInstanceGetComputeInstanceProfileInfo_fn>(
          "nvmlGpuInstanceGetComputeInstanceProfileInfo");
  nvmlGpuInstanceGetComputeInstanceProfileInfoV_fn ci_profile_v =
      Get<nvmlGpuInstanceGetComputeInstanceProfileInfoV_fn>(
          "nvmlGpuInstanceGetComputeInstanceProfileInfoV");
  nvmlGpuInstanceGetComputeInstanceRemainingCapacity_fn ci_capacity =
      Get<nvmlGpuInstanceGetComputeInstanceRemainingCapacity_fn>(
          "nvmlGpuInstanceGetComputeInstanceRemainingCapacity");
  nvmlGpuInstanceGetComputeInstancePossiblePlacements_fn ci_placements =
      Get<nvmlGpuInstanceGetComputeInstancePossiblePlacements_fn>(
          "nvmlGpuInstanceGetComputeInstancePossiblePlacements");
  nvmlGpuInstanceCreateComputeInstance_fn create_ci =
      Get<nvmlGpuInstanceCreateComputeInstance_fn>("nvmlGpuInstanceCreateComputeInstance");
  nvmlGpuInstanceCreateComputeInstanceWithPlacement_fn create_ci_at =
      Get<nvmlGpuInstanceCreateComputeInstanceWithPlacement_fn>(
          "nvmlGpuInstanceCreateComputeInstanceWithPlacement");
  nvmlComputeInstanceDestroy_fn destroy_ci =
      Get<nvmlComputeInstanceDestroy_fn>("nvmlComputeInstanceDestroy");
  nvmlGpuInstanceGetComputeInstances_fn cis =
      Get<nvmlGpuInstanceGetComputeInstances_fn>("nvmlGpuInstanceGetComputeInstances");
  nvmlGpuInstanceGetComputeInstanceById_fn ci_by_id =
      Get<nvmlGpuInstanceGetComputeInstanceById_fn>("nvmlGpuInstanceGetComputeInstanceById");
  nvmlComputeInstanceGetInfo_fn ci_info =
      Get<nvmlComputeInstanceGetInfo_fn>("nvmlComputeInstanceGetInfo_v2");
  nvmlComputeInstanceGetInfo_fn ci_info_v1 =
      Get<nvmlComputeInstanceGetInfo_fn>("nvmlComputeInstanceGetInfo");
  nvmlDeviceGetComputeRunningProcesses_fn procs_v3 =
      Get<nvmlDeviceGetComputeRunningProcesses_fn>("nvmlDeviceGetComputeRunningProcesses_v3");
  nvmlDeviceGetComputeRunningProcesses_fn procs_v2 =
      Get<nvmlDeviceGetComputeRunningProcesses_fn>("nvmlDeviceGetComputeRunningProcesses_v2");
  nvmlDeviceGetComputeRunningProcessesV1_fn procs_v1 =
      Get<nvmlDeviceGetComputeRunningProcessesV1_fn>("nvmlDeviceGetComputeRunningProcesses");
  nvmlDeviceGetComputeRunningProcesses_fn graphics_v3 =
      Get<nvmlDeviceGetComputeRunningProcesses_fn>("nvmlDeviceGetGraphicsRunningProcesses_v3");
  nvmlReturn_t (*attach)(const char*, unsigned int, unsigned long long) =
      Get<nvmlReturn_t (*)(const char*, unsigned int, unsigned long long)>("migdSimAttachProcess");
  nvmlReturn_t (*detach)(const char*, unsigned int) =
      Get<nvmlReturn_t (*)(const char*, unsigned int)>("migdSimDetachProcess");
  nvmlReturn_t (*reboot)() = Get<nvmlReturn_t (*)()>("migdSimReboot");
};

std::string Uuid(const Nvml& n, nvmlDevice_t d) {
  char buf[96] = {};
  if (n.uuid(d, buf, sizeof(buf)) != NVML_SUCCESS) return "";
  return buf;
}

// One walk over the MIG device indices of `gpu`: (GI id, CI id) -> (index,
// handle); every index the library answers with a device, in order.
struct Walked {
  unsigned int index;
  unsigned int gi;
  unsigned int ci;
  nvmlDevice_t handle;
};
std::vector<Walked> Walk(const Nvml& n, nvmlDevice_t gpu) {
  std::vector<Walked> out;
  unsigned int max = 0;
  if (n.max_mig(gpu, &max) != NVML_SUCCESS) return out;
  for (unsigned int i = 0; i < max; ++i) {
    nvmlDevice_t h = nullptr;
    unsigned int gi = 0;
    unsigned int ci = 0;
    if (n.mig_by_index(gpu, i, &h) != NVML_SUCCESS) continue;
    if (n.gi_id(h, &gi) == NVML_SUCCESS && n.ci_id(h, &ci) == NVML_SUCCESS) {
      out.push_back({i, gi, ci, h});
    }
  }
  return out;
}

// The MIG device of (gi, ci) found by one walk; nullptr if absent.
nvmlDevice_t MigDevice(const Nvml& n, nvmlDevice_t gpu, unsigned int gi, unsigned int ci) {
  for (const Walked& w : Walk(n, gpu)) {
    if (w.gi == gi && w.ci == ci) return w.handle;
  }
  return nullptr;
}

class SimAbiTest : public ::testing::Test {
 protected:
  std::string State() const { return dir_.Join("state.json"); }

  // Sets the environment of a child: a state file in the temp dir, fsync off.
  void Env(const std::string& gpus, const std::string& extra_name = "",
           const std::string& extra_value = "") const {
    for (const char* v :
         {"MIGD_SIM_FAULTS", "MIGD_SIM_LATENCY_MS", "MIGD_SIM_GI_IDS", "MIGD_SIM_PROC_ROOT",
          "MIGD_SIM_PROFILE_INFO_MAX_VERSION", "MIGD_SIM_NONCE", "MIGD_SIM_MIG_INDEX",
          "MIGD_SIM_LEGACY_MIG_UUID", "MIGD_SIM_PARENT_INSTANCE_ID",
          "MIGD_SIM_NEW_CI_VISIBILITY"}) {
      ::unsetenv(v);
    }
    ::setenv("MIGD_SIM_STATE", State().c_str(), 1);
    ::setenv("MIGD_SIM_GPUS", gpus.c_str(), 1);
    ::setenv("MIGD_SIM_FSYNC", "0", 1);
    if (!extra_name.empty()) ::setenv(extra_name.c_str(), extra_value.c_str(), 1);
  }

  SimState ReadState() const {
    StatusOr<std::string> text = ReadFileToString(State());
    EXPECT_TRUE(text.ok()) << text.status();
    StatusOr<SimState> s = ParseState(text.ok() ? *text : "", mig::Catalog::Default());
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : SimState{};
  }

  uint64_t Count(const SimState& s, const std::string& fn, const std::string& result) const {
    auto f = s.counters.find(fn);
    if (f == s.counters.end()) return 0;
    auto r = f->second.find(result);
    return r == f->second.end() ? 0 : r->second;
  }

  migd::testing::TempDir dir_;
};

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

TEST_F(SimAbiTest, CreateDestroySemanticsAndCodes) {
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

    // Destroy ordering.
    CHECK_EQ(n.destroy_gi(gi), NVML_ERROR_IN_USE);
    CHECK_EQ(n.destroy_ci(ci), NVML_SUCCESS);
    CHECK_EQ(n.destroy_gi(gi), NVML_SUCCESS);
    CHECK_EQ(n.destroy_gi(me), NVML_SUCCESS);
    n.shutdown();
  }));
  const SimState s = ReadState();
  EXPECT_TRUE(s.gpus[0].gpu_instances.empty());
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstance", "SUCCESS"), 7u);
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstance", "ERROR_INSUFFICIENT_RESOURCES"), 1u);
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstanceWithPlacement", "ERROR_INVALID_ARGUMENT"), 3u);
  EXPECT_EQ(Count(s, "nvmlDeviceCreateGpuInstanceWithPlacement", "ERROR_INSUFFICIENT_RESOURCES"),
            2u);
  EXPECT_EQ(Count(s, "nvmlGpuInstanceDestroy", "ERROR_IN_USE"), 1u);
  EXPECT_EQ(Count(s, "nvmlGpuInstanceDestroy", "SUCCESS"), 9u);
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
