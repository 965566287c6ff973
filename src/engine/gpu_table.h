// File: engine/gpu_table.h
//
// GpuTable: every GPU index NVML reported at startup (listed by ListGpus, or
// skipped by it for NO_PERMISSION), whether migd manages it, its placement
// table (mig::GpuModel), and the per-GPU mutation lock that serialises the
// NVML and record calls of one GPU.
//
// Contract: Init fixes the set of entries once, before any other call. An
// entry becomes managed at most once (Manage: recovery or rediscovery); its
// info and model never change afterwards, so ManagedInfo and Model return
// stable pointers that need no lock. Unmanaged entries' infos change under
// the table's own lock (Gpus(), rediscovery).
//
// Thread-safety: all methods except Init are thread-safe. The table's lock is
// a leaf: it is never held while calling out. Lock order for callers: GPU
// locks (in index order, Lock()) before engine::Registry's lock.
#ifndef MIGD_ENGINE_GPU_TABLE_H_
#define MIGD_ENGINE_GPU_TABLE_H_

#include <absl/base/thread_annotations.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "base/ids.h"
#include "base/mutex.h"
#include "driver/gpu_driver.h"
#include "engine/instance_view.h"
#include "mig/catalog.h"

namespace migd::engine {

// Holds the mutation locks of a set of GPUs, taken in index order, until
// destroyed. Movable, not copyable.
class GpuLocks {
 public:
  GpuLocks() = default;
  explicit GpuLocks(std::vector<Mutex*> locks) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  GpuLocks(GpuLocks&& other) noexcept;
  GpuLocks& operator=(GpuLocks&&) = delete;
  GpuLocks(const GpuLocks&) = delete;
  GpuLocks& operator=(const GpuLocks&) = delete;
  ~GpuLocks() ABSL_NO_THREAD_SAFETY_ANALYSIS;

 private:
  std::vector<Mutex*> locks_;
};

class GpuTable {
 public:
  GpuTable() = default;
  GpuTable(const GpuTable&) = delete;
  GpuTable& operator=(const GpuTable&) = delete;

  // Creates one entry per listed GPU and per skipped index (known by index
  // only until a listing shows it). REQUIRES: called once, before any other
  // method, by one thread.
  void Init(const std::vector<driver::GpuInfo>& listed, const std::vector<GpuIndex>& skipped);

  // Makes entry `gpu` managed with `info` and `model`. REQUIRES: the entry
  // exists and is not managed yet.
  void Manage(uint32_t gpu, const driver::GpuInfo& info, mig::GpuModel model);

  bool Managed(uint32_t gpu) const;
  bool AnyManaged() const;
  // Null unless `gpu` is managed; then stable for the table's life.
  const mig::GpuModel* Model(uint32_t gpu) const;
  const driver::GpuInfo* ManagedInfo(uint32_t gpu) const;
  // Every entry's index, in order (fixed by Init).
  std::vector<uint32_t> Indices() const;
  std::vector<uint32_t> ManagedIndices() const;
  // The current info of any entry and whether ListGpus reported it.
  driver::GpuInfo InfoOf(uint32_t gpu) const;
  bool Listed(uint32_t gpu) const;
  // The index of the managed GPU of `uuid`, if any other than `except`.
  std::optional<uint32_t> ManagedIndexOf(const GpuUuid& uuid, uint32_t except) const;
  // /dev/nvidia<minor> of a managed GPU; 0 for others.
  uint32_t MinorOf(uint32_t gpu) const;
  // Listed GPUs, by index, with their models once managed (Manager::Gpus()).
  std::vector<GpuView> Views() const;

  // The mutation locks of `gpus` (unknown indices are skipped), in index order.
  GpuLocks Lock(const std::set<uint32_t>& gpus) const;

 private:
  // Published once by Manage (release store of `managed` after the fields).
  struct Entry {
    std::atomic<bool> managed{false};
    std::unique_ptr<const driver::GpuInfo> info;
    std::unique_ptr<const mig::GpuModel> model;
    std::unique_ptr<Mutex> mutate_mu = std::make_unique<Mutex>();
  };
  // What Gpus() reports about an entry.
  struct Seen {
    driver::GpuInfo info;
    bool listed = false;
  };
  const Entry* Find(uint32_t gpu) const;

  std::map<uint32_t, Entry> entries_;  // structure fixed by Init
  mutable Mutex mu_;
  std::map<uint32_t, Seen> seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_GPU_TABLE_H_
