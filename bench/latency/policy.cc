#include "bench/latency/policy.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

#include "base/status_macros.h"
#include "bench/placement/table.h"
#include "bench/placement/trace.h"
#include "bench/placement/workload.h"
#include "mig/catalog.h"
#include "planner/solve_executor.h"
#include "planner/value_service.h"

namespace migd::bench::latency {

namespace {

constexpr double kReconcileEverySeconds = 30;

struct Event {
  double time;
  int order;  // releases before allocations at the same instant
  int64_t id;
  std::vector<std::string> profiles;  // empty: release
};

std::vector<Op> ToOps(std::vector<Event> events) {
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.time, a.order, a.id) < std::tie(b.time, b.order, b.id);
  });
  std::vector<Op> ops;
  ops.reserve(events.size());
  for (auto& e : events) {
    Op op;
    op.kind = e.profiles.empty() ? Op::Kind::kRelease : Op::Kind::kAllocate;
    op.id = e.id;
    op.profiles = std::move(e.profiles);
    op.time = e.time;
    ops.push_back(std::move(op));
  }
  return ops;
}

void AddPod(std::vector<Event>& ev, int64_t id, double at, double life,
            std::vector<std::string> profiles) {
  ev.push_back({at, 1, id, std::move(profiles)});
  ev.push_back({at + life, 0, id, {}});
}

}  // namespace

Workload ChurnWorkload(const ChurnSpec& spec) {
  Workload w;
  w.name = spec.bursts ? "churn" : "churn-steady";
  w.gpus = "h100-80gb:2";
  w.warm_pool = {{"1g.10gb", 2}, {"2g.20gb", 1}};
  Rng arrivals(spec.seed, 1), profiles(spec.seed, 2), lifetimes(spec.seed, 3);
  const std::vector<std::string> names = {"1g.10gb", "2g.20gb", "3g.40gb"};
  const std::vector<double> weights = {6, 3, 1};
  constexpr double kRate = 0.7, kMeanLife = 5.0;  // per second; seconds
  if (!spec.bursts) {
    for (size_t i = 0; i < names.size(); ++i) {
      w.markov_load[names[i]] = kRate * kMeanLife * weights[i] / 10.0;
    }
  }
  std::vector<Event> ev;
  int64_t id = 0;
  double t = 0;
  double next_burst = spec.bursts ? 60 : 1e300;
  while (id < spec.allocations) {
    t += arrivals.Exponential(1.0 / kRate);
    while (next_burst <= t && id < spec.allocations) {
      for (int i = 0; i < 6 && id < spec.allocations; ++i) {
        AddPod(ev, id++, next_burst + 0.15 * i, 20, {"1g.10gb"});
      }
      next_burst += 60;
    }
    if (id >= spec.allocations) break;
    AddPod(ev, id++, t, lifetimes.Exponential(kMeanLife), {names[profiles.Pick(weights)]});
  }
  w.ops = ToOps(std::move(ev));
  return w;
}

StatusOr<Workload> AlibabaWorkload(const TraceWorkloadSpec& spec) {
  const mig::GpuModel* h100 = mig::Catalog::Default().FindModel("h100-80gb");
  if (h100 == nullptr) return InternalError("h100-80gb missing from the catalogue");
  MIGD_ASSIGN_OR_RETURN(GpuTable table, GpuTable::Build(*h100, false));
  MIGD_ASSIGN_OR_RETURN(std::vector<TracePod> pods, ReadAlibabaCsv(spec.csv));
  TraceSpec ts;
  ts.mapping = TraceMapping::kComputeCeil;
  ts.arrivals = TraceArrivals::kPoisson;
  ts.include_multi_gpu = true;
  ts.load = spec.load;
  ts.gpus = spec.gpus;
  ts.events = spec.allocations;
  ts.seed = spec.seed;
  MIGD_ASSIGN_OR_RETURN(std::vector<Request> reqs, BuildTraceRequests(table, pods, ts));
  Workload w;
  const std::string base = spec.csv.substr(spec.csv.find_last_of('/') + 1);
  w.name = "alibaba:" + base.substr(0, base.find('.'));
  w.gpus = "h100-80gb:" + std::to_string(spec.gpus);
  w.warm_pool = {{"1g.10gb", 2}, {"2g.20gb", 1}};
  // The trace's time unit is seconds; a reconciler pass every 30 s of it.
  std::vector<Event> ev;
  for (const Request& r : reqs) {
    std::vector<std::string> profiles;
    for (int p : r.profiles) profiles.push_back(table.profile(p).gi->name);
    AddPod(ev, r.id, r.arrival, r.lifetime, std::move(profiles));
  }
  w.ops = ToOps(std::move(ev));
  return w;
}

std::string_view PolicyName(Policy p) {
  switch (p) {
    case Policy::kDestroyOnRelease:
      return "destroy-on-release";
    case Policy::kWholeGpu:
      return "whole-gpu";
    case Policy::kLazy:
      return "lazy";
    case Policy::kLazyWarm:
      return "lazy+warm";
  }
  return "?";
}

StatusOr<Policy> ParsePolicy(std::string_view name) {
  for (Policy p : AllPolicies()) {
    if (PolicyName(p) == name) return p;
  }
  return InvalidArgumentError("unknown policy '" + std::string(name) +
                              "' (destroy-on-release, whole-gpu, lazy, lazy+warm)");
}

std::vector<Policy> AllPolicies() {
  return {Policy::kDestroyOnRelease, Policy::kWholeGpu, Policy::kLazy, Policy::kLazyWarm};
}

namespace {

void Add(HwOps& a, const HwOps& b) {
  a.gi_creates += b.gi_creates;
  a.ci_creates += b.ci_creates;
  a.gi_destroys += b.gi_destroys;
  a.ci_destroys += b.ci_destroys;
}

// whole-gpu: re-applies the layout of the GPU the planner picks for `req`.
// Returns the allocation status (kResourceExhausted: nothing fits even after
// clearing every Idle instance).
StatusOr<engine::Allocation> WholeGpuAllocate(engine::Manager& mgr,
                                              const engine::AllocateRequest& req,
                                              int64_t* temp_seq) {
  std::vector<engine::InstanceSpec> specs = req.instances;
  StatusOr<planner::Plan> plan = mgr.Plan(specs);
  bool all_reuse = plan.ok();
  if (plan.ok()) {
    for (const auto& ip : plan->instances) all_reuse &= ip.stage == planner::Stage::kReuse;
  }
  if (all_reuse) return mgr.Allocate(req);
  // The GPUs whose layout changes: the plan's, or (no plan) every GPU with
  // Idle instances, since mig-parted would re-apply them all.
  std::set<uint32_t> gpus;
  if (plan.ok()) {
    for (const auto& ip : plan->instances) {
      if (ip.stage != planner::Stage::kReuse) gpus.insert(ip.gpu.value());
    }
  } else {
    for (const auto& v : mgr.List().instances) {
      if (v.state == engine::InstanceState::kIdle) gpus.insert(v.gpu.value());
    }
  }
  std::vector<std::pair<uint32_t, std::string>> recreate;
  for (uint32_t g : gpus) {
    engine::ReclaimFilter f;
    f.gpu = GpuIndex(g);
    MIGD_ASSIGN_OR_RETURN(engine::ReclaimResult r, mgr.Reclaim(f));
    if (!r.failed.empty()) return InternalError("whole-gpu: destroy failed");
    for (const auto& v : r.destroyed) recreate.emplace_back(g, v.profile);
  }
  StatusOr<engine::Allocation> a = mgr.Allocate(req);
  if (!a.ok()) return a;
  // The rest of the target layout: the Idle instances that were there, where
  // they still fit (largest first, as a layout file lists them).
  std::stable_sort(recreate.begin(), recreate.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  for (const auto& [g, profile] : recreate) {
    const std::string id = "layout-" + std::to_string((*temp_seq)++);
    StatusOr<engine::Allocation> t = mgr.Allocate(OneInstance(id, profile, g));
    if (t.ok()) {
      MIGD_RETURN_IF_ERROR(mgr.Release(id));
    } else if (t.status().code() != StatusCode::kResourceExhausted) {
      return t.status();
    }
  }
  return a;
}

}  // namespace

std::vector<double> PolicyResult::ReadyMs(const LatencyModel& model) const {
  std::vector<double> out;
  out.reserve(wall_ms.size());
  for (size_t i = 0; i < wall_ms.size(); ++i)
    out.push_back(wall_ms[i] + model.ModeledMs(alloc_calls[i]));
  return out;
}

double PolicyResult::CreatesPer1000() const {
  if (allocations == 0) return 0;
  return 1000.0 * static_cast<double>(request_ops.gi_creates + background_ops.gi_creates) /
         static_cast<double>(allocations);
}

StatusOr<PolicyResult> RunPolicy(const RigOptions& base, const Workload& w, Policy p) {
  RigOptions o = base;
  o.gpus = w.gpus;
  o.latency = LatencyModel::Zero();
  o.frozen_clock = true;
  if (p == Policy::kLazyWarm) o.manager.warm_pool = w.warm_pool;
  planner::ManualExecutor* solves = nullptr;
  if (o.value_policy) {
    auto executor = std::make_unique<planner::ManualExecutor>();
    solves = executor.get();
    o.manager.values =
        std::make_shared<planner::ValueService>(planner::ValueOptions{}, std::move(executor));
  }
  MIGD_ASSIGN_OR_RETURN(std::unique_ptr<Rig> rig, Rig::Open(o));
  engine::Manager& mgr = rig->mgr();

  PolicyResult res;
  res.workload = w.name;
  res.policy = std::string(PolicyName(p));
  Stopwatch run;
  std::map<int64_t, engine::Allocation> live;
  int64_t temp_seq = 0;
  double last_reconcile = 0;
  for (const Op& op : w.ops) {
    if (op.time - last_reconcile >= kReconcileEverySeconds) {
      last_reconcile = op.time;
      const CallCounts before = rig->Counts();
      MIGD_RETURN_IF_ERROR(mgr.ReconcileOnce().status());
      const CallCounts d = Delta(before, rig->Counts());
      res.background_nvml_calls += Total(d);
      Add(res.background_ops, HwOpsOf(d));
      ++res.reconcile_passes;
    }
    const std::string rid = "a" + std::to_string(op.id);
    if (op.kind == Op::Kind::kAllocate) {
      engine::AllocateRequest req;
      req.request_id = rid;
      req.owner = store::Owner::Opaque("pod-" + std::to_string(op.id));
      for (const auto& prof : op.profiles) {
        engine::InstanceSpec spec;
        spec.profile = prof;
        req.instances.push_back(std::move(spec));
      }
      const CallCounts before = rig->Counts();
      const auto disk_before = rig->DiskCounts();
      Stopwatch sw;
      StatusOr<engine::Allocation> a =
          p == Policy::kWholeGpu ? WholeGpuAllocate(mgr, req, &temp_seq) : mgr.Allocate(req);
      const double wall = sw.Ms();
      const CallCounts d = Delta(before, rig->Counts());
      Add(res.request_ops, HwOpsOf(d));
      if (solves != nullptr) res.value_solves += solves->RunPending();
      if (!a.ok()) {
        if (a.status().code() != StatusCode::kResourceExhausted) {
          return Status(a.status().code(), res.policy + " on " + w.name + ", " + rid + ": " +
                                               std::string(a.status().message()));
        }
        ++res.failures;
        res.failed_ids.insert(op.id);
        continue;
      }
      ++res.allocations;
      res.allocate_nvml_calls += Total(d);
      res.wall_ms.push_back(wall);
      res.alloc_calls.push_back(d);
      bool reuse_only = true;
      for (const auto& s : a->stages) {
        ++res.stages[std::string(planner::StageName(s))];
        reuse_only &= s == planner::Stage::kReuse;
      }
      if (p == Policy::kWholeGpu) {
        // The stages of the final Allocate only; a re-applied layout counts
        // as "layout" (its GI/CI work is in request_ops).
        if (!reuse_only) ++res.stages["layout"];
      }
      if (reuse_only && p != Policy::kWholeGpu) {
        ++res.reuse_only_allocations;
        res.record_fsyncs_per_reuse_sum += rig->DiskCounts().fsyncs - disk_before.fsyncs;
      }
      live.emplace(op.id, std::move(*a));
    } else {
      auto it = live.find(op.id);
      if (it == live.end()) continue;  // its allocation failed
      const CallCounts before = rig->Counts();
      MIGD_RETURN_IF_ERROR(mgr.Release(rid));
      if (p == Policy::kDestroyOnRelease) {
        std::set<std::pair<uint32_t, std::string>> done;
        for (const auto& v : it->second.instances) {
          if (!done.insert({v.gpu.value(), v.profile}).second) continue;
          engine::ReclaimFilter f;
          f.gpu = v.gpu;
          f.profile = v.profile;
          MIGD_ASSIGN_OR_RETURN(engine::ReclaimResult r, mgr.Reclaim(f));
          if (!r.failed.empty()) return InternalError("destroy-on-release: destroy failed");
        }
      }
      const CallCounts d = Delta(before, rig->Counts());
      res.release_nvml_calls += Total(d);
      Add(res.request_ops, HwOpsOf(d));
      live.erase(it);
    }
  }
  res.run_s = run.Ms() / 1000.0;
  return res;
}

}  // namespace migd::bench::latency
