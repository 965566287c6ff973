#include "engine/recovery.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/gpu_model_builder.h"

namespace migd::engine {

std::string MigModeOutcome(const driver::MigModeInfo& mig) {
  if (!mig.supported) return "MIG not supported";
  if (mig.current != driver::MigMode::kEnabled) {
    return mig.pending == driver::MigMode::kEnabled ? "MIG mode disabled (enabled pending reset)"
                                                    : "MIG mode disabled";
  }
  return "";
}

void LogLoadProblems(const std::vector<store::LoadProblem>& problems) {
  // A state dir full of junk must not flood the log: the first
  // kMaxProblemLines entries are named, the rest counted.
  constexpr size_t kMaxProblemLines = 100;
  for (size_t i = 0; i < problems.size() && i < kMaxProblemLines; ++i) {
    spdlog::warn("state dir entry not loaded{}", Fields().Add("problem", problems[i].ToString()));
  }
  if (problems.size() > kMaxProblemLines) {
    spdlog::warn("more state dir entries not loaded (not listed){}",
                 Fields()
                     .Add("listed", kMaxProblemLines)
                     .Add("not_listed", problems.size() - kMaxProblemLines));
  }
}

Recovery::Recovery(const ManagerOptions& options, driver::GpuDriver& driver, RecordJournal& journal,
                   Registry& registry, GpuTable& gpus, Executor& executor,
                   InstanceObserver& observer, Clock& clock)
    : options_(options),
      driver_(driver),
      journal_(journal),
      registry_(registry),
      gpus_(gpus),
      executor_(executor),
      observer_(observer),
      clock_(clock) {}

StatusOr<RecoverySummary> Recovery::Run(OwnerSource& owners,
                                        std::map<uint32_t, std::string>* probe_outcomes) {
  MIGD_RETURN_IF_ERROR(ReadGpus(probe_outcomes));
  MIGD_ASSIGN_OR_RETURN(std::vector<store::Record> records, LoadRecords());
  // 4. Owners.
  StatusOr<std::vector<OwnedInstance>> owned = owners.ActiveOwners(records);
  if (!owned.ok()) {
    return owned.status().WithContext("recovery stopped: owner source " +
                                      std::string(owners.name()));
  }
  // 5-6. Verify everything (a record of a GPU not managed now fails: its
  // instances cannot be verified).
  std::map<uint32_t, ScopeGpu> scope;
  for (const auto& [g, gis] : live_) {
    scope[g] = ScopeGpu{gpus_.ManagedInfo(g), gpus_.Model(g), &gis};
  }
  const VerifyOptions vo{options_.adopt_existing_mig_instances, options_.adopt_complete_intents,
                         clock_.Now()};
  MIGD_ASSIGN_OR_RETURN(Takeover t, VerifyTakeover(scope, records, *owned, owners.name(), vo));
  summary_ = t.counts;
  // Everything is verified: act.
  MIGD_RETURN_IF_ERROR(Apply(t));
  MIGD_RETURN_IF_ERROR(PublishAll());
  spdlog::info("recovery done{}", Fields()
                                      .Add("gpus", live_.size())
                                      .Add("active", summary_.active)
                                      .Add("idle", summary_.idle)
                                      .Add("error", summary_.error)
                                      .Add("foreign", summary_.foreign)
                                      .Add("adopted", summary_.adopted)
                                      .Add("other_boot", summary_.other_boot_discarded)
                                      .Add("intents_destroyed", summary_.intents_destroyed)
                                      .Add("intents_removed", summary_.intents_removed)
                                      .Add("deletions_finished", summary_.deletions_finished));
  return summary_;
}

Status Recovery::ReadGpus(std::map<uint32_t, std::string>* probe_outcomes) {
  MIGD_ASSIGN_OR_RETURN(std::vector<driver::GpuInfo> infos, driver_.ListGpus());
  // GPUs ListGpus skipped (NO_PERMISSION) are known by index only, probed
  // again by the reconciler.
  gpus_.Init(infos, driver_.SkippedGpus());
  for (const driver::GpuInfo& g : infos) {
    const std::string why = MigModeOutcome(g.mig);
    if (!why.empty()) {
      // The reconciler probes it again (rediscovery); logged again on change.
      (*probe_outcomes)[g.index.value()] = why;
      spdlog::info("GPU not in MIG mode, not managed{}",
                   Fields().Add("gpu", g.uuid).Add("reason", why));
      continue;
    }
    StatusOr<std::vector<driver::GiProfileInfo>> profiles = driver_.GetGiProfiles(g.index);
    if (!profiles.ok()) {
      return profiles.status().WithContext("reading GI profiles of GPU " + g.uuid.value());
    }
    MIGD_ASSIGN_OR_RETURN(mig::GpuModel model, BuildGpuModel(g, *profiles));
    StatusOr<std::vector<driver::GpuInstanceInfo>> gis = driver_.ListGpuInstances(g.index);
    if (!gis.ok()) return gis.status().WithContext("listing instances of GPU " + g.uuid.value());
    gpus_.Manage(g.index.value(), g, std::move(model));
    live_[g.index.value()] = std::move(*gis);
  }
  return OkStatus();
}

StatusOr<std::vector<store::Record>> Recovery::LoadRecords() {
  MIGD_ASSIGN_OR_RETURN(store::LoadResult loaded, journal_.store().LoadAll());
  LogLoadProblems(loaded.problems);
  std::vector<store::Record> records;
  for (store::Record& r : loaded.records) {
    if (r.boot_id == options_.boot_id) {
      records.push_back(std::move(r));
    } else {
      other_boot_.push_back(r.key);  // other boots describe nothing
    }
  }
  return records;
}

Status Recovery::Apply(Takeover& t) {
  for (const store::RecordKey& k : other_boot_) {
    Status s = journal_.Remove(k);
    if (!s.ok()) spdlog::warn("cannot remove record of another boot{}", Fields().Add("error", s));
    ++summary_.other_boot_discarded;
  }
  for (const store::RecordKey& k : t.remove) {
    Status s = journal_.Remove(k);
    if (!s.ok()) spdlog::warn("cannot remove stale record{}", Fields().Add("error", s));
  }
  {
    MutexLock lock(registry_.mu());
    for (const auto* list : {&t.restore, &t.rewrite, &t.destroy}) {
      for (const TrackedInstance& i : *list) registry_.Load(i, EventReason::kRecovery);
    }
    for (auto& [g, list] : t.foreign) registry_.foreign()[g] = std::move(list);
  }
  for (const TrackedInstance& i : t.rewrite) {
    MIGD_RETURN_IF_ERROR(journal_.Write(i, i.state, store::RecordPhase::kCommitted));
  }
  for (const TrackedInstance& i : t.destroy) {
    Status s = executor_.Destroy(i.key());  // failure: kept in Error, retried later
    (void)s;
  }
  DestroyOrphans(t);
  return OkStatus();
}

void Recovery::DestroyOrphans(const Takeover& t) {
  for (const auto& [g, gi] : t.orphans) {
    const store::RecordKey key{gpus_.ManagedInfo(g)->uuid, gi.profile_id, gi.placement};
    Status s = executor_.DestroyHw(GpuIndex(g), key, gi.id, std::nullopt);
    if (s.ok()) {
      ++summary_.orphan_gis_destroyed;
      continue;
    }
    spdlog::warn("cannot destroy orphan GI, preserved as foreign{}",
                 Fields().Add("gpu", key.gpu_uuid).Add("gi", gi.id).Add("error", s));
    MutexLock lock(registry_.mu());
    registry_.foreign()[g].push_back(gi);
    ++summary_.foreign;
  }
}

Status Recovery::PublishAll() {
  std::vector<TrackedInstance> publish;
  std::vector<MigUuid> tracked;
  {
    MutexLock lock(registry_.mu());
    for (auto& [k, inst] : registry_.instances()) {
      if (inst.state == InstanceState::kActive || inst.state == InstanceState::kIdle) {
        inst.published = true;
        publish.push_back(inst);
      }
      if (inst.state == InstanceState::kActive) {
        ++summary_.active;
        registry_.AddToAllocation(inst);
      } else if (inst.state == InstanceState::kIdle) {
        ++summary_.idle;
      } else if (inst.state == InstanceState::kError) {
        ++summary_.error;
      }
      if (!inst.id.mig_uuid.value().empty()) tracked.push_back(inst.id.mig_uuid);
    }
  }
  for (const TrackedInstance& p : publish) {
    Status s = executor_.Publish(p);
    if (!s.ok()) return s.WithContext("recovery: publishing " + p.id.mig_uuid.value());
  }
  if (Status s = observer_.OnRecovered(tracked); !s.ok()) {
    return s.WithContext("recovery: sweeping published instances");
  }
  return OkStatus();
}

}  // namespace migd::engine
