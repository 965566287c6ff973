// File: engine/owner_source.h
//
// OwnerSource: where recovery learns which instances are in use at startup.
// Implementations:
//   RecordsOwnerSource  (`records`, standalone): every committed Active record
//                       is an active owner of its instance;
//   podresources / hami (src/k8s/podresources): kubelet PodResources API /
//                       HAMi pod annotations; they report MIG UUIDs with
//                       owners and, where known, the GPU, placement and ids
//                       to verify.
//
// Recovery adopts every reported instance as Active (verifying it against
// the live layout; a reported instance that does not exist or does not match
// fails startup) and makes every other verified instance Idle.
//
// Thread-safety: ActiveOwners is called once, from the thread running
// recovery.
#ifndef MIGD_ENGINE_OWNER_SOURCE_H_
#define MIGD_ENGINE_OWNER_SOURCE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "mig/placement.h"
#include "store/record.h"

namespace migd::engine {

// One instance held by an active owner.
struct OwnedInstance {
  MigUuid mig_uuid;
  store::Owner owner;
  std::string request_id;  // the allocation it belongs to; may be empty
  // Identity to verify when the source knows it (HAMi annotations do).
  std::optional<GpuUuid> gpu_uuid;
  std::optional<mig::Placement> placement;
  std::optional<NvmlGiId> gi_id;
  std::optional<NvmlCiId> ci_id;
};

// The owner a committed Active record names, with the record's identity to
// verify (the one record -> owner mapping; every source uses it).
// REQUIRES: record.mig_uuid is set.
OwnedInstance OwnedFromRecord(const store::Record& record);

class OwnerSource {
 public:
  virtual ~OwnerSource() = default;
  // "records", "podresources", "hami".
  virtual std::string_view name() const = 0;
  // The instances held by active owners. `records` are the loaded records of
  // this boot (a source may use or ignore them). An error (source unreachable,
  // undecodable data) fails startup: owners that cannot be verified.
  virtual StatusOr<std::vector<OwnedInstance>> ActiveOwners(
      const std::vector<store::Record>& records) = 0;
};

// Standalone mode: the record's own state is the truth.
class RecordsOwnerSource final : public OwnerSource {
 public:
  std::string_view name() const override { return "records"; }
  StatusOr<std::vector<OwnedInstance>> ActiveOwners(
      const std::vector<store::Record>& records) override;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_OWNER_SOURCE_H_
