// See engine/engine_health.h.
#include "engine/engine_health.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/tracked_instance.h"

namespace migd::engine {

namespace {

// Whether a health change of `inst` rewrites its record (Active and Idle
// instances; the others are on their way out).
bool RecordsHealth(const TrackedInstance& inst) {
  return inst.state == InstanceState::kActive || inst.state == InstanceState::kIdle;
}

// Marks `inst`; keeps a copy in `marked` when its record is to be rewritten.
void Mark(TrackedInstance& inst, std::string reason, std::vector<TrackedInstance>& marked) {
  inst.unhealthy = true;
  inst.health_reason = std::move(reason);
  if (RecordsHealth(inst)) marked.push_back(inst);
}

// Whether a mark hit an Idle instance: the reconciler reclaims it, and is
// asked for a pass at once so that the reclaim (and a request pinned to that
// placement) does not wait for the periodic pass.
bool AnyIdle(const std::vector<InstanceView>& views) {
  return std::any_of(views.begin(), views.end(),
                     [](const InstanceView& v) { return v.state == InstanceState::kIdle; });
}

}  // namespace

void EngineHealth::MarkInstanceUnhealthy(GpuIndex gpu, NvmlGiId gi, std::optional<NvmlCiId> ci,
                                         uint64_t xid) {
  MutexLock serial(&mu_);
  std::vector<TrackedInstance> marked;
  bool found = false;
  bool reclaim = false;
  {
    MutexLock lock(registry_.mu());
    HealthChange change;
    change.gpu = gpu;
    change.reason = "xid " + std::to_string(xid);
    for (auto& [key, inst] : registry_.instances()) {
      if (inst.gpu != gpu || inst.gi() != gi) continue;
      if (ci && inst.ci() && *inst.ci() != *ci) continue;
      found = true;
      if (inst.unhealthy) continue;  // the first reason stays
      Mark(inst, change.reason, marked);
      registry_.AnnounceMark(inst);
      change.instances.push_back(ViewOf(inst));
    }
    reclaim = AnyIdle(change.instances);
    Announce(std::move(change));
  }
  // An Xid on a GI migd does not track (foreign, or being created): nothing
  // to mark; the drift check sorts out what is there.
  if (!found) spdlog::warn("health: xid {} on an untracked GI {} of GPU {}", xid, gi.value(),
                           gpu.value());
  Persist(marked);
  if (reclaim) request_drift_(gpu);
}

void EngineHealth::MarkGpuUnhealthy(GpuIndex gpu, const std::string& reason) {
  MutexLock serial(&mu_);
  MarkGpu(gpu, reason, store::GpuMarkCause::kFault, /*write_mark=*/true);
}

void EngineHealth::MarkGpuLost(GpuIndex gpu, const std::string& reason) {
  MutexLock serial(&mu_);
  MarkGpu(gpu, reason, store::GpuMarkCause::kLost, /*write_mark=*/true);
}

void EngineHealth::WriteMark(GpuIndex gpu, const GpuUuid& uuid, const std::string& reason,
                             store::GpuMarkCause cause) {
  // A GPU known by index only (never listed) has no UUID to key a file:
  // its mark holds in memory; it takes no allocation anyway.
  if (marks_ == nullptr || uuid.value().empty()) return;
  store::GpuMark mark;
  mark.gpu_uuid = uuid;
  mark.gpu_index = gpu.value();
  mark.reason = reason;
  mark.cause = cause;
  Status s = marks_->Put(std::move(mark));
  if (!s.ok()) {
    spdlog::error("health: cannot record the mark of GPU {} (it holds until migd restarts): {}",
                  gpu.value(), s.ToString());
  }
}

void EngineHealth::MarkGpu(GpuIndex gpu, const std::string& reason, store::GpuMarkCause cause,
                           bool write_mark, const GpuUuid& uuid) {
  std::vector<TrackedInstance> marked;
  bool new_mark = false;
  bool reclaim = false;
  std::string kept_reason;  // the GPU's first reason, which stays
  {
    MutexLock lock(registry_.mu());
    HealthChange change;
    change.gpu = gpu;
    change.reason = reason;
    const auto [it, inserted] = registry_.unhealthy_gpus().emplace(gpu.value(), reason);
    change.gpu_changed = inserted;
    new_mark = inserted;
    kept_reason = it->second;
    for (auto& [key, inst] : registry_.instances()) {
      if (inst.gpu != gpu || inst.unhealthy) continue;  // the first reason stays
      Mark(inst, "GPU unhealthy: " + reason, marked);
      registry_.AnnounceMark(inst);
      change.instances.push_back(ViewOf(inst));
    }
    reclaim = AnyIdle(change.instances);
    Announce(std::move(change));
  }
  const GpuUuid known = uuid.value().empty() ? gpus_.InfoOf(gpu.value()).uuid : uuid;
  if (new_mark) {
    if (cause == store::GpuMarkCause::kLost) lost_[gpu.value()] = known;
    if (write_mark) WriteMark(gpu, known, reason, cause);
  } else if (cause == store::GpuMarkCause::kFault && lost_.erase(gpu.value()) > 0) {
    // A fault on a GPU marked lost: no policy may clear it any more.
    if (write_mark) WriteMark(gpu, known, kept_reason, cause);
  }
  Persist(marked);
  if (reclaim) request_drift_(gpu);
}

std::optional<uint32_t> EngineHealth::IndexOf(const GpuUuid& uuid) const {
  for (uint32_t i : gpus_.Indices()) {
    if (gpus_.Listed(i) && gpus_.InfoOf(i).uuid == uuid) return i;
  }
  return std::nullopt;
}

void EngineHealth::Restore(const store::GpuMarkLoad& load) {
  MutexLock serial(&mu_);
  for (const store::GpuMark& m : load.other_boot) {
    spdlog::info("health: dropped the mark of GPU {} ({}) from another boot: {}", m.gpu_index,
                 m.gpu_uuid.value(), m.reason);
  }
  const std::vector<uint32_t> entries = gpus_.Indices();
  for (const store::GpuMark& m : load.marks) {
    std::optional<uint32_t> index = IndexOf(m.gpu_uuid);
    // A GPU this boot's listing skipped is known by index only; within one
    // boot the index is the same GPU's.
    if (!index && std::find(entries.begin(), entries.end(), m.gpu_index) != entries.end() &&
        !gpus_.Listed(m.gpu_index)) {
      index = m.gpu_index;
    }
    if (!index) {
      spdlog::warn("health: the mark of GPU {} ({}: {}) names a GPU this node does not list; it "
                   "stays on disk",
                   m.gpu_index, m.gpu_uuid.value(), m.reason);
      continue;
    }
    MarkGpu(GpuIndex(*index), m.reason, m.cause, /*write_mark=*/false, m.gpu_uuid);
  }
  for (const store::GpuMarkProblem& p : load.problems) {
    const std::optional<uint32_t> index = p.gpu_uuid ? IndexOf(*p.gpu_uuid) : std::nullopt;
    if (!index) {
      spdlog::warn("health: {} (no GPU of this node; left in place)", p.reason);
      continue;
    }
    // Fail closed: a mark that cannot be read may have said unhealthy.
    const std::string reason = "unreadable health mark (" + p.reason +
                               "); check the GPU, then run migctl health clear --gpu " +
                               std::to_string(*index);
    spdlog::error("health: GPU {}: {}", *index, reason);
    MarkGpu(GpuIndex(*index), reason, store::GpuMarkCause::kFault, /*write_mark=*/false);
  }
}

StatusOr<HealthClearResult> EngineHealth::ClearGpu(GpuIndex gpu) {
  MutexLock serial(&mu_);
  if (marks_ != nullptr) {
    const driver::GpuInfo info = gpus_.InfoOf(gpu.value());
    if (!info.uuid.value().empty()) {
      Status removed = marks_->Remove(info.uuid);
      if (!removed.ok()) {
        return removed.WithContext("GPU " + std::to_string(gpu.value()) +
                                   ": cannot remove its health mark, nothing was cleared");
      }
    }
  }
  lost_.erase(gpu.value());
  std::vector<TrackedInstance> cleared;
  HealthClearResult result;
  {
    MutexLock lock(registry_.mu());
    HealthChange change;
    change.gpu = gpu;
    change.cleared = true;
    change.gpu_changed = registry_.unhealthy_gpus().erase(gpu.value()) > 0;
    result.gpu_was_unhealthy = change.gpu_changed;
    for (auto& [key, inst] : registry_.instances()) {
      if (inst.gpu != gpu || !inst.unhealthy) continue;
      inst.unhealthy = false;
      inst.health_reason.clear();
      ++result.instances_cleared;
      if (RecordsHealth(inst)) cleared.push_back(inst);
      registry_.AnnounceMark(inst, EventReason::kHealthCleared);
      change.instances.push_back(ViewOf(inst));
    }
    Announce(std::move(change));
  }
  Persist(cleared);
  spdlog::info("health: GPU {} cleared by the operator (GPU mark: {}, {} instance marks)",
               gpu.value(), result.gpu_was_unhealthy ? "yes" : "no", result.instances_cleared);
  return result;
}

std::vector<LostGpu> EngineHealth::LostGpus() {
  MutexLock serial(&mu_);
  std::vector<LostGpu> out;
  for (const auto& [index, uuid] : lost_) out.push_back(LostGpu{GpuIndex(index), uuid});
  return out;
}

void EngineHealth::ClearRecoveredGpu(GpuIndex gpu) {
  {
    MutexLock serial(&mu_);
    const auto it = lost_.find(gpu.value());
    if (it == lost_.end()) return;  // cleared meanwhile, or a fault since
    if (marks_ != nullptr && !it->second.value().empty()) {
      Status removed = marks_->Remove(it->second);
      if (!removed.ok()) {
        spdlog::error("health: GPU {} answers again but its mark stays: cannot remove its file: {}",
                      gpu.value(), removed.ToString());
        return;
      }
    }
    lost_.erase(it);
    size_t instances_marked = 0;
    {
      MutexLock lock(registry_.mu());
      HealthChange change;
      change.gpu = gpu;
      change.cleared = true;
      change.gpu_changed = registry_.unhealthy_gpus().erase(gpu.value()) > 0;
      for (const auto& [key, inst] : registry_.instances()) {
        if (inst.gpu == gpu && inst.unhealthy) ++instances_marked;
      }
      Announce(std::move(change));
    }
    spdlog::info("health: GPU {} answers again: its loss mark cleared by policy "
                 "(health.clearRecoveredGpus); {} instance mark(s) stay (never reused)",
                 gpu.value(), instances_marked);
  }
  request_drift_(gpu);
}

void EngineHealth::Persist(const std::vector<TrackedInstance>& marked) {
  for (const TrackedInstance& inst : marked) {
    // A failed write keeps the mark in memory (it still applies until a
    // restart) and is said; the next write of the record carries it.
    Status s = journal_.Write(inst, inst.state, store::RecordPhase::kCommitted);
    if (!s.ok()) spdlog::error("health: cannot record the mark of {}: {}", inst.key().ToString(),
                               s.ToString());
  }
}

void EngineHealth::OnEvent(const driver::GpuEvent& event, HealthAction action) {
  if (listener_ != nullptr) listener_->OnGpuEvent(event, HealthActionName(action));
}

void EngineHealth::Announce(HealthChange change) {
  if (listener_ == nullptr || (!change.gpu_changed && change.instances.empty())) return;
  change.time = clock_.Now();
  listener_->OnHealthChange(change);
}

}  // namespace migd::engine
