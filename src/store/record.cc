#include "store/record.h"

#include <chrono>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

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

// Field access for DecodeRecord. Every mistake becomes a message naming the
// field; the caller prefixes the file name.
class Reader {
 public:
  explicit Reader(const Json& obj, std::string prefix = "")
      : obj_(obj), prefix_(std::move(prefix)) {}

  bool Has(const char* name) const { return obj_.contains(name) && !obj_.at(name).is_null(); }

  StatusOr<std::string> String(const char* name) const {
    if (!Has(name)) return Missing(name);
    const Json& v = obj_.at(name);
    if (!v.is_string()) return Mistyped(name, "a string");
    return v.get<std::string>();
  }

  StatusOr<std::string> OptionalString(const char* name) const {
    if (!Has(name)) return std::string();
    return String(name);
  }

  StatusOr<uint32_t> Uint32(const char* name) const {
    if (!Has(name)) return Missing(name);
    const Json& v = obj_.at(name);
    if (!v.is_number_unsigned()) return Mistyped(name, "a non-negative integer");
    const uint64_t u = v.get<uint64_t>();
    if (u > std::numeric_limits<uint32_t>::max()) return Mistyped(name, "a 32-bit integer");
    return static_cast<uint32_t>(u);
  }

  StatusOr<uint64_t> Uint64(const char* name) const {
    if (!Has(name)) return Missing(name);
    const Json& v = obj_.at(name);
    if (!v.is_number_unsigned()) return Mistyped(name, "a non-negative integer");
    return v.get<uint64_t>();
  }

  // A timestamp: "<name>Unix" (authoritative) plus "<name>" (RFC 3339 text).
  StatusOr<Clock::TimePoint> Time(const std::string& name) const {
    const std::string unix_name = name + "Unix";
    if (!Has(unix_name.c_str())) return Missing(unix_name.c_str());
    const Json& v = obj_.at(unix_name);
    if (!v.is_number_integer()) return Mistyped(unix_name.c_str(), "an integer");
    // nlohmann keeps non-negative numbers as unsigned and negative ones as
    // signed; either may be out of range.
    const bool in_range = v.is_number_unsigned()
                              ? v.get<uint64_t>() <= static_cast<uint64_t>(kMaxUnixSeconds)
                              : false;
    if (!in_range) return DataLossError(prefix_ + unix_name + " is out of range");
    const auto s = static_cast<int64_t>(v.get<uint64_t>());
    if (Has(name.c_str()) && !obj_.at(name).is_string()) {
      return Mistyped(name.c_str(), "a string");
    }
    return Clock::TimePoint(std::chrono::seconds(s));
  }

  StatusOr<Reader> Object(const char* name) const {
    if (!Has(name)) return Missing(name);
    const Json& v = obj_.at(name);
    if (!v.is_object()) return Mistyped(name, "an object");
    return Reader(v, prefix_ + name + ".");
  }

 private:
  Status Missing(const char* name) const { return DataLossError(prefix_ + name + " is missing"); }
  Status Mistyped(const char* name, const char* what) const {
    return DataLossError(prefix_ + name + " is not " + what);
  }

  const Json& obj_;
  std::string prefix_;
};

Json EncodeTime(Clock::TimePoint t) { return Json(FormatRfc3339(t)); }

StatusOr<Owner> DecodeOwner(const Reader& top) {
  if (!top.Has("owner")) return Owner{};
  StatusOr<Reader> r = top.Object("owner");
  if (!r.ok()) return r.status();
  StatusOr<std::string> kind = r->String("kind");
  if (!kind.ok()) return kind.status();
  Owner owner;
  if (*kind == "none") return owner;
  if (*kind == "pod") {
    owner.kind = Owner::Kind::kPod;
    StatusOr<std::string> ns = r->String("namespace");
    if (!ns.ok()) return ns.status();
    StatusOr<std::string> name = r->String("name");
    if (!name.ok()) return name.status();
    StatusOr<std::string> uid = r->String("uid");
    if (!uid.ok()) return uid.status();
    StatusOr<std::string> container = r->OptionalString("container");
    if (!container.ok()) return container.status();
    owner.pod_namespace = std::move(*ns);
    owner.pod_name = std::move(*name);
    owner.pod_uid = PodUid(std::move(*uid));
    owner.container = std::move(*container);
    return owner;
  }
  if (*kind == "opaque") {
    owner.kind = Owner::Kind::kOpaque;
    StatusOr<std::string> id = r->String("id");
    if (!id.ok()) return id.status();
    owner.opaque_id = std::move(*id);
    return owner;
  }
  return DataLossError("owner.kind '" + *kind + "' is not none, pod or opaque");
}

StatusOr<Record> DecodeObject(const Json& doc) {
  if (!doc.is_object()) return DataLossError("the document is not a JSON object");
  Reader r(doc);
  Record rec;

  // The version first: a record of another schema may differ in anything else.
  if (!r.Has("version")) return DataLossError("version is missing");
  if (!doc.at("version").is_number_integer()) return DataLossError("version is not an integer");
  const Json& version = doc.at("version");
  if (!version.is_number_unsigned() || version.get<uint64_t>() != uint64_t{kSchemaVersion}) {
    return UnimplementedError("schema version " + version.dump() +
                              " is not supported (this migd reads version " +
                              std::to_string(kSchemaVersion) + ")");
  }
  rec.schema_version = kSchemaVersion;

  StatusOr<std::string> phase = r.String("phase");
  if (!phase.ok()) return phase.status();
  std::optional<RecordPhase> p = ParseRecordPhase(*phase);
  if (!p) return DataLossError("phase '" + *phase + "' is not intent or committed");
  rec.phase = *p;

  StatusOr<std::string> state = r.String("state");
  if (!state.ok()) return state.status();
  std::optional<RecordState> st = ParseRecordState(*state);
  if (!st) return DataLossError("state '" + *state + "' is not a known state");
  rec.state = *st;

  StatusOr<std::string> gpu = r.String("parentGPUUUID");
  if (!gpu.ok()) return gpu.status();
  rec.key.gpu_uuid = GpuUuid(std::move(*gpu));

  StatusOr<uint32_t> profile_id = r.Uint32("profileID");
  if (!profile_id.ok()) return profile_id.status();
  rec.key.profile_id = GiProfileId(*profile_id);

  StatusOr<std::string> profile_name = r.String("profile");
  if (!profile_name.ok()) return profile_name.status();
  rec.profile_name = std::move(*profile_name);

  StatusOr<Reader> placement = r.Object("placement");
  if (!placement.ok()) return placement.status();
  StatusOr<uint32_t> start = placement->Uint32("start");
  if (!start.ok()) return start.status();
  StatusOr<uint32_t> size = placement->Uint32("size");
  if (!size.ok()) return size.status();
  rec.key.placement = mig::Placement{.start = *start, .size = *size};

  if (r.Has("gpuInstanceID")) {
    StatusOr<uint32_t> gi = r.Uint32("gpuInstanceID");
    if (!gi.ok()) return gi.status();
    rec.gi_id = NvmlGiId(*gi);
  }
  if (r.Has("computeInstanceID")) {
    StatusOr<uint32_t> ci = r.Uint32("computeInstanceID");
    if (!ci.ok()) return ci.status();
    rec.ci_id = NvmlCiId(*ci);
  }
  if (r.Has("migUUID")) {
    StatusOr<std::string> mig = r.String("migUUID");
    if (!mig.ok()) return mig.status();
    rec.mig_uuid = MigUuid(std::move(*mig));
  }

  StatusOr<Owner> owner = DecodeOwner(r);
  if (!owner.ok()) return owner.status();
  rec.owner = std::move(*owner);

  StatusOr<std::string> request_id = r.OptionalString("requestID");
  if (!request_id.ok()) return request_id.status();
  rec.request_id = std::move(*request_id);

  StatusOr<std::string> boot_id = r.String("bootID");
  if (!boot_id.ok()) return boot_id.status();
  rec.boot_id = std::move(*boot_id);

  StatusOr<Clock::TimePoint> created = r.Time("createdAt");
  if (!created.ok()) return created.status();
  rec.created_at = *created;
  StatusOr<Clock::TimePoint> updated = r.Time("updatedAt");
  if (!updated.ok()) return updated.status();
  rec.updated_at = *updated;
  if (r.Has("lastUsedAtUnix")) {
    StatusOr<Clock::TimePoint> used = r.Time("lastUsedAt");
    if (!used.ok()) return used.status();
    rec.last_used_at = *used;
  }

  StatusOr<uint64_t> generation = r.Uint64("generation");
  if (!generation.ok()) return generation.status();
  rec.generation = *generation;
  return rec;
}

}  // namespace

std::string RecordKey::ToString() const {
  return "gpu=" + gpu_uuid.value() + " profile=" + std::to_string(profile_id.value()) +
         " placement=" + placement.ToString();
}

std::ostream& operator<<(std::ostream& os, const RecordKey& key) { return os << key.ToString(); }

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
  for (const auto& [field, value] :
       {std::pair<std::string_view, std::string_view>{"profile name", record.profile_name},
        {"request id", record.request_id},
        {"boot id", record.boot_id}}) {
    s = CheckString(field, value);
    if (!s.ok()) return s;
  }
  if (record.mig_uuid && !IsValidMigUuid(record.mig_uuid->value())) {
    return InvalidArgumentError("MIG UUID '" + record.mig_uuid->value().substr(0, 64) +
                                "' is not of the form MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
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
  // Strings are valid UTF-8 or not our business: replace, never throw.
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

StatusOr<Record> DecodeRecord(std::string_view json_text, std::string_view file) {
  const std::string prefix = std::string(file) + ": ";
  try {
    Json doc = Json::parse(json_text, /*cb=*/nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return DataLossError(prefix + "not valid JSON");
    StatusOr<Record> rec = DecodeObject(doc);
    if (!rec.ok()) return Status(rec.status().code(), prefix + std::string(rec.status().message()));
    return rec;
  } catch (const std::exception& e) {
    // nlohmann::json throws on its own misuse only (we check types first);
    // exceptions stop here (style.md §2.3).
    return DataLossError(prefix + "malformed record: " + e.what());
  }
}

}  // namespace migd::store
