// File: store/instance_identity.h
//
// The identity of one MIG instance, defined once for every module:
//
//   RecordKey         where the instance sits: parent GPU UUID, GI profile id
//                     and placement. Chosen before the instance exists; the
//                     key of its record (and its file name, store/record.h).
//   InstanceIdentity  the key plus what NVML named the instance when it was
//                     created: GI id, CI id and MIG UUID.
//
// Views of an instance (engine::InstanceView, engine::PublishedInstance) are
// an InstanceIdentity plus their own fields; store::Record carries the key and
// the runtime parts as optionals (an intent has none yet). docs/engine.md
// ("Instance identity") says why the key is the slot and not the MIG UUID.
//
// Thread-safety: value types and pure functions.
#ifndef MIGD_STORE_INSTANCE_IDENTITY_H_
#define MIGD_STORE_INSTANCE_IDENTITY_H_

#include <compare>
#include <ostream>
#include <string>

#include "base/ids.h"
#include "base/status.h"
#include "mig/placement.h"

namespace migd::store {

// The slot of an instance. Ordered by GPU UUID, profile id, placement.
struct RecordKey {
  GpuUuid gpu_uuid;
  GiProfileId profile_id;
  mig::Placement placement;

  // "gpu=GPU-… profile=19 placement=0:1", for logs.
  std::string ToString() const;

  friend auto operator<=>(const RecordKey&, const RecordKey&) = default;
  friend bool operator==(const RecordKey&, const RecordKey&) = default;
};

std::ostream& operator<<(std::ostream& os, const RecordKey& key);

// The slot and the runtime names of one instance. gi_id, ci_id and mig_uuid
// are 0 / empty until the instance exists (e.g. a Creating placeholder).
struct InstanceIdentity : RecordKey {
  NvmlGiId gi_id;
  NvmlCiId ci_id;
  MigUuid mig_uuid;

  const RecordKey& key() const { return *this; }
  // RecordKey::ToString() + " gi=7 ci=0 mig=MIG-…".
  std::string ToString() const;

  friend bool operator==(const InstanceIdentity&, const InstanceIdentity&) = default;
};

// Checks that `mig_uuid` names a MIG device of the GPU `parent`: it is not
// the parent's own UUID (what a driver reports when it reads the identity
// through NVML's "Parent device" field), it starts with "MIG-", and it has the
// R470+ form MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. Errors:
// kInvalidArgument naming both UUIDs (at most 64 characters of each).
Status ValidateMigUuidOf(const GpuUuid& parent, const MigUuid& mig_uuid);

}  // namespace migd::store

#endif  // MIGD_STORE_INSTANCE_IDENTITY_H_
