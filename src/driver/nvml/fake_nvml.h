// File: driver/nvml/fake_nvml.h
//
// A small in-process fake of the NVML C ABI for driver_test (test-only): one
// A100-40GB-like GPU with four GI profiles (1g id 19, 3g id 9, 7g id 0 and the
// double-memory 1g id 15), GI/CI creation with placement/overlap checks, IN_USE
// and process lists. NvmlLibrary::FromResolver(FakeNvmlResolve, ...) binds it.
// It is not the simulator (src/sim/); it exists so that NvmlLibrary,
// NvmlSession and NvmlDriver have deterministic unit tests of their own.
//
// Thread-safety: global state guarded by one mutex; Reset() between tests.
#ifndef MIGD_DRIVER_NVML_FAKE_NVML_H_
#define MIGD_DRIVER_NVML_FAKE_NVML_H_

#include <map>
#include <set>
#include <string>

#include "driver/nvml/nvml_abi.h"

namespace migd::driver::fake_nvml {

struct Options {
  int max_profile_info_version = 3;  // 2: reject v3 version words
  bool mig_enabled = true;
  bool mig_supported = true;
  nvmlReturn_t init_result = NVML_SUCCESS;
  std::set<std::string> hidden_symbols;  // not resolvable
  // Fail the next call of a function (by exported name) with a code.
  std::map<std::string, nvmlReturn_t> fail_next;
  // GetHandleByIndex of this GPU index returns NO_PERMISSION (-1: none).
  int no_permission_gpu = -1;
  unsigned int gpu_count = 1;
};

// Resets all state (no GIs, counters zero) and installs `options`.
void Reset(const Options& options = Options());
// Resolver for NvmlLibrary::FromResolver; ctx is ignored.
void* Resolve(const char* name, void* ctx);

// The next call of `function` (exported name) returns `r` without effect.
void FailNext(const std::string& function, nvmlReturn_t r);

int InitCalls();
int ShutdownCalls();
int LiveGiCount();
// Attaches a process to the CI's MIG device (IN_USE on destroy).
void AttachProcess(unsigned int gi, unsigned int ci, unsigned int pid);
// Adds `extra_pid` to the list right after the next size query, so the fill
// call sees INSUFFICIENT_SIZE once more (nvml.md §7.12).
void GrowProcessesAfterCountQuery(unsigned int extra_pid);

}  // namespace migd::driver::fake_nvml

#endif  // MIGD_DRIVER_NVML_FAKE_NVML_H_
