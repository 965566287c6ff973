// File: engine/recovery.h
//
// Recovery: the Manager's startup. Reads the GPUs and their GI profile tables
// and live layouts (one NVML session, opened by the caller), the records
// (other boots' discarded) and the active owners; verifies everything
// (VerifyTakeover) before changing anything; then acts: stale records
// removed, instances registered, records rewritten, journaled leftovers
// (intents, interrupted deletions) and orphan GIs destroyed, every Active and
// Idle instance published, allocations rebuilt, the observer's sweep run.
//
// Thread-safety: Run is called once, before the Manager is shared.
#ifndef MIGD_ENGINE_RECOVERY_H_
#define MIGD_ENGINE_RECOVERY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "driver/gpu_driver.h"
#include "engine/executor.h"
#include "engine/gpu_table.h"
#include "engine/instance_observer.h"
#include "engine/journal.h"
#include "engine/manager_types.h"
#include "engine/owner_source.h"
#include "engine/registry.h"
#include "engine/verifier.h"

namespace migd::engine {

// Why a GPU with this MIG mode cannot be managed; empty if it can.
std::string MigModeOutcome(const driver::MigModeInfo& mig);

// Logs the first 100 problems of a LoadAll and counts the rest.
void LogLoadProblems(const std::vector<store::LoadProblem>& problems);

class Recovery {
 public:
  // Every reference must outlive the call to Run.
  Recovery(const ManagerOptions& options, driver::GpuDriver& driver, RecordJournal& journal,
           Registry& registry, GpuTable& gpus, Executor& executor, InstanceObserver& observer,
           Clock& clock);

  // Recovers. `probe_outcomes` receives, for every GPU left unmanaged, why
  // (logged; rediscovery logs again only on change). Errors: those of
  // Manager::Create.
  StatusOr<RecoverySummary> Run(OwnerSource& owners,
                                std::map<uint32_t, std::string>* probe_outcomes);

 private:
  // 1-2. GPUs, tables, live layouts; fills gpus_ and live_.
  Status ReadGpus(std::map<uint32_t, std::string>* probe_outcomes);
  // 3. This boot's records; other boots' keys into other_boot_.
  StatusOr<std::vector<store::Record>> LoadRecords();
  // Acts on a verified takeover.
  Status Apply(Takeover& t);
  void DestroyOrphans(const Takeover& t);
  // Publishes Active and Idle instances, rebuilds allocations, counts.
  Status PublishAll();

  const ManagerOptions& options_;
  driver::GpuDriver& driver_;
  RecordJournal& journal_;
  Registry& registry_;
  GpuTable& gpus_;
  Executor& executor_;
  InstanceObserver& observer_;
  Clock& clock_;
  std::map<uint32_t, std::vector<driver::GpuInstanceInfo>> live_;
  std::vector<store::RecordKey> other_boot_;
  RecoverySummary summary_;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_RECOVERY_H_
