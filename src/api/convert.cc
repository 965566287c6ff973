#include "api/convert.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/status_macros.h"

namespace migd::api {
namespace {

int64_t UnixMs(Clock::TimePoint t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

void ToProto(const mig::Placement& p, v1::Placement* out) {
  out->set_start(p.start);
  out->set_size(p.size);
}

std::string Sub(std::string_view field, std::string_view name) {
  std::string s(field);
  s += '.';
  s += name;
  return s;
}

std::string Index(std::string_view field, size_t i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

// Decodes one UTF-8 sequence at s[i]; returns its length (0 if malformed)
// and the code point in *cp. Rejects overlong forms and surrogates.
size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t len = 0;
  uint32_t v = 0;
  uint32_t min = 0;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2, v = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, v = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return len;
}

std::string Hex(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02x", c);
  return buf;
}

Status TooLong(std::string_view field, size_t n) {
  return InvalidArgumentError(std::string(field) + ": " + std::to_string(n) + " bytes, at most " +
                              std::to_string(kMaxIdBytes));
}

}  // namespace

// --- Engine -> proto -------------------------------------------------------

v1::InstanceState ToProto(engine::InstanceState state) {
  switch (state) {
    case engine::InstanceState::kNone:
      return v1::INSTANCE_STATE_DESTROYED;
    case engine::InstanceState::kCreating:
      return v1::INSTANCE_STATE_CREATING;
    case engine::InstanceState::kActive:
      return v1::INSTANCE_STATE_ACTIVE;
    case engine::InstanceState::kIdle:
      return v1::INSTANCE_STATE_IDLE;
    case engine::InstanceState::kReclaiming:
      return v1::INSTANCE_STATE_RECLAIMING;
    case engine::InstanceState::kDeleting:
      return v1::INSTANCE_STATE_DELETING;
    case engine::InstanceState::kError:
      return v1::INSTANCE_STATE_ERROR;
  }
  return v1::INSTANCE_STATE_UNSPECIFIED;
}

v1::AllocationPath ToProto(planner::Stage stage) {
  switch (stage) {
    case planner::Stage::kReuse:
      return v1::ALLOCATION_PATH_REUSE;
    case planner::Stage::kFree:
      return v1::ALLOCATION_PATH_CREATE;
    case planner::Stage::kReclaim:
      return v1::ALLOCATION_PATH_RECLAIM_CREATE;
  }
  return v1::ALLOCATION_PATH_UNSPECIFIED;
}

void ToProto(const store::Owner& owner, v1::Owner* out) {
  out->Clear();
  switch (owner.kind) {
    case store::Owner::Kind::kNone:
      break;
    case store::Owner::Kind::kPod: {
      v1::PodOwner* pod = out->mutable_pod();
      pod->set_namespace_(owner.pod_namespace);
      pod->set_name(owner.pod_name);
      pod->set_uid(owner.pod_uid.value());
      pod->set_container(owner.container);
      break;
    }
    case store::Owner::Kind::kOpaque:
      out->set_opaque_id(owner.opaque_id);
      break;
  }
}

void ToProto(const store::InstanceIdentity& id, v1::Instance* out) {
  out->set_gpu_uuid(id.gpu_uuid.value());
  out->set_profile_id(id.profile_id.value());
  ToProto(id.placement, out->mutable_placement());
  out->set_gi_id(id.gi_id.value());
  out->set_ci_id(id.ci_id.value());
  out->set_mig_uuid(id.mig_uuid.value());
}

void ToProto(const engine::InstanceView& view, const std::string& cdi_device, v1::Instance* out) {
  ToProto(static_cast<const store::InstanceIdentity&>(view), out);
  out->set_state(ToProto(view.state));
  out->set_gpu_index(view.gpu.value());
  out->set_profile(view.profile);
  if (!view.owner.empty()) ToProto(view.owner, out->mutable_owner());
  out->set_request_id(view.request_id);
  out->set_last_used_unix_ms(view.last_used ? UnixMs(*view.last_used) : 0);
  out->set_cdi_device(cdi_device);
  out->set_unhealthy(view.unhealthy);
  out->set_health_reason(view.health_reason);
}

void ToProto(const engine::ForeignInstance& foreign, v1::ForeignInstance* out) {
  out->set_gpu_index(foreign.gpu.value());
  out->set_gpu_uuid(foreign.gpu_uuid.value());
  out->set_profile(foreign.profile);
  out->set_profile_id(foreign.profile_id.value());
  ToProto(foreign.placement, out->mutable_placement());
  out->set_gi_id(foreign.gi_id.value());
  for (const driver::ComputeInstanceInfo& ci : foreign.compute_instances) {
    out->add_ci_ids(ci.id.value());
  }
}

void ToProto(const engine::GpuView& gpu, v1::Gpu* out) {
  out->set_index(gpu.info.index.value());
  out->set_uuid(gpu.info.uuid.value());
  out->set_name(gpu.info.name);
  out->set_minor(gpu.info.minor);
  out->set_mig_enabled(gpu.info.mig.supported && gpu.info.mig.current == driver::MigMode::kEnabled);
  out->set_memory_total_mib(gpu.info.memory_total_mib);
  out->set_unhealthy(gpu.unhealthy);
  out->set_health_reason(gpu.health_reason);
  if (gpu.model == nullptr) return;
  out->set_memory_slices(gpu.model->memory_slices);
  for (const mig::GiProfile& p : gpu.model->gi_profiles) {
    v1::Profile* pp = out->add_profiles();
    pp->set_id(p.id.value());
    pp->set_name(p.name);
    pp->set_slice_count(p.placement_size());
    pp->set_instance_count(p.instance_count);
    pp->set_memory_mib(p.memory_mib);
    for (const mig::Placement& pl : p.placements) ToProto(pl, pp->add_placements());
  }
}

void ToProto(const planner::Plan& plan, v1::PlanResponse* out) {
  out->set_search(std::string(planner::SearchName(plan.search)));
  for (const planner::InstancePlan& ip : plan.instances) {
    v1::PlannedInstance* pi = out->add_instances();
    pi->set_path(ToProto(ip.stage));
    pi->set_gpu_index(ip.gpu.value());
    pi->set_profile(ip.profile);
    pi->set_profile_id(ip.profile_id.value());
    ToProto(ip.placement, pi->mutable_placement());
    // The engine keys planner occupants by MIG UUID.
    if (ip.stage == planner::Stage::kReuse) pi->set_reuse_mig_uuid(ip.reuse_key);
    for (const planner::ReclaimedInstance& r : ip.reclaim) {
      v1::ReclaimedInstance* ri = pi->add_reclaims();
      ri->set_gpu_index(r.gpu.value());
      ri->set_profile(r.profile);
      ToProto(r.placement, ri->mutable_placement());
      ri->set_mig_uuid(r.key);
    }
  }
}

void ToProto(const engine::InstanceEvent& event, const std::string& cdi_device,
             v1::InstanceEvent* out) {
  out->set_sequence(event.sequence);
  out->set_time_unix_ms(UnixMs(event.time));
  out->set_from(event.from == engine::InstanceState::kNone ? v1::INSTANCE_STATE_UNSPECIFIED
                                                           : ToProto(event.from));
  out->set_to(ToProto(event.to));
  ToProto(event.instance, cdi_device, out->mutable_instance());
  out->mutable_instance()->set_state(ToProto(event.to));
  out->set_reason(std::string(engine::EventReasonName(event.reason)));
}

// --- Validation --------------------------------------------------------------

Status ValidateId(std::string_view value, std::string_view field, std::string_view extra) {
  if (value.empty()) return InvalidArgumentError(std::string(field) + ": required");
  if (value.size() > kMaxIdBytes) return TooLong(field, value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '/' || c == '@' || c == '-' ||
                    extra.find(c) != std::string_view::npos;
    if (!ok) {
      const unsigned char u = static_cast<unsigned char>(c);
      const std::string shown =
          (u >= 0x21 && u < 0x7F) ? "'" + std::string(1, c) + "'" : "byte " + Hex(u);
      return InvalidArgumentError(std::string(field) + ": " + shown + " at offset " +
                                  std::to_string(i) + " is not allowed; use [A-Za-z0-9._:/@" +
                                  std::string(extra) + "-]");
    }
  }
  return OkStatus();
}

Status ValidateText(std::string_view value, std::string_view field, bool required) {
  if (value.empty()) {
    return required ? InvalidArgumentError(std::string(field) + ": required") : OkStatus();
  }
  if (value.size() > kMaxIdBytes) return TooLong(field, value.size());
  for (size_t i = 0; i < value.size();) {
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(value, i, &cp);
    if (len == 0) {
      return InvalidArgumentError(std::string(field) + ": invalid UTF-8 at offset " +
                                  std::to_string(i));
    }
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F)) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "U+%04X", cp);
      return InvalidArgumentError(std::string(field) + ": control character " + buf +
                                  " at offset " + std::to_string(i) + " is not allowed");
    }
    i += len;
  }
  return OkStatus();
}

StatusOr<engine::InstanceState> FromProto(int state, std::string_view field) {
  switch (state) {
    case v1::INSTANCE_STATE_CREATING:
      return engine::InstanceState::kCreating;
    case v1::INSTANCE_STATE_ACTIVE:
      return engine::InstanceState::kActive;
    case v1::INSTANCE_STATE_IDLE:
      return engine::InstanceState::kIdle;
    case v1::INSTANCE_STATE_RECLAIMING:
      return engine::InstanceState::kReclaiming;
    case v1::INSTANCE_STATE_DELETING:
      return engine::InstanceState::kDeleting;
    case v1::INSTANCE_STATE_ERROR:
      return engine::InstanceState::kError;
    case v1::INSTANCE_STATE_UNSPECIFIED:
      return InvalidArgumentError(std::string(field) +
                                  ": INSTANCE_STATE_UNSPECIFIED is not a state");
    case v1::INSTANCE_STATE_DESTROYED:
      return InvalidArgumentError(std::string(field) +
                                  ": INSTANCE_STATE_DESTROYED only appears in Watch events");
    default:
      return InvalidArgumentError(std::string(field) + ": unknown state " + std::to_string(state));
  }
}

StatusOr<store::Owner> FromProto(const v1::Owner& owner, std::string_view field) {
  switch (owner.kind_case()) {
    case v1::Owner::KIND_NOT_SET:
      return InvalidArgumentError(std::string(field) + ": required (pod or opaque_id)");
    case v1::Owner::kOpaqueId:
      MIGD_RETURN_IF_ERROR(ValidateText(owner.opaque_id(), Sub(field, "opaque_id"), true));
      return store::Owner::Opaque(owner.opaque_id());
    case v1::Owner::kPod: {
      const v1::PodOwner& pod = owner.pod();
      const std::string pf = Sub(field, "pod");
      MIGD_RETURN_IF_ERROR(ValidateText(pod.namespace_(), Sub(pf, "namespace"), true));
      MIGD_RETURN_IF_ERROR(ValidateText(pod.name(), Sub(pf, "name"), true));
      MIGD_RETURN_IF_ERROR(ValidateText(pod.uid(), Sub(pf, "uid"), true));
      MIGD_RETURN_IF_ERROR(ValidateText(pod.container(), Sub(pf, "container"), false));
      return store::Owner::Pod(pod.namespace_(), pod.name(), PodUid(pod.uid()), pod.container());
    }
  }
  return InvalidArgumentError(std::string(field) + ": unknown owner kind");
}

StatusOr<std::vector<engine::InstanceSpec>> SpecsFromProto(
    const google::protobuf::RepeatedPtrField<v1::InstanceSpec>& specs, std::string_view field) {
  if (specs.empty()) {
    return InvalidArgumentError(std::string(field) + ": required, 1 to " +
                                std::to_string(kMaxInstances) + " entries");
  }
  if (static_cast<size_t>(specs.size()) > kMaxInstances) {
    return InvalidArgumentError(std::string(field) + ": " + std::to_string(specs.size()) +
                                " entries, at most " + std::to_string(kMaxInstances));
  }
  std::vector<engine::InstanceSpec> out;
  out.reserve(specs.size());
  for (int i = 0; i < specs.size(); ++i) {
    const v1::InstanceSpec& s = specs[i];
    const std::string where = Index(field, static_cast<size_t>(i));
    MIGD_RETURN_IF_ERROR(ValidateId(s.profile(), Sub(where, "profile"), "+"));
    engine::InstanceSpec spec;
    spec.profile = s.profile();
    if (s.has_gpu()) spec.gpu = GpuIndex(s.gpu());
    if (s.has_placement()) {
      if (!s.has_gpu()) {
        return InvalidArgumentError(Sub(where, "placement") + ": requires " + Sub(where, "gpu"));
      }
      const v1::Placement& p = s.placement();
      if (p.size() == 0) {
        return InvalidArgumentError(Sub(where, "placement.size") + ": required (> 0)");
      }
      if (p.start() >= mig::kMaxMemorySlices || p.size() > mig::kMaxMemorySlices ||
          p.start() + p.size() > mig::kMaxMemorySlices) {
        return InvalidArgumentError(Sub(where, "placement") + ": " + std::to_string(p.start()) +
                                    ":" + std::to_string(p.size()) + " exceeds " +
                                    std::to_string(mig::kMaxMemorySlices) + " memory slices");
      }
      spec.placement = mig::Placement{.start = p.start(), .size = p.size()};
    }
    out.push_back(std::move(spec));
  }
  return out;
}

StatusOr<engine::AllocateRequest> FromProto(const v1::AllocateRequest& request) {
  MIGD_RETURN_IF_ERROR(ValidateId(request.request_id(), "request_id"));
  if (!request.has_owner()) return InvalidArgumentError("owner: required (pod or opaque_id)");
  engine::AllocateRequest out;
  out.request_id = request.request_id();
  MIGD_ASSIGN_OR_RETURN(out.owner, FromProto(request.owner(), "owner"));
  MIGD_ASSIGN_OR_RETURN(out.instances, SpecsFromProto(request.instances(), "instances"));
  return out;
}

Status ValidateRelease(const v1::ReleaseRequest& request) {
  switch (request.target_case()) {
    case v1::ReleaseRequest::kRequestId:
      return ValidateId(request.request_id(), "request_id");
    case v1::ReleaseRequest::kMigUuid:
      MIGD_RETURN_IF_ERROR(ValidateId(request.mig_uuid(), "mig_uuid"));
      if (IsValidGpuUuid(request.mig_uuid())) {
        return InvalidArgumentError("mig_uuid: '" + request.mig_uuid() +
                                    "' is a GPU UUID, not a MIG UUID: release one instance by "
                                    "its MIG-… UUID (migctl list), or the allocation by its "
                                    "request_id");
      }
      if (!IsValidMigUuid(request.mig_uuid())) {
        return InvalidArgumentError(
            "mig_uuid: '" + request.mig_uuid() +
            "' is not a MIG UUID (MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
      }
      return OkStatus();
    case v1::ReleaseRequest::TARGET_NOT_SET:
      break;
  }
  return InvalidArgumentError("target: required (request_id or mig_uuid)");
}

StatusOr<engine::ReclaimFilter> FromProto(const v1::ReclaimRequest& request) {
  engine::ReclaimFilter filter;
  if (request.has_gpu()) filter.gpu = GpuIndex(request.gpu());
  if (!request.profile().empty()) {
    MIGD_RETURN_IF_ERROR(ValidateId(request.profile(), "profile", "+"));
    filter.profile = request.profile();
  }
  return filter;
}

StatusOr<std::vector<engine::InstanceState>> StatesFromProto(const v1::ListRequest& request) {
  std::vector<engine::InstanceState> out;
  for (int i = 0; i < request.states_size(); ++i) {
    MIGD_ASSIGN_OR_RETURN(engine::InstanceState s,
                          FromProto(request.states(i), Index("states", static_cast<size_t>(i))));
    out.push_back(s);
  }
  return out;
}

}  // namespace migd::api
