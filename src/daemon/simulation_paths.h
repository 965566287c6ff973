// File: daemon/simulation_paths.h
//
// Under --simulate, migd's root-only default paths (stateDir /run/migd/state,
// api.socket /run/migd/api.socket, cdi.specDir /var/run/cdi) move beside the
// simulator state so that `migd --simulate X` runs unprivileged. A path the
// operator set explicitly — by a flag, or by a key present in the config file,
// even with the default's value — is used as given: a container runtime reads
// specs only from /etc/cdi and /var/run/cdi.
//
// Example:
//   ExplicitPaths e = ExplicitPathsInConfig(file_text);
//   e.spec_dir = e.spec_dir || flags.cdi_spec_dir.has_value();
//   MoveDefaultsForSimulation(sim_dir, e, &config);
//
// Thread-safety: pure functions.
#ifndef MIGD_DAEMON_SIMULATION_PATHS_H_
#define MIGD_DAEMON_SIMULATION_PATHS_H_

#include <string>
#include <string_view>

#include "daemon/config.h"

namespace migd::daemon {

struct ExplicitPaths {
  bool state_dir = false;  // stateDir / --state-dir
  bool socket = false;     // api.socket / --socket
  bool spec_dir = false;   // cdi.specDir / --cdi-spec-dir
};

// Which of the three keys `yaml` (a config file's text) contains. Text that
// is not a YAML mapping sets none (LoadConfigFile reports it).
ExplicitPaths ExplicitPathsInConfig(std::string_view yaml);

// Moves each path that is not explicit under `sim_dir` (state/, api.socket,
// cdi/).
void MoveDefaultsForSimulation(const std::string& sim_dir, const ExplicitPaths& explicit_paths,
                               Config* config);

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_SIMULATION_PATHS_H_
