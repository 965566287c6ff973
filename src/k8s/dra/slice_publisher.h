// File: k8s/dra/slice_publisher.h
//
// SlicePublisher: keeps the node's ResourceSlices (slices.h) equal to what
// the engine's state says, through the API server (resource_api.h).
//
// One pass (SyncOnce):
//   1. the counter-set layout: configured, or from GET /version (combined
//      below 1.35, split from 1.35; the alpha API changed incompatibly
//      between them, KEP-4815);
//   2. the Node's UID once, for the owner reference (absent Node: no owner);
//   3. the desired slices: snapshot -> BuildPool -> RenderSlices;
//   4. LIST our slices (spec.driver, spec.nodeName); slices of another pool
//      name are stale and deleted;
//   5. nothing to do when the same names carry the same specs (quantities
//      compared canonically) at one generation;
//   6. otherwise a new pool generation, higher than any seen: delete the
//      slices no longer wanted, update the others (PUT guarded by their
//      resourceVersion), create the missing ones. Every layout change, and
//      every slice that vanished (kubelet deletes its node's slices when it
//      starts, and a driver's slices 30 s after the driver is gone:
//      kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go), gives a
//      new generation of the whole pool;
//   7. if the API server dropped sharedCounters or consumesCounters (the
//      DRAPartitionableDevices gate is off there: alpha and off by default
//      before 1.36), the devices would be allocatable without their counters,
//      i.e. overlapping MIG placements could be handed out: every slice is
//      deleted again and the pass fails with kFailedPrecondition naming the
//      gate. Nothing is published until the gate is on.
// Errors of a pass are returned (and logged by the loop); a 409 means
// someone else wrote in between, and the next pass starts over.
//
// The loop (Start): a pass at once, then whenever Kick() is called (the
// engine's instance events via OnInstanceEvent, a kubelet (re)registration),
// and every resync_period (slices deleted behind migd's back are recreated
// within it); after a failed pass, retries with backoff from retry_initial
// up to resync_period.
//
// Thread-safety: all methods are thread-safe; passes are serialised.
// OnInstanceEvent only sets a flag (engine listener rule).
#ifndef MIGD_K8S_DRA_SLICE_PUBLISHER_H_
#define MIGD_K8S_DRA_SLICE_PUBLISHER_H_

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "base/status.h"
#include "engine/events.h"
#include "k8s/dra/pool.h"
#include "k8s/dra/resource_api.h"
#include "k8s/dra/slices.h"
#include "planner/planner.h"

namespace migd::k8s::dra {

struct SlicePublisherOptions {
  std::string driver;                   // required
  std::string node_name;                // required
  std::string pool;                     // "" = node_name
  std::optional<CounterLayout> layout;  // nullopt = from the server version
  std::chrono::milliseconds resync_period{30000};
  std::chrono::milliseconds retry_initial{500};
};

struct PublisherStats {
  uint64_t passes = 0;
  uint64_t failed_passes = 0;
  uint64_t generations = 0;  // passes that wrote a new generation
  uint64_t creates = 0, updates = 0, deletes = 0;
  int64_t generation = 0;  // the last generation written (0: none yet)
  size_t slices = 0;       // slices of that generation
  size_t devices = 0;      // devices published in it
  std::optional<CounterLayout> layout;
  Status last_error;  // of the last pass
};

class SlicePublisher final : public engine::EngineListener {
 public:
  using SnapshotFn = std::function<NodeSnapshot()>;
  // `api` is not owned and must outlive the publisher; `snapshot` is called
  // once per pass from the pass's thread.
  SlicePublisher(ResourceApi* api, SnapshotFn snapshot, SlicePublisherOptions options);
  ~SlicePublisher() override;  // Stop()
  SlicePublisher(const SlicePublisher&) = delete;
  SlicePublisher& operator=(const SlicePublisher&) = delete;

  Status SyncOnce();
  void Start();
  void Stop();
  // Asks the loop for a pass soon.
  void Kick();
  PublisherStats stats() const;

  // engine::EngineListener: any state change may change the pool.
  void OnInstanceEvent(const engine::InstanceEvent& event) override;
  void OnAllocation(const engine::AllocationOutcome&) override {}
  void OnReclaim(engine::EventReason, const engine::InstanceView&) override {}

 private:
  struct Existing;
  Status Pass() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  StatusOr<SliceOptions> Options() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  Status Write(const std::vector<DesiredSlice>& desired, const Existing& existing,
               const SliceOptions& o) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  void Loop();

  ResourceApi* const api_;
  const SnapshotFn snapshot_;
  const SlicePublisherOptions options_;

  Mutex pass_mu_;  // one pass at a time
  planner::Planner planner_ ABSL_GUARDED_BY(pass_mu_);
  std::optional<CounterLayout> layout_ ABSL_GUARDED_BY(pass_mu_);
  std::optional<std::string> node_uid_ ABSL_GUARDED_BY(pass_mu_);
  int64_t generation_ ABSL_GUARDED_BY(pass_mu_) = 0;

  mutable Mutex mu_;
  CondVar cv_;
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  PublisherStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_SLICE_PUBLISHER_H_
