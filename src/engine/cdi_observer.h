// File: engine/cdi_observer.h
//
// CdiObserver: the InstanceObserver that keeps one CDI spec file per MIG
// instance (docs/engine.md, "CDI publication") through cdi::Publisher:
//   OnPublish    before Allocate returns (create or reuse; on reuse the file
//                is verified and rewritten only if it differs) and for every
//                instance recovery verified;
//   OnUnpublish  only after the GI/CI was destroyed, so an Idle or Error
//                instance keeps its file; a failed removal is queued;
//   OnRecovered  the startup sweep: files of ours with no tracked instance
//                are removed;
//   OnReconcile  retries queued removals.
// The last built spec of each instance is kept so that the API can return
// the CDI names and the legacy device list of an allocation, and so that a
// reuse of the same instance (same GPU minor, GI, CI) only verifies its file
// against that spec instead of re-reading the host's proc and dev files.
//
// Thread-safety: all methods are thread-safe (cdi::Publisher serialises per
// file; the spec cache has its own mutex).
#ifndef MIGD_ENGINE_CDI_OBSERVER_H_
#define MIGD_ENGINE_CDI_OBSERVER_H_

#include <absl/base/thread_annotations.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "cdi/publisher.h"
#include "engine/instance_observer.h"

namespace migd::engine {

class CdiObserver final : public InstanceObserver {
 public:
  // `publisher` is not owned and must outlive the observer.
  explicit CdiObserver(cdi::Publisher* publisher) : publisher_(publisher) {}

  Status OnPublish(const PublishedInstance& instance) override;
  Status OnUnpublish(const PublishedInstance& instance) override;
  Status OnRecovered(const std::vector<MigUuid>& tracked) override;
  Status OnReconcile() override;

  // The spec last published for `mig_uuid`; nullopt if none.
  std::optional<cdi::BuiltSpec> SpecOf(const MigUuid& mig_uuid) const;

 private:
  struct Entry {
    cdi::MigInstance instance;
    cdi::BuiltSpec built;
  };
  cdi::Publisher* const publisher_;
  mutable Mutex mu_;
  std::map<MigUuid, Entry> specs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_CDI_OBSERVER_H_
