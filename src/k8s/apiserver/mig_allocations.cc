#include "k8s/apiserver/mig_allocations.h"

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "base/json_reader.h"
#include "base/status_macros.h"

namespace migd::k8s::hami {
namespace {

constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();

// The runtime identity of one element; HAMi omits migUUID when empty
// (`json:"migUUID,omitempty"`), so "" is absence.
Status ReadIdentity(const JsonReader& e, MigAllocation* a) {
  MIGD_ASSIGN_OR_RETURN(std::string mig, e.OptionalString("migUUID"));
  if (!mig.empty()) a->mig_uuid = std::move(mig);
  if (e.Has("gpuInstanceID")) {
    MIGD_ASSIGN_OR_RETURN(a->gpu_instance_id, e.Uint32("gpuInstanceID"));
  }
  if (e.Has("computeInstanceID")) {
    MIGD_ASSIGN_OR_RETURN(a->compute_instance_id, e.Uint32("computeInstanceID"));
  }
  const int present =
      a->mig_uuid.has_value() + a->gpu_instance_id.has_value() + a->compute_instance_id.has_value();
  if (present != 0 && present != 3) {
    return e.Error(
        "partial runtime identity (migUUID, gpuInstanceID and computeInstanceID must be all "
        "present or all absent)");
  }
  if (!a->mig_uuid) return OkStatus();
  // A MIG device's identity, never its parent's: a "GPU-…" here means the
  // parent handle's UUID was read (NVML's ComputeInstanceInfo.device is the
  // "Parent device").
  if (!absl::StartsWith(*a->mig_uuid, "MIG-")) {
    return e.ErrorAt("migUUID", absl::StrCat("\"", *a->mig_uuid,
                                             "\" is not a MIG UUID (it must start with MIG-); "
                                             "the parent gpuUUID is \"",
                                             a->gpu_uuid, "\""));
  }
  if (*a->mig_uuid == a->gpu_uuid) {
    return e.ErrorAt("migUUID",
                     absl::StrCat("\"", *a->mig_uuid, "\" equals its parent GPU's UUID gpuUUID \"",
                                  a->gpu_uuid, "\""));
  }
  return OkStatus();
}

StatusOr<MigAllocation> ReadAllocation(const JsonReader& e) {
  MIGD_RETURN_IF_ERROR(e.ExpectObject());
  MigAllocation a;
  MIGD_ASSIGN_OR_RETURN(int64_t container, e.OptionalInt("containerIndex", 0, 0, kMaxIndex));
  MIGD_ASSIGN_OR_RETURN(int64_t device, e.OptionalInt("deviceIndex", 0, 0, kMaxIndex));
  a.container_index = static_cast<int>(container);
  a.device_index = static_cast<int>(device);
  MIGD_ASSIGN_OR_RETURN(a.gpu_uuid, e.OptionalString("gpuUUID"));
  if (a.gpu_uuid.empty()) return e.ExpectedAt("gpuUUID", "the reserved GPU's UUID");
  MIGD_ASSIGN_OR_RETURN(a.profile, e.OptionalString("profile"));
  if (a.profile.empty()) return e.ExpectedAt("profile", "a MIG profile name");
  MIGD_ASSIGN_OR_RETURN(std::optional<JsonReader> placement, e.OptionalObject("placement"));
  if (placement) {
    MIGD_ASSIGN_OR_RETURN(uint64_t start, placement->OptionalUint("start", 0, UINT32_MAX));
    MIGD_ASSIGN_OR_RETURN(uint64_t size, placement->OptionalUint("size", 0, UINT32_MAX));
    a.placement = {static_cast<uint32_t>(start), static_cast<uint32_t>(size)};
  }
  if (a.placement.size == 0) return e.ExpectedAt("placement", "a placement of size 1 or more");
  MIGD_RETURN_IF_ERROR(ReadIdentity(e, &a));
  return a;
}

nlohmann::ordered_json Encode(const MigAllocation& a) {
  nlohmann::ordered_json e;
  e["containerIndex"] = a.container_index;
  e["deviceIndex"] = a.device_index;
  e["gpuUUID"] = a.gpu_uuid;
  e["profile"] = a.profile;
  e["placement"] = {{"start", a.placement.start}, {"size", a.placement.size}};
  if (a.mig_uuid) e["migUUID"] = *a.mig_uuid;
  if (a.gpu_instance_id) e["gpuInstanceID"] = *a.gpu_instance_id;
  if (a.compute_instance_id) e["computeInstanceID"] = *a.compute_instance_id;
  return e;
}

}  // namespace

StatusOr<std::vector<MigAllocation>> DecodeMigAllocations(std::string_view text,
                                                          std::string_view source) {
  std::vector<MigAllocation> out;
  if (text.empty()) return out;
  MIGD_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, source));
  const JsonReader root(doc, std::string(source));
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> elements, root.Elements());
  std::set<std::pair<int, int>> seen;
  for (const JsonReader& e : elements) {
    MIGD_ASSIGN_OR_RETURN(MigAllocation a, ReadAllocation(e));
    if (!seen.insert({a.container_index, a.device_index}).second) {
      return e.Error(absl::StrCat("duplicate containerIndex ", a.container_index, " deviceIndex ",
                                  a.device_index));
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string EncodeMigAllocations(const std::vector<MigAllocation>& allocations) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const MigAllocation& a : allocations) arr.push_back(Encode(a));
  return arr.dump();
}

std::vector<MigAllocation> ContainerAllocations(const std::vector<MigAllocation>& all,
                                                int container_index) {
  std::vector<MigAllocation> out;
  for (const MigAllocation& a : all) {
    if (a.container_index == container_index) out.push_back(a);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.device_index < b.device_index; });
  return out;
}

StatusOr<std::string> SetRuntimeIdentity(std::string_view text, int container_index,
                                         const std::vector<RuntimeIdentity>& identities) {
  // Decode first: the same checks as any reader, and the deviceIndex order.
  MIGD_ASSIGN_OR_RETURN(std::vector<MigAllocation> all, DecodeMigAllocations(text));
  const std::vector<MigAllocation> mine = ContainerAllocations(all, container_index);
  if (mine.size() != identities.size()) {
    return AbortedError(absl::StrCat("the reservation of container index ", container_index,
                                     " has ", mine.size(), " entries, not ", identities.size(),
                                     " (it changed while allocating)"));
  }
  // Edit the document itself so that members a newer scheduler added survive.
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(text.begin(), text.end());
  for (nlohmann::ordered_json& e : doc) {
    if (e.value("containerIndex", 0) != container_index) continue;
    const int device = e.value("deviceIndex", 0);
    for (size_t i = 0; i < mine.size(); ++i) {
      if (mine[i].device_index != device) continue;
      e["migUUID"] = identities[i].mig_uuid;
      e["gpuInstanceID"] = identities[i].gpu_instance_id;
      e["computeInstanceID"] = identities[i].compute_instance_id;
    }
  }
  std::string out = doc.dump();
  // What is written is read back by the same rules (a bad identity is
  // refused here rather than published).
  MIGD_RETURN_IF_ERROR(DecodeMigAllocations(out).status());
  return out;
}

}  // namespace migd::k8s::hami
