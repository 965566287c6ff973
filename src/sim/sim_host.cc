#include "sim/sim_host.h"

#include <sys/stat.h>

#include "base/status_macros.h"
#include "sim/proc_files.h"

namespace migd::sim {

SimHost::SimHost(std::unique_ptr<StateStore> store, const mig::Catalog& catalog)
    : store_(std::move(store)), catalog_(&catalog) {}

StatusOr<std::unique_ptr<SimHost>> SimHost::Open(const SimConfig& config,
                                                 const mig::Catalog& catalog) {
  if (config.state_path.empty()) {
    return FailedPreconditionError(
        std::string(kEnvState) + " is not set: point it at the simulator's state file, e.g. " +
        kEnvState + "=/tmp/migd-sim/state.json " + kEnvGpus + "=a100-40gb:2,h100-80gb:1");
  }
  auto store = std::make_unique<StateStore>(
      StoreOptions{.path = config.state_path, .fsync = config.fsync}, catalog);
  MIGD_ASSIGN_OR_RETURN(bool created, store->CreateIfMissing([&]() -> StatusOr<SimState> {
    if (!config.gpus) {
      return FailedPreconditionError(
          "simulator state file " + config.state_path + " does not exist and " + kEnvGpus +
          " is not set to create it (e.g. " + kEnvGpus + "=a100-40gb:2,h100-80gb:1)");
    }
    MIGD_ASSIGN_OR_RETURN(MachineOptions options, MachineOptionsFromConfig(config));
    return NewMachineState(options, catalog);
  }));
  std::unique_ptr<SimHost> host(new SimHost(std::move(store), catalog));
  // Bring the /proc tree in line with the state: the static files if this
  // host created the machine or they are missing, the instance files always.
  Status synced = host->store_->Inspect([&](const SimState& state) -> Status {
    if (state.proc_root.empty()) return OkStatus();
    struct stat st {};
    const bool missing =
        ::stat((state.proc_root + "/driver/nvidia-caps/mig-minors").c_str(), &st) != 0;
    if (created || missing) MIGD_RETURN_IF_ERROR(WriteStaticProcFiles(state, catalog));
    return SyncInstanceProcFiles(state);
  });
  MIGD_RETURN_IF_ERROR(synced);
  return host;
}

Status SimHost::Transact(const std::function<Commit(Machine&)>& fn) {
  Commit commit = Commit::kNone;
  return store_->Update(
      [&](SimState& state) {
        Machine machine(state, *catalog_);
        commit = fn(machine);
        return commit;
      },
      [&](const SimState& state) {
        return commit == Commit::kDurable ? SyncInstanceProcFiles(state) : OkStatus();
      });
}

StatusOr<SimState> SimHost::Snapshot() { return store_->Read(); }

Status SimHost::AttachProcess(const MigUuid& mig_uuid, uint32_t pid,
                              uint64_t used_gpu_memory_bytes) {
  SimStatus result;
  MIGD_RETURN_IF_ERROR(Transact([&](Machine& m) {
    result = m.AttachProcess(mig_uuid.value(), pid, used_gpu_memory_bytes);
    return result.ok() ? Commit::kDurable : Commit::kNone;
  }));
  return result.ToStatus();
}

Status SimHost::DetachProcess(const MigUuid& mig_uuid, uint32_t pid) {
  SimStatus result;
  MIGD_RETURN_IF_ERROR(Transact([&](Machine& m) {
    result = m.DetachProcess(mig_uuid.value(), pid);
    return result.ok() ? Commit::kDurable : Commit::kNone;
  }));
  return result.ToStatus();
}

Status SimHost::Reboot() {
  return Transact([](Machine& m) {
    m.Reboot();
    return Commit::kDurable;
  });
}

}  // namespace migd::sim
