#include "engine/gpu_table.h"

#include <utility>

namespace migd::engine {

GpuLocks::GpuLocks(std::vector<Mutex*> locks) : locks_(std::move(locks)) {
  // The analysis cannot follow a dynamic set of locks; the order (by GPU
  // index) is what prevents deadlock between multi-GPU operations.
  for (Mutex* mu : locks_) mu->Lock();
}

GpuLocks::GpuLocks(GpuLocks&& other) noexcept : locks_(std::move(other.locks_)) {
  other.locks_.clear();
}

GpuLocks::~GpuLocks() {
  for (auto it = locks_.rbegin(); it != locks_.rend(); ++it) (*it)->Unlock();
}

void GpuTable::Init(const std::vector<driver::GpuInfo>& listed,
                    const std::vector<GpuIndex>& skipped) {
  MutexLock lock(&mu_);
  for (const driver::GpuInfo& g : listed) {
    entries_[g.index.value()];
    seen_[g.index.value()] = Seen{g, true};
  }
  for (GpuIndex i : skipped) {
    if (seen_.count(i.value()) != 0) continue;
    entries_[i.value()];
    Seen s;
    s.info.index = i;
    seen_[i.value()] = std::move(s);
  }
}

void GpuTable::Manage(uint32_t gpu, const driver::GpuInfo& info, mig::GpuModel model) {
  Entry& e = entries_.at(gpu);
  MutexLock lock(&mu_);
  seen_[gpu] = Seen{info, true};
  e.info = std::make_unique<const driver::GpuInfo>(info);
  e.model = std::make_unique<const mig::GpuModel>(std::move(model));
  e.managed.store(true, std::memory_order_release);
}

const GpuTable::Entry* GpuTable::Find(uint32_t gpu) const {
  auto it = entries_.find(gpu);
  return it == entries_.end() ? nullptr : &it->second;
}

bool GpuTable::Managed(uint32_t gpu) const {
  const Entry* e = Find(gpu);
  return e != nullptr && e->managed.load(std::memory_order_acquire);
}

bool GpuTable::AnyManaged() const {
  for (const auto& [g, e] : entries_) {
    if (e.managed.load(std::memory_order_acquire)) return true;
  }
  return false;
}

const mig::GpuModel* GpuTable::Model(uint32_t gpu) const {
  return Managed(gpu) ? Find(gpu)->model.get() : nullptr;
}

const driver::GpuInfo* GpuTable::ManagedInfo(uint32_t gpu) const {
  return Managed(gpu) ? Find(gpu)->info.get() : nullptr;
}

std::vector<uint32_t> GpuTable::Indices() const {
  std::vector<uint32_t> out;
  for (const auto& [g, e] : entries_) out.push_back(g);
  return out;
}

std::vector<uint32_t> GpuTable::ManagedIndices() const {
  std::vector<uint32_t> out;
  for (const auto& [g, e] : entries_) {
    if (e.managed.load(std::memory_order_acquire)) out.push_back(g);
  }
  return out;
}

driver::GpuInfo GpuTable::InfoOf(uint32_t gpu) const {
  MutexLock lock(&mu_);
  auto it = seen_.find(gpu);
  return it == seen_.end() ? driver::GpuInfo{} : it->second.info;
}

bool GpuTable::Listed(uint32_t gpu) const {
  MutexLock lock(&mu_);
  auto it = seen_.find(gpu);
  return it != seen_.end() && it->second.listed;
}

std::optional<uint32_t> GpuTable::ManagedIndexOf(const GpuUuid& uuid, uint32_t except) const {
  for (const auto& [g, e] : entries_) {
    if (g != except && e.managed.load(std::memory_order_acquire) && e.info->uuid == uuid) {
      return g;
    }
  }
  return std::nullopt;
}

uint32_t GpuTable::MinorOf(uint32_t gpu) const {
  const driver::GpuInfo* info = ManagedInfo(gpu);
  return info == nullptr ? 0 : info->minor;
}

std::vector<GpuView> GpuTable::Views() const {
  std::vector<GpuView> out;
  MutexLock lock(&mu_);
  for (const auto& [g, seen] : seen_) {
    if (!seen.listed) continue;  // skipped by ListGpus (NO_PERMISSION) so far
    GpuView v;
    v.info = seen.info;
    v.model = Model(g);
    out.push_back(std::move(v));
  }
  return out;
}

GpuLocks GpuTable::Lock(const std::set<uint32_t>& gpus) const {
  std::vector<Mutex*> locks;
  for (uint32_t g : gpus) {  // std::set iterates in index order
    const Entry* e = Find(g);
    if (e != nullptr) locks.push_back(e->mutate_mu.get());
  }
  return GpuLocks(std::move(locks));
}

}  // namespace migd::engine
