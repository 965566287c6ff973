#include "k8s/dra/slice_publisher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "base/logging.h"
#include "base/status_macros.h"

namespace migd::k8s::dra {
namespace {

using Json = nlohmann::json;

std::string NameOf(const Json& obj) {
  const Json& m = obj.value("metadata", Json::object());
  return m.is_object() ? m.value("name", "") : "";
}

int64_t GenerationOf(const Json& obj) {
  const Json& spec = obj.value("spec", Json::object());
  if (!spec.is_object() || !spec.contains("pool") || !spec["pool"].is_object()) return 0;
  const Json& g = spec["pool"].value("generation", Json(0));
  return g.is_number_integer() ? g.get<int64_t>() : 0;
}

std::string PoolOf(const Json& obj) {
  const Json& spec = obj.value("spec", Json::object());
  if (!spec.is_object() || !spec.contains("pool") || !spec["pool"].is_object()) return "";
  return spec["pool"].value("name", "");
}

// True if the server kept what we sent of the partitionable-device fields.
bool KeptCounters(const Json& sent, const Json& got) {
  const Json& s = sent["spec"];
  const Json& g = got.value("spec", Json::object());
  if (s.contains("sharedCounters") && !s["sharedCounters"].empty() &&
      (!g.is_object() || !g.contains("sharedCounters") || g["sharedCounters"].empty())) {
    return false;
  }
  if (!s.contains("devices")) return true;
  const Json& gd = g.is_object() ? g.value("devices", Json::array()) : Json::array();
  if (!gd.is_array() || gd.size() != s["devices"].size()) return false;
  for (size_t i = 0; i < gd.size(); ++i) {
    if (s["devices"][i].contains("consumesCounters") &&
        (!gd[i].is_object() || !gd[i].contains("consumesCounters"))) {
      return false;
    }
  }
  return true;
}

}  // namespace

struct SlicePublisher::Existing {
  std::map<std::string, Json> ours;  // by name, of our pool
  std::vector<std::string> strays;   // our driver and node, another pool
  int64_t max_generation = 0;
};

SlicePublisher::SlicePublisher(ResourceApi* api, SnapshotFn snapshot, SlicePublisherOptions options)
    : api_(api), snapshot_(std::move(snapshot)), options_(std::move(options)) {
  MutexLock l(&pass_mu_);
  layout_ = options_.layout;
}

SlicePublisher::~SlicePublisher() { Stop(); }

void SlicePublisher::Kick() {
  MutexLock l(&mu_);
  kicked_ = true;
  cv_.SignalAll();
}

void SlicePublisher::OnInstanceEvent(const engine::InstanceEvent&) { Kick(); }

PublisherStats SlicePublisher::stats() const {
  MutexLock l(&mu_);
  return stats_;
}

Status SlicePublisher::SyncOnce() {
  MutexLock l(&pass_mu_);
  Status s = Pass();
  MutexLock sl(&mu_);
  ++stats_.passes;
  if (!s.ok()) ++stats_.failed_passes;
  stats_.last_error = s;
  stats_.layout = layout_;
  return s;
}

StatusOr<SliceOptions> SlicePublisher::Options() {
  if (!layout_) {
    MIGD_ASSIGN_OR_RETURN(ServerVersion v, api_->Version());
    layout_ = LayoutForServer(v.major, v.minor);
    spdlog::info("DRA counter-set layout chosen from the API server version{}",
                 Fields()
                     .Add("version", v.git_version.empty()
                                         ? std::to_string(v.major) + "." + std::to_string(v.minor)
                                         : v.git_version)
                     .Add("layout", CounterLayoutName(*layout_)));
  }
  if (!node_uid_) {
    StatusOr<std::string> uid = api_->NodeUid(options_.node_name);
    if (uid.ok()) {
      node_uid_ = *uid;
    } else if (uid.status().code() == StatusCode::kNotFound) {
      spdlog::warn("node not found; ResourceSlices are published without an owner{}",
                   Fields().Add("node", options_.node_name));
      node_uid_ = "";
    } else {
      return uid.status();
    }
  }
  SliceOptions o;
  o.driver = options_.driver;
  o.pool = options_.pool.empty() ? options_.node_name : options_.pool;
  o.node_name = options_.node_name;
  o.layout = *layout_;
  o.node_uid = *node_uid_;
  // 1.34 allows 128 devices per slice; the combined layout has one GPU's.
  if (o.layout == CounterLayout::kCombined) o.max_devices = 128;
  return o;
}

Status SlicePublisher::Pass() {
  MIGD_ASSIGN_OR_RETURN(SliceOptions o, Options());
  const Pool pool = BuildPool(snapshot_(), planner_);
  const std::vector<DesiredSlice> desired = RenderSlices(pool, o);
  MIGD_ASSIGN_OR_RETURN(Json items, api_->ListSlices(o.driver, o.node_name));
  Existing existing;
  std::set<int64_t> generations;
  for (const Json& item : items) {
    const std::string name = NameOf(item);
    if (name.empty()) continue;
    if (PoolOf(item) != o.pool) {
      existing.strays.push_back(name);
      continue;
    }
    existing.ours[name] = item;
    generations.insert(GenerationOf(item));
    existing.max_generation = std::max(existing.max_generation, GenerationOf(item));
  }
  bool same =
      existing.strays.empty() && existing.ours.size() == desired.size() && generations.size() <= 1;
  for (size_t i = 0; same && i < desired.size(); ++i) {
    auto it = existing.ours.find(desired[i].name);
    same = it != existing.ours.end() && it->second.contains("spec") &&
           ComparableSpec(it->second["spec"]) == ComparableSpec(desired[i].spec);
  }
  {
    MutexLock l(&mu_);
    stats_.devices = pool.devices.size();
  }
  if (same) return OkStatus();
  return Write(desired, existing, o);
}

Status SlicePublisher::Write(const std::vector<DesiredSlice>& desired, const Existing& existing,
                             const SliceOptions& o) {
  const int64_t generation = std::max(generation_, existing.max_generation) + 1;
  std::set<std::string> wanted;
  for (const DesiredSlice& d : desired) wanted.insert(d.name);
  uint64_t creates = 0, updates = 0, deletes = 0;
  // Obsolete slices first, then updates, then creations (the order of
  // k8s.io/dynamic-resource-allocation resourceslice's controller).
  std::vector<std::string> doomed = existing.strays;
  for (const auto& [name, obj] : existing.ours) {
    if (wanted.count(name) == 0) doomed.push_back(name);
  }
  for (const std::string& name : doomed) {
    MIGD_RETURN_IF_ERROR(api_->DeleteSlice(name));
    ++deletes;
  }
  bool dropped = false;
  for (const DesiredSlice& d : desired) {
    Json obj = SliceObject(d, generation, o);
    auto it = existing.ours.find(d.name);
    StatusOr<Json> written = [&]() -> StatusOr<Json> {
      if (it == existing.ours.end()) return api_->CreateSlice(obj);
      obj["metadata"]["resourceVersion"] = it->second["metadata"].value("resourceVersion", "");
      return api_->UpdateSlice(obj);
    }();
    if (!written.ok()) return written.status();
    ++(it == existing.ours.end() ? creates : updates);
    if (!KeptCounters(obj, *written)) dropped = true;
  }
  generation_ = generation;
  {
    MutexLock l(&mu_);
    stats_.creates += creates;
    stats_.updates += updates;
    stats_.deletes += deletes;
    ++stats_.generations;
    stats_.generation = generation;
    stats_.slices = desired.size();
  }
  if (dropped) {
    for (const DesiredSlice& d : desired) {
      Status s = api_->DeleteSlice(d.name);
      if (!s.ok())
        spdlog::error("cannot delete slice{}", Fields().Add("slice", d.name).Add("error", s));
    }
    {
      MutexLock l(&mu_);
      stats_.slices = 0;
      stats_.deletes += desired.size();
    }
    return FailedPreconditionError(
        "the API server dropped sharedCounters/consumesCounters from migd's ResourceSlices: the "
        "DRAPartitionableDevices feature gate is off there (alpha, off by default before "
        "Kubernetes 1.36). migd publishes no devices until it is enabled on kube-apiserver and "
        "kube-scheduler; without it overlapping MIG placements could be allocated");
  }
  spdlog::info("ResourceSlices published{}", Fields()
                                                 .Add("pool", o.pool)
                                                 .Add("generation", generation)
                                                 .Add("slices", desired.size())
                                                 .Add("created", creates)
                                                 .Add("updated", updates)
                                                 .Add("deleted", deletes));
  return OkStatus();
}

void SlicePublisher::Start() {
  MutexLock l(&mu_);
  if (thread_.joinable() || stop_) return;
  kicked_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void SlicePublisher::Stop() {
  {
    MutexLock l(&mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void SlicePublisher::Loop() {
  std::chrono::milliseconds backoff{0};
  while (true) {
    {
      MutexLock l(&mu_);
      const auto wait = backoff.count() > 0 ? backoff : options_.resync_period;
      cv_.WaitFor(&mu_, wait,
                  [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || kicked_; });
      if (stop_) return;
      kicked_ = false;
    }
    Status s = SyncOnce();
    if (s.ok()) {
      backoff = std::chrono::milliseconds(0);
      continue;
    }
    spdlog::error("publishing ResourceSlices failed; retrying{}", Fields().Add("error", s));
    backoff = backoff.count() == 0 ? options_.retry_initial
                                   : std::min(backoff * 2, options_.resync_period);
  }
}

}  // namespace migd::k8s::dra
