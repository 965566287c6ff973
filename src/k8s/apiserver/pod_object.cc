#include "k8s/apiserver/pod_object.h"

#include <absl/strings/ascii.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>

#include <utility>

#include "base/status_macros.h"

namespace migd::k8s {
namespace {

StatusOr<std::map<std::string, std::string>> ReadStringMap(const JsonReader& parent,
                                                           std::string_view key) {
  std::map<std::string, std::string> out;
  MIGD_ASSIGN_OR_RETURN(std::optional<JsonReader> obj, parent.OptionalObject(key));
  if (!obj) return out;
  for (auto it = obj->value().begin(); it != obj->value().end(); ++it) {
    MIGD_ASSIGN_OR_RETURN(out[it.key()], obj->Child(it.key()).AsString());
  }
  return out;
}

Status AppendContainers(const JsonReader& spec, std::string_view key, bool init,
                        std::vector<PodContainer>* out) {
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> list, spec.OptionalArray(key));
  for (const JsonReader& c : list) {
    PodContainer container;
    container.init = init;
    MIGD_ASSIGN_OR_RETURN(container.name, c.String("name"));
    MIGD_ASSIGN_OR_RETURN(std::optional<JsonReader> resources, c.OptionalObject("resources"));
    if (resources) {
      MIGD_ASSIGN_OR_RETURN(container.limits, ReadStringMap(*resources, "limits"));
    }
    out->push_back(std::move(container));
  }
  return OkStatus();
}

}  // namespace

std::optional<std::string> ObjectMeta::Annotation(std::string_view key) const {
  auto it = annotations.find(std::string(key));
  if (it == annotations.end()) return std::nullopt;
  return it->second;
}

StatusOr<ObjectMeta> ReadObjectMeta(const JsonReader& object) {
  MIGD_ASSIGN_OR_RETURN(JsonReader m, object.Object("metadata"));
  ObjectMeta meta;
  MIGD_ASSIGN_OR_RETURN(meta.name, m.String("name"));
  MIGD_ASSIGN_OR_RETURN(meta.ns, m.OptionalString("namespace"));
  MIGD_ASSIGN_OR_RETURN(meta.uid, m.OptionalString("uid"));
  MIGD_ASSIGN_OR_RETURN(meta.resource_version, m.OptionalString("resourceVersion"));
  MIGD_ASSIGN_OR_RETURN(std::string deletion, m.OptionalString("deletionTimestamp"));
  meta.deleting = !deletion.empty();
  MIGD_ASSIGN_OR_RETURN(meta.annotations, ReadStringMap(m, "annotations"));
  return meta;
}

bool PodObject::Active() const {
  return !meta.deleting && phase != "Succeeded" && phase != "Failed";
}

StatusOr<PodObject> ReadPodObject(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.ExpectObject());
  PodObject out;
  MIGD_ASSIGN_OR_RETURN(out.meta, ReadObjectMeta(r));
  const JsonReader meta = r.Child("metadata");
  if (out.meta.ns.empty()) return meta.ExpectedAt("namespace", "a namespace");
  if (out.meta.uid.empty()) return meta.ExpectedAt("uid", "the pod's uid");
  MIGD_ASSIGN_OR_RETURN(std::optional<JsonReader> spec, r.OptionalObject("spec"));
  if (spec) {
    MIGD_ASSIGN_OR_RETURN(out.node_name, spec->OptionalString("nodeName"));
    MIGD_RETURN_IF_ERROR(AppendContainers(*spec, "initContainers", true, &out.containers));
    MIGD_RETURN_IF_ERROR(AppendContainers(*spec, "containers", false, &out.containers));
  }
  MIGD_ASSIGN_OR_RETURN(std::optional<JsonReader> status, r.OptionalObject("status"));
  if (status) {
    MIGD_ASSIGN_OR_RETURN(out.phase, status->OptionalString("phase"));
  }
  return out;
}

StatusOr<PodObject> ParsePodObject(const nlohmann::json& pod, std::string source, StatusCode code) {
  return ReadPodObject(JsonReader(pod, std::move(source), code));
}

StatusOr<std::vector<PodObject>> ParsePodList(const nlohmann::json& list, std::string source,
                                              StatusCode code) {
  JsonReader r(list, std::move(source), code);
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> items, r.Array("items"));
  std::vector<PodObject> out;
  out.reserve(items.size());
  for (const JsonReader& item : items) {
    MIGD_ASSIGN_OR_RETURN(PodObject pod, ReadPodObject(item));
    out.push_back(std::move(pod));
  }
  return out;
}

StatusOr<int64_t> DeviceLimit(const PodContainer& container, const std::string& resource) {
  auto it = container.limits.find(resource);
  if (it == container.limits.end()) return 0;
  uint64_t n = 0;
  const absl::string_view text = absl::StripAsciiWhitespace(it->second);
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == text.npos;
  if (!digits || !absl::SimpleAtoi(text, &n) || n > static_cast<uint64_t>(INT32_MAX)) {
    return InvalidArgumentError(absl::StrCat("container ", container.name, ": resources.limits[",
                                             resource, "] is \"", it->second,
                                             "\", not a whole number of devices"));
  }
  return static_cast<int64_t>(n);
}

}  // namespace migd::k8s
