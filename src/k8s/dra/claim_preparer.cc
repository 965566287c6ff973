#include "k8s/dra/claim_preparer.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "base/json_reader.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "k8s/dra/claim_ids.h"
#include "k8s/dra/device_table.h"

namespace migd::k8s::dra {

// One allocation result of our driver, resolved to an instance spec.
struct ClaimPreparer::Result {
  std::string request;  // base request name
  std::string device;
  engine::InstanceSpec spec;
};

namespace {

std::string ClaimName(const ClaimRef& c) { return c.ns + "/" + c.name; }

// "gpu/small" -> "gpu" (resourceclaim.BaseRequestRef).
std::string BaseRequest(const std::string& request) {
  const size_t slash = request.find('/');
  return slash == std::string::npos ? request : request.substr(0, slash);
}

}  // namespace

ClaimPreparer::ClaimPreparer(ResourceApi* api, engine::Manager* manager, engine::CdiObserver* cdi,
                             ClaimPreparerOptions options)
    : api_(api), manager_(manager), cdi_(cdi), options_(std::move(options)) {}

StatusOr<std::vector<ClaimPreparer::Result>> ClaimPreparer::ReadResults(const ClaimRef& claim) {
  const std::string what = "ResourceClaim " + ClaimName(claim);
  StatusOr<nlohmann::json> obj = api_->GetClaim(claim.ns, claim.name);
  if (!obj.ok()) {
    return Status(obj.status().code(), what + ": reading it from the API server failed: " +
                                           std::string(obj.status().message()));
  }
  JsonReader r(*obj, what, StatusCode::kDataLoss);
  MIGD_ASSIGN_OR_RETURN(JsonReader meta, r.Object("metadata"));
  MIGD_ASSIGN_OR_RETURN(std::string uid, meta.String("uid"));
  if (uid != claim.uid) {
    return FailedPreconditionError(what + " has uid " + uid + ", kubelet asked for " + claim.uid +
                                   ": the claim was deleted and recreated; kubelet retries with "
                                   "the new one");
  }
  MIGD_ASSIGN_OR_RETURN(std::optional<JsonReader> status, r.OptionalObject("status"));
  std::optional<JsonReader> alloc;
  if (status) {
    MIGD_ASSIGN_OR_RETURN(alloc, status->OptionalObject("allocation"));
  }
  if (!alloc) {
    return FailedPreconditionError(what +
                                   " is not allocated (no status.allocation); the "
                                   "scheduler allocates it before kubelet prepares it");
  }
  MIGD_ASSIGN_OR_RETURN(std::optional<JsonReader> devices, alloc->OptionalObject("devices"));
  std::vector<JsonReader> results;
  if (devices) {
    MIGD_ASSIGN_OR_RETURN(results, devices->OptionalArray("results"));
  }

  std::vector<DeviceTable> tables;
  for (const engine::GpuView& g : manager_->Gpus()) {
    if (g.model != nullptr) tables.push_back(BuildDeviceTable(g.info.index, *g.model));
  }
  std::vector<Result> out;
  for (const JsonReader& res : results) {
    MIGD_ASSIGN_OR_RETURN(std::string driver, res.String("driver"));
    if (driver != options_.driver) continue;
    MIGD_ASSIGN_OR_RETURN(std::string request, res.String("request"));
    MIGD_ASSIGN_OR_RETURN(std::string pool, res.String("pool"));
    MIGD_ASSIGN_OR_RETURN(std::string device, res.String("device"));
    MIGD_ASSIGN_OR_RETURN(bool admin, res.OptionalBool("adminAccess", false));
    if (pool != options_.pool) {
      return InvalidArgumentError(what + ": device " + device + " is in pool " + pool +
                                  ", which is not this node's pool " + options_.pool +
                                  "; the claim was allocated for another node");
    }
    if (admin) {
      return UnimplementedError(what + ": device " + device +
                                " was allocated with adminAccess, which migd does not support "
                                "(a MIG instance is never shared); request it without "
                                "adminAccess");
    }
    const TableDevice* found = nullptr;
    GpuIndex gpu;
    for (const DeviceTable& t : tables) {
      if ((found = t.Find(device)) != nullptr) {
        gpu = t.gpu;
        break;
      }
    }
    if (found == nullptr) {
      return NotFoundError(what + ": no device " + device + " in pool " + options_.pool +
                           " (no such GPU, profile or placement on this node); the claim "
                           "names a device migd never published here");
    }
    out.push_back({BaseRequest(request), device, {found->profile->name, gpu, found->placement}});
  }
  if (out.empty()) {
    return FailedPreconditionError(what + " has no device allocated by driver " + options_.driver);
  }
  return out;
}

StatusOr<std::vector<PreparedDevice>> ClaimPreparer::Prepare(const ClaimRef& claim) {
  StatusOr<std::vector<PreparedDevice>> out = PrepareImpl(claim);
  if (!out.ok()) {
    spdlog::warn("preparing ResourceClaim failed{}", Fields()
                                                         .Add("claim", ClaimName(claim))
                                                         .Add("uid", claim.uid)
                                                         .Add("error", out.status().message()));
  }
  return out;
}

StatusOr<std::vector<PreparedDevice>> ClaimPreparer::PrepareImpl(const ClaimRef& claim) {
  MIGD_ASSIGN_OR_RETURN(std::vector<Result> results, ReadResults(claim));
  engine::AllocateRequest req;
  req.request_id = ClaimRequestId(claim.uid);
  req.owner = ClaimOwner(claim.ns, claim.name, claim.uid);
  for (const Result& r : results) req.instances.push_back(r.spec);
  StatusOr<engine::Allocation> a = manager_->Allocate(req);
  if (!a.ok()) {
    std::string devices;
    for (const Result& r : results) devices += (devices.empty() ? "" : ", ") + r.device;
    std::string hint;
    if (a.status().code() == StatusCode::kResourceExhausted) {
      hint =
          "; the placement is held by an instance the scheduler did not allocate (migd's own "
          "API, another NVML client): free it, or delete the pod so that the claim is "
          "allocated again from the devices migd publishes now";
    }
    return Status(a.status().code(), "ResourceClaim " + ClaimName(claim) + ": preparing " +
                                         devices + " failed: " + std::string(a.status().message()) +
                                         hint);
  }
  std::vector<PreparedDevice> out;
  for (size_t i = 0; i < results.size(); ++i) {
    const engine::InstanceView& v = a->instances.at(i);
    PreparedDevice d{results[i].request, options_.pool, results[i].device, {}};
    std::optional<cdi::BuiltSpec> spec = cdi_ == nullptr ? std::nullopt : cdi_->SpecOf(v.mig_uuid);
    if (!spec) {
      return InternalError("ResourceClaim " + ClaimName(claim) + ": no CDI spec is published for " +
                           v.mig_uuid.value() + " (is cdi.enabled off? DRA needs CDI)");
    }
    d.cdi_ids.push_back(spec->qualified_name);
    out.push_back(std::move(d));
  }
  spdlog::info("ResourceClaim prepared{}", Fields()
                                               .Add("claim", ClaimName(claim))
                                               .Add("uid", claim.uid)
                                               .Add("devices", out.size())
                                               .Add("replayed", a->replayed ? "true" : "false"));
  return out;
}

Status ClaimPreparer::Unprepare(const ClaimRef& claim) {
  Status s = manager_->Release(ClaimRequestId(claim.uid));
  if (s.code() == StatusCode::kNotFound) return OkStatus();
  if (!s.ok()) {
    return Status(s.code(), "ResourceClaim " + ClaimName(claim) +
                                ": unpreparing failed: " + std::string(s.message()));
  }
  spdlog::info("ResourceClaim unprepared{}",
               Fields().Add("claim", ClaimName(claim)).Add("uid", claim.uid));
  return OkStatus();
}

}  // namespace migd::k8s::dra
