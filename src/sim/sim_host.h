// File: sim/sim_host.h
//
// SimHost: a simulated machine backed by its state file, the C++ entry point
// for everything outside the NVML ABI: tests and `migctl` mark processes on
// MIG devices, simulate reboots and inspect the state through it, and
// libnvidia-ml-sim.so runs every NVML call through Transact().
//
// Opening creates the state file if it is missing (from MIGD_SIM_GPUS etc.,
// see sim/config.h) and brings the fake /proc tree (sim/proc_files.h) in line
// with the state, which also repairs it after a crash between the two writes.
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(SimConfig cfg, SimConfigFromEnv(mig::Catalog::Default()));
//   MIGD_ASSIGN_OR_RETURN(std::unique_ptr<SimHost> host, SimHost::Open(cfg));
//   MIGD_RETURN_IF_ERROR(host->AttachProcess(MigUuid("MIG-…"), 4242, 1 << 30));
//   MIGD_RETURN_IF_ERROR(host->Reboot());
//
// Thread-safety: all methods are thread-safe; SimHosts in different
// processes on one state file exclude each other through its lock.
#ifndef MIGD_SIM_SIM_HOST_H_
#define MIGD_SIM_SIM_HOST_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "base/ids.h"
#include "base/status.h"
#include "mig/catalog.h"
#include "sim/config.h"
#include "sim/machine.h"
#include "sim/state.h"
#include "sim/state_store.h"

namespace migd::sim {

class SimHost {
 public:
  // Opens the machine of `config.state_path`, creating it from `config` if
  // the file does not exist. Only the machine-shaping fields of `config`
  // (gpus, gi_id_policy, nonce, proc_root) matter at creation; afterwards the
  // file's values rule. `fsync` applies to this host's writes.
  // Errors: kFailedPrecondition if state_path is empty, or if the file is
  // missing and config.gpus is unset (message says what to set); kDataLoss
  // for a corrupt file; OS errors from the file system.
  static StatusOr<std::unique_ptr<SimHost>> Open(
      const SimConfig& config, const mig::Catalog& catalog = mig::Catalog::Default());

  // Runs `fn` on a Machine over the freshest state, under the state lock, and
  // commits what it returns (sim/state_store.h). After a kDurable commit the
  // per-instance /proc files are synced; their error, if any, is returned
  // (the state change stands).
  Status Transact(const std::function<Commit(Machine&)>& fn);

  // A copy of the current state.
  StatusOr<SimState> Snapshot();

  // Marks / unmarks a process on a MIG device (Machine::AttachProcess).
  // kNotFound if no CI has that UUID (or, for detach, the pid is not marked).
  Status AttachProcess(const MigUuid& mig_uuid, uint32_t pid, uint64_t used_gpu_memory_bytes);
  Status DetachProcess(const MigUuid& mig_uuid, uint32_t pid);

  // Simulated reboot / driver reload / GPU reset (Machine::Reboot), durable;
  // the per-instance /proc files disappear with the instances.
  Status Reboot();

  const mig::Catalog& catalog() const { return *catalog_; }
  StateStore& store() { return *store_; }

 private:
  SimHost(std::unique_ptr<StateStore> store, const mig::Catalog& catalog);

  std::unique_ptr<StateStore> store_;
  const mig::Catalog* catalog_;
};

}  // namespace migd::sim

#endif  // MIGD_SIM_SIM_HOST_H_
