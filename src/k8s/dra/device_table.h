// File: k8s/dra/device_table.h
//
// The DRA device model of one MIG-capable GPU: every legal (GI profile,
// placement) of its placement table is one device of the node's pool, and
// the GPU is one counter set whose counters encode mig::Layout's legality
// rules (mig/layout.h), so that any set of devices the scheduler's allocator
// can fit into the counters is a layout NVML accepts:
//
//   memory-slice-<i> = 1    per memory slice i; a device consumes its
//                           placement's slices (no overlap);
//   copy-engines, decoders, encoders, jpeg-engines, ofa-engines
//                           the GPU's engine budget (engineTotals); a device
//                           consumes its profile's engines (+me / +me.all
//                           exclusivity); a counter only when some profile
//                           needs that engine;
//   gi-<id>-instances       a profile's instanceCount, only where it binds
//                           tighter than the slices and engines do.
// Counter and counter-set names are DNS labels (KEP-4815 validation:
// k8s.io/api resource/v1 CounterSet.Name, "must be a DNS label").
//
// Names (stable for the GPU's lifetime: the allocator keeps consumption per
// device name, dynamic-resource-allocation structured/ checkAvailableCounters):
//   device       gpu-<index>-<profile slug>-<GI profile id>-<placement start>
//                e.g. gpu-0-3g40gb-9-4, gpu-1-1g10gb-me-19-0 (slug: the
//                profile name lower-cased, '.' dropped, other characters
//                outside [a-z0-9] as '-'); at most 63 characters.
//   counter set  gpu-<index>
//
// Pure: no NVML, no I/O. Thread-safety: value types and pure functions.
#ifndef MIGD_K8S_DRA_DEVICE_TABLE_H_
#define MIGD_K8S_DRA_DEVICE_TABLE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/ids.h"
#include "mig/catalog.h"
#include "mig/placement.h"

namespace migd::k8s::dra {

// Counter name -> amount (DRA Counter.value, an integer Quantity).
using Counters = std::map<std::string, int64_t>;

// One device of the table.
struct TableDevice {
  std::string name;
  const mig::GiProfile* profile = nullptr;  // points into the GpuModel
  mig::Placement placement;
  Counters consumes;  // on the GPU's counter set
};

// Every device of one GPU, by profile (catalogue order) then placement start.
struct DeviceTable {
  GpuIndex gpu;
  const mig::GpuModel* model = nullptr;
  std::string counter_set;  // "gpu-<index>"
  Counters capacity;        // the whole counter set of an empty GPU
  std::vector<TableDevice> devices;

  // nullptr if no device has that name.
  const TableDevice* Find(const std::string& name) const;
  // nullptr if (profile id, placement) is not a device of the table.
  const TableDevice* Find(GiProfileId profile, const mig::Placement& placement) const;
};

// The table of `model` on GPU `gpu`. REQUIRES: `model` outlives the table.
DeviceTable BuildDeviceTable(GpuIndex gpu, const mig::GpuModel& model);

// "1g.10gb+me" -> "1g10gb-me".
std::string ProfileSlug(std::string_view profile_name);
std::string DeviceName(GpuIndex gpu, const mig::GiProfile& profile, const mig::Placement& p);
std::string CounterSetName(GpuIndex gpu);
std::string MemorySliceCounter(uint32_t slice);

// What `profile` at `placement` consumes of a counter set with `capacity`
// (BuildDeviceTable's): its memory slices, its engines and instance counter
// where the set has them.
Counters Consumption(const Counters& capacity, const mig::GiProfile& profile,
                     const mig::Placement& placement);

// `available` minus `used`, per counter (a counter never goes below 0).
void Subtract(Counters& available, const Counters& used);
// True if every counter of `need` is present in `available` and fits.
bool Fits(const Counters& available, const Counters& need);

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_DEVICE_TABLE_H_
