// File: mig/catalog.h
//
// The catalogue of MIG-capable GPU models and their GPU-instance (GI) and
// compute-instance (CI) profiles, loaded from data/mig-profiles.json (schema
// version 1; provenance in data/README.md). The JSON is compiled into the
// binary, so Catalog::Default() needs no file at run time.
//
// Role: the catalogue feeds the simulator and the `migctl probe` comparison.
// On a real GPU migd takes every profile and placement from NVML at run time;
// the catalogue never drives placement decisions there.
//
// Example:
//   const mig::Catalog& cat = mig::Catalog::Default();
//   const mig::GpuModel* h100 = cat.FindModel("h100-80gb");
//   const mig::GiProfile* p = h100->FindProfileByName("3g.40gb");  // id 9, {0,4}:4
//
// Thread-safety: a Catalog is immutable after construction; share freely.
#ifndef MIGD_MIG_CATALOG_H_
#define MIGD_MIG_CATALOG_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "mig/placement.h"

namespace migd::mig {

// How a GI profile differs from the base profile of its size (the suffixes of
// NVIDIA's profile names; NVML_GPU_INSTANCE_PROFILE_*_REV1/REV2/ALL_ME/NO_ME/GFX).
enum class Variant {
  kBase,          // "base"
  kMe,            // "me": +me (REV1)
  kMeAll,         // "me.all": +me.all (ALL_ME)
  kNoMe,          // "no-me": -me (NO_ME)
  kGfx,           // "gfx": +gfx
  kDoubleMemory,  // "double-memory": 1g with two memory units (REV2)
};
std::string_view VariantName(Variant v);
StatusOr<Variant> ParseVariant(std::string_view name);

// Engine counts of a profile, or the engine budget of a whole GPU.
struct Engines {
  uint32_t copy_engines = 0;
  uint32_t decoders = 0;
  uint32_t encoders = 0;
  uint32_t jpeg = 0;
  uint32_t ofa = 0;

  Engines& operator+=(const Engines& o);
  // Subtracts per count; a count never goes below 0.
  Engines& operator-=(const Engines& o);
  // True if every count of `need` is <= the same count here.
  bool Covers(const Engines& need) const;
  friend bool operator==(const Engines&, const Engines&) = default;
};

struct CiProfile {
  CiProfileIndex index;
  CiProfileId id;
  uint32_t slice_count = 0;
  uint32_t instance_count = 0;
  bool is_default = false;            // the CI `nvidia-smi mig -cgi … -C` creates
  std::vector<Placement> placements;  // compute slices, relative to the GI
  bool confirmed = false;
};

struct GiProfile {
  std::string name;                  // e.g. "1g.10gb", "1g.24gb+me.all"
  std::vector<std::string> aliases;  // other names drivers use, e.g. "3g.39gb"
  GiProfileIndex index;
  GiProfileId id;
  Variant variant = Variant::kBase;
  uint32_t slice_count = 0;
  uint32_t instance_count = 0;
  uint64_t memory_mib = 0;
  uint32_t sm_count = 0;
  Engines engines;
  std::vector<Placement> placements;  // memory slices, sorted by start
  std::vector<CiProfile> ci_profiles;
  bool confirmed = false;  // "confidence": "confirmed"

  // The placement size shared by all placements (0 if none are listed).
  uint32_t placement_size() const { return placements.empty() ? 0 : placements[0].size; }
  bool HasPlacement(const Placement& p) const;
  // The CI marked default; nullptr if the catalogue lists none.
  const CiProfile* DefaultCi() const;
  const CiProfile* FindCiByIndex(CiProfileIndex index) const;
};

struct GpuModel {
  std::string key;                       // e.g. "h100-80gb"
  std::vector<std::string> names;        // nvmlDeviceGetName values
  std::vector<uint32_t> pci_device_ids;  // (device id << 16) | vendor id
  uint32_t compute_slices = 0;
  uint32_t memory_slices = 0;
  uint64_t memory_mib = 0;
  uint32_t sm_count = 0;
  Engines engine_totals;
  // Placement size -> inclusive [first, last] GI id range (observed ranges;
  // data/README.md).
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> gi_id_ranges;
  std::vector<GiProfile> gi_profiles;

  const GiProfile* FindProfileById(GiProfileId id) const;
  const GiProfile* FindProfileByIndex(GiProfileIndex index) const;
  // Matches `name` or an alias; a leading "MIG " is ignored.
  const GiProfile* FindProfileByName(std::string_view name) const;
};

class Catalog {
 public:
  // Parses and validates a schema-version-1 document. kInvalidArgument names
  // the model/profile/field at fault: unknown schema version, missing field,
  // a placement outside [0, memorySlices), placements of mixed sizes, a
  // duplicate profile id or index, a CI larger than its GI, or no size range
  // for a placement size.
  static StatusOr<Catalog> FromJson(std::string_view json);

  // The catalogue compiled from data/mig-profiles.json. Aborts at first use if
  // the embedded document is invalid (a build defect caught by the tests).
  static const Catalog& Default();

  const std::vector<GpuModel>& models() const { return models_; }
  const GpuModel* FindModel(std::string_view key) const;
  const GpuModel* FindModelByPciDeviceId(uint32_t pci_device_id) const;
  const GpuModel* FindModelByName(std::string_view device_name) const;

 private:
  std::vector<GpuModel> models_;
};

// The JSON text of data/mig-profiles.json as compiled into the binary.
std::string_view EmbeddedCatalogJson();

}  // namespace migd::mig

#endif  // MIGD_MIG_CATALOG_H_
