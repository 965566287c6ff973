#include "k8s/apiserver/hami_backend.h"
#include "k8s/hami_request_id.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <utility>

#include "base/logging.h"
#include "base/status_macros.h"
#include "cdi/publisher.h"

namespace migd::k8s {
namespace {

std::string MetaString(const nlohmann::json& obj, const char* key) {
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  const nlohmann::json& m = obj["metadata"];
  return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : "";
}

// Container names in HAMi's order: init containers first.
std::vector<std::string> ContainerNames(const nlohmann::json& pod) {
  std::vector<std::string> out;
  if (!pod.contains("spec")) return out;
  for (const char* list : {"initContainers", "containers"}) {
    if (!pod["spec"].contains(list) || !pod["spec"][list].is_array()) continue;
    for (const nlohmann::json& c : pod["spec"][list]) out.push_back(c.value("name", ""));
  }
  return out;
}

// HAMi's GetPendingPod condition.
bool IsBeingBound(const nlohmann::json& pod, const std::string& node) {
  if (!hami::PodIsActive(pod)) return false;
  const std::string phase =
      pod.contains("status") && pod["status"].is_object() ? pod["status"].value("phase", "") : "";
  if (!phase.empty() && phase != "Pending") return false;
  if (!hami::Annotation(pod, hami::kBindTime)) return false;
  const auto bind_phase = hami::Annotation(pod, hami::kBindPhase);
  if (!bind_phase ||
      (*bind_phase != hami::kBindPhaseAllocating && *bind_phase != hami::kBindPhaseSuccess)) {
    return false;
  }
  const auto vnode = hami::Annotation(pod, hami::kVgpuNode);
  if (!vnode || *vnode != node) return false;
  // A pod whose containers are all allocated (bind-phase success, not yet
  // Running) is not the one kubelet is admitting now. An undecodable list
  // stays a candidate so that the error reaches the pod's events.
  StatusOr<hami::PodDevices> devs =
      hami::DecodePodDevices(hami::Annotation(pod, hami::kDevicesToAllocate).value_or(""));
  if (!devs.ok()) return true;
  return std::any_of(devs->begin(), devs->end(), [](const auto& c) { return !c.empty(); });
}

int64_t BindTime(const nlohmann::json& pod) {
  const auto t = hami::Annotation(pod, hami::kBindTime);
  if (!t) return 0;
  try {
    return std::stoll(*t);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

HamiBackend::HamiBackend(KubeClient* client, engine::Manager* manager, HamiBackendOptions options)
    : client_(client), manager_(manager), options_(std::move(options)) {}

std::string HamiBackend::RequestId(const std::string& pod_uid, int container_index) {
  return HamiRequestId(pod_uid, container_index);
}

std::vector<AdvertisedDevice> HamiBackend::Devices() {
  std::vector<AdvertisedDevice> out;
  for (const engine::GpuView& g : manager_->Gpus()) {
    if (g.model == nullptr) continue;  // MIG disabled: nothing HAMi could reserve
    for (int i = 0; i < options_.device_split_count; ++i) {
      AdvertisedDevice d;
      d.id = g.info.uuid.value() + "-" + std::to_string(i);
      out.push_back(std::move(d));
    }
  }
  return out;
}

StatusOr<ContainerAllocation> HamiBackend::AllocateContainer(
    const std::vector<std::string>& device_ids) {
  std::lock_guard<std::mutex> lock(mu_);
  StatusOr<nlohmann::json> list = client_->ListPods(options_.node_name);
  if (!list.ok()) {
    return UnavailableError("HAMi allocate: cannot list the pods of node " + options_.node_name +
                            ": " + std::string(list.status().message()));
  }
  const nlohmann::json* pod = nullptr;
  if (list->contains("items") && (*list)["items"].is_array()) {
    for (const nlohmann::json& p : (*list)["items"]) {
      if (!IsBeingBound(p, options_.node_name)) continue;
      if (pod == nullptr || BindTime(p) < BindTime(*pod)) pod = &p;
    }
  }
  if (pod == nullptr) {
    return FailedPreconditionError(
        "HAMi allocate for devices [" + (device_ids.empty() ? "" : device_ids[0]) +
        (device_ids.size() > 1 ? ",..." : "") + "]: no pod on node " + options_.node_name +
        " is being bound (hami.io/bind-phase allocating, hami.io/vgpu-node set); is HAMi's "
        "scheduler the pod's scheduler?");
  }
  // Release before allocating, so that a pod that ended frees its
  // placements for the reservation (HAMi reconciles first too).
  ReleaseEndedLocked(*list);
  const std::string ns = MetaString(*pod, "namespace");
  const std::string name = MetaString(*pod, "name");
  StatusOr<ContainerAllocation> result = AllocateForPod(*pod);
  if (!result.ok()) {
    spdlog::warn("HAMi allocation failed{}",
                 Fields().Add("pod", ns + "/" + name).Add("error", result.status().ToString()));
    Status s = FinishBind(ns, name, hami::kBindPhaseFailed);
    if (!s.ok()) spdlog::warn("cannot mark pod failed{}", Fields().Add("error", s.ToString()));
    return result.status().WithContext("pod " + ns + "/" + name);
  }
  return result;
}

StatusOr<ContainerAllocation> HamiBackend::AllocateForPod(const nlohmann::json& pod) {
  const std::string ns = MetaString(pod, "namespace");
  const std::string name = MetaString(pod, "name");
  const std::string uid = MetaString(pod, "uid");
  MIGD_ASSIGN_OR_RETURN(
      hami::PodDevices to_allocate,
      hami::DecodePodDevices(hami::Annotation(pod, hami::kDevicesToAllocate).value_or("")));
  int index = -1;
  for (size_t i = 0; i < to_allocate.size(); ++i) {
    if (!to_allocate[i].empty()) {
      index = static_cast<int>(i);
      break;
    }
  }
  if (index < 0) {
    return FailedPreconditionError(std::string(hami::kDevicesToAllocate) +
                                   " has no container left to allocate");
  }
  const std::vector<std::string> names = ContainerNames(pod);
  if (static_cast<size_t>(index) >= names.size()) {
    return InvalidArgumentError("container index " + std::to_string(index) +
                                " out of range (the pod has " + std::to_string(names.size()) +
                                " containers, init containers included)");
  }
  const std::vector<hami::ContainerDevice>& devs = to_allocate[index];
  MIGD_ASSIGN_OR_RETURN(
      std::vector<hami::MigAllocation> all,
      hami::DecodeMigAllocations(hami::Annotation(pod, hami::kMigAllocations).value_or("")));
  std::vector<hami::MigAllocation> mine;
  for (const auto& a : all) {
    if (a.container_index == index) mine.push_back(a);
  }
  std::sort(mine.begin(), mine.end(),
            [](const auto& a, const auto& b) { return a.device_index < b.device_index; });
  if (mine.size() != devs.size()) {
    return FailedPreconditionError(
        "container " + names[index] + " (index " + std::to_string(index) + ") has " +
        std::to_string(devs.size()) + " devices to allocate but " + std::to_string(mine.size()) +
        " MIG reservations in " + hami::kMigAllocations + "; the scheduler must reschedule it");
  }
  const std::vector<engine::GpuView> gpus = manager_->Gpus();
  engine::AllocateRequest req;
  req.request_id = RequestId(uid, index);
  req.owner = store::Owner::Pod(ns, name, PodUid(uid), names[index]);
  for (size_t i = 0; i < mine.size(); ++i) {
    if (mine[i].gpu_uuid != devs[i].uuid) {
      return FailedPreconditionError(
          "reservation deviceIndex " + std::to_string(mine[i].device_index) + " is on " +
          mine[i].gpu_uuid + " but the device to allocate is " + devs[i].uuid);
    }
    const engine::GpuView* gpu = nullptr;
    for (const auto& g : gpus) {
      if (g.info.uuid.value() == mine[i].gpu_uuid) gpu = &g;
    }
    if (gpu == nullptr) {
      return NotFoundError("reserved GPU " + mine[i].gpu_uuid + " is not on node " +
                           options_.node_name);
    }
    req.instances.push_back(engine::InstanceSpec{
        .profile = mine[i].profile, .gpu = gpu->info.index, .placement = mine[i].placement});
  }
  MIGD_ASSIGN_OR_RETURN(engine::Allocation alloc, manager_->Allocate(req));
  Status s = OkStatus();
  for (size_t i = 0; i < alloc.instances.size() && s.ok(); ++i) {
    const engine::InstanceView& v = alloc.instances[i];
    if (v.gpu_uuid.value() != mine[i].gpu_uuid || !(v.placement.start == mine[i].placement.start &&
                                                    v.placement.size == mine[i].placement.size)) {
      s = InternalError("engine realised " + v.mig_uuid.value() + " at " + v.placement.ToString() +
                        " on " + v.gpu_uuid.value() + ", not the reserved " +
                        mine[i].placement.ToString() + " on " + mine[i].gpu_uuid);
    }
  }
  StatusOr<ContainerAllocation> resp = InternalError("unset");
  if (s.ok()) s = WriteBack(pod, index, alloc.instances);
  if (s.ok()) {
    resp = BuildResponse(alloc.instances);
    s = resp.status();
  }
  if (!s.ok()) {
    // Nothing of this allocation reaches a container: back to Idle (kept for
    // reuse, unlike HAMi's rollback which destroys).
    Status r = manager_->Release(req.request_id);
    if (!r.ok()) spdlog::warn("rollback release failed{}", Fields().Add("error", r.ToString()));
    return s;
  }
  spdlog::info("HAMi allocation realised{}", Fields()
                                                 .Add("pod", ns + "/" + name)
                                                 .Add("container", names[index])
                                                 .Add("request", req.request_id)
                                                 .Add("instances", alloc.instances.size()));
  return resp;
}

Status HamiBackend::WriteBack(const nlohmann::json& first_pod, int container_index,
                              const std::vector<engine::InstanceView>& instances) {
  nlohmann::json pod = first_pod;
  const std::string ns = MetaString(pod, "namespace");
  const std::string name = MetaString(pod, "name");
  const std::string uid = MetaString(pod, "uid");
  Status last = OkStatus();
  for (int attempt = 0; attempt < std::max(1, options_.patch_attempts); ++attempt) {
    if (attempt > 0) {
      MIGD_ASSIGN_OR_RETURN(pod, client_->GetPod(ns, name));
      if (MetaString(pod, "uid") != uid) {
        return AbortedError("pod " + ns + "/" + name + " was replaced while allocating");
      }
    }
    MIGD_ASSIGN_OR_RETURN(
        std::vector<hami::MigAllocation> all,
        hami::DecodeMigAllocations(hami::Annotation(pod, hami::kMigAllocations).value_or("")));
    std::vector<hami::MigAllocation*> mine;
    for (auto& a : all) {
      if (a.container_index == container_index) mine.push_back(&a);
    }
    std::sort(mine.begin(), mine.end(),
              [](const auto* a, const auto* b) { return a->device_index < b->device_index; });
    if (mine.size() != instances.size()) {
      return AbortedError("the reservation of container index " + std::to_string(container_index) +
                          " changed while allocating");
    }
    for (size_t i = 0; i < mine.size(); ++i) {
      mine[i]->mig_uuid = instances[i].mig_uuid.value();
      mine[i]->gpu_instance_id = instances[i].gi_id.value();
      mine[i]->compute_instance_id = instances[i].ci_id.value();
    }
    MIGD_ASSIGN_OR_RETURN(
        hami::PodDevices to_allocate,
        hami::DecodePodDevices(hami::Annotation(pod, hami::kDevicesToAllocate).value_or("")));
    if (static_cast<size_t>(container_index) < to_allocate.size()) {
      to_allocate[container_index].clear();
    }
    const bool all_done = std::all_of(to_allocate.begin(), to_allocate.end(),
                                      [](const auto& c) { return c.empty(); });
    nlohmann::json patch;
    patch["metadata"]["resourceVersion"] = MetaString(pod, "resourceVersion");
    patch["metadata"]["annotations"][hami::kMigAllocations] = hami::EncodeMigAllocations(all);
    patch["metadata"]["annotations"][hami::kDevicesToAllocate] =
        hami::EncodePodDevices(to_allocate);
    StatusOr<nlohmann::json> r = client_->PatchPod(ns, name, patch);
    if (r.ok()) {
      if (all_done) {
        // The instances are realised and recorded on the pod: a failure to
        // set the phase or free the lock must not undo that (HAMi logs it
        // too; the scheduler's lock expires).
        Status fin = FinishBind(ns, name, hami::kBindPhaseSuccess);
        if (!fin.ok()) {
          spdlog::warn("cannot mark pod bound{}",
                       Fields().Add("pod", ns + "/" + name).Add("error", fin.ToString()));
        }
      }
      return OkStatus();
    }
    last = r.status();
    if (last.code() != StatusCode::kAborted) return last;
    spdlog::info("pod annotation patch conflict, re-reading{}",
                 Fields().Add("pod", ns + "/" + name).Add("attempt", attempt + 1));
  }
  return last.WithContext("gave up after " + std::to_string(options_.patch_attempts) +
                          " conflicting patches");
}

Status HamiBackend::FinishBind(const std::string& ns, const std::string& name, const char* phase) {
  nlohmann::json patch;
  patch["metadata"]["annotations"][hami::kBindPhase] = phase;
  StatusOr<nlohmann::json> r = client_->PatchPod(ns, name, patch);
  Status lock = ReleaseNodeLock(ns, name);
  if (!r.ok()) return r.status();
  return lock;
}

Status HamiBackend::ReleaseNodeLock(const std::string& ns, const std::string& name) {
  Status last = OkStatus();
  // The node object is also written by others (HAMi's scheduler, our own
  // registration): retry a conflicting release on a fresh read.
  for (int attempt = 0; attempt < std::max(1, options_.patch_attempts); ++attempt) {
    MIGD_ASSIGN_OR_RETURN(nlohmann::json node, client_->GetNode(options_.node_name));
    const auto value = hami::Annotation(node, hami::kNodeLock);
    if (!value) return OkStatus();
    // HAMi's lock value is "<time>,<namespace>,<pod>" (older: a bare time);
    // a lock another pod holds is not ours to release.
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t i = 0; i <= value->size(); ++i) {
      if (i == value->size() || (*value)[i] == ',') {
        parts.push_back(value->substr(start, i - start));
        start = i + 1;
      }
    }
    if (parts.size() >= 3 && (parts[1] != ns || parts[2] != name)) {
      spdlog::info("node lock held by another pod, kept{}", Fields().Add("lock", *value));
      return OkStatus();
    }
    nlohmann::json patch;
    patch["metadata"]["resourceVersion"] = MetaString(node, "resourceVersion");
    patch["metadata"]["annotations"][hami::kNodeLock] = nullptr;
    last = client_->PatchNode(options_.node_name, patch).status();
    if (last.code() != StatusCode::kAborted) return last;
  }
  return last;
}

StatusOr<ContainerAllocation> HamiBackend::BuildResponse(
    const std::vector<engine::InstanceView>& instances) {
  ContainerAllocation out;
  std::string visible;
  std::vector<cdi::BuiltSpec> specs;
  for (const engine::InstanceView& v : instances) {
    out.mig_uuids.push_back(v.mig_uuid);
    visible += (visible.empty() ? "" : ",") + v.mig_uuid.value();
    if (options_.cdi != nullptr) {
      std::optional<cdi::BuiltSpec> spec = options_.cdi->SpecOf(v.mig_uuid);
      if (!spec) {
        return InternalError("no CDI spec published for " + v.mig_uuid.value());
      }
      specs.push_back(std::move(*spec));
    }
  }
  if (options_.cdi == nullptr) {
    out.envs.emplace_back("NVIDIA_VISIBLE_DEVICES", visible);
    return out;
  }
  cdi::AllocateDevices devs = cdi::MakeAllocateDevices(specs, options_.cdi_enabled);
  out.cdi_devices = std::move(devs.cdi_devices);
  out.envs = std::move(devs.envs);
  out.device_nodes = std::move(devs.device_nodes);
  return out;
}

StatusOr<ReleasePassResult> HamiBackend::ReleaseEndedPods() {
  std::lock_guard<std::mutex> lock(mu_);
  StatusOr<nlohmann::json> list = client_->ListPods(options_.node_name);
  if (!list.ok()) {
    return list.status().WithContext("release pass skipped, nothing released");
  }
  return ReleaseEndedLocked(*list);
}

ReleasePassResult HamiBackend::ReleaseEndedLocked(const nlohmann::json& pod_list) {
  ReleasePassResult result;
  std::set<std::string> active_uids;
  if (pod_list.contains("items") && pod_list["items"].is_array()) {
    for (const nlohmann::json& p : pod_list["items"]) {
      if (hami::PodIsActive(p)) active_uids.insert(MetaString(p, "uid"));
    }
  }
  result.active_pods = active_uids.size();
  // By request id (one Release per allocation); instances adopted at
  // startup may carry none (the owner source did not know it): those go one
  // by one.
  std::set<std::string> by_request;
  std::set<std::string> by_uuid;
  for (const engine::InstanceView& v : manager_->List().instances) {
    if (v.state != engine::InstanceState::kActive) continue;
    if (v.owner.kind != store::Owner::Kind::kPod) continue;
    if (active_uids.count(v.owner.pod_uid.value())) continue;
    if (v.request_id.empty()) {
      by_uuid.insert(v.mig_uuid.value());
    } else {
      by_request.insert(v.request_id);
    }
  }
  auto report = [&result](const std::string& what, const Status& s) {
    if (s.ok()) {
      ++result.released;
      spdlog::info("released instances of ended pod{}", Fields().Add("what", what));
    } else {
      spdlog::warn("release of ended pod failed{}",
                   Fields().Add("what", what).Add("error", s.ToString()));
    }
  };
  for (const std::string& id : by_request) report(id, manager_->Release(id));
  for (const std::string& uuid : by_uuid) report(uuid, manager_->ReleaseInstance(MigUuid(uuid)));
  return result;
}

Status HamiBackend::PublishNodeRegistration() {
  nlohmann::json patch;
  patch["metadata"]["annotations"][hami::kNodeRegister] =
      hami::NodeRegisterValue(manager_->Gpus(), options_.profile_allowlist).dump();
  patch["metadata"]["annotations"][hami::kNodeHandshake] = hami::HandshakeValue(std::time(nullptr));
  return client_->PatchNode(options_.node_name, patch).status();
}

}  // namespace migd::k8s
