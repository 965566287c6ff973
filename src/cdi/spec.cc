#include "cdi/spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "base/status_macros.h"

namespace migd::cdi {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kHookNames[] = {"prestart",       "createRuntime", "createContainer",
                                           "startContainer", "poststart",     "poststop"};

Status FieldError(std::string_view source, const std::string& path, std::string_view what) {
  return InvalidArgumentError(std::string(source) + ": " + path + ": " + std::string(what));
}

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

// ---- strict parsing ---------------------------------------------------------

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Status Keys(const Json& obj, const std::string& path,
              std::initializer_list<std::string_view> known) const {
    if (!obj.is_object()) return FieldError(source_, path, "expected an object");
    for (const auto& [key, value] : obj.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        return FieldError(source_, path, "unknown field \"" + key + "\"");
      }
    }
    return OkStatus();
  }

  Status String(const Json& obj, const char* key, const std::string& path, std::string* out) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return OkStatus();
    if (!it->is_string()) return FieldError(source_, path + "." + key, "expected a string");
    *out = it->get<std::string>();
    return OkStatus();
  }

  Status Strings(const Json& obj, const char* key, const std::string& path,
                 std::vector<std::string>* out) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return OkStatus();
    const std::string p = path + "." + key;
    if (!it->is_array()) return FieldError(source_, p, "expected a list of strings");
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string()) {
        return FieldError(source_, p + "[" + std::to_string(i) + "]", "expected a string");
      }
      out->push_back((*it)[i].get<std::string>());
    }
    return OkStatus();
  }

  template <typename T>
  Status Int(const Json& obj, const char* key, const std::string& path,
             std::optional<T>* out) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return OkStatus();
    StatusOr<T> v = IntValue<T>(*it, path + "." + key);
    if (!v.ok()) return v.status();
    *out = *v;
    return OkStatus();
  }

  template <typename T>
  StatusOr<T> IntValue(const Json& j, const std::string& path) const {
    if (j.is_number_unsigned()) {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(u);
    } else if (j.is_number_integer()) {
      const int64_t s = j.get<int64_t>();
      if (s >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
          (s < 0 ||
           static_cast<uint64_t>(s) <= static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
        return static_cast<T>(s);
      }
    } else {
      return FieldError(source_, path, "expected an integer");
    }
    return FieldError(source_, path, "integer out of range");
  }

  StatusOr<DeviceNode> Node(const Json& j, const std::string& path) const {
    MIGD_RETURN_IF_ERROR(Keys(
        j, path,
        {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}));
    DeviceNode n;
    MIGD_RETURN_IF_ERROR(String(j, "path", path, &n.path));
    MIGD_RETURN_IF_ERROR(String(j, "hostPath", path, &n.host_path));
    MIGD_RETURN_IF_ERROR(String(j, "type", path, &n.type));
    MIGD_RETURN_IF_ERROR(Int(j, "major", path, &n.major));
    MIGD_RETURN_IF_ERROR(Int(j, "minor", path, &n.minor));
    MIGD_RETURN_IF_ERROR(Int(j, "fileMode", path, &n.file_mode));
    MIGD_RETURN_IF_ERROR(String(j, "permissions", path, &n.permissions));
    MIGD_RETURN_IF_ERROR(Int(j, "uid", path, &n.uid));
    MIGD_RETURN_IF_ERROR(Int(j, "gid", path, &n.gid));
    return n;
  }

  StatusOr<ContainerEdits> Edits(const Json& j, const std::string& path) const {
    ContainerEdits e;
    if (j.is_null()) return e;
    if (j.is_object()) {
      for (const char* unsupported : {"intelRdt", "netDevices"}) {
        if (j.contains(unsupported)) {
          return FieldError(source_, path + "." + unsupported,
                            "not supported by migd (needs CDI spec ≥ 0.7.0 and is unknown to "
                            "CDI library 0.5.x)");
        }
      }
    }
    MIGD_RETURN_IF_ERROR(
        Keys(j, path, {"env", "deviceNodes", "mounts", "hooks", "additionalGids"}));
    MIGD_RETURN_IF_ERROR(Strings(j, "env", path, &e.env));
    Status nodes_status = List(j, "deviceNodes", path, [&](const Json& item, const std::string& p) {
      StatusOr<DeviceNode> n = Node(item, p);
      if (!n.ok()) return n.status();
      e.device_nodes.push_back(std::move(*n));
      return OkStatus();
    });
    if (!nodes_status.ok()) return nodes_status;
    Status mounts_status = List(j, "mounts", path, [&](const Json& item, const std::string& p) {
      MIGD_RETURN_IF_ERROR(Keys(item, p, {"hostPath", "containerPath", "options", "type"}));
      Mount m;
      MIGD_RETURN_IF_ERROR(String(item, "hostPath", p, &m.host_path));
      MIGD_RETURN_IF_ERROR(String(item, "containerPath", p, &m.container_path));
      MIGD_RETURN_IF_ERROR(Strings(item, "options", p, &m.options));
      MIGD_RETURN_IF_ERROR(String(item, "type", p, &m.type));
      e.mounts.push_back(std::move(m));
      return OkStatus();
    });
    if (!mounts_status.ok()) return mounts_status;
    Status hooks_status = List(j, "hooks", path, [&](const Json& item, const std::string& p) {
      MIGD_RETURN_IF_ERROR(Keys(item, p, {"hookName", "path", "args", "env", "timeout"}));
      Hook h;
      MIGD_RETURN_IF_ERROR(String(item, "hookName", p, &h.hook_name));
      MIGD_RETURN_IF_ERROR(String(item, "path", p, &h.path));
      MIGD_RETURN_IF_ERROR(Strings(item, "args", p, &h.args));
      MIGD_RETURN_IF_ERROR(Strings(item, "env", p, &h.env));
      MIGD_RETURN_IF_ERROR(Int(item, "timeout", p, &h.timeout));
      e.hooks.push_back(std::move(h));
      return OkStatus();
    });
    if (!hooks_status.ok()) return hooks_status;
    Status gids_status =
        List(j, "additionalGids", path, [&](const Json& item, const std::string& p) {
          StatusOr<uint32_t> gid = IntValue<uint32_t>(item, p);
          if (!gid.ok()) return gid.status();
          e.additional_gids.push_back(*gid);
          return OkStatus();
        });
    if (!gids_status.ok()) return gids_status;
    return e;
  }

  template <typename F>
  Status List(const Json& obj, const char* key, const std::string& path, F&& each) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return OkStatus();
    const std::string p = path + "." + key;
    if (!it->is_array()) return FieldError(source_, p, "expected a list");
    for (size_t i = 0; i < it->size(); ++i) {
      MIGD_RETURN_IF_ERROR(each((*it)[i], p + "[" + std::to_string(i) + "]"));
    }
    return OkStatus();
  }

  StatusOr<Spec> Document(const Json& j) const {
    MIGD_RETURN_IF_ERROR(
        Keys(j, "$", {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}));
    Spec spec;
    MIGD_RETURN_IF_ERROR(String(j, "cdiVersion", "$", &spec.version));
    MIGD_RETURN_IF_ERROR(String(j, "kind", "$", &spec.kind));
    if (spec.version.empty()) return FieldError(source_, "$.cdiVersion", "missing");
    if (spec.kind.empty()) return FieldError(source_, "$.kind", "missing");
    if (auto it = j.find("annotations"); it != j.end() && !it->is_null() && !it->is_object()) {
      return FieldError(source_, "$.annotations", "expected an object");
    }
    Status devices_status = List(j, "devices", "$", [&](const Json& item, const std::string& p) {
      MIGD_RETURN_IF_ERROR(Keys(item, p, {"name", "annotations", "containerEdits"}));
      Device d;
      MIGD_RETURN_IF_ERROR(String(item, "name", p, &d.name));
      if (auto it = item.find("containerEdits"); it != item.end()) {
        StatusOr<ContainerEdits> e = Edits(*it, p + ".containerEdits");
        if (!e.ok()) return e.status();
        d.edits = std::move(*e);
      }
      spec.devices.push_back(std::move(d));
      return OkStatus();
    });
    if (!devices_status.ok()) return devices_status;
    if (auto it = j.find("containerEdits"); it != j.end()) {
      MIGD_ASSIGN_OR_RETURN(spec.edits, Edits(*it, "$.containerEdits"));
    }
    return spec;
  }

 private:
  std::string_view source_;
};

// YAML → JSON with the YAML 1.1-style scalar typing of sigs.k8s.io/yaml:
// quoted scalars are strings; plain ones become null, bool, integer or
// float when they look like one, else strings.
Json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      Json arr = Json::array();
      for (const YAML::Node& item : node) arr.push_back(YamlToJson(item));
      return arr;
    }
    case YAML::NodeType::Map: {
      Json obj = Json::object();
      for (const auto& kv : node) obj[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return obj;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted
  if (s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (!s.empty()) {
    size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    bool digits = i < s.size();
    for (size_t k = i; k < s.size(); ++k) digits = digits && (s[k] >= '0' && s[k] <= '9');
    if (digits) {
      try {
        if (s[0] == '-') return std::stoll(s);
        return std::stoull(s);
      } catch (const std::exception&) {
        return s;  // out of range: keep the text; the typed reader rejects it
      }
    }
  }
  return s;
}

bool LooksLikeYaml(std::string_view text, std::string_view source) {
  if (source.ends_with(".yaml") || source.ends_with(".yml")) return true;
  if (source.ends_with(".json")) return false;
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first == std::string_view::npos || text[first] != '{';
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

namespace {

StatusOr<Json> ParseDocument(std::string_view text, std::string_view source) {
  Json doc;
  if (LooksLikeYaml(text, source)) {
    try {
      doc = YamlToJson(YAML::Load(std::string(text)));
      // yaml-cpp, unlike the JSON parser, passes bytes that are not UTF-8
      // through into strings; refuse them here, where the error names the
      // file, since SerializeSpec would otherwise throw on them (found by
      // fuzz/cdi_common_edits_fuzz.cc).
      (void)doc.dump();
    } catch (const std::exception& e) {
      return InvalidArgumentError(std::string(source) + ": malformed YAML: " + e.what());
    }
  } else {
    try {
      doc = Json::parse(text);
    } catch (const std::exception& e) {
      return InvalidArgumentError(std::string(source) + ": malformed JSON: " + e.what());
    }
  }
  if (!doc.is_object()) {
    return InvalidArgumentError(std::string(source) + ": expected a CDI spec (a mapping)");
  }
  return doc;
}

}  // namespace

StatusOr<SpecHeader> ParseSpecHeader(std::string_view text, std::string_view source) {
  MIGD_ASSIGN_OR_RETURN(Json doc, ParseDocument(text, source));
  SpecHeader out;
  if (auto it = doc.find("kind"); it != doc.end() && it->is_string()) {
    out.kind = it->get<std::string>();
  }
  if (auto it = doc.find("devices"); it != doc.end() && it->is_array()) {
    for (const Json& d : *it) {
      if (!d.is_object()) continue;
      if (auto n = d.find("name"); n != d.end() && n->is_string()) {
        out.device_names.push_back(n->get<std::string>());
      }
    }
  }
  return out;
}

StatusOr<Spec> ParseSpecDocument(std::string_view text, std::string_view source) {
  MIGD_ASSIGN_OR_RETURN(Json doc, ParseDocument(text, source));
  try {
    return Parser(source).Document(doc);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(source) + ": " + e.what());
  }
}

}  // namespace migd::cdi
