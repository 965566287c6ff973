#include "daemon/effective_config.h"

#include "base/file_util.h"
#include "base/status_macros.h"
#include "daemon/config_files.h"
#include "daemon/config_validate.h"
#include "daemon/simulation_paths.h"

namespace migd::daemon {
namespace {

constexpr char kCommandLine[] = "command line";

// The command-line overrides win over the file.
void ApplyFlags(const Flags& flags, Config* c) {
  if (flags.socket) c->api.socket = *flags.socket;
  if (flags.state_dir) c->state_dir = *flags.state_dir;
  if (flags.metrics_listen) c->metrics.listen = *flags.metrics_listen;
  if (flags.cdi_spec_dir) c->cdi.spec_dir = *flags.cdi_spec_dir;
  if (flags.nvml_library) c->nvml.library = *flags.nvml_library;
  if (flags.log_level) c->log.level = *flags.log_level;
}

// Which root-only paths the command line or the config file sets explicitly
// (daemon/simulation_paths.h).
ExplicitPaths ExplicitIn(const Flags& flags) {
  ExplicitPaths e;
  if (!flags.config_file.empty()) {
    // The file already passed LoadConfigFile's checks; only presence matters.
    if (StatusOr<std::string> text = ReadFileToString(flags.config_file); text.ok()) {
      e = ExplicitPathsInConfig(*text);
    }
  }
  e.state_dir = e.state_dir || flags.state_dir.has_value();
  e.socket = e.socket || flags.socket.has_value();
  e.spec_dir = e.spec_dir || flags.cdi_spec_dir.has_value();
  return e;
}

// Under --simulate: the defaults that only make sense for root on a real
// node move beside the simulator state unless set explicitly, and the CDI
// proc root is the simulator's fake /proc.
void ApplySimulation(const Simulation& sim, const ExplicitPaths& explicit_paths, Config* c) {
  if (!sim.enabled) return;
  MoveDefaultsForSimulation(sim.dir, explicit_paths, c);
  if (!sim.proc_root.empty()) c->cdi.proc_root = sim.proc_root;
}

}  // namespace

std::string ConfigSource(const Flags& flags) {
  return flags.config_file.empty() ? std::string(kCommandLine) : flags.config_file;
}

StatusOr<Config> ReadEffectiveConfig(const Flags& flags, const Simulation& sim) {
  Config config;
  if (!flags.config_file.empty()) {
    MIGD_ASSIGN_OR_RETURN(config, LoadConfigFile(flags.config_file));
  }
  ApplyFlags(flags, &config);
  ApplySimulation(sim, ExplicitIn(flags), &config);
  const std::string source = flags.config_file.empty()
                                 ? std::string(kCommandLine)
                                 : flags.config_file + " (with command-line overrides)";
  MIGD_RETURN_IF_ERROR(ValidateConfig(config, source));
  return config;
}

engine::ManagerPolicy PolicyOf(const Config& c) {
  engine::ManagerPolicy p;
  if (c.lifecycle.idle_ttl) {
    p.idle_ttl = std::chrono::duration_cast<Clock::Duration>(*c.lifecycle.idle_ttl);
  }
  p.max_idle_per_gpu = c.lifecycle.max_idle_per_gpu;
  p.warm_pool = c.lifecycle.warm_pool;
  p.profile_allowlist = {c.mig_profile_allowlist.begin(), c.mig_profile_allowlist.end()};
  return p;
}

}  // namespace migd::daemon
