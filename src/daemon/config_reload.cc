#include "daemon/config_reload.h"

#include "daemon/config_schema.h"

namespace migd::daemon {

ConfigDiff DiffConfigs(const Config& before, const Config& after) {
  ConfigDiff diff;
  for (const KeySpec& key : ConfigSchema()) {
    if (key.type == KeyType::kSection || SameValue(key, before, after)) continue;
    (key.reload == Reload::kOnSighup ? diff.applied : diff.needs_restart).emplace_back(key.path);
  }
  return diff;
}

Config MergeReloadable(const Config& current, const Config& reloaded) {
  Config out = current;
  for (const KeySpec& key : ConfigSchema()) {
    if (key.type != KeyType::kSection && key.reload == Reload::kOnSighup) {
      CopyValue(key, reloaded, &out);
    }
  }
  return out;
}

}  // namespace migd::daemon
