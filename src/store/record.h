// File: store/record.h
//
// The ownership record of one MIG instance, as it is kept on disk by
// store::RecordStore (record_store.h): its identity (store/instance_identity.h),
// where it is in the create journal (intent or committed), its runtime ids,
// lifecycle state, owner and timestamps; plus the pure functions that name,
// validate, encode and decode it. Nothing here touches the filesystem.
//
// File name. Derived from the key only, so the intent and the committed
// record of one instance are the same file and a commit is one atomic
// rewrite:
//
//   <GPU UUID>_p<GI profile id>_<placement start>-<placement size>.json
//   e.g. GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1_p19_0-1.json
//
// The GPU UUID is validated (IsValidGpuUuid), so a name can never contain
// '/', ".." or any character outside [0-9A-Za-z_.-].
//
// JSON (schema version 1). Field names reuse those of HAMi's `version: 1`
// dynamic-MIG ownership record where they exist (version, migUUID,
// parentGPUUUID, profile, placement{start,size}, gpuInstanceID,
// computeInstanceID; docs/engine.md, "Records") and add migd's own.
// Absent optionals are omitted. Unknown fields are ignored on read, so
// version 1 may grow additive fields; anything else bumps the version.
//
//   {
//     "version": 1,
//     "phase": "committed",                     // "intent" | "committed"
//     "state": "Active",                        // Creating|Active|Idle|Reclaiming|Deleting|Error
//     "parentGPUUUID": "GPU-…",
//     "profileID": 19, "profile": "1g.10gb",
//     "placement": {"start": 0, "size": 1},
//     "gpuInstanceID": 7, "computeInstanceID": 0, "migUUID": "MIG-…",
//     "owner": {"kind": "pod", "namespace": "ns", "name": "p", "uid": "…",
//               "container": "c"},              // or {"kind":"opaque","id":"…"}; absent: none
//     "requestID": "req-1", "bootID": "…",
//     "createdAt": "2026-01-01T00:00:00Z", "createdAtUnix": 1767225600,
//     "updatedAt": "…", "updatedAtUnix": …, "lastUsedAt": "…", "lastUsedAtUnix": …,
//     "generation": 2,
//     "unhealthy": "xid 94"                     // absent: healthy
//   }
//
// "unhealthy" is additive (version 1): a record written before it existed
// loads as healthy.
//
// The *Unix fields are authoritative; the RFC 3339 strings are for humans and
// are not checked on read beyond being strings.
//
// Example:
//   store::Record r;
//   r.key = {GpuUuid("GPU-…"), GiProfileId(19), {.start = 0, .size = 1}};
//   r.phase = store::RecordPhase::kIntent;
//   r.state = store::RecordState::kCreating;
//   r.profile_name = "1g.10gb";
//   MIGD_RETURN_IF_ERROR(store::ValidateRecord(r));
//
// Thread-safety: value types and pure functions.
#ifndef MIGD_STORE_RECORD_H_
#define MIGD_STORE_RECORD_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/ids.h"
#include "base/status.h"
#include "mig/placement.h"
#include "store/instance_identity.h"

namespace migd::store {

// The only schema version this code writes and reads.
inline constexpr int kSchemaVersion = 1;

// Upper bound for every free-form string field (names, ids, request id).
inline constexpr size_t kMaxFieldBytes = 256;

// Latest wall time a record may carry: 2255-03-14, safely inside the range of
// Clock::TimePoint (int64 nanoseconds).
inline constexpr int64_t kMaxUnixSeconds = 9'000'000'000;

// Where the record is in the create journal.
enum class RecordPhase {
  kIntent,     // written before the GI is created; ids and MIG UUID may be absent
  kCommitted,  // written after GI and CI exist; ids and MIG UUID present
};

// Mirrors the engine's instance states (engine/instance_state.h) by name.
enum class RecordState { kCreating, kActive, kIdle, kReclaiming, kDeleting, kError };

// "intent" / "committed".
std::string_view RecordPhaseName(RecordPhase phase);
std::optional<RecordPhase> ParseRecordPhase(std::string_view name);
// "Creating", "Active", "Idle", "Reclaiming", "Deleting", "Error".
std::string_view RecordStateName(RecordState state);
std::optional<RecordState> ParseRecordState(std::string_view name);

// Who holds the instance. kNone for Idle instances (and for records whose
// owner is not known yet, e.g. an intent written by a rollback path).
struct Owner {
  enum class Kind { kNone, kPod, kOpaque };

  Kind kind = Kind::kNone;
  // kPod: namespace, name and uid are required; container may be empty.
  std::string pod_namespace;
  std::string pod_name;
  PodUid pod_uid;
  std::string container;
  // kOpaque: an identifier chosen by a non-Kubernetes client.
  std::string opaque_id;

  static Owner Pod(std::string pod_namespace, std::string pod_name, PodUid uid,
                   std::string container);
  static Owner Opaque(std::string id);
  bool empty() const { return kind == Kind::kNone; }

  friend bool operator==(const Owner&, const Owner&) = default;
};

// "none" / "pod" / "opaque".
std::string_view OwnerKindName(Owner::Kind kind);

struct Record {
  int schema_version = kSchemaVersion;
  RecordKey key;
  RecordPhase phase = RecordPhase::kIntent;
  RecordState state = RecordState::kCreating;
  // The catalogue name of the GI profile, e.g. "1g.10gb" or "1g.10gb+me".
  std::string profile_name;
  // Runtime identity: required once committed, optional in an intent.
  std::optional<NvmlGiId> gi_id;
  std::optional<NvmlCiId> ci_id;
  std::optional<MigUuid> mig_uuid;
  Owner owner;
  // The allocation request that created or last claimed the instance (for
  // idempotent retries); may be empty.
  std::string request_id;
  // /proc/sys/kernel/random/boot_id of the boot that wrote the record.
  std::string boot_id;
  // Whole seconds (RecordStore::Put floors them). created_at and updated_at
  // are stamped by RecordStore::Put; last_used_at belongs to the engine
  // (last release or reuse) and is nullopt until first use.
  Clock::TimePoint created_at{};
  Clock::TimePoint updated_at{};
  std::optional<Clock::TimePoint> last_used_at;
  // Incremented by every RecordStore::Put of the key; for ordering and debugging.
  uint64_t generation = 0;
  // Set by the engine's health marks (docs/health.md): why the instance must
  // never be reused. nullopt: healthy.
  std::optional<std::string> unhealthy;

  friend bool operator==(const Record&, const Record&) = default;
};

// The identity `record` states: its key and, where present, its GI id, CI id
// and MIG UUID (0 / empty where absent, as in an intent).
InstanceIdentity IdentityOf(const Record& record);

// Checks the key (valid GPU UUID, 0 < size, start + size <= kMaxMemorySlices).
// Errors: kInvalidArgument naming the offending field.
Status ValidateKey(const RecordKey& key);

// The file name of `key` (see the file comment). Errors: those of ValidateKey.
StatusOr<std::string> RecordFileName(const RecordKey& key);

// Checks everything a record must satisfy to be written or accepted on load:
//   - schema_version == kSchemaVersion; a valid key; a non-empty profile name;
//   - committed: gi_id, ci_id and mig_uuid present;
//   - intent: state is Creating, Deleting or Error (an intent never describes
//     an instance that was handed out);
//   - mig_uuid, when present, passes ValidateMigUuidOf(key.gpu_uuid, …);
//   - owner consistent with its kind; Idle has no owner; Active has one;
//   - strings at most kMaxFieldBytes, without control characters;
//   - timestamps within [0, kMaxUnixSeconds].
// boot_id may be empty here (RecordStore::Put fills it in).
// Errors: kInvalidArgument naming the offending field.
Status ValidateRecord(const Record& record);

// The JSON text of `record` (2-space indented, keys sorted, trailing newline).
// Does not validate; callers validate first.
std::string EncodeRecord(const Record& record);

// Parses the JSON text of a record. `file` names the source in messages.
// Checks syntax, field presence and types and integer ranges, but not the
// semantic rules of ValidateRecord. Null members count as absent; unknown
// members are ignored.
// Errors: kDataLoss in base/json_reader.h's style ("<file>: /owner/kind:
// expected one of none, pod, opaque, got \"x\"") for invalid JSON, a missing
// or mistyped member or an unknown enum name; kUnimplemented ("<file>: schema
// version 2 is not supported …") for a version other than kSchemaVersion.
// Never throws.
StatusOr<Record> DecodeRecord(std::string_view json_text, std::string_view file);

}  // namespace migd::store

#endif  // MIGD_STORE_RECORD_H_
