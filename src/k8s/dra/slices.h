// File: k8s/dra/slices.h
//
// The ResourceSlice objects (resource.k8s.io/v1) of a Pool, in the JSON
// shape of k8s.io/api resource/v1 types.go, in one of the two layouts of
// partitionable devices (KEP-4815):
//
//   kCombined  Kubernetes 1.34: one slice per GPU holding its counter set
//              and the devices that consume it (the v0.34 allocator looks
//              counters up in the device's own slice; at most 32 counters
//              per slice, 128 devices);
//   kSplit     Kubernetes 1.35+: counter sets in slices of their own (at most
//              8 per slice; only one of devices/sharedCounters per slice),
//              then device slices of at most 64 devices (the limit when
//              devices consume counters). A profile's ranked devices are
//              kept in one slice whenever they fit, so the first fit within
//              that profile is migd's choice even where slice order is not
//              honoured (before 1.36).
// Slices are named <node>-<driver with '.'->'-'>-<3-digit index> in
// publishing order (1.36+ allocators sort a pool's slices by name; the
// name is shortened with a hash suffix past 253 characters). Every slice
// has spec.nodeName (counter slices too: exactly one node selector field is
// required), the same pool name, generation and resourceSliceCount, and
// optionally the Node as controller owner (kubelet's garbage collection).
//
// Device shape: attributes type=mig, profile, profileID, memoryMiB,
// parentUUID, parentIndex, productName, placementStart, placementSize and
// resource.kubernetes.io/pciBusID (sysfs form 0000:17:00.0); capacity memory
// (canonical Mi/Gi quantity) and multiprocessors; one consumesCounters entry
// on the GPU's counter set.
//
// Thread-safety: pure functions.
#ifndef MIGD_K8S_DRA_SLICES_H_
#define MIGD_K8S_DRA_SLICES_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "k8s/dra/pool.h"

namespace migd::k8s::dra {

enum class CounterLayout { kCombined, kSplit };
std::string_view CounterLayoutName(CounterLayout layout);  // "combined", "split"
// "combined", "split"; nullopt for anything else ("auto": ask the server).
std::optional<CounterLayout> CounterLayoutFromName(std::string_view name);
// kCombined below Kubernetes 1.35, kSplit from 1.35.
CounterLayout LayoutForServer(int major, int minor);

struct SliceOptions {
  std::string driver;     // spec.driver
  std::string pool;       // spec.pool.name
  std::string node_name;  // spec.nodeName
  CounterLayout layout = CounterLayout::kSplit;
  std::string node_uid;         // "" = no owner reference
  size_t max_devices = 64;      // per device slice (kSplit)
  size_t max_counter_sets = 8;  // per counter slice (kSplit)
};

struct DesiredSlice {
  std::string name;
  nlohmann::json spec;  // the whole spec except spec.pool.generation
};

// The slices of `pool` in publishing order; empty when there is nothing to
// publish (no managed GPU).
std::vector<DesiredSlice> RenderSlices(const Pool& pool, const SliceOptions& options);

// The full object to create or update.
nlohmann::json SliceObject(const DesiredSlice& slice, int64_t generation,
                           const SliceOptions& options);

// `spec` without pool.generation and with every {"value": quantity}
// canonical (integers of base units), so that a desired spec and the one the
// API server returns compare equal when they mean the same.
nlohmann::json ComparableSpec(const nlohmann::json& spec);

std::string SliceName(const SliceOptions& options, size_t index);
// 9856 -> "9856Mi", 20480 -> "20Gi" (what the API server prints).
std::string MebibyteQuantity(uint64_t mib);
// Parses an integer Kubernetes quantity ("1", "9856Mi", "2Gi", "3k");
// nullopt for anything else (fractions, exponents).
std::optional<int64_t> ParseIntegerQuantity(std::string_view text);
// NVML "00000000:17:00.0" -> "0000:17:00.0" (lower case).
std::string SysfsBusId(std::string_view nvml_bus_id);

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_SLICES_H_
