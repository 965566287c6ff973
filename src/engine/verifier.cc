#include "engine/verifier.h"

#include <spdlog/spdlog.h>

#include <set>
#include <string>

#include "base/logging.h"
#include "base/status_macros.h"

namespace migd::engine {
namespace {

using GiList = std::vector<driver::GpuInstanceInfo>;

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

std::string Id(uint32_t v) { return std::to_string(v); }

bool Deleting(store::RecordState s) {
  return s == store::RecordState::kReclaiming || s == store::RecordState::kDeleting;
}

// An instance adopted from the live layout (no record): committed, with the
// identity NVML reports.
TrackedInstance FromLive(uint32_t g, const ScopeGpu& gpu, const mig::GiProfile& prof,
                         const driver::GpuInstanceInfo& gi, const driver::ComputeInstanceInfo& ci,
                         InstanceState state, Clock::TimePoint now) {
  TrackedInstance inst;
  static_cast<store::RecordKey&>(inst.id) = {gpu.info->uuid, gi.profile_id, gi.placement};
  inst.gpu = GpuIndex(g);
  inst.profile = prof.name;
  inst.set_gi(gi.id);
  inst.set_ci(ci.id);
  inst.id.mig_uuid = ci.mig_uuid;
  inst.state = state;
  inst.committed = true;
  inst.created_at = now;
  return inst;
}

class Verifier {
 public:
  Verifier(const std::map<uint32_t, ScopeGpu>& scope, std::string_view owner_source,
           const VerifyOptions& options);

  Status VerifyOwners(const std::vector<OwnedInstance>& owned);
  Status VerifyRecord(const store::Record& r);
  Status AdoptOwnedWithoutRecord();
  void ClassifyUnclaimed();
  Takeover Take() { return std::move(t_); }

 private:
  struct CiRef {
    uint32_t gpu;
    const driver::GpuInstanceInfo* gi;
    const driver::ComputeInstanceInfo* ci;
  };
  // What the record being verified is about.
  struct Subject {
    const store::Record& r;
    uint32_t gpu;
    const GiList& gis;
    std::string gpu_text;
    std::string inst_text;
  };
  Status VerifyOwner(const OwnedInstance& o);
  Status VerifyIntent(const Subject& s, TrackedInstance inst);
  Status VerifyCommitted(const Subject& s, TrackedInstance inst);
  Status VerifyVanished(const Subject& s, const TrackedInstance& inst);
  // The owned instance of `uuid`, or null.
  const OwnedInstance* OwnerOf(const std::string& uuid) const;
  void MakeActive(TrackedInstance& inst, const OwnedInstance& o);

  const std::map<uint32_t, ScopeGpu>& scope_;
  const std::string_view owner_source_;
  const VerifyOptions options_;
  std::map<std::string, uint32_t> gpu_by_uuid_;
  std::map<std::string, CiRef> by_uuid_;
  std::map<std::string, const OwnedInstance*> owned_by_uuid_;
  std::set<std::pair<uint32_t, uint32_t>> claimed_;  // (GPU index, GI id)
  std::set<std::string> owned_done_;
  Takeover t_;
};

Verifier::Verifier(const std::map<uint32_t, ScopeGpu>& scope, std::string_view owner_source,
                   const VerifyOptions& options)
    : scope_(scope), owner_source_(owner_source), options_(options) {
  for (const auto& [g, sg] : scope_) {
    gpu_by_uuid_[sg.info->uuid.value()] = g;
    for (const auto& gi : *sg.live) {
      for (const auto& ci : gi.compute_instances) {
        if (!ci.mig_uuid.value().empty()) by_uuid_[ci.mig_uuid.value()] = {g, &gi, &ci};
      }
    }
  }
}

const OwnedInstance* Verifier::OwnerOf(const std::string& uuid) const {
  auto it = owned_by_uuid_.find(uuid);
  return it == owned_by_uuid_.end() ? nullptr : it->second;
}

void Verifier::MakeActive(TrackedInstance& inst, const OwnedInstance& o) {
  owned_done_.insert(inst.id.mig_uuid.value());
  inst.state = InstanceState::kActive;
  inst.owner = o.owner;
  inst.request_id = o.request_id;
}

Status Verifier::VerifyOwners(const std::vector<OwnedInstance>& owned) {
  for (const OwnedInstance& o : owned) MIGD_RETURN_IF_ERROR(VerifyOwner(o));
  return OkStatus();
}

Status Verifier::VerifyOwner(const OwnedInstance& o) {
  const std::string uuid = o.mig_uuid.value();
  const std::string gpu_text = o.gpu_uuid ? o.gpu_uuid->value() : std::string("?");
  auto it = by_uuid_.find(uuid);
  if (it == by_uuid_.end()) {
    return Unverifiable(gpu_text, uuid,
                        "held by active owner " + OwnerString(o.owner) + " (source " +
                            std::string(owner_source_) + ") but no such MIG device exists");
  }
  const std::string live_gpu = scope_.at(it->second.gpu).info->uuid.value();
  const driver::GpuInstanceInfo& gi = *it->second.gi;
  const driver::ComputeInstanceInfo& ci = *it->second.ci;
  if (o.gpu_uuid && o.gpu_uuid->value() != live_gpu) {
    return Unverifiable(gpu_text, uuid,
                        "owner says parent GPU " + gpu_text + ", live parent is " + live_gpu);
  }
  if (o.placement && *o.placement != gi.placement) {
    return Unverifiable(live_gpu, uuid,
                        "owner says placement " + o.placement->ToString() + ", live GI is at " +
                            gi.placement.ToString());
  }
  if (o.gi_id && *o.gi_id != gi.id) {
    return Unverifiable(
        live_gpu, uuid,
        "owner says GI id " + Id(o.gi_id->value()) + ", live GI id is " + Id(gi.id.value()));
  }
  if (o.ci_id && *o.ci_id != ci.id) {
    return Unverifiable(
        live_gpu, uuid,
        "owner says CI id " + Id(o.ci_id->value()) + ", live CI id is " + Id(ci.id.value()));
  }
  if (!owned_by_uuid_.emplace(uuid, &o).second) {
    return Unverifiable(live_gpu, uuid, "claimed by two owners");
  }
  return OkStatus();
}

Status Verifier::VerifyRecord(const store::Record& r) {
  const std::string inst_text =
      r.key.ToString() + (r.mig_uuid ? " mig=" + r.mig_uuid->value() : std::string());
  auto git = gpu_by_uuid_.find(r.key.gpu_uuid.value());
  if (git == gpu_by_uuid_.end()) {
    return Unverifiable(r.key.gpu_uuid.value(), inst_text,
                        "the record's GPU is not present or not in MIG mode");
  }
  const uint32_t g = git->second;
  const ScopeGpu& gpu = scope_.at(g);
  const Subject s{r, g, *gpu.live, gpu.info->uuid.value(), inst_text};
  const mig::GiProfile* prof = gpu.model->FindProfileById(r.key.profile_id);
  if (prof == nullptr || !prof->HasPlacement(r.key.placement)) {
    return Unverifiable(s.gpu_text, inst_text,
                        "profile " + Id(r.key.profile_id.value()) + " at " +
                            r.key.placement.ToString() + " is not offered by this GPU");
  }
  TrackedInstance inst = TrackedFromRecord(r, GpuIndex(g), prof->name);
  return r.phase == store::RecordPhase::kIntent ? VerifyIntent(s, std::move(inst))
                                                : VerifyCommitted(s, std::move(inst));
}

Status Verifier::VerifyIntent(const Subject& s, TrackedInstance inst) {
  const driver::GpuInstanceInfo* at = nullptr;
  for (const auto& gi : s.gis) {
    if (gi.profile_id == s.r.key.profile_id && gi.placement == s.r.key.placement) at = &gi;
  }
  if (at == nullptr) {  // nothing was created (or it is gone)
    t_.remove.push_back(s.r.key);
    ++t_.counts.intents_removed;
    return OkStatus();
  }
  if (s.r.gi_id && *s.r.gi_id != at->id) {
    return Unverifiable(s.gpu_text, s.inst_text,
                        "intent names GI " + Id(s.r.gi_id->value()) + " but GI " +
                            Id(at->id.value()) + " is at its placement");
  }
  if (!claimed_.insert({s.gpu, at->id.value()}).second) {
    return Unverifiable(s.gpu_text, s.inst_text, "GI claimed by two records");
  }
  inst.set_gi(at->id);
  const bool complete = at->compute_instances.size() == 1;
  const OwnedInstance* o = complete ? OwnerOf(at->compute_instances[0].mig_uuid.value()) : nullptr;
  const bool adopt = options_.adopt_complete_intents && s.r.state == store::RecordState::kCreating;
  if (!complete || (o == nullptr && !adopt)) {
    inst.set_ci(complete ? std::optional<NvmlCiId>(at->compute_instances[0].id) : std::nullopt);
    inst.state = InstanceState::kCreating;
    inst.committed = false;
    t_.destroy.push_back(std::move(inst));
    ++t_.counts.intents_destroyed;
    return OkStatus();
  }
  inst.set_ci(at->compute_instances[0].id);
  inst.id.mig_uuid = at->compute_instances[0].mig_uuid;
  inst.committed = true;
  if (o != nullptr) {
    MakeActive(inst, *o);
  } else {
    inst.state = InstanceState::kIdle;
    inst.ClearOwner();
    inst.last_used = options_.now;
  }
  t_.rewrite.push_back(std::move(inst));
  ++t_.counts.intents_adopted;
  return OkStatus();
}

Status Verifier::VerifyVanished(const Subject& s, const TrackedInstance& inst) {
  for (const auto& gi : s.gis) {
    if (gi.placement.Overlaps(s.r.key.placement)) {
      return Unverifiable(s.gpu_text, s.inst_text,
                          "record says GI " + Id(s.r.gi_id->value()) + " at " +
                              s.r.key.placement.ToString() + ", but live GI " + Id(gi.id.value()) +
                              " (profile " + Id(gi.profile_id.value()) + ") is at " +
                              gi.placement.ToString());
    }
  }
  if (s.r.state == store::RecordState::kActive || OwnerOf(inst.id.mig_uuid.value()) != nullptr) {
    return Unverifiable(s.gpu_text, s.inst_text,
                        "the Active instance of " + OwnerString(s.r.owner) + " no longer exists");
  }
  t_.remove.push_back(s.r.key);
  if (Deleting(s.r.state)) {
    ++t_.counts.deletions_finished;
  } else {
    ++t_.counts.vanished_removed;
    spdlog::warn("drift: recorded instance vanished, record removed{}",
                 Fields().Add("gpu", s.gpu_text).Add("instance", s.inst_text));
  }
  return OkStatus();
}

Status Verifier::VerifyCommitted(const Subject& s, TrackedInstance inst) {
  const store::Record& r = s.r;
  const driver::GpuInstanceInfo* live_gi = nullptr;
  for (const auto& gi : s.gis) {
    if (gi.id == *r.gi_id) live_gi = &gi;
  }
  if (live_gi == nullptr) return VerifyVanished(s, inst);
  const std::string live_text = "live GI " + Id(live_gi->id.value());
  if (live_gi->profile_id != r.key.profile_id) {
    return Unverifiable(s.gpu_text, s.inst_text,
                        "record says profile " + Id(r.key.profile_id.value()) + ", " + live_text +
                            " has profile " + Id(live_gi->profile_id.value()));
  }
  if (live_gi->placement != r.key.placement) {
    return Unverifiable(s.gpu_text, s.inst_text,
                        "record says placement " + r.key.placement.ToString() + ", " + live_text +
                            " is at " + live_gi->placement.ToString());
  }
  if (!claimed_.insert({s.gpu, live_gi->id.value()}).second) {
    return Unverifiable(s.gpu_text, s.inst_text, "GI claimed by two records");
  }
  inst.committed = true;
  if (Deleting(r.state)) {
    inst.state = InstanceState::kDeleting;  // a missing CI reads as NotFound: done
    t_.destroy.push_back(std::move(inst));
    ++t_.counts.deletions_finished;
    return OkStatus();
  }
  if (r.state == store::RecordState::kError) {
    inst.state = InstanceState::kError;
    t_.restore.push_back(std::move(inst));
    return OkStatus();
  }
  const driver::ComputeInstanceInfo* ci = nullptr;
  for (const auto& c : live_gi->compute_instances) {
    if (c.id == *r.ci_id) ci = &c;
  }
  if (ci == nullptr) {
    return Unverifiable(s.gpu_text, s.inst_text,
                        "record says CI id " + Id(r.ci_id->value()) + ", GI " +
                            Id(live_gi->id.value()) + " has CIs " + CiIds(*live_gi));
  }
  if (ci->mig_uuid != *r.mig_uuid) {
    return Unverifiable(
        s.gpu_text, s.inst_text,
        "record says MIG UUID " + r.mig_uuid->value() + ", live CI has " + ci->mig_uuid.value());
  }
  if (const OwnedInstance* o = OwnerOf(inst.id.mig_uuid.value()); o != nullptr) {
    MakeActive(inst, *o);
    const bool same = r.state == store::RecordState::kActive && r.owner == inst.owner &&
                      r.request_id == inst.request_id;
    (same ? t_.restore : t_.rewrite).push_back(std::move(inst));
    return OkStatus();
  }
  inst.state = InstanceState::kIdle;
  inst.ClearOwner();
  if (r.state == store::RecordState::kIdle) {
    t_.restore.push_back(std::move(inst));
  } else {
    inst.last_used = options_.now;
    t_.rewrite.push_back(std::move(inst));
  }
  return OkStatus();
}

Status Verifier::AdoptOwnedWithoutRecord() {
  for (const auto& [uuid, o] : owned_by_uuid_) {
    if (owned_done_.count(uuid) != 0) continue;
    const CiRef& ref = by_uuid_.at(uuid);
    const ScopeGpu& gpu = scope_.at(ref.gpu);
    if (!claimed_.insert({ref.gpu, ref.gi->id.value()}).second) {
      return Unverifiable(gpu.info->uuid.value(), uuid,
                          "held by an active owner but its GI is claimed by a record");
    }
    const mig::GiProfile* prof = gpu.model->FindProfileById(ref.gi->profile_id);
    if (prof == nullptr) {
      return Unverifiable(gpu.info->uuid.value(), uuid, "GI profile unknown to this GPU");
    }
    TrackedInstance inst =
        FromLive(ref.gpu, gpu, *prof, *ref.gi, *ref.ci, InstanceState::kActive, options_.now);
    inst.owner = o->owner;
    inst.request_id = o->request_id;
    t_.rewrite.push_back(std::move(inst));
    ++t_.counts.adopted;
  }
  return OkStatus();
}

void Verifier::ClassifyUnclaimed() {
  // GPUs with a live allocation: no orphan GI is destroyed there.
  std::set<uint32_t> busy_gpus;
  for (const auto* list : {&t_.restore, &t_.rewrite}) {
    for (const TrackedInstance& i : *list) {
      if (i.state == InstanceState::kActive) busy_gpus.insert(i.gpu.value());
    }
  }
  for (const auto& [g, sg] : scope_) {
    for (const auto& gi : *sg.live) {
      if (claimed_.count({g, gi.id.value()}) == 0 && gi.compute_instances.size() > 1) {
        busy_gpus.insert(g);
      }
    }
  }
  for (const auto& [g, sg] : scope_) {
    for (const auto& gi : *sg.live) {
      if (claimed_.count({g, gi.id.value()}) != 0) continue;
      const mig::GiProfile* prof = sg.model->FindProfileById(gi.profile_id);
      if (options_.adopt_existing_mig_instances && prof != nullptr) {
        if (gi.compute_instances.size() == 1) {
          TrackedInstance inst = FromLive(g, sg, *prof, gi, gi.compute_instances[0],
                                          InstanceState::kIdle, options_.now);
          inst.last_used = options_.now;
          t_.rewrite.push_back(std::move(inst));
          ++t_.counts.adopted;
          continue;
        }
        if (gi.compute_instances.empty() && busy_gpus.count(g) == 0) {
          t_.orphans.emplace_back(g, gi);
          continue;
        }
      }
      t_.foreign[g].push_back(gi);
      ++t_.counts.foreign;
    }
  }
}

}  // namespace

StatusOr<Takeover> VerifyTakeover(const std::map<uint32_t, ScopeGpu>& scope,
                                  const std::vector<store::Record>& records,
                                  const std::vector<OwnedInstance>& owned,
                                  std::string_view owner_source, const VerifyOptions& options) {
  Verifier v(scope, owner_source, options);
  // Owners' identities first: a record is Active only if an owner holds it.
  MIGD_RETURN_IF_ERROR(v.VerifyOwners(owned));
  for (const store::Record& r : records) MIGD_RETURN_IF_ERROR(v.VerifyRecord(r));
  MIGD_RETURN_IF_ERROR(v.AdoptOwnedWithoutRecord());
  v.ClassifyUnclaimed();
  return v.Take();
}

}  // namespace migd::engine
