#include "store/record.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/json_reader.h"
#include "base/status_macros.h"

namespace migd::store {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kPhaseNames[] = {"intent", "committed"};
constexpr std::string_view kStateNames[] = {"Creating",   "Active",   "Idle",
                                            "Reclaiming", "Deleting", "Error"};

// Well-formed UTF-8 (no overlongs, no surrogates, at most U+10FFFF), so that
// what is written is what is read back.
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    uint32_t min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1fu;
      min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0fu;
      min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07u;
      min = 0x10000;
    } else {
      return false;
    }
    if (s.size() - i <= n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

Status CheckString(std::string_view field, std::string_view value) {
  if (value.size() > kMaxFieldBytes) {
    return InvalidArgumentError(std::string(field) + " is longer than " +
                                std::to_string(kMaxFieldBytes) + " bytes");
  }
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return InvalidArgumentError(std::string(field) + " contains a control character");
    }
  }
  if (!IsValidUtf8(value)) return InvalidArgumentError(std::string(field) + " is not UTF-8");
  return OkStatus();
}

Status CheckTime(std::string_view field, Clock::TimePoint t) {
  const int64_t s = ToUnixSeconds(t);
  if (s < 0 || s > kMaxUnixSeconds) {
    return InvalidArgumentError(std::string(field) + " is out of range (" + std::to_string(s) +
                                " s since the epoch)");
  }
  return OkStatus();
}

Status CheckOwner(const Owner& owner) {
  switch (owner.kind) {
    case Owner::Kind::kNone:
      if (!owner.pod_namespace.empty() || !owner.pod_name.empty() ||
          !owner.pod_uid.value().empty() || !owner.container.empty() || !owner.opaque_id.empty()) {
        return InvalidArgumentError("owner of kind none carries owner fields");
      }
      return OkStatus();
    case Owner::Kind::kPod:
      if (owner.pod_namespace.empty() || owner.pod_name.empty() || owner.pod_uid.value().empty()) {
        return InvalidArgumentError("pod owner needs namespace, name and uid");
      }
      if (!owner.opaque_id.empty()) {
        return InvalidArgumentError("pod owner carries an opaque id");
      }
      for (const auto& [field, value] :
           {std::pair<std::string_view, std::string_view>{"owner.namespace", owner.pod_namespace},
            {"owner.name", owner.pod_name},
            {"owner.uid", owner.pod_uid.value()},
            {"owner.container", owner.container}}) {
        Status s = CheckString(field, value);
        if (!s.ok()) return s;
      }
      return OkStatus();
    case Owner::Kind::kOpaque:
      if (owner.opaque_id.empty()) return InvalidArgumentError("opaque owner needs an id");
      if (!owner.pod_namespace.empty() || !owner.pod_name.empty() ||
          !owner.pod_uid.value().empty() || !owner.container.empty()) {
        return InvalidArgumentError("opaque owner carries pod fields");
      }
      return CheckString("owner.id", owner.opaque_id);
  }
  return InvalidArgumentError("owner has an unknown kind");
}

Json EncodeTime(Clock::TimePoint t) { return Json(FormatRfc3339(t)); }

// A timestamp: "<name>Unix" (authoritative, whole seconds in [0,
// kMaxUnixSeconds]) plus "<name>" (RFC 3339 text, only checked to be a string).
StatusOr<Clock::TimePoint> DecodeTime(const JsonReader& r, const std::string& name) {
  MIGD_ASSIGN_OR_RETURN(int64_t s, r.Int(name + "Unix", 0, kMaxUnixSeconds));
  MIGD_RETURN_IF_ERROR(r.OptionalString(name).status());
  return Clock::TimePoint(std::chrono::seconds(s));
}

StatusOr<Owner> DecodeOwner(const JsonReader& top) {
  MIGD_ASSIGN_OR_RETURN(std::optional<JsonReader> r, top.OptionalObject("owner"));
  if (!r) return Owner{};
  MIGD_ASSIGN_OR_RETURN(size_t kind, r->Enum("kind", {"none", "pod", "opaque"}));
  Owner owner;
  if (kind == 1) {
    owner.kind = Owner::Kind::kPod;
    MIGD_ASSIGN_OR_RETURN(owner.pod_namespace, r->String("namespace"));
    MIGD_ASSIGN_OR_RETURN(owner.pod_name, r->String("name"));
    MIGD_ASSIGN_OR_RETURN(std::string uid, r->String("uid"));
    owner.pod_uid = PodUid(std::move(uid));
    MIGD_ASSIGN_OR_RETURN(owner.container, r->OptionalString("container"));
  } else if (kind == 2) {
    owner.kind = Owner::Kind::kOpaque;
    MIGD_ASSIGN_OR_RETURN(owner.opaque_id, r->String("id"));
  }
  return owner;
}

// The version first: a record of another schema may differ in anything else.
Status CheckVersion(const JsonReader& r) {
  if (!r.Has("version")) return r.ExpectedAt("version", "an integer");
  const JsonReader v = r.Child("version");
  if (!v.value().is_number_integer()) return v.Expected("an integer");
  if (!v.value().is_number_unsigned() || v.value().get<uint64_t>() != uint64_t{kSchemaVersion}) {
    return UnimplementedError(r.source() + ": schema version " + v.value().dump() +
                              " is not supported (this migd reads version " +
                              std::to_string(kSchemaVersion) + ")");
  }
  return OkStatus();
}

// The key and the runtime identity.
Status DecodeIdentity(const JsonReader& r, Record& rec) {
  MIGD_ASSIGN_OR_RETURN(std::string gpu, r.String("parentGPUUUID"));
  rec.key.gpu_uuid = GpuUuid(std::move(gpu));
  MIGD_ASSIGN_OR_RETURN(uint32_t profile_id, r.Uint32("profileID"));
  rec.key.profile_id = GiProfileId(profile_id);
  MIGD_ASSIGN_OR_RETURN(rec.profile_name, r.String("profile"));
  MIGD_ASSIGN_OR_RETURN(JsonReader placement, r.Object("placement"));
  MIGD_ASSIGN_OR_RETURN(rec.key.placement.start, placement.Uint32("start"));
  MIGD_ASSIGN_OR_RETURN(rec.key.placement.size, placement.Uint32("size"));
  if (r.Has("gpuInstanceID")) {
    MIGD_ASSIGN_OR_RETURN(uint32_t gi, r.Uint32("gpuInstanceID"));
    rec.gi_id = NvmlGiId(gi);
  }
  if (r.Has("computeInstanceID")) {
    MIGD_ASSIGN_OR_RETURN(uint32_t ci, r.Uint32("computeInstanceID"));
    rec.ci_id = NvmlCiId(ci);
  }
  if (r.Has("migUUID")) {
    MIGD_ASSIGN_OR_RETURN(std::string mig, r.String("migUUID"));
    rec.mig_uuid = MigUuid(std::move(mig));
  }
  return OkStatus();
}

StatusOr<Record> DecodeObject(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.ExpectObject());
  MIGD_RETURN_IF_ERROR(CheckVersion(r));
  Record rec;
  rec.schema_version = kSchemaVersion;
  MIGD_ASSIGN_OR_RETURN(size_t phase, r.Enum("phase", {kPhaseNames[0], kPhaseNames[1]}));
  rec.phase = static_cast<RecordPhase>(phase);
  MIGD_ASSIGN_OR_RETURN(
      size_t state, r.Enum("state", {kStateNames[0], kStateNames[1], kStateNames[2], kStateNames[3],
                                     kStateNames[4], kStateNames[5]}));
  rec.state = static_cast<RecordState>(state);
  MIGD_RETURN_IF_ERROR(DecodeIdentity(r, rec));
  MIGD_ASSIGN_OR_RETURN(rec.owner, DecodeOwner(r));
  MIGD_ASSIGN_OR_RETURN(rec.request_id, r.OptionalString("requestID"));
  MIGD_ASSIGN_OR_RETURN(rec.boot_id, r.String("bootID"));
  MIGD_ASSIGN_OR_RETURN(rec.created_at, DecodeTime(r, "createdAt"));
  MIGD_ASSIGN_OR_RETURN(rec.updated_at, DecodeTime(r, "updatedAt"));
  if (r.Has("lastUsedAtUnix")) {
    MIGD_ASSIGN_OR_RETURN(rec.last_used_at, DecodeTime(r, "lastUsedAt"));
  }
  MIGD_ASSIGN_OR_RETURN(rec.generation, r.Uint("generation"));
  if (r.Has("unhealthy")) {
    MIGD_ASSIGN_OR_RETURN(std::string why, r.String("unhealthy"));
    rec.unhealthy = std::move(why);
  }
  return rec;
}

}  // namespace

std::string_view RecordPhaseName(RecordPhase phase) {
  return kPhaseNames[static_cast<size_t>(phase)];
}

std::optional<RecordPhase> ParseRecordPhase(std::string_view name) {
  for (size_t i = 0; i < std::size(kPhaseNames); ++i) {
    if (kPhaseNames[i] == name) return static_cast<RecordPhase>(i);
  }
  return std::nullopt;
}

std::string_view RecordStateName(RecordState state) {
  return kStateNames[static_cast<size_t>(state)];
}

std::optional<RecordState> ParseRecordState(std::string_view name) {
  for (size_t i = 0; i < std::size(kStateNames); ++i) {
    if (kStateNames[i] == name) return static_cast<RecordState>(i);
  }
  return std::nullopt;
}

Owner Owner::Pod(std::string pod_namespace, std::string pod_name, PodUid uid,
                 std::string container) {
  Owner o;
  o.kind = Kind::kPod;
  o.pod_namespace = std::move(pod_namespace);
  o.pod_name = std::move(pod_name);
  o.pod_uid = std::move(uid);
  o.container = std::move(container);
  return o;
}

Owner Owner::Opaque(std::string id) {
  Owner o;
  o.kind = Kind::kOpaque;
  o.opaque_id = std::move(id);
  return o;
}

std::string_view OwnerKindName(Owner::Kind kind) {
  switch (kind) {
    case Owner::Kind::kNone:
      return "none";
    case Owner::Kind::kPod:
      return "pod";
    case Owner::Kind::kOpaque:
      return "opaque";
  }
  return "unknown";
}

Status ValidateKey(const RecordKey& key) {
  if (!IsValidGpuUuid(key.gpu_uuid.value())) {
    // Quote at most a prefix: the value may be hostile or huge.
    return InvalidArgumentError("GPU UUID '" + key.gpu_uuid.value().substr(0, 64) +
                                "' is not of the form GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
  }
  const mig::Placement& p = key.placement;
  if (p.size == 0 || p.start > mig::kMaxMemorySlices || p.size > mig::kMaxMemorySlices - p.start) {
    return InvalidArgumentError("placement " + p.ToString() + " is not a valid placement");
  }
  return OkStatus();
}

InstanceIdentity IdentityOf(const Record& record) {
  InstanceIdentity id;
  static_cast<RecordKey&>(id) = record.key;
  id.gi_id = record.gi_id.value_or(NvmlGiId(0));
  id.ci_id = record.ci_id.value_or(NvmlCiId(0));
  id.mig_uuid = record.mig_uuid.value_or(MigUuid(""));
  return id;
}

StatusOr<std::string> RecordFileName(const RecordKey& key) {
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  return key.gpu_uuid.value() + "_p" + std::to_string(key.profile_id.value()) + "_" +
         std::to_string(key.placement.start) + "-" + std::to_string(key.placement.size) + ".json";
}

Status ValidateRecord(const Record& record) {
  if (record.schema_version != kSchemaVersion) {
    return InvalidArgumentError("schema version " + std::to_string(record.schema_version) +
                                " is not " + std::to_string(kSchemaVersion));
  }
  Status s = ValidateKey(record.key);
  if (!s.ok()) return s;
  if (record.profile_name.empty()) return InvalidArgumentError("profile name is empty");
  const std::string unhealthy = record.unhealthy.value_or("");
  for (const auto& [field, value] :
       {std::pair<std::string_view, std::string_view>{"profile name", record.profile_name},
        {"request id", record.request_id},
        {"boot id", record.boot_id},
        {"unhealthy", unhealthy}}) {
    s = CheckString(field, value);
    if (!s.ok()) return s;
  }
  if (record.mig_uuid) {
    s = ValidateMigUuidOf(record.key.gpu_uuid, *record.mig_uuid);
    if (!s.ok()) return s;
  }
  if (record.phase == RecordPhase::kCommitted) {
    if (!record.gi_id || !record.ci_id || !record.mig_uuid) {
      return InvalidArgumentError("a committed record needs the GI id, the CI id and the MIG UUID");
    }
  } else if (record.state != RecordState::kCreating && record.state != RecordState::kDeleting &&
             record.state != RecordState::kError) {
    return InvalidArgumentError("an intent record cannot be in state " +
                                std::string(RecordStateName(record.state)));
  }
  s = CheckOwner(record.owner);
  if (!s.ok()) return s;
  if (record.state == RecordState::kIdle && !record.owner.empty()) {
    return InvalidArgumentError("an Idle record has an owner");
  }
  if (record.state == RecordState::kActive && record.owner.empty()) {
    return InvalidArgumentError("an Active record has no owner");
  }
  s = CheckTime("created_at", record.created_at);
  if (s.ok()) s = CheckTime("updated_at", record.updated_at);
  if (s.ok() && record.last_used_at) s = CheckTime("last_used_at", *record.last_used_at);
  return s;
}

std::string EncodeRecord(const Record& record) {
  Json doc = Json::object();
  doc["version"] = record.schema_version;
  doc["phase"] = std::string(RecordPhaseName(record.phase));
  doc["state"] = std::string(RecordStateName(record.state));
  doc["parentGPUUUID"] = record.key.gpu_uuid.value();
  doc["profileID"] = record.key.profile_id.value();
  doc["profile"] = record.profile_name;
  doc["placement"] = {{"start", record.key.placement.start}, {"size", record.key.placement.size}};
  if (record.gi_id) doc["gpuInstanceID"] = record.gi_id->value();
  if (record.ci_id) doc["computeInstanceID"] = record.ci_id->value();
  if (record.mig_uuid) doc["migUUID"] = record.mig_uuid->value();
  switch (record.owner.kind) {
    case Owner::Kind::kNone:
      break;
    case Owner::Kind::kPod:
      doc["owner"] = {{"kind", "pod"},
                      {"namespace", record.owner.pod_namespace},
                      {"name", record.owner.pod_name},
                      {"uid", record.owner.pod_uid.value()},
                      {"container", record.owner.container}};
      break;
    case Owner::Kind::kOpaque:
      doc["owner"] = {{"kind", "opaque"}, {"id", record.owner.opaque_id}};
      break;
  }
  doc["requestID"] = record.request_id;
  doc["bootID"] = record.boot_id;
  doc["createdAt"] = EncodeTime(record.created_at);
  doc["createdAtUnix"] = ToUnixSeconds(record.created_at);
  doc["updatedAt"] = EncodeTime(record.updated_at);
  doc["updatedAtUnix"] = ToUnixSeconds(record.updated_at);
  if (record.last_used_at) {
    doc["lastUsedAt"] = EncodeTime(*record.last_used_at);
    doc["lastUsedAtUnix"] = ToUnixSeconds(*record.last_used_at);
  }
  doc["generation"] = record.generation;
  if (record.unhealthy) doc["unhealthy"] = *record.unhealthy;
  // Strings are valid UTF-8 or not our business: replace, never throw.
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

StatusOr<Record> DecodeRecord(std::string_view json_text, std::string_view file) {
  MIGD_ASSIGN_OR_RETURN(Json doc, ParseJson(json_text, file, StatusCode::kDataLoss));
  return DecodeObject(JsonReader(doc, std::string(file), StatusCode::kDataLoss));
}

}  // namespace migd::store
