#include "api/service.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <set>
#include <string>
#include <utility>

#include "api/convert.h"
#include "api/status_mapping.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "cdi/publisher.h"
#include "engine/capacity.h"

namespace migd::api {
namespace {

// How to bring a MIG-disabled GPU in: the reconciler re-probes unmanaged GPUs
// every pass, so no restart is needed.
constexpr char kEnableMigTail[] =
    " -mig 1 (a GPU reset may be needed); migd takes it over at its next reconcile pass";

std::string GpuList(const std::vector<engine::GpuView>& gpus) {
  std::string s;
  for (const engine::GpuView& g : gpus) {
    if (!s.empty()) s += ", ";
    s += std::to_string(g.info.index.value());
  }
  return s;
}

// The planner names request entries "request[i]"; the API field is
// "instances[i]". Ids and profile names cannot contain '[', so the rename
// cannot touch anything but field paths.
Status RenameRequestField(const Status& s) {
  if (s.code() != StatusCode::kInvalidArgument) return s;
  std::string msg(s.message());
  const std::string from = "request[";
  const std::string to = "instances[";
  for (size_t pos = msg.find(from); pos != std::string::npos; pos = msg.find(from, pos)) {
    if (pos > 0 &&
        (std::isalnum(static_cast<unsigned char>(msg[pos - 1])) || msg[pos - 1] == '_')) {
      pos += from.size();
      continue;
    }
    msg.replace(pos, from.size(), to);
    pos += to.size();
  }
  return Status(s.code(), msg);
}

bool MigEnabled(const engine::GpuView& g) { return g.model != nullptr; }

Status UnknownGpu(const std::string& field, uint32_t index,
                  const std::vector<engine::GpuView>& gpus) {
  return InvalidArgumentError(field + ": unknown GPU " + std::to_string(index) + " (GPUs: " +
                              (gpus.empty() ? std::string("none") : GpuList(gpus)) + ")");
}

const engine::GpuView* FindGpu(const std::vector<engine::GpuView>& gpus, uint32_t index) {
  for (const engine::GpuView& g : gpus) {
    if (g.info.index.value() == index) return &g;
  }
  return nullptr;
}

// kInvalidArgument naming the profiles known where `spec` may go when none of
// those GPUs has its profile (the planner would only say "not a profile").
Status CheckProfile(const std::vector<engine::GpuView>& gpus, const engine::InstanceSpec& spec,
                    size_t i) {
  // GPUs of one model share a table: list each table once, with its GPUs.
  std::vector<std::pair<std::string, const mig::GpuModel*>> tables;  // "gpu0, gpu1" -> model
  for (const engine::GpuView& g : gpus) {
    if (!MigEnabled(g)) continue;
    if (spec.gpu && g.info.index != *spec.gpu) continue;
    if (g.model->FindProfileByName(spec.profile) != nullptr) return OkStatus();
    const std::string name = "gpu" + std::to_string(g.info.index.value());
    bool merged = false;
    for (auto& [label, model] : tables) {
      if (model->key == g.model->key && model->gi_profiles.size() == g.model->gi_profiles.size()) {
        label += ", " + name;
        merged = true;
        break;
      }
    }
    if (!merged) tables.emplace_back(name, g.model);
  }
  std::string known;
  for (const auto& [label, model] : tables) {
    known += known.empty() ? "" : "; ";
    known += label + ":";
    bool first = true;
    for (const mig::GiProfile& p : model->gi_profiles) {
      known += (first ? " " : ", ") + p.name;
      first = false;
    }
  }
  return InvalidArgumentError("instances[" + std::to_string(i) + "].profile: unknown profile \"" +
                              spec.profile + "\"; known on " + known);
}

}  // namespace

MigManagerService::MigManagerService(engine::Manager& manager, EventHub& hub, ServerInfo info,
                                     ServiceOptions options)
    : manager_(manager), hub_(hub), info_(std::move(info)), options_(options) {}

grpc::Status MigManagerService::Finish(const char* rpc, const grpc::ServerContext* ctx,
                                       const std::string& request_id, const Status& status,
                                       const std::string& mig_uuid, bool audit) const {
  if (status.ok() && !audit && !spdlog::should_log(spdlog::level::debug)) {
    return grpc::Status::OK;
  }
  Fields f;
  f.Add("rpc", rpc).Add("code", StatusCodeName(status.code()));
  if (!request_id.empty()) f.Add("request", request_id);
  if (!mig_uuid.empty()) f.Add("mig", mig_uuid);
  AddPeer(ctx, f);
  if (status.ok()) {
    if (audit) {
      spdlog::info("rpc{}", f);
    } else {
      spdlog::debug("rpc{}", f);
    }
    return grpc::Status::OK;
  }
  f.Add("message", status.message());
  if (status.code() == StatusCode::kCancelled) {
    spdlog::debug("rpc ended{}", f);
  } else if (status.code() == StatusCode::kInternal || status.code() == StatusCode::kDataLoss) {
    spdlog::error("rpc failed{}", f);
  } else {
    spdlog::warn("rpc failed{}", f);
  }
  return ToGrpcStatus(status);
}

void MigManagerService::AddPeer(const grpc::ServerContext* ctx, Fields& f) const {
  if (ctx == nullptr) return;
  const std::string peer = ctx->peer();
  if (std::optional<PeerCredentials> cred = peers_.Lookup(peer)) {
    AddPeerFields(*cred, f);
  } else {
    f.Add("peer", peer);
  }
}

std::string MigManagerService::CdiName(const MigUuid& mig_uuid) const {
  if (options_.cdi == nullptr || !options_.cdi_enabled || mig_uuid.value().empty()) return "";
  return CdiName(options_.cdi->SpecOf(mig_uuid));
}

std::string MigManagerService::CdiName(const std::optional<cdi::BuiltSpec>& spec) const {
  return spec && options_.cdi_enabled ? spec->qualified_name : "";
}

Status MigManagerService::CheckGpus(const std::vector<engine::InstanceSpec>& specs) const {
  const std::vector<engine::GpuView> gpus = manager_.Gpus();
  if (gpus.empty()) {
    return FailedPreconditionError(
        "no GPU found; check the NVIDIA driver with nvidia-smi and restart migd");
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].gpu) continue;
    const uint32_t n = specs[i].gpu->value();
    const engine::GpuView* g = FindGpu(gpus, n);
    if (g == nullptr) {
      return UnknownGpu("instances[" + std::to_string(i) + "].gpu", n, gpus);
    }
    if (!g->info.mig.supported) {
      return FailedPreconditionError("gpu" + std::to_string(n) + " (" + g->info.name +
                                     ") does not support MIG; pin a MIG-capable GPU");
    }
    if (!MigEnabled(*g)) {
      return FailedPreconditionError("gpu" + std::to_string(n) +
                                     ": MIG mode is disabled; enable it with nvidia-smi -i " +
                                     std::to_string(n) + kEnableMigTail);
    }
  }
  bool any = false;
  for (const engine::GpuView& g : gpus) any = any || MigEnabled(g);
  if (any) {
    for (size_t i = 0; i < specs.size(); ++i) {
      MIGD_RETURN_IF_ERROR(CheckProfile(gpus, specs[i], i));
    }
  } else {
    std::string hint;
    for (const engine::GpuView& g : gpus) {
      if (!g.info.mig.supported) continue;
      const std::string n = std::to_string(g.info.index.value());
      hint += (hint.empty() ? "" : ", ") + ("gpu" + n);
    }
    if (hint.empty()) {
      return FailedPreconditionError("no GPU on this node supports MIG (GPUs: " + GpuList(gpus) +
                                     ")");
    }
    return FailedPreconditionError(
        "no GPU has MIG mode enabled (MIG-capable: " + hint + "); enable it with nvidia-smi -i " +
        (hint.find(',') == std::string::npos ? hint.substr(3) : std::string("<index>")) +
        kEnableMigTail);
  }
  return OkStatus();
}

// --- Allocate ---------------------------------------------------------------

grpc::Status MigManagerService::Allocate(grpc::ServerContext* ctx, const v1::AllocateRequest* req,
                                         v1::AllocateResponse* resp) {
  return Finish("Allocate", ctx, req->request_id(), DoAllocate(*req, resp), "", /*audit=*/true);
}

Status MigManagerService::DoAllocate(const v1::AllocateRequest& req, v1::AllocateResponse* resp) {
  MIGD_ASSIGN_OR_RETURN(engine::AllocateRequest request, FromProto(req));
  MIGD_RETURN_IF_ERROR(CheckGpus(request.instances));
  StatusOr<engine::Allocation> alloc = manager_.Allocate(request);
  if (!alloc.ok()) return RenameRequestField(alloc.status());
  resp->set_request_id(alloc->request_id);
  resp->set_replayed(alloc->replayed);
  const bool have_stages = alloc->stages.size() == alloc->instances.size();
  std::vector<cdi::BuiltSpec> specs;
  std::string visible;
  for (size_t i = 0; i < alloc->instances.size(); ++i) {
    const engine::InstanceView& v = alloc->instances[i];
    // One lookup per instance: the spec gives both the CDI name and the
    // devices below.
    std::optional<cdi::BuiltSpec> spec;
    if (options_.cdi != nullptr) {
      spec = options_.cdi->SpecOf(v.mig_uuid);
      if (!spec) {
        // The engine publishes before Allocate returns; a missing spec is a
        // broken invariant, not something the client can fix.
        return InternalError("no CDI spec published for " + v.mig_uuid.value() +
                             " after allocation " + alloc->request_id);
      }
    }
    v1::AllocatedInstance* ai = resp->add_instances();
    ToProto(v, CdiName(spec), ai->mutable_instance());
    ai->set_path(have_stages && !alloc->replayed ? ToProto(alloc->stages[i])
                                                 : v1::ALLOCATION_PATH_UNSPECIFIED);
    visible += (visible.empty() ? "" : ",") + v.mig_uuid.value();
    if (spec) specs.push_back(std::move(*spec));
  }
  if (options_.cdi != nullptr) {
    cdi::AllocateDevices devs = cdi::MakeAllocateDevices(specs, options_.cdi_enabled);
    for (const std::string& d : devs.cdi_devices) resp->add_cdi_devices(d);
    for (const auto& [name, value] : devs.envs) {
      v1::EnvVar* e = resp->add_envs();
      e->set_name(name);
      e->set_value(value);
    }
    for (const cdi::LegacyDeviceNode& n : devs.device_nodes) {
      v1::DeviceNode* d = resp->add_device_nodes();
      d->set_container_path(n.container_path);
      d->set_host_path(n.host_path);
      d->set_permissions(n.permissions);
    }
  } else if (!visible.empty()) {
    v1::EnvVar* e = resp->add_envs();
    e->set_name("NVIDIA_VISIBLE_DEVICES");
    e->set_value(visible);
  }
  return OkStatus();
}

// --- Release ----------------------------------------------------------------

grpc::Status MigManagerService::Release(grpc::ServerContext* ctx, const v1::ReleaseRequest* req,
                                        v1::ReleaseResponse* resp) {
  return Finish("Release", ctx, req->has_request_id() ? req->request_id() : "",
                DoRelease(*req, resp), req->has_mig_uuid() ? req->mig_uuid() : "",
                /*audit=*/true);
}

Status MigManagerService::DoRelease(const v1::ReleaseRequest& req, v1::ReleaseResponse* resp) {
  if (req.has_mig_uuid()) {
    for (const engine::GpuView& g : manager_.Gpus()) {
      if (g.info.uuid.value() != req.mig_uuid()) continue;
      return InvalidArgumentError("mig_uuid: '" + req.mig_uuid() + "' is the UUID of GPU " +
                                  std::to_string(g.info.index.value()) + " (" +
                                  g.info.uuid.value() +
                                  "), the parent of MIG instances, not one of them: release an "
                                  "instance by its MIG-… UUID (migctl list)");
    }
  }
  MIGD_RETURN_IF_ERROR(ValidateRelease(req));
  std::set<std::string> uuids;
  if (req.has_request_id()) {
    // Idle instances forget their request id: note the members first.
    for (const engine::InstanceView& v : manager_.List().instances) {
      if (v.request_id == req.request_id()) uuids.insert(v.mig_uuid.value());
    }
    MIGD_RETURN_IF_ERROR(manager_.Release(req.request_id()));
  } else {
    uuids.insert(req.mig_uuid());
    MIGD_RETURN_IF_ERROR(manager_.ReleaseInstance(MigUuid(req.mig_uuid())));
  }
  // An instance reused by another allocation in the meantime is not Idle
  // any more and is not listed.
  for (const engine::InstanceView& v : manager_.List().instances) {
    if (v.state == engine::InstanceState::kIdle && uuids.count(v.mig_uuid.value()) > 0) {
      ToProto(v, CdiName(v.mig_uuid), resp->add_instances());
    }
  }
  return OkStatus();
}

// --- List -------------------------------------------------------------------

grpc::Status MigManagerService::List(grpc::ServerContext* ctx, const v1::ListRequest* req,
                                     v1::ListResponse* resp) {
  return Finish("List", ctx, "", DoList(*req, resp));
}

Status MigManagerService::DoList(const v1::ListRequest& req, v1::ListResponse* resp) {
  MIGD_ASSIGN_OR_RETURN(std::vector<engine::InstanceState> states, StatesFromProto(req));
  const std::vector<engine::GpuView> gpus = manager_.Gpus();
  if (req.has_gpu() && FindGpu(gpus, req.gpu()) == nullptr) {
    return UnknownGpu("gpu", req.gpu(), gpus);
  }
  const std::set<engine::InstanceState> wanted(states.begin(), states.end());
  const auto gpu_ok = [&](uint32_t index) { return !req.has_gpu() || req.gpu() == index; };
  for (const engine::GpuView& g : gpus) {
    if (gpu_ok(g.info.index.value())) ToProto(g, resp->add_gpus());
  }
  const engine::ManagerSnapshot snap = manager_.List();
  for (const engine::InstanceView& v : snap.instances) {
    if (!gpu_ok(v.gpu.value())) continue;
    if (!wanted.empty() && wanted.count(v.state) == 0) continue;
    ToProto(v, CdiName(v.mig_uuid), resp->add_instances());
  }
  for (const engine::ForeignInstance& f : snap.foreign) {
    if (gpu_ok(f.gpu.value())) ToProto(f, resp->add_foreign());
  }
  return OkStatus();
}

// --- Plan -------------------------------------------------------------------

grpc::Status MigManagerService::Plan(grpc::ServerContext* ctx, const v1::PlanRequest* req,
                                     v1::PlanResponse* resp) {
  return Finish("Plan", ctx, "", DoPlan(*req, resp));
}

Status MigManagerService::DoPlan(const v1::PlanRequest& req, v1::PlanResponse* resp) {
  MIGD_ASSIGN_OR_RETURN(std::vector<engine::InstanceSpec> specs,
                        SpecsFromProto(req.instances(), "instances"));
  MIGD_RETURN_IF_ERROR(CheckGpus(specs));
  StatusOr<planner::Plan> plan = manager_.Plan(specs);
  if (!plan.ok()) return RenameRequestField(plan.status());
  ToProto(*plan, resp);
  return OkStatus();
}

// --- Reclaim ----------------------------------------------------------------

grpc::Status MigManagerService::Reclaim(grpc::ServerContext* ctx, const v1::ReclaimRequest* req,
                                        v1::ReclaimResponse* resp) {
  return Finish("Reclaim", ctx, "", DoReclaim(*req, resp), "", /*audit=*/true);
}

Status MigManagerService::DoReclaim(const v1::ReclaimRequest& req, v1::ReclaimResponse* resp) {
  MIGD_ASSIGN_OR_RETURN(engine::ReclaimFilter filter, FromProto(req));
  if (filter.gpu) {
    const std::vector<engine::GpuView> gpus = manager_.Gpus();
    if (FindGpu(gpus, filter.gpu->value()) == nullptr) {
      return UnknownGpu("gpu", filter.gpu->value(), gpus);
    }
  }
  MIGD_ASSIGN_OR_RETURN(engine::ReclaimResult result, manager_.Reclaim(filter));
  for (const engine::InstanceView& v : result.destroyed) {
    ToProto(v, "", resp->add_destroyed());
    // Gone: its state in the response says so.
    resp->mutable_destroyed(resp->destroyed_size() - 1)->set_state(v1::INSTANCE_STATE_DESTROYED);
  }
  for (const engine::InstanceView& v : result.failed) {
    ToProto(v, CdiName(v.mig_uuid), resp->add_failed());
    // The engine's view predates the failed destroy (it may still say
    // Reclaiming); the instance is in Error now (Manager::Reclaim contract).
    resp->mutable_failed(resp->failed_size() - 1)->set_state(v1::INSTANCE_STATE_ERROR);
  }
  return OkStatus();
}

// --- ClearHealth --------------------------------------------------------------

grpc::Status MigManagerService::ClearHealth(grpc::ServerContext* ctx,
                                            const v1::ClearHealthRequest* req,
                                            v1::ClearHealthResponse* resp) {
  return Finish("ClearHealth", ctx, "", DoClearHealth(*req, resp), "", /*audit=*/true);
}

Status MigManagerService::DoClearHealth(const v1::ClearHealthRequest& req,
                                        v1::ClearHealthResponse* resp) {
  const std::vector<engine::GpuView> gpus = manager_.Gpus();
  if (FindGpu(gpus, req.gpu()) == nullptr) {
    return NotFoundError("GPU " + std::to_string(req.gpu()) + " is not on this node (GPUs: " +
                         (gpus.empty() ? std::string("none") : GpuList(gpus)) +
                         "; migctl status lists the GPUs)");
  }
  MIGD_ASSIGN_OR_RETURN(engine::HealthClearResult cleared,
                        manager_.ClearGpuHealth(GpuIndex(req.gpu())));
  resp->set_instances_cleared(static_cast<uint32_t>(cleared.instances_cleared));
  resp->set_gpu_was_unhealthy(cleared.gpu_was_unhealthy);
  return OkStatus();
}

// --- GetStatus ----------------------------------------------------------------

grpc::Status MigManagerService::GetStatus(grpc::ServerContext* ctx, const v1::GetStatusRequest*,
                                          v1::GetStatusResponse* resp) {
  return Finish("GetStatus", ctx, "", DoGetStatus(resp));
}

Status MigManagerService::DoGetStatus(v1::GetStatusResponse* resp) {
  resp->set_version(info_.version);
  resp->set_driver_version(info_.driver_version);
  resp->set_nvml_library(info_.nvml_library);
  resp->set_simulated(info_.simulated);
  resp->set_started_unix_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(info_.started.time_since_epoch())
          .count());
  resp->set_boot_id(info_.boot_id);
  resp->set_cdi_common_edits(info_.cdi_common_edits);
  for (const std::string& w : info_.warnings) resp->add_warnings(w);
  const engine::ManagerSnapshot snap = manager_.List();
  for (const engine::GpuView& g : manager_.Gpus()) {
    v1::GpuStatus* gs = resp->add_gpus();
    ToProto(g, gs->mutable_gpu());
    const engine::GpuCapacity cap = engine::ComputeCapacity(g, snap);
    gs->set_free_slices(cap.free_slices);
    gs->set_idle_slices(cap.idle_slices);
    gs->set_active_slices(cap.active_slices);
    gs->set_foreign_slices(cap.foreign_slices);
    gs->set_fragmentation(cap.fragmentation);
  }
  const engine::ManagerCounters c = manager_.counters();
  v1::Counters* pc = resp->mutable_counters();
  pc->set_allocations(c.allocations);
  pc->set_allocation_failures(c.allocation_failures);
  pc->set_creates(c.creates);
  pc->set_reuses(c.reuses);
  pc->set_destroys(c.destroys);
  pc->set_destroy_failures(c.destroy_failures);
  pc->set_releases(c.releases);
  pc->set_ttl_reclaims(c.ttl_reclaims);
  pc->set_cap_reclaims(c.cap_reclaims);
  pc->set_warm_creates(c.warm_creates);
  pc->set_reconcile_runs(c.reconcile_runs);
  pc->set_drift_events(c.drift_vanished + c.drift_foreign_appeared + c.drift_foreign_gone);
  uint32_t active = 0, idle = 0, error = 0;
  for (const engine::InstanceView& v : snap.instances) {
    active += v.state == engine::InstanceState::kActive;
    idle += v.state == engine::InstanceState::kIdle;
    error += v.state == engine::InstanceState::kError;
  }
  resp->set_instances_active(active);
  resp->set_instances_idle(idle);
  resp->set_instances_error(error);
  resp->set_instances_foreign(static_cast<uint32_t>(snap.foreign.size()));
  return OkStatus();
}

// --- Watch ------------------------------------------------------------------

grpc::Status MigManagerService::Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                                      grpc::ServerWriter<v1::InstanceEvent>* writer) {
  return Finish("Watch", ctx, "", DoWatch(ctx, *req, writer));
}

Status MigManagerService::DoWatch(grpc::ServerContext* ctx, const v1::WatchRequest& req,
                                  grpc::ServerWriter<v1::InstanceEvent>* writer) {
  // Subscribe before the snapshot so that no change falls between the two.
  MIGD_ASSIGN_OR_RETURN(std::unique_ptr<EventHub::Subscription> sub, hub_.Subscribe());
  const Status gone = CancelledError("the client went away");
  if (req.initial_snapshot()) {
    const auto now = Clock::Real().Now();
    for (const engine::InstanceView& v : manager_.List().instances) {
      engine::InstanceEvent ev;
      ev.time = now;
      ev.to = v.state;
      ev.instance = v;
      v1::InstanceEvent out;
      ToProto(ev, CdiName(v.mig_uuid), &out);
      out.set_sequence(0);
      out.set_reason("snapshot");
      if (!writer->Write(out)) return gone;
    }
  }
  engine::InstanceEvent ev;
  while (true) {
    if (ctx->IsCancelled()) return gone;
    switch (sub->Next(&ev, options_.watch_poll)) {
      case EventHub::Wait::kEvent: {
        v1::InstanceEvent out;
        ToProto(ev, CdiName(ev.instance.mig_uuid), &out);
        if (options_.before_watch_write) options_.before_watch_write(out);
        if (!writer->Write(out)) return gone;
        break;
      }
      case EventHub::Wait::kTimeout:
        break;
      case EventHub::Wait::kLost:
        return EventHub::LostStatus();
      case EventHub::Wait::kClosed:
        return UnavailableError("migd is shutting down; reconnect and resync with List");
    }
  }
}

}  // namespace migd::api
