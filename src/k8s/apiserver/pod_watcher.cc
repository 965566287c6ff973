#include "k8s/apiserver/pod_watcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "base/logging.h"

namespace migd::k8s {

PodWatcher::PodWatcher(HamiBackend* backend, PodWatcherOptions options)
    : backend_(backend), options_(options) {}

PodWatcher::~PodWatcher() { Stop(); }

void PodWatcher::Start() {
  if (thread_.joinable()) return;
  {
    MutexLock lock(&mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void PodWatcher::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

uint64_t PodWatcher::passes() const {
  MutexLock lock(&mu_);
  return passes_;
}

void PodWatcher::RequestRegistration() {
  MutexLock lock(&mu_);
  register_now_ = true;
  cv_.SignalAll();
}

bool PodWatcher::WaitForRegistrations(uint64_t n, std::chrono::milliseconds timeout) const {
  MutexLock lock(&mu_);
  return cv_.WaitFor(&mu_, timeout,
                     [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return registrations_ >= n; });
}

bool PodWatcher::WaitForPasses(uint64_t n, std::chrono::milliseconds timeout) const {
  MutexLock lock(&mu_);
  return cv_.WaitFor(&mu_, timeout,
                     [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return passes_ >= n; });
}

void PodWatcher::Loop() {
  using SteadyClock = std::chrono::steady_clock;
  SteadyClock::time_point next_register = SteadyClock::now();
  SteadyClock::time_point next_release = next_register;
  bool registered = false;
  // One round of whatever is due; true when a release pass ran.
  auto run_due = [&](bool register_now) {
    const SteadyClock::time_point now = SteadyClock::now();
    registered = register_now || now >= next_register;
    if (registered) {
      const Status s = backend_->PublishNodeRegistration();
      if (!s.ok()) {
        spdlog::warn("HAMi node registration failed{}", Fields().Add("error", s.ToString()));
      }
      next_register = now + options_.register_interval;
    }
    if (now < next_release) return false;
    StatusOr<ReleasePassResult> r = backend_->ReleaseEndedPods();
    if (!r.ok()) {
      spdlog::warn("pod release pass skipped{}", Fields().Add("error", r.status().ToString()));
    }
    next_release = now + options_.release_interval;
    return true;
  };
  while (true) {
    bool register_now = false;
    {
      MutexLock lock(&mu_);
      if (stop_) return;
      register_now = std::exchange(register_now_, false);
    }
    const bool released = run_due(register_now);  // without the lock
    MutexLock lock(&mu_);
    if (released) ++passes_;
    if (registered) ++registrations_;
    if (released || registered) cv_.SignalAll();
    const SteadyClock::time_point deadline = std::min(next_register, next_release);
    while (!stop_ && !register_now_ && SteadyClock::now() < deadline) {
      if (!cv_.WaitUntil(&mu_, deadline)) break;  // the deadline passed
    }
  }
}

}  // namespace migd::k8s
