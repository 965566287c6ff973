// File: driver/nvml/nvml_sim_testing.h
//
// Test-only support for running the production NVML layer (NvmlLibrary,
// NvmlSession, NvmlDriver) against the simulator's NVML library,
// libnvidia-ml-sim.so (docs/simulator.md), loaded by path. The simulator is
// the one NVML implementation the tests use; nothing here implements NVML
// behaviour. What it offers:
//   * SimMachine: a fresh simulated machine per test (its own state file in a
//     temp dir, the MIGD_SIM_* environment set for it) and the simulator's
//     per-function call counters and instances, read from that state file;
//   * AttachProcess / DetachProcess: the simulator's migdSim* controls;
//   * LoadSimWithSymbols: NvmlLibrary::FromResolver over a dlopen handle of
//     the simulator, with chosen symbols hidden (as in an older library that
//     does not export them) or hooked (a forwarding wrapper that adds an
//     outside event, such as another process starting, between two calls);
//   * MIGD_RUN_IN_FRESH_PROCESS(): runs the current test again, alone, in a
//     new process (fork + exec of the test binary), for scenarios that need
//     per-process simulator state such as MIGD_SIM_FAULTS "@N" call numbers.
//
// Example:
//   TEST(Foo, SecondDestroyFails) {
//     MIGD_RUN_IN_FRESH_PROCESS();  // "@2" counts this process's calls
//     SimMachine sim("a100-40gb:1", {{"MIGD_SIM_FAULTS", "nvmlGpuInstanceDestroy=IN_USE@2"}});
//     MIGD_ASSERT_OK_AND_ASSIGN(auto driver, NvmlDriver::Open(MIGD_SIM_LIBRARY));
//     ...
//     EXPECT_EQ(sim.Count("nvmlGpuInstanceDestroy", "ERROR_IN_USE"), 1u);
//   }
//
// Thread-safety: SimMachine and ClearSimEnv change the process environment;
// use them from the test's main thread while no NVML session is open.
#ifndef MIGD_DRIVER_NVML_NVML_SIM_TESTING_H_
#define MIGD_DRIVER_NVML_NVML_SIM_TESTING_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "driver/nvml/nvml_abi.h"
#include "driver/nvml/nvml_library.h"
#include "testing/temp_dir.h"

namespace migd::driver::sim_testing {

// (function, result) -> count, e.g. {"nvmlInit_v2", "SUCCESS"} -> 1. The
// result names are the simulator's and NvmlCallCount's: "SUCCESS",
// "ERROR_IN_USE", ...
using CallCounts = std::map<std::pair<std::string, std::string>, uint64_t>;

// NvmlLibrary::CallCounts() rows as a map.
CallCounts ToCallCounts(const std::vector<NvmlCallCount>& rows);
// The counters that changed from `before` to `after`, with their increase.
CallCounts Delta(const CallCounts& before, const CallCounts& after);
// The counter of (function, result); 0 if absent.
uint64_t Get(const CallCounts& counts, const std::string& function, const std::string& result);

// Unsets every MIGD_SIM_* variable of this process's environment, then
// restores the header-open knobs (sim::kHeaderOpenKnobs) to the values the
// process started with, so that a suite runs under the simulator variant its
// environment names (tests/sim_variants).
void ClearSimEnv();

// One simulated machine for one test. The constructor clears every MIGD_SIM_*
// variable (keeping the variant knobs, see ClearSimEnv), then sets MIGD_SIM_STATE to "<new temp dir>/state.json",
// MIGD_SIM_GPUS to `gpus`, MIGD_SIM_FSYNC to 0, then `extra_env`. The
// simulator creates the machine at the next nvmlInit_v2 that takes its
// reference count from 0 to 1 (or at a migdSim* control), and reads the
// process knobs (MIGD_SIM_FAULTS, MIGD_SIM_PROFILE_INFO_MAX_VERSION, ...) then
// too. The destructor clears the MIGD_SIM_* variables and removes the dir.
class SimMachine {
 public:
  explicit SimMachine(const std::string& gpus,
                      const std::map<std::string, std::string>& extra_env = {});
  ~SimMachine();
  SimMachine(const SimMachine&) = delete;
  SimMachine& operator=(const SimMachine&) = delete;

  const std::string& state_path() const { return state_path_; }
  const migd::testing::TempDir& dir() const { return dir_; }

  // True once the simulator has created the state file.
  bool exists() const;
  // The simulator's own call counters ("counters" of the state file); empty
  // if the file does not exist yet.
  CallCounts Counts() const;
  uint64_t Count(const std::string& function, const std::string& result) const;
  // From the state file: the number of GIs of GPU `gpu`, the number of CIs
  // in all of them, and the GPU's UUID. Fail the test (and return -1 / "")
  // if the file or the GPU is missing.
  int GiCount(unsigned int gpu = 0) const;
  int CiCount(unsigned int gpu = 0) const;
  std::string GpuUuid(unsigned int gpu = 0) const;

 private:
  migd::testing::TempDir dir_;
  std::string state_path_;
};

// The symbol `name` of the library at `path` if that library is already
// loaded in this process (dlopen with RTLD_NOLOAD); nullptr otherwise.
void* LoadedSymbol(const std::string& path, const char* name);

// The simulator's controls (docs/simulator.md §9), called in the library at
// `path`, which must be loaded. NVML_ERROR_LIBRARY_NOT_FOUND if it is not,
// NVML_ERROR_FUNCTION_NOT_FOUND if it lacks the control.
nvmlReturn_t AttachProcess(const std::string& path, const std::string& mig_uuid, unsigned int pid,
                           unsigned long long used_bytes);
nvmlReturn_t DetachProcess(const std::string& path, const std::string& mig_uuid,
                           unsigned int pid);

// migdSimInjectEvents(specs) (sim/events.h syntax) in the library at `path`.
nvmlReturn_t InjectEvents(const std::string& path, const std::string& specs);

// NvmlLibrary::FromResolver over a dlopen handle of `path` (loaded like
// NvmlLibrary::Load does): every symbol is the library's own, except that
// the names in `hidden` do not resolve and those in `hooks` resolve to the
// given function instead (which should forward to LoadedSymbol(path, name)).
// The library's path() is `path`. The same binding and error rules as Load().
StatusOr<std::shared_ptr<NvmlLibrary>> LoadSimWithSymbols(
    const std::string& path, const std::set<std::string>& hidden,
    const std::map<std::string, void*>& hooks = {});

// Runs the current gtest test again, alone, in a new process: fork + exec of
// this test binary with --gtest_filter=<the test's full name> and the same
// environment (minus sharding and output settings), stdout and stderr
// captured. In that process, returns false: the test body continues there.
// In the calling process, waits for it, adds a test failure with its output
// unless it exited 0 having passed exactly that test, and returns true: the
// body must return. Use MIGD_RUN_IN_FRESH_PROCESS(). REQUIRES: called from a
// test body (not from a fixture's SetUp), before any NVML session is opened.
bool RerunInFreshProcess();

}  // namespace migd::driver::sim_testing

// First statement of a test body that must run in a process of its own.
#define MIGD_RUN_IN_FRESH_PROCESS()                                      \
  do {                                                                   \
    if (::migd::driver::sim_testing::RerunInFreshProcess()) return;      \
  } while (0)

#endif  // MIGD_DRIVER_NVML_NVML_SIM_TESTING_H_
