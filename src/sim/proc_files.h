// File: sim/proc_files.h
//
// The fake /proc tree of a simulated machine (MIGD_SIM_PROC_ROOT), so that
// code reading device-node facts (mig-hardware.md §6) can be tested:
//
//   <root>/devices                                    "Character devices:" with
//                                                     195 nvidia-frontend,
//                                                     508 nvidia-caps, 511 nvidia-uvm
//   <root>/driver/nvidia-caps/mig-minors              config 1, monitor 2, then every
//                                                     gpu<G>/gi<I>[/ci<C>]/access minor
//   <root>/driver/nvidia-caps/nvlink-minors           fabric-mgmt 0
//   <root>/driver/nvidia/capabilities/mig/config      3-line capability file (minor 1)
//   <root>/driver/nvidia/capabilities/mig/monitor     3-line capability file (minor 2)
//   <root>/driver/nvidia/gpus/<bus id>/information    Model, GPU UUID, Bus Location,
//                                                     Device Minor
//   <root>/driver/nvidia/capabilities/gpu<minor>/mig/gi<I>/access          per live GI
//   <root>/driver/nvidia/capabilities/gpu<minor>/mig/gi<I>/ci<C>/access    per live CI
//
// Minors follow the driver's table order: gi access = 3 + 135·G + 9·I and
// ci access = that + 1 + C, with G the GPU's device minor.
//
// Thread-safety: the functions are reentrant; concurrent writers of one root
// must be serialised by the caller (the state-file lock does it).
#ifndef MIGD_SIM_PROC_FILES_H_
#define MIGD_SIM_PROC_FILES_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "mig/catalog.h"
#include "sim/state.h"

namespace migd::sim {

// Majors written to <root>/devices.
inline constexpr uint32_t kNvidiaFrontendMajor = 195;
inline constexpr uint32_t kNvidiaCapsMajor = 508;
inline constexpr uint32_t kNvidiaUvmMajor = 511;

// DeviceFileMode values (decimal in the files): config 0400, monitor and
// gi/ci access 0444 (mig-hardware.md §6).
inline constexpr uint32_t kConfigMode = 0400;
inline constexpr uint32_t kAccessMode = 0444;

uint32_t GiAccessMinor(uint32_t gpu_minor, uint32_t gi_id);
uint32_t CiAccessMinor(uint32_t gpu_minor, uint32_t gi_id, uint32_t ci_id);

// "DeviceFileMinor: <minor>\nDeviceFileMode: <mode>\nDeviceFileModify: <modify>\n".
std::string CapabilityFileContent(uint32_t minor, uint32_t mode, uint32_t modify);

// The content of mig-minors (every possible entry, 4322 lines + 2).
std::string MigMinorsContent();

// Writes the static files (devices, mig-minors, nvlink-minors, mig/config,
// mig/monitor, gpus/*/information). No-op if state.proc_root is empty.
// Errors: the OS error of the failing write, with its path.
Status WriteStaticProcFiles(const SimState& state, const mig::Catalog& catalog);

// Makes the per-instance access files match the GIs and CIs of `state`
// exactly: writes the missing ones, removes those of instances that no longer
// exist. No-op if state.proc_root is empty.
Status SyncInstanceProcFiles(const SimState& state);

}  // namespace migd::sim

#endif  // MIGD_SIM_PROC_FILES_H_
