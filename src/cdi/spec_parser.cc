// ParseSpecDocument and ParseSpecHeader (declared in cdi/spec.h): CDI spec
// documents, JSON or YAML, read through base/JsonReader. The accepted fields
// are those of the CDI spec's Go types (cncf-tags/container-device-interface
// specs-go/config.go; SPEC.md "CDI JSON Specification").
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/json_reader.h"
#include "base/status_macros.h"
#include "cdi/spec.h"

namespace migd::cdi {
namespace {

using Json = nlohmann::json;

// An optional integer member: absent or null is nullopt.
template <typename T>
StatusOr<std::optional<T>> OptionalInteger(const JsonReader& r, std::string_view key) {
  if (!r.Has(key)) return std::optional<T>();
  if constexpr (std::is_signed_v<T>) {
    MIGD_ASSIGN_OR_RETURN(int64_t v, r.Int(key, std::numeric_limits<T>::min(),
                                           std::numeric_limits<T>::max()));
    return std::optional<T>(static_cast<T>(v));
  } else {
    MIGD_ASSIGN_OR_RETURN(uint64_t v, r.Uint(key, std::numeric_limits<T>::max()));
    return std::optional<T>(static_cast<T>(v));
  }
}

StatusOr<std::vector<std::string>> Strings(const JsonReader& r, std::string_view key) {
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> items, r.OptionalArray(key));
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const JsonReader& item : items) {
    MIGD_ASSIGN_OR_RETURN(std::string s, item.AsString());
    out.push_back(std::move(s));
  }
  return out;
}

StatusOr<DeviceNode> ReadNode(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys(
      {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}));
  DeviceNode n;
  MIGD_ASSIGN_OR_RETURN(n.path, r.OptionalString("path"));
  MIGD_ASSIGN_OR_RETURN(n.host_path, r.OptionalString("hostPath"));
  MIGD_ASSIGN_OR_RETURN(n.type, r.OptionalString("type"));
  MIGD_ASSIGN_OR_RETURN(n.major, OptionalInteger<int64_t>(r, "major"));
  MIGD_ASSIGN_OR_RETURN(n.minor, OptionalInteger<int64_t>(r, "minor"));
  MIGD_ASSIGN_OR_RETURN(n.file_mode, OptionalInteger<uint32_t>(r, "fileMode"));
  MIGD_ASSIGN_OR_RETURN(n.permissions, r.OptionalString("permissions"));
  MIGD_ASSIGN_OR_RETURN(n.uid, OptionalInteger<uint32_t>(r, "uid"));
  MIGD_ASSIGN_OR_RETURN(n.gid, OptionalInteger<uint32_t>(r, "gid"));
  return n;
}

StatusOr<Mount> ReadMount(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys({"hostPath", "containerPath", "options", "type"}));
  Mount m;
  MIGD_ASSIGN_OR_RETURN(m.host_path, r.OptionalString("hostPath"));
  MIGD_ASSIGN_OR_RETURN(m.container_path, r.OptionalString("containerPath"));
  MIGD_ASSIGN_OR_RETURN(m.options, Strings(r, "options"));
  MIGD_ASSIGN_OR_RETURN(m.type, r.OptionalString("type"));
  return m;
}

StatusOr<Hook> ReadHook(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys({"hookName", "path", "args", "env", "timeout"}));
  Hook h;
  MIGD_ASSIGN_OR_RETURN(h.hook_name, r.OptionalString("hookName"));
  MIGD_ASSIGN_OR_RETURN(h.path, r.OptionalString("path"));
  MIGD_ASSIGN_OR_RETURN(h.args, Strings(r, "args"));
  MIGD_ASSIGN_OR_RETURN(h.env, Strings(r, "env"));
  MIGD_ASSIGN_OR_RETURN(h.timeout, OptionalInteger<int64_t>(r, "timeout"));
  return h;
}

// Appends read(element) for every element of the optional array `key`.
template <typename T, typename Read>
Status ReadList(const JsonReader& r, std::string_view key, Read read, std::vector<T>* out) {
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> items, r.OptionalArray(key));
  for (const JsonReader& item : items) {
    MIGD_ASSIGN_OR_RETURN(T value, read(item));
    out->push_back(std::move(value));
  }
  return OkStatus();
}

// `r` is the containerEdits member; null is empty edits.
StatusOr<ContainerEdits> ReadEdits(const JsonReader& r) {
  ContainerEdits e;
  if (r.value().is_null()) return e;
  MIGD_RETURN_IF_ERROR(r.ExpectObject());
  for (const char* unsupported : {"intelRdt", "netDevices"}) {
    if (r.value().contains(unsupported)) {
      return r.ErrorAt(unsupported,
                       "not supported by migd (needs CDI spec 0.7.0 or later, which CDI "
                       "library 0.5.x does not know)");
    }
  }
  MIGD_RETURN_IF_ERROR(
      r.NoUnknownKeys({"env", "deviceNodes", "mounts", "hooks", "additionalGids"}));
  MIGD_ASSIGN_OR_RETURN(e.env, Strings(r, "env"));
  MIGD_RETURN_IF_ERROR(ReadList(r, "deviceNodes", ReadNode, &e.device_nodes));
  MIGD_RETURN_IF_ERROR(ReadList(r, "mounts", ReadMount, &e.mounts));
  MIGD_RETURN_IF_ERROR(ReadList(r, "hooks", ReadHook, &e.hooks));
  auto read_gid = [](const JsonReader& item) -> StatusOr<uint32_t> {
    MIGD_ASSIGN_OR_RETURN(uint64_t gid, item.AsUint(std::numeric_limits<uint32_t>::max()));
    return static_cast<uint32_t>(gid);
  };
  MIGD_RETURN_IF_ERROR(ReadList(r, "additionalGids", read_gid, &e.additional_gids));
  return e;
}

StatusOr<ContainerEdits> ReadOptionalEdits(const JsonReader& r) {
  if (!r.Has("containerEdits")) return ContainerEdits{};
  return ReadEdits(r.Child("containerEdits"));
}

Status ExpectOptionalObject(const JsonReader& r, std::string_view key) {
  return r.OptionalObject(key).status();
}

StatusOr<Device> ReadDevice(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys({"name", "annotations", "containerEdits"}));
  MIGD_RETURN_IF_ERROR(ExpectOptionalObject(r, "annotations"));  // read and dropped
  Device d;
  MIGD_ASSIGN_OR_RETURN(d.name, r.OptionalString("name"));
  MIGD_ASSIGN_OR_RETURN(d.edits, ReadOptionalEdits(r));
  return d;
}

StatusOr<Spec> ReadSpec(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(
      r.NoUnknownKeys({"cdiVersion", "kind", "annotations", "devices", "containerEdits"}));
  Spec spec;
  MIGD_ASSIGN_OR_RETURN(spec.version, r.String("cdiVersion"));
  MIGD_ASSIGN_OR_RETURN(spec.kind, r.String("kind"));
  if (spec.version.empty()) return r.ExpectedAt("cdiVersion", "a CDI version such as \"0.5.0\"");
  if (spec.kind.empty()) return r.ExpectedAt("kind", "a kind \"<vendor>/<class>\"");
  MIGD_RETURN_IF_ERROR(ExpectOptionalObject(r, "annotations"));  // read and dropped
  MIGD_RETURN_IF_ERROR(ReadList(r, "devices", ReadDevice, &spec.devices));
  MIGD_ASSIGN_OR_RETURN(spec.edits, ReadOptionalEdits(r));
  return spec;
}

// YAML → JSON with the YAML 1.1-style scalar typing of sigs.k8s.io/yaml
// (which the CDI library uses): quoted scalars are strings; plain ones become
// null, bool or integer when they look like one, else strings.
Json YamlScalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted
  if (s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (sign == s.size() || s.find_first_not_of("0123456789", sign) != std::string::npos) return s;
  try {
    if (s[0] == '-') return std::stoll(s);
    return std::stoull(s);
  } catch (const std::exception&) {
    return s;  // out of range: keep the text; the typed reader rejects it
  }
}

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
  return YamlScalarToJson(node);
}

bool LooksLikeYaml(std::string_view text, std::string_view source) {
  if (source.ends_with(".yaml") || source.ends_with(".yml")) return true;
  if (source.ends_with(".json")) return false;
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first == std::string_view::npos || text[first] != '{';
}

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
    MIGD_ASSIGN_OR_RETURN(doc, ParseJson(text, source));
  }
  if (!doc.is_object()) {
    return JsonReader(doc, std::string(source)).Expected("a CDI spec (a mapping)");
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
  return ReadSpec(JsonReader(doc, std::string(source)));
}

}  // namespace migd::cdi
