#include "engine/health_monitor.h"

#include <absl/strings/match.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace migd::engine {

using driver::GpuEvent;
using driver::GpuEventKind;
using driver::GpuEventKinds;

std::string_view HealthActionName(HealthAction action) {
  switch (action) {
    case HealthAction::kIgnore: return "ignored";
    case HealthAction::kInstanceUnhealthy: return "instance-unhealthy";
    case HealthAction::kGpuUnhealthy: return "gpu-unhealthy";
    case HealthAction::kDriftCheck: return "drift-check";
  }
  return "unknown";
}

HealthAction ClassifyGpuEvent(const GpuEvent& event, const HealthOptions& options) {
  switch (event.kind) {
    case GpuEventKind::kMigConfigChange: return HealthAction::kDriftCheck;
    case GpuEventKind::kGpuLost: return HealthAction::kGpuUnhealthy;
    case GpuEventKind::kXid:
      if (options.ignored_xids.contains(event.xid)) return HealthAction::kIgnore;
      return event.gi ? HealthAction::kInstanceUnhealthy : HealthAction::kGpuUnhealthy;
  }
  return HealthAction::kIgnore;
}

StatusOr<std::unique_ptr<HealthMonitor>> HealthMonitor::Start(driver::GpuDriver& driver,
                                                             const std::vector<GpuIndex>& gpus,
                                                             HealthOptions options,
                                                             HealthSink& sink) {
  if (!options.enabled) {
    spdlog::info("health: monitoring disabled (health.enabled is false)");
    return std::unique_ptr<HealthMonitor>(
        new HealthMonitor(std::move(options), driver, sink, nullptr));
  }
  StatusOr<std::unique_ptr<driver::GpuEventWatch>> watch = driver.OpenEventWatch();
  if (!watch.ok()) return watch.status();
  for (GpuIndex gpu : gpus) {
    StatusOr<GpuEventKinds> got = (*watch)->Register(gpu, GpuEventKinds::All());
    if (!got.ok()) {
      spdlog::warn("health: GPU {} gets no events: {}", gpu.value(), got.status().ToString());
      if (absl::StrContains(std::string(got.status().message()), "GPU_IS_LOST")) {
        sink.MarkGpuLost(gpu, "lost at registration: " + got.status().ToString());
      }
      continue;
    }
    if (*got != GpuEventKinds::All()) {
      spdlog::warn("health: GPU {} supports only {} of xid,mig-config-change,gpu-lost events",
                   gpu.value(), got->ToString());
    }
  }
  std::unique_ptr<HealthMonitor> monitor(
      new HealthMonitor(std::move(options), driver, sink, std::move(watch).value()));
  {
    MutexLock lock(&monitor->stop_mu_);
    monitor->thread_ = std::thread([m = monitor.get()] { m->Run(); });
  }
  return monitor;
}

HealthMonitor::HealthMonitor(HealthOptions options, driver::GpuDriver& driver, HealthSink& sink,
                             std::unique_ptr<driver::GpuEventWatch> watch)
    : options_(std::move(options)), driver_(driver), sink_(sink), watch_(std::move(watch)) {}

HealthMonitor::~HealthMonitor() { Stop(); }

void HealthMonitor::Stop() {
  MutexLock stop(&stop_mu_);
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  // Closing wakes a Wait in progress (GpuEventWatch: within its timeout).
  if (watch_ != nullptr && !closed_) {
    closed_ = true;
    Status st = watch_->Close();
    if (!st.ok()) spdlog::warn("health: closing the event watch: {}", st.ToString());
  }
  if (thread_.joinable()) thread_.join();
  // The watch shares the NVML session (NvmlDriver::OpenEventWatch): drop it
  // so that the session can close once its driver is gone.
  watch_.reset();
}

void HealthMonitor::Run() {
  const auto wait = std::clamp(options_.wait, std::chrono::milliseconds(1),
                               driver::GpuEventWatch::kMaxWait);
  const auto probe_every = std::max(options_.recovery_probe, std::chrono::milliseconds(1));
  auto next_probe = std::chrono::steady_clock::now() + probe_every;
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (options_.clear_recovered_gpus && std::chrono::steady_clock::now() >= next_probe) {
      ProbeLostGpus();
      next_probe = std::chrono::steady_clock::now() + probe_every;
    }
    StatusOr<std::optional<GpuEvent>> e = watch_->Wait(std::min<std::chrono::milliseconds>(
        wait, options_.clear_recovered_gpus ? probe_every : wait));
    if (e.ok()) {
      if (e->has_value()) Handle(**e);
      continue;
    }
    MutexLock lock(&mu_);
    if (stopping_) return;
    spdlog::warn("health: waiting for GPU events: {}", e.status().ToString());
    ++counters_.wait_errors;
    cv_.WaitFor(&mu_, options_.error_backoff,
                [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
  }
}

void HealthMonitor::Handle(const GpuEvent& event) {
  const HealthAction action = ClassifyGpuEvent(event, options_);
  spdlog::warn("health: {}: action {}", driver::DescribeGpuEvent(event), HealthActionName(action));
  switch (action) {
    case HealthAction::kIgnore: break;
    case HealthAction::kInstanceUnhealthy:
      sink_.MarkInstanceUnhealthy(event.gpu, *event.gi, event.ci, event.xid);
      break;
    case HealthAction::kGpuUnhealthy:
      if (event.kind == GpuEventKind::kGpuLost) {
        sink_.MarkGpuLost(event.gpu, driver::DescribeGpuEvent(event));
      } else {
        sink_.MarkGpuUnhealthy(event.gpu, driver::DescribeGpuEvent(event));
      }
      break;
    case HealthAction::kDriftCheck: sink_.OnMigConfigChange(event.gpu); break;
  }
  sink_.OnEvent(event, action);
  MutexLock lock(&mu_);
  ++counters_.events;
  if (action == HealthAction::kIgnore) ++counters_.ignored;
  cv_.SignalAll();
}

bool HealthMonitor::Answers(const LostGpu& lost, const std::vector<driver::GpuInfo>& listed) {
  const auto it = std::find_if(listed.begin(), listed.end(),
                               [&](const driver::GpuInfo& i) { return i.index == lost.gpu; });
  if (it == listed.end()) return false;  // still skipped: GPU_IS_LOST (or no access)
  if (!lost.uuid.value().empty() && it->uuid != lost.uuid) {
    spdlog::warn("health: GPU {} answers as {}, not as the lost {}: its mark stays",
                 lost.gpu.value(), it->uuid.value(), lost.uuid.value());
    return false;
  }
  return true;  // the listing read its UUID and MIG mode: it answers
}

void HealthMonitor::ProbeLostGpus() {
  const std::vector<LostGpu> lost = sink_.LostGpus();
  StatusOr<std::vector<driver::GpuInfo>> listed = std::vector<driver::GpuInfo>();
  if (!lost.empty()) listed = driver_.ListGpus();  // nothing to ask otherwise
  uint64_t recovered = 0;
  if (!listed.ok()) {
    spdlog::info("health: recovery probe: listing GPUs: {}", listed.status().ToString());
  } else {
    for (const LostGpu& l : lost) {
      if (!Answers(l, *listed)) continue;
      sink_.ClearRecoveredGpu(l.gpu);
      ++recovered;
      // The watch left the GPU out when it was lost.
      StatusOr<GpuEventKinds> got = watch_->Register(l.gpu, GpuEventKinds::All());
      if (!got.ok()) {
        spdlog::warn("health: GPU {} answers again but gets no events: {}", l.gpu.value(),
                     got.status().ToString());
      }
    }
  }
  MutexLock lock(&mu_);
  ++counters_.recovery_probes;
  counters_.recovered += recovered;
  cv_.SignalAll();
}

void HealthMonitor::WaitForRecoveryProbes(uint64_t n) const {
  MutexLock lock(&mu_);
  cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return counters_.recovery_probes >= n; });
}

HealthMonitor::Counters HealthMonitor::counters() const {
  MutexLock lock(&mu_);
  return counters_;
}

void HealthMonitor::WaitForEvents(uint64_t n) const {
  MutexLock lock(&mu_);
  cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return counters_.events >= n; });
}

}  // namespace migd::engine
