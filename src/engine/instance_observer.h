// File: engine/instance_observer.h
//
// InstanceObserver: the hook through which the CDI module follows instances.
// The Manager calls OnPublish before Allocate returns an instance (created or
// reused) and after recovery verified an Active or Idle instance; it calls
// OnUnpublish only after the GI/CI was destroyed (never on release: an Idle
// instance keeps its CDI file).
//
// Thread-safety: implementations must be thread-safe; the Manager calls them
// without holding its registry lock, possibly from several threads (one per
// GPU at most at a time for a given instance).
#ifndef MIGD_ENGINE_INSTANCE_OBSERVER_H_
#define MIGD_ENGINE_INSTANCE_OBSERVER_H_

#include <string>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "store/instance_identity.h"

namespace migd::engine {

// What an observer learns about an instance: its identity, where its GPU
// sits (index, /dev/nvidia<minor>) and its profile name.
struct PublishedInstance : store::InstanceIdentity {
  GpuIndex gpu;
  uint32_t gpu_minor = 0;
  std::string profile;
};

class InstanceObserver {
 public:
  virtual ~InstanceObserver() = default;
  // The instance exists and is (or may be) handed out. An error fails the
  // allocation (which then rolls back) or, during recovery, startup.
  virtual Status OnPublish(const PublishedInstance& instance) = 0;
  // The instance was destroyed. Errors are logged; the observer owns retries.
  virtual Status OnUnpublish(const PublishedInstance& instance) = 0;
  // Once after recovery (after the OnPublish calls): the MIG UUIDs of every
  // instance migd tracks (Active, Idle and Error), so that the observer can
  // drop what belongs to no tracked instance. An error fails startup.
  virtual Status OnRecovered(const std::vector<MigUuid>& tracked) {
    (void)tracked;
    return OkStatus();
  }
  // Each reconcile pass: retry whatever the observer queued (e.g. removals).
  // Errors are logged and counted; the next pass retries.
  virtual Status OnReconcile() { return OkStatus(); }
};

// The default: does nothing.
class NoopInstanceObserver final : public InstanceObserver {
 public:
  Status OnPublish(const PublishedInstance&) override { return OkStatus(); }
  Status OnUnpublish(const PublishedInstance&) override { return OkStatus(); }
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_INSTANCE_OBSERVER_H_
