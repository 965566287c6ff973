// File: daemon/config_reload.h
//
// What a SIGHUP changes: the keys whose values differ between the running
// and the re-read config, split by the schema's Reload column (config_schema.cc:
// today lifecycle.idleTTL, lifecycle.maxIdlePerGPU, lifecycle.warmPool,
// migProfileAllowlist and log.level are applied; every other key needs a
// restart).
//
// Thread-safety: pure functions over values.
#ifndef MIGD_DAEMON_CONFIG_RELOAD_H_
#define MIGD_DAEMON_CONFIG_RELOAD_H_

#include <string>
#include <vector>

#include "daemon/config.h"

namespace migd::daemon {

// Key paths as in the file ("api.socket"), in schema order.
struct ConfigDiff {
  std::vector<std::string> applied;
  std::vector<std::string> needs_restart;
  bool empty() const { return applied.empty() && needs_restart.empty(); }
};
ConfigDiff DiffConfigs(const Config& before, const Config& after);

// The config with `reloaded`'s reloadable keys and `current`'s others: what
// the daemon runs with after a SIGHUP.
Config MergeReloadable(const Config& current, const Config& reloaded);

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_CONFIG_RELOAD_H_
