#include "k8s/apiserver/pod_watcher.h"

#include <spdlog/spdlog.h>

#include "base/logging.h"

namespace migd::k8s {

PodWatcher::PodWatcher(HamiBackend* backend, PodWatcherOptions options)
    : backend_(backend), options_(options) {}

PodWatcher::~PodWatcher() { Stop(); }

void PodWatcher::Start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void PodWatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t PodWatcher::passes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return passes_;
}

void PodWatcher::Loop() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point next_register = Clock::now();
  Clock::time_point next_release = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const Clock::time_point now = Clock::now();
    bool released = false;
    if (now >= next_register) {
      Status s = backend_->PublishNodeRegistration();
      if (!s.ok())
        spdlog::warn("HAMi node registration failed{}", Fields().Add("error", s.ToString()));
      next_register = now + options_.register_interval;
    }
    if (now >= next_release) {
      StatusOr<ReleasePassResult> r = backend_->ReleaseEndedPods();
      if (!r.ok()) {
        spdlog::warn("pod release pass skipped{}", Fields().Add("error", r.status().ToString()));
      }
      next_release = now + options_.release_interval;
      released = true;
    }
    lock.lock();
    if (released) ++passes_;
    cv_.wait_until(lock, std::min(next_register, next_release), [this] { return stop_; });
  }
}

}  // namespace migd::k8s
