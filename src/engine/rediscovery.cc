#include "engine/rediscovery.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "base/logging.h"
#include "engine/gpu_model_builder.h"
#include "engine/owner_source.h"
#include "engine/recovery.h"

namespace migd::engine {

Rediscovery::Rediscovery(const ManagerOptions& options, driver::GpuDriver& driver,
                         RecordJournal& journal, Registry& registry, GpuTable& gpus,
                         InstanceObserver& observer, Clock& clock)
    : options_(options),
      driver_(driver),
      journal_(journal),
      registry_(registry),
      gpus_(gpus),
      observer_(observer),
      clock_(clock) {}

void Rediscovery::SetOutcomes(std::map<uint32_t, std::string> outcomes) {
  MutexLock lock(&mu_);
  outcomes_ = std::move(outcomes);
}

void Rediscovery::Note(uint32_t gpu, const std::string& outcome) {
  std::string& last = outcomes_[gpu];
  if (outcome == last) return;  // logged when it changed, not every pass
  last = outcome;
  spdlog::warn("GPU not managed, probed again each reconcile pass{}",
               Fields().Add("gpu_index", gpu).Add("reason", outcome));
}

void Rediscovery::Run(ReconcileReport& report) {
  MutexLock lock(&mu_);
  for (uint32_t g : gpus_.Indices()) {
    if (gpus_.Managed(g)) continue;
    // One NVML call per unmanaged GPU and pass (the GPU handle is cached; a
    // GPU skipped for NO_PERMISSION is refused by the handle lookup itself).
    StatusOr<driver::MigModeInfo> mode = driver_.GetMigMode(GpuIndex(g));
    std::string outcome =
        mode.ok() ? MigModeOutcome(*mode) : "probe failed: " + mode.status().ToString();
    if (outcome.empty()) outcome = TakeOver(g, *mode);
    if (outcome.empty()) {
      ++report.gpus_discovered;
      continue;
    }
    ++report.gpus_unmanaged;
    Note(g, outcome);
  }
}

std::string Rediscovery::TakeOver(uint32_t g, const driver::MigModeInfo& mode) {
  Candidate c;
  if (std::string why = Identify(g, mode, c.info); !why.empty()) return why;
  if (std::optional<uint32_t> other = gpus_.ManagedIndexOf(c.info.uuid, g)) {
    return "UUID " + c.info.uuid.value() + " is already managed as GPU index " +
           std::to_string(*other);
  }
  StatusOr<std::vector<driver::GiProfileInfo>> profiles = driver_.GetGiProfiles(GpuIndex(g));
  if (!profiles.ok()) return "reading GI profiles: " + profiles.status().ToString();
  StatusOr<mig::GpuModel> model = BuildGpuModel(c.info, *profiles);
  if (!model.ok()) return "building the placement table: " + model.status().ToString();
  c.model = std::make_unique<mig::GpuModel>(std::move(*model));
  // The GPU's lock, as for any mutation of it: nothing else uses an
  // unmanaged GPU, but an Allocate may use it as soon as it is managed, and
  // its record writes must come after ours.
  GpuLocks locks = gpus_.Lock({g});
  if (std::string why = Verify(g, c); !why.empty()) return why;
  return Apply(g, c);
}

std::string Rediscovery::Identify(uint32_t g, const driver::MigModeInfo& mode,
                                  driver::GpuInfo& info) {
  info = gpus_.InfoOf(g);
  if (gpus_.Listed(g)) {
    info.mig = mode;
    return "";
  }
  // Skipped by ListGpus at startup: its identity (UUID, minor, PCI) is
  // unknown until a listing shows it.
  StatusOr<std::vector<driver::GpuInfo>> infos = driver_.ListGpus();
  if (!infos.ok()) return "listing GPUs: " + infos.status().ToString();
  bool found = false;
  for (const driver::GpuInfo& i : *infos) {
    if (i.index.value() == g) {
      info = i;
      found = true;
    }
  }
  if (!found) return "not listed by NVML (not accessible)";
  return MigModeOutcome(info.mig);
}

std::string Rediscovery::Verify(uint32_t g, Candidate& c) {
  StatusOr<std::vector<driver::GpuInstanceInfo>> gis = driver_.ListGpuInstances(GpuIndex(g));
  if (!gis.ok()) return "listing instances: " + gis.status().ToString();
  StatusOr<store::LoadResult> loaded = journal_.store().LoadAll();
  if (!loaded.ok()) return "loading records: " + loaded.status().ToString();
  std::vector<store::Record> records;
  for (store::Record& r : loaded->records) {
    if (r.key.gpu_uuid != c.info.uuid) continue;  // other GPUs' records are live state
    if (r.boot_id == options_.boot_id) {
      records.push_back(std::move(r));
    } else {
      c.other_boot.push_back(r.key);
    }
  }
  RecordsOwnerSource record_owners;
  StatusOr<std::vector<OwnedInstance>> owned = record_owners.ActiveOwners(records);
  if (!owned.ok()) return "owners from records: " + owned.status().ToString();
  std::map<uint32_t, ScopeGpu> scope;
  scope[g] = ScopeGpu{&c.info, c.model.get(), &*gis};
  const VerifyOptions vo{options_.adopt_existing_mig_instances, options_.adopt_complete_intents,
                         clock_.Now()};
  StatusOr<Takeover> verified = VerifyTakeover(scope, records, *owned, record_owners.name(), vo);
  if (!verified.ok()) {
    return "verification failed, GPU left unmanaged (nothing changed): " +
           verified.status().ToString();
  }
  c.takeover = std::move(*verified);
  // Nothing is created or destroyed here: what startup would destroy is
  // taken in Error (the Error retry of this pass destroys it as any Error
  // instance), orphan GIs stay foreign.
  Takeover& t = c.takeover;
  for (TrackedInstance& i : t.destroy) i.state = InstanceState::kError;
  for (auto& [og, gi] : t.orphans) {
    t.foreign[og].push_back(gi);
    ++t.counts.foreign;
  }
  return "";
}

std::string Rediscovery::Apply(uint32_t g, Candidate& c) {
  Takeover& t = c.takeover;
  // Disk first, then observers, then the registry: a failure on the way
  // leaves the GPU unmanaged (the records written describe verified live
  // instances; the next pass verifies them again).
  for (const TrackedInstance& i : t.rewrite) {
    if (Status s = journal_.Write(i, i.state, store::RecordPhase::kCommitted); !s.ok()) {
      return "writing records: " + s.ToString();
    }
  }
  for (const TrackedInstance& i : t.destroy) {
    const store::RecordPhase phase =
        i.committed ? store::RecordPhase::kCommitted : store::RecordPhase::kIntent;
    if (Status s = journal_.Write(i, InstanceState::kError, phase); !s.ok()) {
      return "writing records: " + s.ToString();
    }
  }
  for (const auto* keys : {&c.other_boot, &t.remove}) {
    for (const store::RecordKey& k : *keys) {
      Status s = journal_.Remove(k);
      if (!s.ok()) spdlog::warn("cannot remove stale record{}", Fields().Add("error", s));
    }
  }
  uint64_t active = 0;
  uint64_t idle = 0;
  for (const auto* list : {&t.restore, &t.rewrite}) {
    for (const TrackedInstance& i : *list) {
      if (i.state != InstanceState::kActive && i.state != InstanceState::kIdle) continue;
      (i.state == InstanceState::kActive ? active : idle) += 1;
      if (Status s = observer_.OnPublish(PublishedOf(i, c.info.minor)); !s.ok()) {
        return "publishing " + i.id.mig_uuid.value() + ": " + s.ToString();
      }
    }
  }
  {
    MutexLock lock(registry_.mu());
    registry_.foreign()[g] = std::move(t.foreign[g]);
    for (auto* list : {&t.restore, &t.rewrite, &t.destroy}) {
      for (TrackedInstance& i : *list) {
        i.published = i.state == InstanceState::kActive || i.state == InstanceState::kIdle;
        if (i.state == InstanceState::kActive) registry_.AddToAllocation(i);
        registry_.Load(i, EventReason::kRecovery);
      }
    }
    ++registry_.counters().gpus_discovered;
    gpus_.Manage(g, c.info, std::move(*c.model));
  }
  spdlog::info("GPU now managed (rediscovered by the reconciler){}",
               Fields()
                   .Add("gpu", c.info.uuid)
                   .Add("gpu_index", g)
                   .Add("name", c.info.name)
                   .Add("active", active)
                   .Add("idle", idle)
                   .Add("error", t.destroy.size())
                   .Add("foreign", t.counts.foreign)
                   .Add("adopted", t.counts.adopted));
  return "";
}

}  // namespace migd::engine
