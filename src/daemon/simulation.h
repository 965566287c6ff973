// File: daemon/simulation.h
//
// `migd --simulate SPEC`: the simulated NVML library and its machine.
// SetUpSimulation (before the config is read) exports MIGD_SIM_GPUS = SPEC,
// creates a temporary directory for the machine unless MIGD_SIM_STATE names
// its state file, defaults MIGD_SIM_PROC_ROOT to proc/ beside it, and points
// --nvml-library at <exe dir>/../lib/libnvidia-ml-sim.so.1 unless given
// (docs/simulator.md). ReadSimProcRoot (after NVML created the machine)
// learns the fake /proc tree from the state file.
//
// Thread-safety: called from the daemon's startup thread only (setenv).
#ifndef MIGD_DAEMON_SIMULATION_H_
#define MIGD_DAEMON_SIMULATION_H_

#include <string>

#include "daemon/daemon.h"
#include "daemon/startup_failure.h"

namespace migd::daemon {

struct Simulation {
  bool enabled = false;
  std::string dir;        // the directory holding MIGD_SIM_STATE
  std::string temp_dir;   // created by SetUpSimulation (removed at exit); "" if none
  std::string proc_root;  // the machine's fake /proc (from its state file)
};

// Nothing without --simulate. kExitConfig for an empty GPU list or a
// relative MIGD_SIM_STATE; kExitStartup if the temporary directory cannot
// be created. May set flags->nvml_library.
MaybeFailure SetUpSimulation(Flags* flags, Simulation* sim);

// Reads "procRoot" of the state file MIGD_SIM_STATE names into sim->proc_root
// (an existing file keeps its own, whatever the environment says).
// kExitNvml if the file cannot be read or is not a simulator state.
MaybeFailure ReadSimProcRoot(Simulation* sim);

// The directory part of `path`: "." for none, "/" for the root.
std::string DirName(const std::string& path);

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_SIMULATION_H_
