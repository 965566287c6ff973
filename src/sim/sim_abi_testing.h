// File: sim/sim_abi_testing.h
//
// Shared by sim_abi_test.cc and sim_abi_instances_test.cc, which drive the
// built libnvidia-ml-sim.so (and the legacy variant) only through
// dlopen()/dlsym() of its C symbols, as NvmlDriver does. Every scenario runs
// in a fork()ed child with its own environment (InChild), so that each gets
// a fresh library (env vars are read at nvmlInit) and crash hooks can kill
// it; the parent checks the child's report and the state file.
//
// Thread-safety: test code, single-threaded.
#ifndef MIGD_SIM_SIM_ABI_TESTING_H_
#define MIGD_SIM_SIM_ABI_TESTING_H_
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
#include "sim/nvml_names.h"
#include "sim/state.h"
#include "testing/temp_dir.h"

namespace migd::sim::abi_testing {


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
inline ChildResult InChild(const std::function<void(Checks&)>& fn) {
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

inline void ExpectPassed(const ChildResult& r) {
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

inline std::string Uuid(const Nvml& n, nvmlDevice_t d) {
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
inline std::vector<Walked> Walk(const Nvml& n, nvmlDevice_t gpu) {
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
inline nvmlDevice_t MigDevice(const Nvml& n, nvmlDevice_t gpu, unsigned int gi, unsigned int ci) {
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

}  // namespace migd::sim::abi_testing

#endif  // MIGD_SIM_SIM_ABI_TESTING_H_
