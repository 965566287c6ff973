// File: k8s/dra/testing/allocator_model.h
//
// AllocatorModel: a model of the kube-scheduler's structured-parameters
// allocator (k8s.io/dynamic-resource-allocation structured/, read at tags
// v0.34.0, v0.35.0, v0.36.0), independent of migd's slice builder: it reads
// ResourceSlice JSON as the API server stores it and picks devices the way
// the allocator does, for tests (is migd's first device the scheduler's
// first choice?) and the DRA benchmark.
//
//   pools    slices grouped by (driver, pool name); only the highest
//            generation counts; a pool is complete iff it has
//            resourceSliceCount slices; incomplete or invalid pools
//            (duplicate device or counter-set names, a device consuming a
//            counter set or counter that does not exist) are skipped
//            (GatherPools / buildPool);
//   order    pools, then slices, then devices in list order. Pools are
//            sorted by (driver, pool) and slices by name only from v0.36
//            (the incubating allocator, the default once DRAConsumableCapacity
//            is on in 1.36); before, the scheduler's listing order, modelled
//            here as the input order;
//   counters v0.34: per slice (a device consumes the counter sets of its own
//            slice); v0.35+: per pool. Available = counter-set value minus
//            what allocated devices that are published consume (negatives
//            count as 0), minus the devices being chosen
//            (checkAvailableCounters);
//   search   requests in order, `count` devices each, first fit with
//            backtracking; the first full solution wins.
// Selectors are plain predicates (CEL is not modelled).
//
// Thread-safety: const methods on value state; share freely.
#ifndef MIGD_K8S_DRA_TESTING_ALLOCATOR_MODEL_H_
#define MIGD_K8S_DRA_TESTING_ALLOCATOR_MODEL_H_

#include <compare>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace migd::k8s::dra::testing {

struct DeviceRef {
  std::string driver;
  std::string pool;
  std::string device;
  friend auto operator<=>(const DeviceRef&, const DeviceRef&) = default;
  friend bool operator==(const DeviceRef&, const DeviceRef&) = default;
};

struct ModelRequest {
  std::string driver;
  // Called with the device's JSON; true = selectable.
  std::function<bool(const nlohmann::json& device)> selector;
  int count = 1;
};

// A selector for devices whose `attribute` is the string `value`.
std::function<bool(const nlohmann::json&)> StringAttributeIs(const std::string& attribute,
                                                             const std::string& value);

struct PoolSummary {
  std::string driver;
  std::string pool;
  int64_t generation = 0;
  bool complete = false;
  bool valid = false;
  std::string invalid_reason;
  size_t devices = 0;
};

class AllocatorModel {
 public:
  // `minor`: the Kubernetes minor version whose allocator to model (34, 35,
  // 36; higher behaves as 36).
  explicit AllocatorModel(int minor) : minor_(minor) {}

  // The devices for one claim's requests (in request order), or nullopt when
  // none fit. `allocated` are the devices of claims already allocated.
  std::optional<std::vector<DeviceRef>> Allocate(const std::vector<nlohmann::json>& slices,
                                                 const std::set<DeviceRef>& allocated,
                                                 const std::vector<ModelRequest>& requests,
                                                 const std::string& node) const;

  std::vector<PoolSummary> Pools(const std::vector<nlohmann::json>& slices,
                                 const std::string& node) const;

 private:
  struct Pool;
  std::vector<Pool> Gather(const std::vector<nlohmann::json>& slices,
                           const std::string& node) const;
  // Completeness, slice order, validity and counter capacities of one pool.
  Pool Build(Pool pool) const;
  const int minor_;
};

}  // namespace migd::k8s::dra::testing

#endif  // MIGD_K8S_DRA_TESTING_ALLOCATOR_MODEL_H_
