#include "sim/fake_event_watch.h"

#include <algorithm>
#include <string>

#include "driver/nvml/nvml_abi.h"

namespace migd::sim {
namespace {

namespace abi = ::migd::nvml_abi;
using driver::GpuEvent;
using driver::GpuEventKind;
using driver::GpuEventKinds;

std::optional<GpuEventKind> KindOf(uint64_t type) {
  switch (type) {
    case abi::kEventTypeXidCriticalError: return GpuEventKind::kXid;
    case abi::kEventMigConfigChange: return GpuEventKind::kMigConfigChange;
    case abi::kEventTypeGpuUnavailableError: return GpuEventKind::kGpuLost;
    default: return std::nullopt;
  }
}

Status Closed() { return FailedPreconditionError("the event watch is closed"); }

}  // namespace

StatusOr<GpuEventKinds> FakeEventWatch::Register(GpuIndex gpu, GpuEventKinds wanted) {
  MutexLock lock(&driver_->mu_);
  if (closed_) return Closed();
  const SimGpu* g = gpu.value() < driver_->state_.gpus.size()
                        ? &driver_->state_.gpus[gpu.value()]
                        : nullptr;
  if (g == nullptr) return NotFoundError("no GPU " + std::to_string(gpu.value()));
  if (g->lost) {
    return FailedPreconditionError("GPU " + std::to_string(gpu.value()) +
                                   " is lost (NVML_ERROR_GPU_IS_LOST)");
  }
  std::map<GpuEventKind, uint64_t>& kinds = registered_[gpu.value()];
  for (GpuEventKind k :
       {GpuEventKind::kXid, GpuEventKind::kMigConfigChange, GpuEventKind::kGpuLost}) {
    if (wanted.Has(k) && driver_->supported_events_.Has(k)) {
      kinds.emplace(k, driver_->state_.event_seq);
    }
  }
  GpuEventKinds got;
  got.xid = kinds.contains(GpuEventKind::kXid);
  got.mig_config_change = kinds.contains(GpuEventKind::kMigConfigChange);
  got.gpu_lost = kinds.contains(GpuEventKind::kGpuLost);
  if (kinds.empty()) registered_.erase(gpu.value());
  return got;
}

const SimEvent* FakeEventWatch::NextEvent() const {
  for (const SimEvent& e : driver_->state_.events) {
    if (delivered_.contains(e.seq)) continue;
    const std::optional<GpuEventKind> kind = KindOf(e.type);
    auto g = registered_.find(e.gpu);
    if (!kind || g == registered_.end()) continue;
    auto k = g->second.find(*kind);
    if (k != g->second.end() && e.seq > k->second) return &e;
  }
  return nullptr;
}

bool FakeEventWatch::Ready() const { return closed_ || NextEvent() != nullptr; }

std::optional<GpuEvent> FakeEventWatch::Next() {
  const SimEvent* e = NextEvent();
  if (e == nullptr) return std::nullopt;
  delivered_.insert(e->seq);
  GpuEvent out;
  out.gpu = GpuIndex(e->gpu);
  out.kind = *KindOf(e->type);
  if (out.kind == GpuEventKind::kXid) {
    out.xid = e->data;
    if (e->gi != abi::kInvalidInstanceId) out.gi = NvmlGiId(e->gi);
    if (e->ci != abi::kInvalidInstanceId) out.ci = NvmlCiId(e->ci);
  }
  // Reported once, then left out (GpuEventWatch's contract).
  if (out.kind == GpuEventKind::kGpuLost) registered_.erase(e->gpu);
  return out;
}

StatusOr<std::optional<GpuEvent>> FakeEventWatch::Wait(std::chrono::milliseconds timeout) {
  MutexLock lock(&driver_->mu_);
  if (closed_) return Closed();
  const auto ms = std::clamp(timeout, std::chrono::milliseconds(0), kMaxWait);
  driver_->events_cv_.WaitFor(&driver_->mu_, ms, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                                     driver_->mu_) { return Ready(); });
  if (closed_) return Closed();
  return Next();
}

Status FakeEventWatch::Close() {
  MutexLock lock(&driver_->mu_);
  closed_ = true;
  registered_.clear();
  driver_->events_cv_.SignalAll();
  return OkStatus();
}

}  // namespace migd::sim
