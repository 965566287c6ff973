// File: cli/requests.h
//
// migctl's flags as migd.v1 requests: the options of each client subcommand
// and the parsers of their texts (--timeout, --pod, --state, instance
// items). Every error is kInvalidArgument naming the flag at fault, so the
// subcommand exits 1 (usage) without calling migd.
//
// Thread-safety: pure functions over values.
#ifndef MIGD_CLI_REQUESTS_H_
#define MIGD_CLI_REQUESTS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "migd/v1/migd.pb.h"

namespace migd::cli {

// Parses "--timeout": a positive number with unit ms, s or m ("500ms",
// "30s", "2m"); a bare number is seconds. kInvalidArgument otherwise.
StatusOr<std::chrono::milliseconds> ParseTimeout(std::string_view text);

// Parses "--pod ns/name/uid[/container]"; kInvalidArgument names the part
// that is missing or empty.
StatusOr<migd::v1::PodOwner> ParsePodOwner(std::string_view text);

// Parses instance items in the planner's request syntax
// (`[gpuN/]PROFILE[@START:SIZE]`, planner/plan_json.h); each item may itself
// hold comma-separated items. kInvalidArgument names the bad item, a
// placement without a GPU, or an empty list.
StatusOr<std::vector<migd::v1::InstanceSpec>> ParseInstanceSpecs(
    const std::vector<std::string>& items);

// "active", "idle", "creating", "reclaiming", "deleting", "error" (any case,
// comma-separated items allowed); kInvalidArgument otherwise.
StatusOr<std::vector<migd::v1::InstanceState>> ParseStates(const std::vector<std::string>& items);

struct StatusOptions {
  std::optional<uint32_t> gpu;
};
struct ListOptions {
  std::optional<uint32_t> gpu;
  std::vector<std::string> states;
};
struct AllocateOptions {
  std::string request_id;
  std::string owner;  // opaque owner id; exclusive with pod
  std::string pod;    // ns/name/uid[/container]
  std::vector<std::string> items;
};
struct ReleaseOptions {
  std::string request_id;  // exactly one of request_id, mig_uuid
  std::string mig_uuid;
};
struct RemotePlanOptions {
  std::vector<std::string> items;
};
struct ReclaimOptions {
  std::optional<uint32_t> gpu;
  std::string profile;
};
struct HealthClearOptions {
  uint32_t gpu = 0;  // GPU index (required flag)
};

// Builds an AllocateRequest; kInvalidArgument names the flag at fault
// (--id missing, neither or both of --owner/--pod, bad items).
StatusOr<migd::v1::AllocateRequest> BuildAllocateRequest(const AllocateOptions& options);
// Builds a ReleaseRequest; kInvalidArgument unless exactly one target is set.
StatusOr<migd::v1::ReleaseRequest> BuildReleaseRequest(const ReleaseOptions& options);

}  // namespace migd::cli

#endif  // MIGD_CLI_REQUESTS_H_
