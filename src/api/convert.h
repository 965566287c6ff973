// File: api/convert.h
//
// Conversion between the engine's value types and the migd.v1 messages, and
// validation of every request message before it reaches the engine.
//
// Validation returns kInvalidArgument whose message starts with the exact
// field path of the offending field, e.g.
//   "request_id: required"
//   "request_id: 300 bytes, at most 253"
//   "instances: 65 entries, at most 64"
//   "instances[1].placement: requires instances[1].gpu"
//   "owner.pod.uid: required"
// Limits (proto header comment): at most kMaxInstances instances per request;
// ids and names at most kMaxIdBytes bytes of [A-Za-z0-9._:/@-] (profile names
// may also contain '+', as in "1g.24gb+me"); owner fields at most kMaxIdBytes
// bytes of printable UTF-8 without control characters.
//
// Thread-safety: pure functions.
#ifndef MIGD_API_CONVERT_H_
#define MIGD_API_CONVERT_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/events.h"
#include "engine/instance_state.h"
#include "engine/instance_view.h"
#include "engine/manager.h"
#include "migd/v1/migd.pb.h"
#include "planner/planner.h"
#include "store/record.h"

namespace migd::api {

inline constexpr size_t kMaxInstances = 64;
inline constexpr size_t kMaxIdBytes = 253;

// --- Engine -> proto -------------------------------------------------------

v1::InstanceState ToProto(engine::InstanceState state);
// planner::Stage of one allocated instance -> its AllocationPath.
v1::AllocationPath ToProto(planner::Stage stage);
// Leaves `out` cleared when `owner` is kNone.
void ToProto(const store::Owner& owner, v1::Owner* out);
// The identity fields of an Instance (GPU UUID, profile id, placement, GI id,
// CI id, MIG UUID).
void ToProto(const store::InstanceIdentity& id, v1::Instance* out);
// `cdi_device` is the qualified CDI name ("" when CDI is off or unpublished).
void ToProto(const engine::InstanceView& view, const std::string& cdi_device, v1::Instance* out);
void ToProto(const engine::ForeignInstance& foreign, v1::ForeignInstance* out);
// Profiles (with their legal placements) come from gpu.model; none when MIG
// is disabled (model == nullptr).
void ToProto(const engine::GpuView& gpu, v1::Gpu* out);
void ToProto(const planner::Plan& plan, v1::PlanResponse* out);
void ToProto(const engine::InstanceEvent& event, const std::string& cdi_device,
             v1::InstanceEvent* out);

// --- Proto -> engine (validating) ------------------------------------------

// The proto state as an engine state. kInvalidArgument (naming `field`) for
// UNSPECIFIED, DESTROYED (never a tracked state) and unknown numbers.
StatusOr<engine::InstanceState> FromProto(int state, std::string_view field);

// Checks and converts an AllocateRequest (request_id, owner, instances).
StatusOr<engine::AllocateRequest> FromProto(const v1::AllocateRequest& request);
// Checks and converts the instance list of Allocate and Plan; `field` is the
// repeated field's name ("instances").
StatusOr<std::vector<engine::InstanceSpec>> SpecsFromProto(
    const google::protobuf::RepeatedPtrField<v1::InstanceSpec>& specs, std::string_view field);
StatusOr<store::Owner> FromProto(const v1::Owner& owner, std::string_view field);

// Checks a ReleaseRequest: exactly one of request_id / mig_uuid, well formed
// (a mig_uuid must be a MIG UUID, MIG-…; a GPU UUID is refused as such).
Status ValidateRelease(const v1::ReleaseRequest& request);
// Checks a ReclaimRequest and converts it to the engine's filter.
StatusOr<engine::ReclaimFilter> FromProto(const v1::ReclaimRequest& request);
// Checks a ListRequest's state filter; returns the states (empty = all).
StatusOr<std::vector<engine::InstanceState>> StatesFromProto(const v1::ListRequest& request);

// The building blocks, exposed for tests and for other checks:
// `value` non-empty, at most kMaxIdBytes, every byte in [A-Za-z0-9._:/@-]
// (plus `extra`).
Status ValidateId(std::string_view value, std::string_view field, std::string_view extra = "");
// `value` non-empty (when `required`), at most kMaxIdBytes, valid UTF-8 without
// control characters (C0, DEL, C1).
Status ValidateText(std::string_view value, std::string_view field, bool required);

}  // namespace migd::api

#endif  // MIGD_API_CONVERT_H_
