#include "cli/requests.h"

#include <absl/strings/ascii.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>

#include <charconv>

#include "planner/plan_json.h"

namespace migd::cli {
namespace {

// The comma-separated items of repeatable flags, each trimmed.
std::vector<std::string> SplitCommas(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    for (absl::string_view part : absl::StrSplit(item, ',')) {
      out.emplace_back(absl::StripAsciiWhitespace(part));
    }
  }
  return out;
}

}  // namespace

StatusOr<std::chrono::milliseconds> ParseTimeout(std::string_view text) {
  const std::string bad = "--timeout: want a positive duration such as 500ms, 30s or 2m, got '" +
                          std::string(text) + "'";
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == begin) return InvalidArgumentError(bad);
  const std::string_view unit(ptr, static_cast<size_t>(end - ptr));
  double ms = 0;
  if (unit.empty() || unit == "s") {
    ms = value * 1000;
  } else if (unit == "ms") {
    ms = value;
  } else if (unit == "m") {
    ms = value * 60000;
  } else {
    return InvalidArgumentError(bad);
  }
  // At least 1 ms, at most a day: beyond that the number is surely a mistake.
  if (!(ms >= 1) || ms > 86400000.0) return InvalidArgumentError(bad);
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

StatusOr<migd::v1::PodOwner> ParsePodOwner(std::string_view text) {
  const std::vector<std::string> parts = absl::StrSplit(std::string(text), '/');
  if (parts.size() < 3 || parts.size() > 4) {
    return InvalidArgumentError("--pod: want NAMESPACE/NAME/UID[/CONTAINER], got '" +
                                std::string(text) + "'");
  }
  static constexpr const char* kNames[] = {"namespace", "name", "uid", "container"};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) {
      return InvalidArgumentError("--pod: the " + std::string(kNames[i]) + " is empty in '" +
                                  std::string(text) + "' (want NAMESPACE/NAME/UID[/CONTAINER])");
    }
  }
  migd::v1::PodOwner pod;
  pod.set_namespace_(parts[0]);
  pod.set_name(parts[1]);
  pod.set_uid(parts[2]);
  if (parts.size() == 4) pod.set_container(parts[3]);
  return pod;
}

StatusOr<std::vector<migd::v1::InstanceSpec>> ParseInstanceSpecs(
    const std::vector<std::string>& items) {
  if (items.empty()) {
    return InvalidArgumentError(
        "no instances: give at least one [gpuN/]PROFILE[@START:SIZE], e.g. 3g.40gb");
  }
  const std::string text = absl::StrJoin(items, ",");
  StatusOr<std::vector<planner::InstanceRequest>> parsed = planner::ParseRequest(text);
  if (!parsed.ok()) return parsed.status();
  std::vector<migd::v1::InstanceSpec> specs;
  for (size_t i = 0; i < parsed->size(); ++i) {
    const planner::InstanceRequest& r = (*parsed)[i];
    migd::v1::InstanceSpec spec;
    spec.set_profile(r.profile);
    if (r.gpu.has_value()) spec.set_gpu(r.gpu->value());
    if (r.placement.has_value()) {
      if (!r.gpu.has_value()) {
        return InvalidArgumentError(
            "request item " + std::to_string(i) + " '" + r.profile + "@" + r.placement->ToString() +
            "': a placement needs a GPU, e.g. gpu0/" + r.profile + "@" + r.placement->ToString());
      }
      spec.mutable_placement()->set_start(r.placement->start);
      spec.mutable_placement()->set_size(r.placement->size);
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

StatusOr<std::vector<migd::v1::InstanceState>> ParseStates(const std::vector<std::string>& items) {
  std::vector<migd::v1::InstanceState> out;
  for (const std::string& item : SplitCommas(items)) {
    const std::string s = absl::AsciiStrToLower(item);
    migd::v1::InstanceState state;
    if (s == "creating") {
      state = migd::v1::INSTANCE_STATE_CREATING;
    } else if (s == "active") {
      state = migd::v1::INSTANCE_STATE_ACTIVE;
    } else if (s == "idle") {
      state = migd::v1::INSTANCE_STATE_IDLE;
    } else if (s == "reclaiming") {
      state = migd::v1::INSTANCE_STATE_RECLAIMING;
    } else if (s == "deleting") {
      state = migd::v1::INSTANCE_STATE_DELETING;
    } else if (s == "error") {
      state = migd::v1::INSTANCE_STATE_ERROR;
    } else {
      return InvalidArgumentError("--state: unknown state '" + item +
                                  "' (want active, idle, creating, reclaiming, deleting or "
                                  "error)");
    }
    out.push_back(state);
  }
  return out;
}

StatusOr<migd::v1::AllocateRequest> BuildAllocateRequest(const AllocateOptions& options) {
  if (options.request_id.empty()) {
    return InvalidArgumentError("--id: required (a unique id for this allocation, e.g. job-7)");
  }
  if (options.owner.empty() == options.pod.empty()) {
    return InvalidArgumentError(
        "give exactly one owner: --owner ID or --pod NAMESPACE/NAME/UID[/CONTAINER]");
  }
  migd::v1::AllocateRequest request;
  request.set_request_id(options.request_id);
  if (!options.owner.empty()) {
    request.mutable_owner()->set_opaque_id(options.owner);
  } else {
    StatusOr<migd::v1::PodOwner> pod = ParsePodOwner(options.pod);
    if (!pod.ok()) return pod.status();
    *request.mutable_owner()->mutable_pod() = *std::move(pod);
  }
  StatusOr<std::vector<migd::v1::InstanceSpec>> specs = ParseInstanceSpecs(options.items);
  if (!specs.ok()) return specs.status();
  for (migd::v1::InstanceSpec& s : *specs) *request.add_instances() = std::move(s);
  return request;
}

StatusOr<migd::v1::ReleaseRequest> BuildReleaseRequest(const ReleaseOptions& options) {
  if (options.request_id.empty() == options.mig_uuid.empty()) {
    return InvalidArgumentError("give exactly one of --id REQUEST or --mig MIG-UUID");
  }
  migd::v1::ReleaseRequest request;
  if (!options.request_id.empty()) {
    request.set_request_id(options.request_id);
  } else {
    request.set_mig_uuid(options.mig_uuid);
  }
  return request;
}

}  // namespace migd::cli
