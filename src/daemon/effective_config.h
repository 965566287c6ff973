// File: daemon/effective_config.h
//
// The configuration migd runs with: the file (LoadConfigFile) or the
// built-in defaults, then the command-line overrides (--socket, --state-dir,
// --metrics-listen, --cdi-spec-dir, --nvml-library, --log-level), then what
// --simulate moves: stateDir, api.socket and cdi.specDir still at their
// root-only defaults go beside the simulator's state file, and cdi.procRoot
// is the machine's fake /proc. Applied at start and at every SIGHUP, so a
// reload never undoes a flag. Validated as a whole; messages name the source
// ("config migd.yaml (with command-line overrides): ...").
//
// Thread-safety: pure functions (LoadConfigFile reads the file).
#ifndef MIGD_DAEMON_EFFECTIVE_CONFIG_H_
#define MIGD_DAEMON_EFFECTIVE_CONFIG_H_

#include <string>

#include "base/status.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/simulation.h"
#include "engine/manager.h"

namespace migd::daemon {

// The config file, or "command line" without one: how messages name where a
// setting came from.
std::string ConfigSource(const Flags& flags);

// File (or defaults) + flags + simulation, validated.
StatusOr<Config> ReadEffectiveConfig(const Flags& flags, const Simulation& sim);

// The keys SIGHUP applies (lifecycle.idleTTL, maxIdlePerGPU, warmPool,
// migProfileAllowlist) as the engine's policy.
engine::ManagerPolicy PolicyOf(const Config& config);

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_EFFECTIVE_CONFIG_H_
