#include "bench/placement/dra_policy.h"

#include <absl/strings/str_cat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>

#include "k8s/dra/device_table.h"
#include "k8s/dra/pool.h"
#include "k8s/dra/slices.h"
#include "k8s/dra/testing/allocator_model.h"
#include "planner/demand_mix.h"
#include "planner/planner.h"

namespace migd::bench {
namespace {

using Json = nlohmann::json;
namespace kdra = ::migd::k8s::dra;

constexpr char kDriver[] = "mig.migd.io";
constexpr char kNode[] = "bench-node";
constexpr int64_t kTicksPerLifetime = 1000;

// NVIDIA's slug: lower case, '.' removed, other characters outside
// [a-z0-9-.] as '-' (cmd/gpu-kubelet-plugin mig.go toRFC1123Compliant).
std::string NvidiaSlug(std::string_view gi_name) {
  std::string out;
  for (char c : gi_name) {
    if (c == '.') continue;
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    out += keep ? c : '-';
  }
  return out;
}

Json CountersJson(const kdra::Counters& c) {
  Json out = Json::object();
  for (const auto& [name, v] : c) out[name] = Json{{"value", std::to_string(v)}};
  return out;
}

Json SliceJson(const std::string& name, int64_t generation, int64_t count, Json spec_body) {
  Json s;
  s["metadata"]["name"] = name;
  s["spec"] = std::move(spec_body);
  s["spec"]["driver"] = kDriver;
  s["spec"]["nodeName"] = kNode;
  s["spec"]["pool"] = {{"name", kNode}, {"generation", generation}, {"resourceSliceCount", count}};
  return s;
}

}  // namespace

std::string NvidiaDeviceName(int minor, std::string_view gi_name, uint32_t gi_id, uint32_t start) {
  return absl::StrCat("gpu-", minor, "-mig-", NvidiaSlug(gi_name), "-", gi_id, "-", start);
}

StatusOr<DraLatency> ParseDraLatency(std::string_view text) {
  DraLatency l;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item(text.substr(pos, comma - pos));
    pos = comma + 1;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    double v = -1;
    if (eq != std::string::npos) {
      try {
        size_t used = 0;
        v = std::stod(item.substr(eq + 1), &used);
        if (used != item.size() - eq - 1) v = -1;
      } catch (const std::exception&) {
        v = -1;
      }
    }
    if (v < 0) {
      return InvalidArgumentError("--latency: \"" + item +
                                  "\" is not key=milliseconds (create, destroy, reuse)");
    }
    if (key == "create") {
      l.create_ms = v;
    } else if (key == "destroy") {
      l.destroy_ms = v;
    } else if (key == "reuse") {
      l.reuse_ms = v;
    } else {
      return InvalidArgumentError("--latency: unknown key \"" + key +
                                  "\" (create, destroy, reuse)");
    }
  }
  return l;
}

struct DraPolicy::Impl {
  const GpuTable* table = nullptr;
  double time_unit = 1;
  int gpus = 0;
  std::vector<kdra::DeviceTable> tables;  // per GPU
  // Published device name -> (gpu, pair), rebuilt per decision.
  std::map<std::string, std::pair<int, int>> by_name;
  // (gpu, pair) -> published name.
  std::vector<std::vector<std::string>> names;
  planner::Planner planner;
  planner::DemandMix mix{0};
  int64_t last_observed = -1;
  int64_t generation = 0;

  int64_t Tick(double t) const { return std::llround(t / time_unit * kTicksPerLifetime); }
  const mig::GiProfile& Gi(int pair) const { return *table->profile(table->pair(pair).profile).gi; }
  mig::Placement PlacementOf(int pair) const {
    return {table->pair(pair).start, table->pair(pair).size};
  }
  const kdra::TableDevice& Device(int g, int pair) const {
    const kdra::TableDevice* d = tables[g].Find(Gi(pair).id, PlacementOf(pair));
    return *d;  // every pair of the bench table is a device of the model's table
  }

  // NVIDIA: a counter slice, then one slice per GPU, devices sorted by name.
  std::vector<Json> NvidiaSlices() {
    const int64_t count = gpus + 1;
    Json counters = Json::array();
    for (int g = 0; g < gpus; ++g) {
      counters.push_back(
          {{"name", tables[g].counter_set}, {"counters", CountersJson(tables[g].capacity)}});
    }
    std::vector<Json> out;
    out.push_back(SliceJson("nv-000", generation, count, Json{{"sharedCounters", counters}}));
    for (int g = 0; g < gpus; ++g) {
      std::map<std::string, int> sorted;  // name -> pair
      for (int p = 0; p < table->num_pairs(); ++p) {
        const mig::GiProfile& gi = Gi(p);
        sorted[NvidiaDeviceName(g, gi.name, gi.id.value(), table->pair(p).start)] = p;
      }
      Json devices = Json::array();
      for (const auto& [name, p] : sorted) {
        names[g][p] = name;
        by_name[name] = {g, p};
        devices.push_back({{"name", name},
                           {"attributes", {{"profile", {{"string", Gi(p).name}}}}},
                           {"consumesCounters",
                            Json::array({{{"counterSet", tables[g].counter_set},
                                          {"counters", CountersJson(Device(g, p).consumes)}}})}});
      }
      char idx[16];
      std::snprintf(idx, sizeof(idx), "nv-%03d", g + 1);
      out.push_back(SliceJson(idx, generation, count, Json{{"devices", devices}}));
    }
    return out;
  }

  // migd: BuildPool + RenderSlices on the current layout.
  std::vector<Json> MigdSlices(const ClusterState& cs) {
    kdra::NodeSnapshot node;
    for (int g = 0; g < gpus; ++g) {
      kdra::SnapshotGpu sg{GpuIndex(static_cast<uint32_t>(g)),
                           GpuUuid("GPU-bench-" + std::to_string(g)),
                           "",
                           "",
                           &table->model(),
                           {}};
      for (const Instance& inst : cs.gpus[g].instances) {
        sg.instances.push_back({Gi(inst.pair).name, PlacementOf(inst.pair),
                                inst.idle ? kdra::Occupancy::kIdle : kdra::Occupancy::kClaimed,
                                std::to_string(g) + ":" + std::to_string(inst.pair),
                                inst.idle ? Tick(inst.last_used) : 0});
      }
      node.gpus.push_back(std::move(sg));
    }
    node.demand = mix.Weights();
    for (const ProfileClass& pc : table->profiles()) node.profile_allowlist.insert(pc.gi->name);
    const kdra::Pool pool = kdra::BuildPool(node, planner);
    kdra::SliceOptions o;
    o.driver = kDriver;
    o.pool = kNode;
    o.node_name = kNode;
    o.layout = kdra::CounterLayout::kSplit;
    std::vector<Json> out;
    for (const kdra::DesiredSlice& s : kdra::RenderSlices(pool, o)) {
      out.push_back(kdra::SliceObject(s, generation, o));
    }
    for (int g = 0; g < gpus; ++g) {
      for (int p = 0; p < table->num_pairs(); ++p) {
        names[g][p] = kdra::DeviceName(GpuIndex(static_cast<uint32_t>(g)), Gi(p), PlacementOf(p));
        by_name[names[g][p]] = {g, p};
      }
    }
    return out;
  }
};

DraPolicy::DraPolicy(DraPolicyOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {}
DraPolicy::~DraPolicy() = default;

std::string DraPolicy::name() const {
  return options_.order == DraOrder::kNvidia ? "dra-nvidia" : "dra-migd";
}

Status DraPolicy::Reset(const RunContext& ctx) {
  impl_ = std::make_unique<Impl>();
  impl_->table = ctx.table;
  impl_->time_unit = ctx.time_unit;
  impl_->gpus = ctx.gpus;
  impl_->mix = planner::DemandMix(options_.half_life > 0
                                      ? std::llround(options_.half_life * kTicksPerLifetime)
                                      : planner::DemandMix::kNoDecay);
  for (int g = 0; g < ctx.gpus; ++g) {
    impl_->tables.push_back(
        kdra::BuildDeviceTable(GpuIndex(static_cast<uint32_t>(g)), ctx.table->model()));
  }
  impl_->names.assign(ctx.gpus, std::vector<std::string>(ctx.table->num_pairs()));
  ready_ms_.clear();
  errors_ = 0;
  return OkStatus();
}

std::optional<Decision> DraPolicy::Decide(const ClusterState& cs, const Request& req) {
  Impl& m = *impl_;
  if (req.id > m.last_observed) {
    m.last_observed = req.id;
    for (int p : req.profiles) m.mix.Observe(m.table->profile(p).gi->name, m.Tick(cs.now));
  }
  ++m.generation;
  m.by_name.clear();
  std::vector<Json> slices =
      options_.order == DraOrder::kNvidia ? m.NvidiaSlices() : m.MigdSlices(cs);
  if (options_.kubernetes_minor < 36) std::reverse(slices.begin(), slices.end());
  std::set<k8s::dra::testing::DeviceRef> allocated;
  for (int g = 0; g < cs.num_gpus(); ++g) {
    for (const Instance& inst : cs.gpus[g].instances) {
      if (!inst.idle) allocated.insert({kDriver, kNode, m.names[g][inst.pair]});
    }
  }
  std::vector<k8s::dra::testing::ModelRequest> requests;
  for (int p : req.profiles) {
    requests.push_back(
        {kDriver, k8s::dra::testing::StringAttributeIs("profile", m.table->profile(p).gi->name),
         1});
  }
  const auto got = k8s::dra::testing::AllocatorModel(options_.kubernetes_minor)
                       .Allocate(slices, allocated, requests, kNode);
  if (!got) return std::nullopt;
  Decision d;
  std::vector<Op> creates;
  double ready = 0;
  std::set<std::pair<int, int>> destroyed;
  for (size_t i = 0; i < got->size(); ++i) {
    auto it = m.by_name.find((*got)[i].device);
    if (it == m.by_name.end()) {
      ++errors_;
      return std::nullopt;
    }
    const auto [g, pair] = it->second;
    const Instance* at = cs.gpus[g].Find(pair);
    if (at != nullptr && at->idle) {
      d.ops.push_back({OpKind::kReuse, g, pair, static_cast<int>(i)});
      ready += options_.latency.reuse_ms;
      continue;
    }
    // Only the Idle instances that overlap the device (the pinned plan).
    const uint32_t mask = m.table->pair(pair).mask;
    for (const Instance& inst : cs.gpus[g].instances) {
      if (!inst.idle || (m.table->pair(inst.pair).mask & mask) == 0) continue;
      if (destroyed.insert({g, inst.pair}).second) {
        d.ops.push_back({OpKind::kDestroy, g, inst.pair, -1});
        ready += options_.latency.destroy_ms;
      }
    }
    creates.push_back({OpKind::kCreate, g, pair, static_cast<int>(i)});
    ready += options_.latency.create_ms;
  }
  d.ops.insert(d.ops.end(), creates.begin(), creates.end());
  ready_ms_[req.id] = ready;
  return d;
}

}  // namespace migd::bench
