#include "bench/latency/scenarios.h"

#include <map>

#include "base/status_macros.h"

namespace migd::bench::latency {

namespace {

// Samples of one operation kind.
struct Samples {
  std::vector<double> wall;
  std::vector<CallCounts> deltas;
  uint64_t calls = 0, calls_max = 0, fsyncs = 0;
  HwOps hw;
  std::string stage_check;
};

// Times `fn` on `rig`, adds one sample to `s`.
template <typename F>
Status Measure(Rig& rig, Samples& s, F&& fn) {
  const CallCounts before = rig.Counts();
  const uint64_t fs = rig.DiskCounts().fsyncs;
  Stopwatch sw;
  MIGD_RETURN_IF_ERROR(fn());
  const double wall = sw.Ms();
  const CallCounts d = Delta(before, rig.Counts());
  const uint64_t n = Total(d);
  s.wall.push_back(wall);
  s.deltas.push_back(d);
  s.calls += n;
  s.calls_max = std::max(s.calls_max, n);
  s.fsyncs += rig.DiskCounts().fsyncs - fs;
  const HwOps h = HwOpsOf(d);
  s.hw.gi_creates += h.gi_creates;
  s.hw.ci_creates += h.ci_creates;
  s.hw.gi_destroys += h.gi_destroys;
  s.hw.ci_destroys += h.ci_destroys;
  return OkStatus();
}

Status ExpectStage(const engine::Allocation& a, planner::Stage want, Samples& s) {
  for (const auto& st : a.stages) {
    if (st != want) {
      s.stage_check = std::string(planner::StageName(st));
      return InternalError("expected stage " + std::string(planner::StageName(want)) + ", got " +
                           s.stage_check);
    }
  }
  return OkStatus();
}

OpResult Finish(const std::string& op, const LatencyModel& sleep, bool sync, const Samples& s) {
  OpResult r;
  r.op = op;
  r.model = sleep.name;
  r.store_sync = sync;
  r.wall = Summarize(s.wall);
  r.wall_ms = s.wall;
  r.calls = s.deltas;
  const double n = s.wall.empty() ? 1 : static_cast<double>(s.wall.size());
  r.nvml_calls = static_cast<double>(s.calls) / n;
  r.nvml_calls_max = s.calls_max;
  r.fsyncs = static_cast<double>(s.fsyncs) / n;
  r.hw = s.hw;
  r.stage_check = s.stage_check;
  return r;
}

}  // namespace

Summary OpResult::Modeled(const LatencyModel& m) const {
  std::vector<double> ms;
  ms.reserve(wall_ms.size());
  for (size_t i = 0; i < wall_ms.size(); ++i) ms.push_back(wall_ms[i] + m.ModeledMs(calls[i]));
  return Summarize(std::move(ms));
}

StatusOr<std::vector<OpResult>> RunOps(const RigOptions& base, const LatencyModel& sleep,
                                       const OpsSpec& spec) {
  RigOptions o = base;
  o.gpus = "h100-80gb:1";
  o.latency = sleep;
  MIGD_ASSIGN_OR_RETURN(std::unique_ptr<Rig> rig, Rig::Open(o));
  engine::Manager& mgr = rig->mgr();
  const mig::Placement p3g{4, 4};
  int64_t seq = 0;
  auto id = [&](const char* prefix) { return std::string(prefix) + std::to_string(seq++); };

  // Warm-up: the first create of a GI profile fills the driver's CI profile
  // cache (one extra call); not what a steady daemon pays.
  for (const char* prof : {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb"}) {
    const std::string w = id("warm");
    MIGD_RETURN_IF_ERROR(mgr.Allocate(OneInstance(w, prof, 0)).status());
    MIGD_RETURN_IF_ERROR(mgr.Release(w));
    MIGD_RETURN_IF_ERROR(mgr.Reclaim({}).status());
  }

  // (b) create in free space.
  Samples create;
  for (int i = 0; i < spec.create_reps; ++i) {
    const std::string r = id("create");
    MIGD_RETURN_IF_ERROR(Measure(*rig, create, [&]() -> Status {
      MIGD_ASSIGN_OR_RETURN(engine::Allocation a, mgr.Allocate(OneInstance(r, "1g.10gb")));
      return ExpectStage(a, planner::Stage::kFree, create);
    }));
    MIGD_RETURN_IF_ERROR(mgr.Release(r));
    MIGD_RETURN_IF_ERROR(mgr.Reclaim({}).status());
  }

  // (a) reuse and (d) release: one Idle 1g.10gb, allocated and released.
  Samples reuse, release;
  {
    const std::string seed = id("seed");
    MIGD_RETURN_IF_ERROR(mgr.Allocate(OneInstance(seed, "1g.10gb")).status());
    MIGD_RETURN_IF_ERROR(mgr.Release(seed));
  }
  for (int i = 0; i < spec.reuse_reps; ++i) {
    const std::string r = id("reuse");
    MIGD_RETURN_IF_ERROR(Measure(*rig, reuse, [&]() -> Status {
      MIGD_ASSIGN_OR_RETURN(engine::Allocation a, mgr.Allocate(OneInstance(r, "1g.10gb")));
      return ExpectStage(a, planner::Stage::kReuse, reuse);
    }));
    MIGD_RETURN_IF_ERROR(Measure(*rig, release, [&] { return mgr.Release(r); }));
  }
  MIGD_RETURN_IF_ERROR(mgr.Reclaim({}).status());

  // (c) reclaim-then-create: 4g.40gb Active at 0, 3g.40gb Idle at 4; a
  // 2g.20gb fits only where the Idle 3g is.
  Samples reclaim;
  MIGD_RETURN_IF_ERROR(
      mgr.Allocate(OneInstance(id("hold"), "4g.40gb", 0, mig::Placement{0, 4})).status());
  for (int i = 0; i < spec.reclaim_reps; ++i) {
    const std::string idle = id("idle");
    MIGD_RETURN_IF_ERROR(mgr.Allocate(OneInstance(idle, "3g.40gb", 0, p3g)).status());
    MIGD_RETURN_IF_ERROR(mgr.Release(idle));
    const std::string r = id("reclaim");
    MIGD_RETURN_IF_ERROR(Measure(*rig, reclaim, [&]() -> Status {
      MIGD_ASSIGN_OR_RETURN(engine::Allocation a, mgr.Allocate(OneInstance(r, "2g.20gb")));
      return ExpectStage(a, planner::Stage::kReclaim, reclaim);
    }));
    MIGD_RETURN_IF_ERROR(mgr.Release(r));
    engine::ReclaimFilter f;
    f.profile = "2g.20gb";
    MIGD_RETURN_IF_ERROR(mgr.Reclaim(f).status());
  }

  std::vector<OpResult> out;
  out.push_back(Finish("reuse", sleep, o.store_sync, reuse));
  out.push_back(Finish("create", sleep, o.store_sync, create));
  out.push_back(Finish("reclaim+create", sleep, o.store_sync, reclaim));
  out.push_back(Finish("release", sleep, o.store_sync, release));
  return out;
}

StatusOr<RecoveryResult> RunRecovery(const RigOptions& base, int gpus, int reps) {
  RigOptions o = base;
  o.gpus = "h100-80gb:" + std::to_string(gpus);
  o.latency = LatencyModel::Zero();
  MIGD_ASSIGN_OR_RETURN(std::unique_ptr<Rig> rig, Rig::Open(o));
  engine::Manager& mgr = rig->mgr();
  for (int g = 0; g < gpus; ++g) {
    for (uint32_t s = 0; s < 7; ++s) {
      const std::string r = "g" + std::to_string(g) + "s" + std::to_string(s);
      MIGD_RETURN_IF_ERROR(
          mgr.Allocate(OneInstance(r, "1g.10gb", static_cast<uint32_t>(g), mig::Placement{s, 1}))
              .status());
      if (s >= 4) MIGD_RETURN_IF_ERROR(mgr.Release(r));
    }
  }
  RecoveryResult res;
  res.gpus = gpus;
  std::vector<double> ms;
  CallCounts per;
  for (int i = 0; i < reps; ++i) {
    const CallCounts before = rig->Counts();
    MIGD_ASSIGN_OR_RETURN(std::chrono::nanoseconds t, rig->RestartManager());
    per = Delta(before, rig->Counts());
    ms.push_back(std::chrono::duration<double, std::milli>(t).count());
  }
  res.create_ms = Summarize(ms);
  res.nvml_calls = Total(per);
  std::map<std::string, uint64_t> by_fn;
  for (const auto& [k, v] : per) by_fn[k.first] += v;
  for (const auto& [f, v] : by_fn) {
    res.nvml_by_function +=
        (res.nvml_by_function.empty() ? "" : ", ") + f + " " + std::to_string(v);
  }
  const auto& sum = rig->mgr().recovery_summary();
  res.instances = static_cast<int>(sum.active + sum.idle);
  if (sum.active != static_cast<uint64_t>(4 * gpus) ||
      sum.idle != static_cast<uint64_t>(3 * gpus) || sum.error != 0) {
    return InternalError("recovery of " + std::to_string(gpus) + " GPUs found " +
                         std::to_string(sum.active) + " active, " + std::to_string(sum.idle) +
                         " idle, " + std::to_string(sum.error) + " error");
  }
  // Full restart: a new NVML session too. The new driver's counters start at
  // zero, so its CallCounts are the restart's calls.
  Stopwatch sw;
  MIGD_RETURN_IF_ERROR(rig->Reopen(LatencyModel::Zero()));
  res.full_restart_ms = sw.Ms();
  res.full_restart_nvml_calls = Total(rig->Counts());
  return res;
}

StatusOr<FootprintResult> RunFootprint(const RigOptions& base) {
  FootprintResult res;
  res.rss_kb_before = SelfUsage().rss_kb;
  const uint64_t heap0 = HeapInUse();
  RigOptions o = base;
  o.gpus = "h100-80gb:8";
  o.latency = LatencyModel::Zero();
  MIGD_ASSIGN_OR_RETURN(std::unique_ptr<Rig> rig, Rig::Open(o));
  for (uint32_t g = 0; g < 8; ++g) {
    for (uint32_t s = 0; s < 7; ++s) {
      const std::string r = "g" + std::to_string(g) + "s" + std::to_string(s);
      MIGD_RETURN_IF_ERROR(
          rig->mgr().Allocate(OneInstance(r, "1g.10gb", g, mig::Placement{s, 1})).status());
      if (s >= 4) MIGD_RETURN_IF_ERROR(rig->mgr().Release(r));
    }
  }
  MIGD_RETURN_IF_ERROR(rig->RestartManager().status());  // a fresh planner
  // RestartManager replaced the Manager: take the reference only now.
  engine::Manager& mgr = rig->mgr();
  const uint64_t heap_rig = HeapInUse();
  res.heap_rig_bytes = heap_rig > heap0 ? heap_rig - heap0 : 0;
  for (uint32_t g = 0; g < 8; ++g) {
    for (const char* prof : {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}) {
      engine::InstanceSpec s;
      s.profile = prof;
      s.gpu = GpuIndex(g);
      (void)mgr.Plan({s});  // most are exhausted; the tables are built either way
    }
  }
  const uint64_t heap_plan = HeapInUse();
  res.heap_planner_bytes = heap_plan > heap_rig ? heap_plan - heap_rig : 0;
  res.rss_kb_idle = SelfUsage().rss_kb;
  const double cpu0 = SelfUsage().cpu_s;
  for (int i = 0; i < 1000; ++i) {
    const std::string r = "fp" + std::to_string(i);
    MIGD_RETURN_IF_ERROR(mgr.Allocate(OneInstance(r, "1g.10gb")).status());
    MIGD_RETURN_IF_ERROR(mgr.Release(r));
  }
  res.cpu_s_per_1000_reuse = SelfUsage().cpu_s - cpu0;
  const uint64_t heap_end = HeapInUse();
  res.heap_after_1000_allocs = heap_end > heap_plan ? heap_end - heap_plan : 0;
  return res;
}

}  // namespace migd::bench::latency
