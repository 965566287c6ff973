// Manager::Recover: startup recovery (DESIGN.md §4). Everything is verified
// first, without changing anything (VerifyGpus); only then are records
// rewritten or removed and the journaled leftovers (intents, interrupted
// deletions) and, with adoptExistingMIGInstances, orphan GIs on idle GPUs
// destroyed.
//
// Manager::Rediscover: the reconciler's step 0. GPUs recovery could not
// manage are probed again; one that answers MIG-enabled is verified by the
// same VerifyGpus, for that GPU alone, and taken over without creating or
// destroying anything (TakeOver).
#include <set>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/gpu_model_builder.h"
#include "engine/manager.h"
#include "engine/owner_source.h"

namespace migd::engine {
namespace {

Status Unverifiable(const std::string& gpu, const std::string& instance, const std::string& what) {
  return FailedPreconditionError("recovery stopped, nothing on the hardware was changed: GPU " +
                                 gpu + " instance " + instance + ": " + what);
}

std::string CiIds(const driver::GpuInstanceInfo& gi) {
  std::string s = "[";
  for (const auto& ci : gi.compute_instances) {
    if (s.size() > 1) s += ",";
    s += std::to_string(ci.id.value());
  }
  return s + "]";
}

std::string OwnerString(const store::Owner& o) {
  if (o.kind == store::Owner::Kind::kPod) {
    return "pod " + o.pod_namespace + "/" + o.pod_name + " (" + o.pod_uid.value() + ")";
  }
  if (o.kind == store::Owner::Kind::kOpaque) return "opaque " + o.opaque_id;
  return "none";
}

// Why a GPU with this MIG mode is not managed; empty if it can be.
std::string MigOutcome(const driver::MigModeInfo& mig) {
  if (!mig.supported) return "MIG not supported";
  if (mig.current != driver::MigMode::kEnabled) {
    return mig.pending == driver::MigMode::kEnabled ? "MIG mode disabled (enabled pending reset)"
                                                    : "MIG mode disabled";
  }
  return "";
}

}  // namespace

struct Manager::Takeover {
  std::vector<Instance> restore;  // the record is right as it is
  std::vector<Instance> rewrite;  // Put a committed record with inst.state
  std::vector<Instance> destroy;  // destroy, then remove the record
  std::vector<store::RecordKey> remove;
  std::map<uint32_t, std::vector<driver::GpuInstanceInfo>> foreign;
  std::vector<std::pair<uint32_t, driver::GpuInstanceInfo>> orphans;
  RecoverySummary counts;  // all but other_boot_discarded and orphan_gis_destroyed
};

StatusOr<Manager::Takeover> Manager::VerifyGpus(const std::map<uint32_t, ScopeGpu>& scope,
                                                const std::vector<store::Record>& records,
                                                const std::vector<OwnedInstance>& owned,
                                                std::string_view owner_source) const {
  Takeover t;
  std::map<std::string, uint32_t> gpu_by_uuid;
  std::map<uint32_t, std::vector<driver::GpuInstanceInfo>> live;
  for (const auto& [g, sg] : scope) {
    gpu_by_uuid[sg.info->uuid.value()] = g;
    live[g] = *sg.live;
  }
  struct CiRef {
    uint32_t gpu;
    const driver::GpuInstanceInfo* gi;
    const driver::ComputeInstanceInfo* ci;
  };
  std::map<std::string, CiRef> by_uuid;
  for (const auto& [g, gis] : live) {
    for (const auto& gi : gis) {
      for (const auto& ci : gi.compute_instances) {
        if (!ci.mig_uuid.value().empty()) by_uuid[ci.mig_uuid.value()] = {g, &gi, &ci};
      }
    }
  }
  // 5. Adopt the identities of active owners first.
  std::map<std::string, const OwnedInstance*> owned_by_uuid;
  for (const OwnedInstance& o : owned) {
    const std::string gpu_text = o.gpu_uuid ? o.gpu_uuid->value() : std::string("?");
    auto it = by_uuid.find(o.mig_uuid.value());
    if (it == by_uuid.end()) {
      return Unverifiable(gpu_text, o.mig_uuid.value(),
                          "held by active owner " + OwnerString(o.owner) + " (source " +
                              std::string(owner_source) + ") but no such MIG device exists");
    }
    const ScopeGpu& gpu = scope.at(it->second.gpu);
    const auto& gi = *it->second.gi;
    const auto& ci = *it->second.ci;
    if (o.gpu_uuid && *o.gpu_uuid != gpu.info->uuid) {
      return Unverifiable(gpu_text, o.mig_uuid.value(),
                          "owner says parent GPU " + gpu_text + ", live parent is " +
                              gpu.info->uuid.value());
    }
    if (o.placement && *o.placement != gi.placement) {
      return Unverifiable(gpu.info->uuid.value(), o.mig_uuid.value(),
                          "owner says placement " + o.placement->ToString() + ", live GI is at " +
                              gi.placement.ToString());
    }
    if (o.gi_id && *o.gi_id != gi.id) {
      return Unverifiable(gpu.info->uuid.value(), o.mig_uuid.value(),
                          "owner says GI id " + std::to_string(o.gi_id->value()) +
                              ", live GI id is " + std::to_string(gi.id.value()));
    }
    if (o.ci_id && *o.ci_id != ci.id) {
      return Unverifiable(gpu.info->uuid.value(), o.mig_uuid.value(),
                          "owner says CI id " + std::to_string(o.ci_id->value()) +
                              ", live CI id is " + std::to_string(ci.id.value()));
    }
    if (!owned_by_uuid.emplace(o.mig_uuid.value(), &o).second) {
      return Unverifiable(gpu.info->uuid.value(), o.mig_uuid.value(), "claimed by two owners");
    }
  }

  // 6. Verify every record against the live layout.
  std::set<std::pair<uint32_t, uint32_t>> claimed;  // (GPU index, GI id)
  std::vector<Instance> restore;  // the record is right as it is
  std::vector<Instance> rewrite;  // Put a committed record with inst.state
  std::vector<Instance> destroy;  // destroy, then remove the record
  std::vector<store::RecordKey> remove;
  std::set<std::string> owned_done;
  const Clock::TimePoint now = clock_.Now();

  for (const store::Record& r : records) {
    const std::string inst_text =
        r.key.ToString() + (r.mig_uuid ? " mig=" + r.mig_uuid->value() : std::string());
    auto git = gpu_by_uuid.find(r.key.gpu_uuid.value());
    if (git == gpu_by_uuid.end()) {
      return Unverifiable(r.key.gpu_uuid.value(), inst_text,
                          "the record's GPU is not present or not in MIG mode");
    }
    const uint32_t g = git->second;
    const ScopeGpu& gpu = scope.at(g);
    const std::string gpu_text = gpu.info->uuid.value();
    const auto& gis = live[g];
    const mig::GiProfile* prof = gpu.model->FindProfileById(r.key.profile_id);
    if (prof == nullptr || !prof->HasPlacement(r.key.placement)) {
      return Unverifiable(gpu_text, inst_text,
                          "profile " + std::to_string(r.key.profile_id.value()) + " at " +
                              r.key.placement.ToString() + " is not offered by this GPU");
    }
    Instance inst;
    inst.key = r.key;
    inst.gpu = GpuIndex(g);
    inst.profile = prof->name;
    inst.gi_id = r.gi_id;
    inst.ci_id = r.ci_id;
    if (r.mig_uuid) inst.mig_uuid = *r.mig_uuid;
    inst.owner = r.owner;
    inst.request_id = r.request_id;
    inst.last_used = r.last_used_at;
    inst.created_at = r.created_at;

    if (r.phase == store::RecordPhase::kIntent) {
      const driver::GpuInstanceInfo* at = nullptr;
      for (const auto& gi : gis) {
        if (gi.profile_id == r.key.profile_id && gi.placement == r.key.placement) at = &gi;
      }
      if (at == nullptr) {  // nothing was created (or it is gone)
        remove.push_back(r.key);
        ++t.counts.intents_removed;
        continue;
      }
      if (r.gi_id && *r.gi_id != at->id) {
        return Unverifiable(gpu_text, inst_text,
                            "intent names GI " + std::to_string(r.gi_id->value()) + " but GI " +
                                std::to_string(at->id.value()) + " is at its placement");
      }
      if (!claimed.insert({g, at->id.value()}).second) {
        return Unverifiable(gpu_text, inst_text, "GI claimed by two records");
      }
      inst.gi_id = at->id;
      const bool complete = at->compute_instances.size() == 1;
      const std::string uuid =
          complete ? at->compute_instances[0].mig_uuid.value() : std::string();
      auto oit = complete ? owned_by_uuid.find(uuid) : owned_by_uuid.end();
      if (complete && (oit != owned_by_uuid.end() ||
                       (options_.adopt_complete_intents &&
                        r.state == store::RecordState::kCreating))) {
        inst.ci_id = at->compute_instances[0].id;
        inst.mig_uuid = at->compute_instances[0].mig_uuid;
        inst.committed = true;
        if (oit != owned_by_uuid.end()) {
          owned_done.insert(uuid);
          inst.state = InstanceState::kActive;
          inst.owner = oit->second->owner;
          inst.request_id = oit->second->request_id;
        } else {
          inst.state = InstanceState::kIdle;
          inst.owner = store::Owner();
          inst.request_id.clear();
          inst.last_used = now;
        }
        rewrite.push_back(inst);
        ++t.counts.intents_adopted;
      } else {
        inst.ci_id = complete ? std::optional<NvmlCiId>(at->compute_instances[0].id)
                              : std::nullopt;
        inst.state = InstanceState::kCreating;
        inst.committed = false;
        destroy.push_back(inst);
        ++t.counts.intents_destroyed;
      }
      continue;
    }

    // Committed record: verify GI id, profile, placement, CI id, MIG UUID.
    const driver::GpuInstanceInfo* live_gi = nullptr;
    for (const auto& gi : gis) {
      if (gi.id == *r.gi_id) live_gi = &gi;
    }
    if (live_gi == nullptr) {
      for (const auto& gi : gis) {
        if (gi.placement.Overlaps(r.key.placement)) {
          return Unverifiable(gpu_text, inst_text,
                              "record says GI " + std::to_string(r.gi_id->value()) + " at " +
                                  r.key.placement.ToString() + ", but live GI " +
                                  std::to_string(gi.id.value()) + " (profile " +
                                  std::to_string(gi.profile_id.value()) + ") is at " +
                                  gi.placement.ToString());
        }
      }
      if (r.state == store::RecordState::kActive || owned_by_uuid.count(inst.mig_uuid.value())) {
        return Unverifiable(gpu_text, inst_text,
                            "the Active instance of " + OwnerString(r.owner) +
                                " no longer exists");
      }
      remove.push_back(r.key);
      if (r.state == store::RecordState::kReclaiming || r.state == store::RecordState::kDeleting) {
        ++t.counts.deletions_finished;
      } else {
        ++t.counts.vanished_removed;
        spdlog::warn("drift: recorded instance vanished, record removed{}",
                     Fields().Add("gpu", gpu_text).Add("instance", inst_text));
      }
      continue;
    }
    if (live_gi->profile_id != r.key.profile_id) {
      return Unverifiable(gpu_text, inst_text,
                          "record says profile " + std::to_string(r.key.profile_id.value()) +
                              ", live GI " + std::to_string(live_gi->id.value()) +
                              " has profile " + std::to_string(live_gi->profile_id.value()));
    }
    if (live_gi->placement != r.key.placement) {
      return Unverifiable(gpu_text, inst_text,
                          "record says placement " + r.key.placement.ToString() + ", live GI " +
                              std::to_string(live_gi->id.value()) + " is at " +
                              live_gi->placement.ToString());
    }
    if (!claimed.insert({g, live_gi->id.value()}).second) {
      return Unverifiable(gpu_text, inst_text, "GI claimed by two records");
    }
    const driver::ComputeInstanceInfo* ci = nullptr;
    for (const auto& c : live_gi->compute_instances) {
      if (c.id == *r.ci_id) ci = &c;
    }
    inst.committed = true;
    if (r.state == store::RecordState::kReclaiming || r.state == store::RecordState::kDeleting) {
      inst.state = InstanceState::kDeleting;  // a missing CI reads as NotFound: done
      destroy.push_back(inst);
      ++t.counts.deletions_finished;
      continue;
    }
    if (r.state == store::RecordState::kError) {
      inst.state = InstanceState::kError;
      restore.push_back(inst);
      continue;
    }
    if (ci == nullptr) {
      return Unverifiable(gpu_text, inst_text,
                          "record says CI id " + std::to_string(r.ci_id->value()) + ", GI " +
                              std::to_string(live_gi->id.value()) + " has CIs " +
                              CiIds(*live_gi));
    }
    if (ci->mig_uuid != *r.mig_uuid) {
      return Unverifiable(gpu_text, inst_text,
                          "record says MIG UUID " + r.mig_uuid->value() + ", live CI has " +
                              ci->mig_uuid.value());
    }
    auto oit = owned_by_uuid.find(inst.mig_uuid.value());
    if (oit != owned_by_uuid.end()) {
      owned_done.insert(inst.mig_uuid.value());
      inst.state = InstanceState::kActive;
      inst.owner = oit->second->owner;
      inst.request_id = oit->second->request_id;
      const bool same = r.state == store::RecordState::kActive && r.owner == inst.owner &&
                        r.request_id == inst.request_id;
      (same ? restore : rewrite).push_back(inst);
    } else {
      inst.state = InstanceState::kIdle;
      inst.owner = store::Owner();
      inst.request_id.clear();
      if (r.state == store::RecordState::kIdle) {
        restore.push_back(inst);
      } else {
        inst.last_used = now;
        rewrite.push_back(inst);
      }
    }
  }

  // Owned instances without a record (e.g. HAMi realised them): adopt.
  for (const auto& [uuid, o] : owned_by_uuid) {
    if (owned_done.count(uuid) != 0) continue;
    const CiRef& ref = by_uuid.at(uuid);
    const ScopeGpu& gpu = scope.at(ref.gpu);
    if (!claimed.insert({ref.gpu, ref.gi->id.value()}).second) {
      return Unverifiable(gpu.info->uuid.value(), uuid,
                          "held by an active owner but its GI is claimed by a record");
    }
    const mig::GiProfile* prof = gpu.model->FindProfileById(ref.gi->profile_id);
    if (prof == nullptr) {
      return Unverifiable(gpu.info->uuid.value(), uuid, "GI profile unknown to this GPU");
    }
    Instance inst;
    inst.key = {gpu.info->uuid, ref.gi->profile_id, ref.gi->placement};
    inst.gpu = GpuIndex(ref.gpu);
    inst.profile = prof->name;
    inst.gi_id = ref.gi->id;
    inst.ci_id = ref.ci->id;
    inst.mig_uuid = ref.ci->mig_uuid;
    inst.owner = o->owner;
    inst.request_id = o->request_id;
    inst.state = InstanceState::kActive;
    inst.committed = true;
    inst.created_at = now;
    rewrite.push_back(inst);
    ++t.counts.adopted;
  }

  // Unknown GIs: preserved as foreign, or adopted with the flag.
  std::set<uint32_t> busy_gpus;
  for (const auto* list : {&restore, &rewrite}) {
    for (const Instance& i : *list) {
      if (i.state == InstanceState::kActive) busy_gpus.insert(i.gpu.value());
    }
  }
  for (const auto& [g, gis] : live) {
    for (const auto& gi : gis) {
      if (claimed.count({g, gi.id.value()}) == 0 && gi.compute_instances.size() > 1) {
        busy_gpus.insert(g);
      }
    }
  }
  std::map<uint32_t, std::vector<driver::GpuInstanceInfo>> foreign;
  std::vector<std::pair<uint32_t, driver::GpuInstanceInfo>> orphans;
  for (const auto& [g, gis] : live) {
    const ScopeGpu& gpu = scope.at(g);
    for (const auto& gi : gis) {
      if (claimed.count({g, gi.id.value()}) != 0) continue;
      const mig::GiProfile* prof = gpu.model->FindProfileById(gi.profile_id);
      if (options_.adopt_existing_mig_instances && prof != nullptr) {
        if (gi.compute_instances.size() == 1) {
          Instance inst;
          inst.key = {gpu.info->uuid, gi.profile_id, gi.placement};
          inst.gpu = GpuIndex(g);
          inst.profile = prof->name;
          inst.gi_id = gi.id;
          inst.ci_id = gi.compute_instances[0].id;
          inst.mig_uuid = gi.compute_instances[0].mig_uuid;
          inst.state = InstanceState::kIdle;
          inst.committed = true;
          inst.created_at = now;
          inst.last_used = now;
          rewrite.push_back(inst);
          ++t.counts.adopted;
          continue;
        }
        if (gi.compute_instances.empty() && busy_gpus.count(g) == 0) {
          orphans.emplace_back(g, gi);
          continue;
        }
      }
      foreign[g].push_back(gi);
      ++t.counts.foreign;
    }
  }

  t.restore = std::move(restore);
  t.rewrite = std::move(rewrite);
  t.destroy = std::move(destroy);
  t.remove = std::move(remove);
  t.foreign = std::move(foreign);
  t.orphans = std::move(orphans);
  return t;
}

Status Manager::Recover(OwnerSource& owners) {
  // 1-2. GPUs, their NVML tables and live layouts (one session, opened by
  // the caller).
  MIGD_ASSIGN_OR_RETURN(std::vector<driver::GpuInfo> infos, driver_.ListGpus());
  std::map<uint32_t, std::vector<driver::GpuInstanceInfo>> live;
  for (const driver::GpuInfo& g : infos) {
    Gpu& gpu = gpus_[g.index.value()];
    gpu.info = g;
    gpu.listed = true;
    const std::string why = MigOutcome(g.mig);
    if (!why.empty()) {
      // The reconciler probes it again (Rediscover); logged again on change.
      gpu.probe_outcome = why;
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
    gpu.model = std::make_unique<mig::GpuModel>(std::move(model));
    gpu.managed.store(true, std::memory_order_release);
    live[g.index.value()] = std::move(*gis);
  }
  // GPUs ListGpus skipped (NO_PERMISSION): known by index only, probed again
  // by the reconciler.
  for (GpuIndex i : driver_.SkippedGpus()) {
    Gpu& gpu = gpus_[i.value()];
    if (gpu.listed) continue;
    gpu.info.index = i;
  }
  std::map<uint32_t, ScopeGpu> scope;
  for (const auto& [g, gis] : live) {
    const Gpu& gpu = gpus_.at(g);
    scope[g] = ScopeGpu{&gpu.info, gpu.model.get(), &gis};
  }

  // 3. Records; other boots describe nothing.
  MIGD_ASSIGN_OR_RETURN(store::LoadResult loaded, store_.LoadAll());
  // A state dir full of junk must not flood the log: the first
  // kMaxProblemLines entries are named, the rest counted.
  constexpr size_t kMaxProblemLines = 100;
  for (size_t i = 0; i < loaded.problems.size() && i < kMaxProblemLines; ++i) {
    spdlog::warn("state dir entry not loaded{}",
                 Fields().Add("problem", loaded.problems[i].ToString()));
  }
  if (loaded.problems.size() > kMaxProblemLines) {
    spdlog::warn("more state dir entries not loaded (not listed){}",
                 Fields()
                     .Add("listed", kMaxProblemLines)
                     .Add("not_listed", loaded.problems.size() - kMaxProblemLines));
  }
  std::vector<store::Record> records;
  std::vector<store::RecordKey> other_boot;
  for (store::Record& r : loaded.records) {
    if (r.boot_id == options_.boot_id) {
      records.push_back(std::move(r));
    } else {
      other_boot.push_back(r.key);
    }
  }

  // 4. Owners.
  StatusOr<std::vector<OwnedInstance>> owned = owners.ActiveOwners(records);
  if (!owned.ok()) {
    return owned.status().WithContext("recovery stopped: owner source " +
                                      std::string(owners.name()));
  }
  // 5-6. Verify everything (a record of a GPU not managed now fails: its
  // instances cannot be verified).
  MIGD_ASSIGN_OR_RETURN(Takeover t, VerifyGpus(scope, records, *owned, owners.name()));
  recovery_ = t.counts;
  std::vector<Instance>& restore = t.restore;
  std::vector<Instance>& rewrite = t.rewrite;
  std::vector<Instance>& destroy = t.destroy;
  std::vector<store::RecordKey>& remove = t.remove;
  std::map<uint32_t, std::vector<driver::GpuInstanceInfo>>& foreign = t.foreign;
  std::vector<std::pair<uint32_t, driver::GpuInstanceInfo>>& orphans = t.orphans;

  // Everything is verified: act.
  for (const store::RecordKey& k : other_boot) {
    Status s = store_.Remove(k);
    if (!s.ok()) spdlog::warn("cannot remove record of another boot{}", Fields().Add("error", s));
    ++recovery_.other_boot_discarded;
  }
  for (const store::RecordKey& k : remove) {
    Status s = store_.Remove(k);
    if (!s.ok()) spdlog::warn("cannot remove stale record{}", Fields().Add("error", s));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto* list : {&restore, &rewrite, &destroy}) {
      for (const Instance& i : *list) {
        instances_[i.key] = i;
        EmitLocked(InstanceState::kNone, i, EventReason::kRecovery);
      }
    }
    for (auto& [g, list] : foreign) gpus_.at(g).foreign = std::move(list);
  }
  for (const Instance& i : rewrite) {
    MIGD_RETURN_IF_ERROR(PutRecord(i, i.state, store::RecordPhase::kCommitted));
  }
  for (const Instance& i : destroy) {
    Status s = DestroyInstance(i.key);  // failure: kept in Error, retried later
    (void)s;
  }
  for (const auto& [g, gi] : orphans) {
    store::RecordKey key{gpus_.at(g).info.uuid, gi.profile_id, gi.placement};
    Status s = DestroyHw(GpuIndex(g), key, gi.id, std::nullopt);
    if (s.ok()) {
      ++recovery_.orphan_gis_destroyed;
    } else {
      spdlog::warn("cannot destroy orphan GI, preserved as foreign{}",
                   Fields().Add("gpu", key.gpu_uuid).Add("gi", gi.id).Add("error", s));
      std::lock_guard<std::mutex> lock(mu_);
      gpus_.at(g).foreign.push_back(gi);
      ++recovery_.foreign;
    }
  }
  // Publish, rebuild allocations.
  std::vector<PublishedInstance> publish;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, inst] : instances_) {
      if (inst.state == InstanceState::kActive || inst.state == InstanceState::kIdle) {
        inst.published = true;
        publish.push_back(PublishedLocked(inst));
      }
      if (inst.state == InstanceState::kActive) {
        ++recovery_.active;
        const std::string id = inst.request_id.empty() ? "instance:" + inst.mig_uuid.value()
                                                       : inst.request_id;
        AllocationEntry& e = allocations_[id];
        e.owner = inst.owner;
        e.keys.push_back(k);
      } else if (inst.state == InstanceState::kIdle) {
        ++recovery_.idle;
      } else if (inst.state == InstanceState::kError) {
        ++recovery_.error;
      }
    }
  }
  for (const PublishedInstance& p : publish) {
    Status s = observer_.OnPublish(p);
    if (!s.ok()) return s.WithContext("recovery: publishing " + p.mig_uuid.value());
  }
  std::vector<MigUuid> tracked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, inst] : instances_) {
      if (!inst.mig_uuid.value().empty()) tracked.push_back(inst.mig_uuid);
    }
  }
  if (Status s = observer_.OnRecovered(tracked); !s.ok()) {
    return s.WithContext("recovery: sweeping published instances");
  }
  spdlog::info("recovery done{}", Fields()
                                      .Add("gpus", live.size())
                                      .Add("active", recovery_.active)
                                      .Add("idle", recovery_.idle)
                                      .Add("error", recovery_.error)
                                      .Add("foreign", recovery_.foreign)
                                      .Add("adopted", recovery_.adopted)
                                      .Add("other_boot", recovery_.other_boot_discarded)
                                      .Add("intents_destroyed", recovery_.intents_destroyed)
                                      .Add("intents_removed", recovery_.intents_removed)
                                      .Add("deletions_finished", recovery_.deletions_finished));
  return OkStatus();
}

void Manager::NoteProbe(uint32_t g, Gpu& gpu, const std::string& outcome) {
  if (outcome == gpu.probe_outcome) return;  // logged when it changed, not every pass
  gpu.probe_outcome = outcome;
  spdlog::warn("GPU not managed, probed again each reconcile pass{}",
               Fields().Add("gpu_index", g).Add("reason", outcome));
}

void Manager::Rediscover(ReconcileReport& report) {
  // gpus_'s structure is fixed after recovery and only this thread (under
  // reconcile_mu_) makes an entry managed.
  for (auto& [g, gpu] : gpus_) {
    if (Managed(gpu)) continue;
    // One NVML call per unmanaged GPU and pass (the GPU handle is cached; a
    // GPU skipped for NO_PERMISSION is refused by the handle lookup itself).
    StatusOr<driver::MigModeInfo> mode = driver_.GetMigMode(GpuIndex(g));
    std::string outcome =
        mode.ok() ? MigOutcome(*mode) : "probe failed: " + mode.status().ToString();
    if (outcome.empty()) outcome = TakeOver(g, *mode);
    if (outcome.empty()) {
      ++report.gpus_discovered;
      continue;
    }
    ++report.gpus_unmanaged;
    NoteProbe(g, gpu, outcome);
  }
}

std::string Manager::TakeOver(uint32_t g, const driver::MigModeInfo& mode) {
  Gpu& gpu = gpus_.at(g);
  driver::GpuInfo info;
  bool listed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    info = gpu.info;
    listed = gpu.listed;
  }
  if (listed) {
    info.mig = mode;
  } else {
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
    if (std::string why = MigOutcome(info.mig); !why.empty()) return why;
  }
  for (const auto& [i, other] : gpus_) {
    if (i != g && Managed(other) && other.info.uuid == info.uuid) {
      return "UUID " + info.uuid.value() + " is already managed as GPU index " +
             std::to_string(i);
    }
  }
  const std::string uuid = info.uuid.value();
  StatusOr<std::vector<driver::GiProfileInfo>> profiles = driver_.GetGiProfiles(GpuIndex(g));
  if (!profiles.ok()) return "reading GI profiles: " + profiles.status().ToString();
  StatusOr<mig::GpuModel> model = BuildGpuModel(info, *profiles);
  if (!model.ok()) return "building the placement table: " + model.status().ToString();

  // The GPU's lock, as for any mutation of it: nothing else uses an
  // unmanaged GPU, but an Allocate may use it as soon as it is managed below,
  // and its record writes must come after ours.
  auto locks = LockGpus({g});
  StatusOr<std::vector<driver::GpuInstanceInfo>> gis = driver_.ListGpuInstances(GpuIndex(g));
  if (!gis.ok()) return "listing instances: " + gis.status().ToString();
  StatusOr<store::LoadResult> loaded = store_.LoadAll();
  if (!loaded.ok()) return "loading records: " + loaded.status().ToString();
  std::vector<store::Record> records;
  std::vector<store::RecordKey> other_boot;
  for (store::Record& r : loaded->records) {
    if (r.key.gpu_uuid.value() != uuid) continue;  // other GPUs' records are live state
    if (r.boot_id == options_.boot_id) {
      records.push_back(std::move(r));
    } else {
      other_boot.push_back(r.key);
    }
  }
  // After startup migd's records are the truth about owners (every change is
  // written); the startup owner sources (kubelet, HAMi) are asked once.
  RecordsOwnerSource record_owners;
  StatusOr<std::vector<OwnedInstance>> owned = record_owners.ActiveOwners(records);
  if (!owned.ok()) return "owners from records: " + owned.status().ToString();
  std::map<uint32_t, ScopeGpu> scope;
  scope[g] = ScopeGpu{&info, &*model, &*gis};
  StatusOr<Takeover> verified = VerifyGpus(scope, records, *owned, record_owners.name());
  if (!verified.ok()) {
    return "verification failed, GPU left unmanaged (nothing changed): " +
           verified.status().ToString();
  }
  Takeover& t = *verified;
  // Nothing is created or destroyed here: what startup would destroy is
  // taken in Error (the reconciler's Error retry, step 1 of this pass,
  // destroys it as any Error instance), orphan GIs stay foreign.
  for (Instance& i : t.destroy) i.state = InstanceState::kError;
  for (auto& [og, gi] : t.orphans) {
    t.foreign[og].push_back(gi);
    ++t.counts.foreign;
  }
  // Disk first, then observers, then the registry: a failure on the way
  // leaves the GPU unmanaged (the records written describe verified live
  // instances; the next pass verifies them again).
  for (const Instance& i : t.rewrite) {
    if (Status s = PutRecord(i, i.state, store::RecordPhase::kCommitted); !s.ok()) {
      return "writing records: " + s.ToString();
    }
  }
  for (const Instance& i : t.destroy) {
    const store::RecordPhase phase =
        i.committed ? store::RecordPhase::kCommitted : store::RecordPhase::kIntent;
    if (Status s = PutRecord(i, InstanceState::kError, phase); !s.ok()) {
      return "writing records: " + s.ToString();
    }
  }
  for (const auto* keys : {&other_boot, &t.remove}) {
    for (const store::RecordKey& k : *keys) {
      Status s = store_.Remove(k);
      if (!s.ok()) spdlog::warn("cannot remove stale record{}", Fields().Add("error", s));
    }
  }
  uint64_t active = 0;
  uint64_t idle = 0;
  for (const auto* list : {&t.restore, &t.rewrite}) {
    for (const Instance& i : *list) {
      if (i.state != InstanceState::kActive && i.state != InstanceState::kIdle) continue;
      (i.state == InstanceState::kActive ? active : idle) += 1;
      PublishedInstance p;
      {
        std::lock_guard<std::mutex> lock(mu_);
        p = PublishedLocked(i);
      }
      p.gpu_minor = info.minor;
      if (Status s = observer_.OnPublish(p); !s.ok()) {
        return "publishing " + i.mig_uuid.value() + ": " + s.ToString();
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    gpu.info = info;
    gpu.listed = true;
    gpu.model = std::make_unique<mig::GpuModel>(std::move(*model));
    gpu.foreign = std::move(t.foreign[g]);
    for (auto* list : {&t.restore, &t.rewrite, &t.destroy}) {
      for (Instance& i : *list) {
        i.published = i.state == InstanceState::kActive || i.state == InstanceState::kIdle;
        if (i.state == InstanceState::kActive) {
          const std::string id =
              i.request_id.empty() ? "instance:" + i.mig_uuid.value() : i.request_id;
          AllocationEntry& e = allocations_[id];
          e.owner = i.owner;
          e.keys.push_back(i.key);
        }
        instances_[i.key] = i;
        EmitLocked(InstanceState::kNone, i, EventReason::kRecovery);
      }
    }
    ++counters_.gpus_discovered;
    gpu.managed.store(true, std::memory_order_release);
  }
  spdlog::info("GPU now managed (rediscovered by the reconciler){}",
               Fields()
                   .Add("gpu", uuid)
                   .Add("gpu_index", g)
                   .Add("name", info.name)
                   .Add("active", active)
                   .Add("idle", idle)
                   .Add("error", t.destroy.size())
                   .Add("foreign", t.counts.foreign)
                   .Add("adopted", t.counts.adopted));
  return "";
}

}  // namespace migd::engine
