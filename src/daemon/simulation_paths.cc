#include "daemon/simulation_paths.h"

#include <yaml-cpp/yaml.h>

namespace migd::daemon {

ExplicitPaths ExplicitPathsInConfig(std::string_view yaml) {
  ExplicitPaths e;
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsDefined() || !root.IsMap()) return e;
    auto has = [&root](const char* section, const char* key) {
      const YAML::Node s = root[section];
      return s.IsDefined() && s.IsMap() && s[key].IsDefined();
    };
    e.state_dir = root["stateDir"].IsDefined();
    e.socket = has("api", "socket");
    e.spec_dir = has("cdi", "specDir");
  } catch (const std::exception&) {
    return ExplicitPaths{};
  }
  return e;
}

void MoveDefaultsForSimulation(const std::string& sim_dir, const ExplicitPaths& explicit_paths,
                               Config* config) {
  if (!explicit_paths.state_dir) config->state_dir = sim_dir + "/state";
  if (!explicit_paths.socket) config->api.socket = sim_dir + "/api.socket";
  if (!explicit_paths.spec_dir) config->cdi.spec_dir = sim_dir + "/cdi";
}

}  // namespace migd::daemon
