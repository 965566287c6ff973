// File: k8s/apiserver/pod_watcher.h
//
// PodWatcher: the periodic side of HAMi mode. Every `release_interval` it
// runs HamiBackend::ReleaseEndedPods (a LIST of this node's pods; instances
// of pods that were deleted, are terminating, Succeeded or Failed go Idle),
// and every `register_interval` HamiBackend::PublishNodeRegistration (HAMi's
// plugin re-registers every 30 s). Periodic LIST, not the watch protocol:
// HAMi's own reconciler lists every 5 s, and a list needs no resume logic.
// Failures are logged and retried at the next tick (a failed LIST releases
// nothing). RequestRegistration publishes the registration at once (a GPU's
// health changed), on the watcher's thread.
//
// Thread-safety: Start/Stop from one thread; RequestRegistration, passes(),
// WaitForPasses() and WaitForRegistrations() from any thread.
// RequestRegistration never blocks on the API server (it may be called with
// the engine's registry lock held).
#ifndef MIGD_K8S_APISERVER_POD_WATCHER_H_
#define MIGD_K8S_APISERVER_POD_WATCHER_H_

#include <chrono>
#include <cstdint>
#include <thread>

#include "base/mutex.h"
#include "base/status.h"
#include "k8s/apiserver/hami_backend.h"

namespace migd::k8s {

struct PodWatcherOptions {
  std::chrono::milliseconds release_interval{5000};
  std::chrono::milliseconds register_interval{30000};
};

class PodWatcher {
 public:
  // `backend` is not owned and must outlive the watcher.
  PodWatcher(HamiBackend* backend, PodWatcherOptions options);
  ~PodWatcher();  // Stop()
  PodWatcher(const PodWatcher&) = delete;
  PodWatcher& operator=(const PodWatcher&) = delete;

  // Registers the node once, then starts the thread. Idempotent.
  void Start();
  // Wakes and joins the thread. Idempotent.
  void Stop();

  // Publishes the node registration on the watcher's thread as soon as it is
  // free (coalesced: several requests before it runs give one publication).
  void RequestRegistration() ABSL_LOCKS_EXCLUDED(mu_);

  // Completed release passes (successful or not), for tests and metrics.
  uint64_t passes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until `n` passes completed since construction, or `timeout`
  // passed; returns whether they did (tests synchronise on it).
  bool WaitForPasses(uint64_t n, std::chrono::milliseconds timeout) const ABSL_LOCKS_EXCLUDED(mu_);
  // The same for registration attempts (successful or not).
  bool WaitForRegistrations(uint64_t n, std::chrono::milliseconds timeout) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();

  HamiBackend* const backend_;
  const PodWatcherOptions options_;
  mutable Mutex mu_;
  mutable CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t passes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t registrations_ ABSL_GUARDED_BY(mu_) = 0;
  bool register_now_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace migd::k8s

#endif  // MIGD_K8S_APISERVER_POD_WATCHER_H_
