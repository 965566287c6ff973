#include "daemon/effective_config.h"

#include "base/status_macros.h"
#include "daemon/config_files.h"
#include "daemon/config_validate.h"

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

// Defaults that only make sense for root on a real node (/var/lib/migd,
// /run/migd, /var/run/cdi) move under the simulation directory unless the
// file or a flag set them, so `migd --simulate X` runs unprivileged.
void ApplySimulation(const Simulation& sim, Config* c) {
  if (!sim.enabled) return;
  const Config defaults;
  if (c->state_dir == defaults.state_dir) c->state_dir = sim.dir + "/state";
  if (c->api.socket == defaults.api.socket) c->api.socket = sim.dir + "/api.socket";
  if (c->cdi.spec_dir == defaults.cdi.spec_dir) c->cdi.spec_dir = sim.dir + "/cdi";
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
  ApplySimulation(sim, &config);
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
