// File: engine/rediscovery.h
//
// Rediscovery: the reconciler's first step. Every GPU index that is not
// managed (MIG not supported or not enabled at startup, skipped by ListGpus
// for NO_PERMISSION, or an earlier takeover that failed) is probed with one
// GetMigMode call per pass. Once it answers MIG-enabled, the GPU is taken
// over through recovery's verification (VerifyTakeover) for that GPU alone,
// with the records as the owner source (after startup migd's records are the
// truth about owners). Nothing is created or destroyed: leftovers startup
// would destroy (intents, interrupted deletions) are taken in Error (the
// Error retry of the same pass destroys them) and orphan GIs stay foreign.
// Anything unverifiable leaves the GPU unmanaged, nothing changed; the next
// pass retries. One log line when a GPU becomes managed, one when its probe
// outcome changes.
//
// Thread-safety: Run is serialised by the rediscovery's own lock (one pass at
// a time); it takes the GPU's lock and then the registry lock while it
// changes anything.
#ifndef MIGD_ENGINE_REDISCOVERY_H_
#define MIGD_ENGINE_REDISCOVERY_H_

#include <absl/base/thread_annotations.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "driver/gpu_driver.h"
#include "engine/gpu_table.h"
#include "engine/instance_observer.h"
#include "engine/journal.h"
#include "engine/manager_types.h"
#include "engine/registry.h"
#include "engine/verifier.h"

namespace migd::engine {

class Rediscovery {
 public:
  // Every reference must outlive the object.
  Rediscovery(const ManagerOptions& options, driver::GpuDriver& driver, RecordJournal& journal,
              Registry& registry, GpuTable& gpus, InstanceObserver& observer, Clock& clock);
  Rediscovery(const Rediscovery&) = delete;
  Rediscovery& operator=(const Rediscovery&) = delete;

  // The outcomes recovery logged for the GPUs it left unmanaged.
  void SetOutcomes(std::map<uint32_t, std::string> outcomes);
  // One probe of every unmanaged GPU; counts gpus_discovered / gpus_unmanaged.
  void Run(ReconcileReport& report);

 private:
  // What a takeover read and verified, before it changes anything.
  struct Candidate {
    driver::GpuInfo info;
    std::unique_ptr<mig::GpuModel> model;
    std::vector<store::RecordKey> other_boot;
    Takeover takeover;
  };
  // Empty when `gpu` is now managed; else why not (the outcome to log).
  std::string TakeOver(uint32_t gpu, const driver::MigModeInfo& mode)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The GPU's identity now; empty `why` when it can be managed.
  std::string Identify(uint32_t gpu, const driver::MigModeInfo& mode, driver::GpuInfo& info);
  // Reads the live layout and records of `gpu` and verifies them. REQUIRES:
  // the GPU's lock held.
  std::string Verify(uint32_t gpu, Candidate& c);
  // Writes, publishes and registers a verified candidate. REQUIRES: the
  // GPU's lock held.
  std::string Apply(uint32_t gpu, Candidate& c);
  void Note(uint32_t gpu, const std::string& outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ManagerOptions& options_;
  driver::GpuDriver& driver_;
  RecordJournal& journal_;
  Registry& registry_;
  GpuTable& gpus_;
  InstanceObserver& observer_;
  Clock& clock_;
  Mutex mu_;                                                       // one Run at a time
  std::map<uint32_t, std::string> outcomes_ ABSL_GUARDED_BY(mu_);  // last logged, per GPU
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_REDISCOVERY_H_
