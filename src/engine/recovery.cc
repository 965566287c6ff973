// Manager::Recover: startup recovery (DESIGN.md §4). Everything is verified
// first, without changing anything; only then are records rewritten or
// removed and the journaled leftovers (intents, interrupted deletions) and,
// with adoptExistingMIGInstances, orphan GIs on idle GPUs destroyed.
#include <set>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/gpu_model_builder.h"
#include "engine/manager.h"

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

}  // namespace

Status Manager::Recover(OwnerSource& owners) {
  // 1-2. GPUs, their NVML tables and live layouts (one session, opened by
  // the caller).
  MIGD_ASSIGN_OR_RETURN(std::vector<driver::GpuInfo> infos, driver_.ListGpus());
  all_gpus_ = infos;
  std::map<uint32_t, std::vector<driver::GpuInstanceInfo>> live;
  for (const driver::GpuInfo& g : infos) {
    if (!g.mig.supported || g.mig.current != driver::MigMode::kEnabled) {
      spdlog::info("GPU not in MIG mode, not managed{}", Fields().Add("gpu", g.uuid));
      continue;
    }
    StatusOr<std::vector<driver::GiProfileInfo>> profiles = driver_.GetGiProfiles(g.index);
    if (!profiles.ok()) {
      return profiles.status().WithContext("reading GI profiles of GPU " + g.uuid.value());
    }
    MIGD_ASSIGN_OR_RETURN(mig::GpuModel model, BuildGpuModel(g, *profiles));
    StatusOr<std::vector<driver::GpuInstanceInfo>> gis = driver_.ListGpuInstances(g.index);
    if (!gis.ok()) return gis.status().WithContext("listing instances of GPU " + g.uuid.value());
    Gpu gpu;
    gpu.info = g;
    gpu.model = std::make_unique<mig::GpuModel>(std::move(model));
    gpu.mutate_mu = std::make_unique<std::mutex>();
    gpu_by_uuid_[g.uuid.value()] = g.index.value();
    live[g.index.value()] = std::move(*gis);
    gpus_.emplace(g.index.value(), std::move(gpu));
  }

  // 3. Records; other boots describe nothing.
  MIGD_ASSIGN_OR_RETURN(store::LoadResult loaded, store_.LoadAll());
  for (const store::LoadProblem& p : loaded.problems) {
    spdlog::warn("state dir entry not loaded{}", Fields().Add("problem", p.ToString()));
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
  for (const OwnedInstance& o : *owned) {
    const std::string gpu_text = o.gpu_uuid ? o.gpu_uuid->value() : std::string("?");
    auto it = by_uuid.find(o.mig_uuid.value());
    if (it == by_uuid.end()) {
      return Unverifiable(gpu_text, o.mig_uuid.value(),
                          "held by active owner " + OwnerString(o.owner) + " (source " +
                              std::string(owners.name()) + ") but no such MIG device exists");
    }
    const Gpu& gpu = gpus_.at(it->second.gpu);
    const auto& gi = *it->second.gi;
    const auto& ci = *it->second.ci;
    if (o.gpu_uuid && *o.gpu_uuid != gpu.info.uuid) {
      return Unverifiable(gpu_text, o.mig_uuid.value(),
                          "owner says parent GPU " + gpu_text + ", live parent is " +
                              gpu.info.uuid.value());
    }
    if (o.placement && *o.placement != gi.placement) {
      return Unverifiable(gpu.info.uuid.value(), o.mig_uuid.value(),
                          "owner says placement " + o.placement->ToString() + ", live GI is at " +
                              gi.placement.ToString());
    }
    if (o.gi_id && *o.gi_id != gi.id) {
      return Unverifiable(gpu.info.uuid.value(), o.mig_uuid.value(),
                          "owner says GI id " + std::to_string(o.gi_id->value()) +
                              ", live GI id is " + std::to_string(gi.id.value()));
    }
    if (o.ci_id && *o.ci_id != ci.id) {
      return Unverifiable(gpu.info.uuid.value(), o.mig_uuid.value(),
                          "owner says CI id " + std::to_string(o.ci_id->value()) +
                              ", live CI id is " + std::to_string(ci.id.value()));
    }
    if (!owned_by_uuid.emplace(o.mig_uuid.value(), &o).second) {
      return Unverifiable(gpu.info.uuid.value(), o.mig_uuid.value(), "claimed by two owners");
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
    auto git = gpu_by_uuid_.find(r.key.gpu_uuid.value());
    if (git == gpu_by_uuid_.end()) {
      return Unverifiable(r.key.gpu_uuid.value(), inst_text,
                          "the record's GPU is not present or not in MIG mode");
    }
    const uint32_t g = git->second;
    const Gpu& gpu = gpus_.at(g);
    const std::string gpu_text = gpu.info.uuid.value();
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
        ++recovery_.intents_removed;
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
        ++recovery_.intents_adopted;
      } else {
        inst.ci_id = complete ? std::optional<NvmlCiId>(at->compute_instances[0].id)
                              : std::nullopt;
        inst.state = InstanceState::kCreating;
        inst.committed = false;
        destroy.push_back(inst);
        ++recovery_.intents_destroyed;
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
        ++recovery_.deletions_finished;
      } else {
        ++recovery_.vanished_removed;
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
      ++recovery_.deletions_finished;
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
    const Gpu& gpu = gpus_.at(ref.gpu);
    if (!claimed.insert({ref.gpu, ref.gi->id.value()}).second) {
      return Unverifiable(gpu.info.uuid.value(), uuid,
                          "held by an active owner but its GI is claimed by a record");
    }
    const mig::GiProfile* prof = gpu.model->FindProfileById(ref.gi->profile_id);
    if (prof == nullptr) {
      return Unverifiable(gpu.info.uuid.value(), uuid, "GI profile unknown to this GPU");
    }
    Instance inst;
    inst.key = {gpu.info.uuid, ref.gi->profile_id, ref.gi->placement};
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
    ++recovery_.adopted;
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
    const Gpu& gpu = gpus_.at(g);
    for (const auto& gi : gis) {
      if (claimed.count({g, gi.id.value()}) != 0) continue;
      const mig::GiProfile* prof = gpu.model->FindProfileById(gi.profile_id);
      if (options_.adopt_existing_mig_instances && prof != nullptr) {
        if (gi.compute_instances.size() == 1) {
          Instance inst;
          inst.key = {gpu.info.uuid, gi.profile_id, gi.placement};
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
          ++recovery_.adopted;
          continue;
        }
        if (gi.compute_instances.empty() && busy_gpus.count(g) == 0) {
          orphans.emplace_back(g, gi);
          continue;
        }
      }
      foreign[g].push_back(gi);
      ++recovery_.foreign;
    }
  }

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
                                      .Add("gpus", gpus_.size())
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

}  // namespace migd::engine
