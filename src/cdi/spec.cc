#include "cdi/spec.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "base/status_macros.h"

namespace migd::cdi {
namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kHookNames[] = {"prestart",       "createRuntime", "createContainer",
                                           "startContainer", "poststart",     "poststop"};

// ---- serialization ----------------------------------------------------------

OrderedJson NodeToJson(const DeviceNode& n) {
  OrderedJson j;
  j["path"] = n.path;
  if (!n.host_path.empty()) j["hostPath"] = n.host_path;
  if (!n.type.empty()) j["type"] = n.type;
  if (n.major && *n.major != 0) j["major"] = *n.major;
  if (n.minor && *n.minor != 0) j["minor"] = *n.minor;
  if (n.file_mode) j["fileMode"] = *n.file_mode;
  if (!n.permissions.empty()) j["permissions"] = n.permissions;
  if (n.uid) j["uid"] = *n.uid;
  if (n.gid) j["gid"] = *n.gid;
  return j;
}

OrderedJson EditsToJson(const ContainerEdits& e) {
  OrderedJson j = OrderedJson::object();
  if (!e.env.empty()) j["env"] = e.env;
  if (!e.device_nodes.empty()) {
    OrderedJson nodes = OrderedJson::array();
    for (const DeviceNode& n : e.device_nodes) nodes.push_back(NodeToJson(n));
    j["deviceNodes"] = std::move(nodes);
  }
  if (!e.hooks.empty()) {
    OrderedJson hooks = OrderedJson::array();
    for (const Hook& h : e.hooks) {
      OrderedJson hj;
      hj["hookName"] = h.hook_name;
      hj["path"] = h.path;
      if (!h.args.empty()) hj["args"] = h.args;
      if (!h.env.empty()) hj["env"] = h.env;
      if (h.timeout) hj["timeout"] = *h.timeout;
      hooks.push_back(std::move(hj));
    }
    j["hooks"] = std::move(hooks);
  }
  if (!e.mounts.empty()) {
    OrderedJson mounts = OrderedJson::array();
    for (const Mount& m : e.mounts) {
      OrderedJson mj;
      mj["hostPath"] = m.host_path;
      mj["containerPath"] = m.container_path;
      if (!m.options.empty()) mj["options"] = m.options;
      if (!m.type.empty()) mj["type"] = m.type;
      mounts.push_back(std::move(mj));
    }
    j["mounts"] = std::move(mounts);
  }
  if (!e.additional_gids.empty()) j["additionalGids"] = e.additional_gids;
  return j;
}

Status ValidateEdits(const ContainerEdits& e, const std::string& path) {
  for (size_t i = 0; i < e.env.size(); ++i) {
    const size_t eq = e.env[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError(path + ".env[" + std::to_string(i) + "]: invalid env \"" +
                                  e.env[i] + "\" (want KEY=VALUE)");
    }
  }
  for (size_t i = 0; i < e.device_nodes.size(); ++i) {
    const DeviceNode& n = e.device_nodes[i];
    const std::string p = path + ".deviceNodes[" + std::to_string(i) + "]";
    if (n.path.empty()) return InvalidArgumentError(p + ": empty device path");
    if (!(n.type.empty() || n.type == "b" || n.type == "c" || n.type == "u" || n.type == "p")) {
      return InvalidArgumentError(p + ": invalid device type \"" + n.type + "\"");
    }
    if (n.permissions != "none") {
      for (char c : n.permissions) {
        if (c != 'r' && c != 'w' && c != 'm') {
          return InvalidArgumentError(p + ": invalid permissions \"" + n.permissions + "\"");
        }
      }
    }
  }
  for (size_t i = 0; i < e.mounts.size(); ++i) {
    const std::string p = path + ".mounts[" + std::to_string(i) + "]";
    if (e.mounts[i].host_path.empty()) return InvalidArgumentError(p + ": empty hostPath");
    if (e.mounts[i].container_path.empty()) {
      return InvalidArgumentError(p + ": empty containerPath");
    }
  }
  for (size_t i = 0; i < e.hooks.size(); ++i) {
    const Hook& h = e.hooks[i];
    const std::string p = path + ".hooks[" + std::to_string(i) + "]";
    if (std::find(std::begin(kHookNames), std::end(kHookNames), h.hook_name) ==
        std::end(kHookNames)) {
      return InvalidArgumentError(p + ": invalid hookName \"" + h.hook_name + "\"");
    }
    if (h.path.empty()) return InvalidArgumentError(p + ": empty hook path");
    for (const std::string& kv : h.env) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        return InvalidArgumentError(p + ": invalid env \"" + kv + "\"");
      }
    }
  }
  return OkStatus();
}

bool EditsNeedHostPath(const ContainerEdits& e) {
  return std::any_of(e.device_nodes.begin(), e.device_nodes.end(),
                     [](const DeviceNode& n) { return !n.host_path.empty(); });
}
bool EditsNeedMountType(const ContainerEdits& e) {
  return std::any_of(e.mounts.begin(), e.mounts.end(),
                     [](const Mount& m) { return !m.type.empty(); });
}

}  // namespace

Version MinimumVersion(const Spec& spec) {
  Version v = kVersion030;
  std::vector<const ContainerEdits*> edits = {&spec.edits};
  for (const Device& d : spec.devices) edits.push_back(&d.edits);
  for (const ContainerEdits* e : edits) {
    if (EditsNeedMountType(*e)) v = std::max(v, kVersion040);
    if (EditsNeedHostPath(*e)) v = std::max(v, kVersion050);
    if (!e->additional_gids.empty()) v = std::max(v, kVersion070);
  }
  for (const Device& d : spec.devices) {
    if (!d.name.empty() &&
        !((d.name[0] >= 'a' && d.name[0] <= 'z') || (d.name[0] >= 'A' && d.name[0] <= 'Z'))) {
      v = std::max(v, kVersion050);
    }
  }
  const size_t slash = spec.kind.find('/');
  if (slash != std::string::npos && spec.kind.find('.', slash) != std::string::npos) {
    v = std::max(v, kVersion060);
  }
  return v;
}

Status ValidateSpec(const Spec& spec, const Version& max_version) {
  MIGD_ASSIGN_OR_RETURN(Version version, ParseVersion(spec.version));
  const size_t slash = spec.kind.find('/');
  if (slash == std::string::npos) {
    return InvalidArgumentError("invalid CDI kind \"" + spec.kind + "\": want <vendor>/<class>");
  }
  const Kind kind{spec.kind.substr(0, slash), spec.kind.substr(slash + 1)};
  MIGD_RETURN_IF_ERROR(ValidateKind(kind, /*allow_dots_in_class=*/version >= kVersion060));
  if (spec.devices.empty()) return InvalidArgumentError("invalid CDI spec: no devices");
  std::set<std::string> names;
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    const Device& d = spec.devices[i];
    MIGD_RETURN_IF_ERROR(ValidateDeviceName(d.name));
    if (!names.insert(d.name).second) {
      return InvalidArgumentError("invalid CDI spec: multiple devices \"" + d.name + "\"");
    }
    if (d.edits.empty()) {
      return InvalidArgumentError("invalid CDI device \"" + d.name + "\": empty device edits");
    }
    MIGD_RETURN_IF_ERROR(ValidateEdits(d.edits, "devices[" + std::to_string(i) + "]"));
  }
  MIGD_RETURN_IF_ERROR(ValidateEdits(spec.edits, "containerEdits"));
  const Version minimum = MinimumVersion(spec);
  if (version < minimum) {
    return InvalidArgumentError("CDI spec version " + version.ToString() +
                                " is below the version its content needs (" + minimum.ToString() +
                                ")");
  }
  if (version > max_version) {
    return InvalidArgumentError("CDI spec needs version " + version.ToString() +
                                ", above the configured maximum " + max_version.ToString() +
                                " (runtimes linking older CDI libraries could not read it)");
  }
  return OkStatus();
}

std::string SerializeSpec(const Spec& spec) {
  OrderedJson j;
  j["cdiVersion"] = spec.version;
  j["kind"] = spec.kind;
  OrderedJson devices = OrderedJson::array();
  for (const Device& d : spec.devices) {
    OrderedJson dj;
    dj["name"] = d.name;
    dj["containerEdits"] = EditsToJson(d.edits);
    devices.push_back(std::move(dj));
  }
  j["devices"] = std::move(devices);
  if (!spec.edits.empty()) j["containerEdits"] = EditsToJson(spec.edits);
  return j.dump(2) + "\n";
}

}  // namespace migd::cdi
