#include "bench/latency/sections.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "base/status_macros.h"
#include "bench/latency/churn_bound.h"
#include "bench/latency/online_bound.h"
#include "bench/latency/policy.h"
#include "bench/latency/scenarios.h"
#include "mig/catalog.h"

namespace migd::bench::latency {

std::string FormatMs(double v) {
  if (v < 1) return fmt::format("{:.3f}", v);
  if (v < 100) return fmt::format("{:.2f}", v);
  return fmt::format("{:.0f}", v);
}

namespace {

void OpsTable(std::ostream& md, const std::vector<OpResult>& rows,
              const std::vector<LatencyModel>& projections) {
  md << "| operation | simulator sleeps | store fsync | n | p50 ms | p99 ms | mean ms |";
  for (const auto& m : projections) md << " " << m.name << " p50 ms |";
  md << " NVML calls/op (max) | record fsyncs/op | GI+CI creates | GI+CI destroys "
        "|\n|---|---|---|---|---|---|---|";
  for (size_t i = 0; i < projections.size(); ++i) md << "---|";
  md << "---|---|---|---|\n";
  for (const auto& r : rows) {
    md << "| " << r.op << " | " << r.model << " | " << (r.store_sync ? "on" : "off") << " | "
       << r.wall.n << " | " << FormatMs(r.wall.p50) << " | " << FormatMs(r.wall.p99) << " | "
       << FormatMs(r.wall.mean) << " | ";
    for (const auto& m : projections) md << FormatMs(r.Modeled(m).p50) << " | ";
    md << fmt::format("{:.2f} ({})", r.nvml_calls, r.nvml_calls_max) << " | "
       << fmt::format("{:.1f}", r.fsyncs) << " | " << r.hw.gi_creates + r.hw.ci_creates << " | "
       << r.hw.gi_destroys + r.hw.ci_destroys << " |\n";
  }
  md << "\n";
}

const OpResult* Row(const std::vector<OpResult>& rows, const std::string& op) {
  for (const auto& r : rows) {
    if (r.op == op) return &r;
  }
  return nullptr;
}

// Time to ready of a create and of a reuse under each model, and the ratio.
void SpeedupTable(std::ostream& md, const std::vector<OpResult>& rows,
                  const std::vector<LatencyModel>& models) {
  const OpResult* create = Row(rows, "create");
  const OpResult* reuse = Row(rows, "reuse");
  if (create == nullptr || reuse == nullptr) return;
  md << "| scenario | create p50 ms | reuse p50 ms | reuse p99 ms | speed-up p50/p50 | speed-up "
        "create p50 / reuse p99 |\n|---|---|---|---|---|---|\n";
  for (const auto& m : models) {
    const Summary c = create->Modeled(m), r = reuse->Modeled(m);
    md << "| " << m.name << " | " << FormatMs(c.p50) << " | " << FormatMs(r.p50) << " | "
       << FormatMs(r.p99) << " | " << fmt::format("{:.0f}x", r.p50 > 0 ? c.p50 / r.p50 : 0) << " | "
       << fmt::format("{:.0f}x", r.p99 > 0 ? c.p50 / r.p99 : 0) << " |\n";
  }
  md << "\n";
}

// Refusal prices (in creates) the online bound maximises over.
constexpr double kOnlinePrices[] = {0.25, 0.5, 1, 2, 4, 8, 16, 64};

double Per1000(uint64_t n, uint64_t allocs) {
  return allocs == 0 ? 0 : 1000.0 * static_cast<double>(n) / static_cast<double>(allocs);
}

uint64_t Stage(const PolicyResult& r, const char* k) {
  auto it = r.stages.find(k);
  return it == r.stages.end() ? 0 : it->second;
}

void CountsRow(std::ostream& md, const PolicyResult& r) {
  const uint64_t n = r.allocations;
  md << "| " << r.workload << " | " << r.policy << " | " << n << " | " << r.failures << " | "
     << Stage(r, "reuse") << " / " << Stage(r, "free") << " / " << Stage(r, "reclaim") << " | "
     << fmt::format("{:.0f}", Per1000(r.request_ops.gi_creates, n)) << " | "
     << fmt::format("{:.0f}", Per1000(r.request_ops.ci_creates, n)) << " | "
     << fmt::format("{:.0f}", Per1000(r.background_ops.gi_creates, n)) << " | "
     << fmt::format("{:.0f}", Per1000(r.request_ops.gi_destroys, n)) << " | "
     << fmt::format("{:.2f}", n ? double(r.allocate_nvml_calls) / double(n) : 0) << " | "
     << fmt::format("{:.2f}", n ? double(r.release_nvml_calls) / double(n) : 0) << " | "
     << r.background_nvml_calls << " | "
     << fmt::format("{:.1f}", r.reuse_only_allocations ? double(r.record_fsyncs_per_reuse_sum) /
                                                             double(r.reuse_only_allocations)
                                                       : 0)
     << " |\n";
}

void ReadyRow(std::ostream& md, const PolicyResult& r, const std::vector<LatencyModel>& models) {
  md << "| " << r.workload << " | " << r.policy << " | " << FormatMs(Summarize(r.wall_ms).p99)
     << " |";
  for (const auto& m : models) {
    const Summary s = Summarize(r.ReadyMs(m));
    md << " " << FormatMs(s.mean) << " | " << FormatMs(s.p50) << " | " << FormatMs(s.p99) << " |";
  }
  md << "\n";
}

struct WorkloadRun {
  Workload workload;
  std::vector<PolicyResult> results;  // AllPolicies() order
};

const PolicyResult* Find(const WorkloadRun& w, Policy p) {
  for (const auto& r : w.results) {
    if (r.policy == PolicyName(p)) return &r;
  }
  return nullptr;
}

StatusOr<std::vector<Workload>> Workloads(const BenchConfig& cfg) {
  std::vector<Workload> out;
  const int churn = cfg.quick ? 200 : cfg.churn_allocations;
  out.push_back(ChurnWorkload({churn, cfg.seed, false}));
  out.push_back(ChurnWorkload({churn, cfg.seed, true}));
  if (!cfg.trace_dir.empty()) {
    MIGD_ASSIGN_OR_RETURN(
        Workload w, AlibabaWorkload({cfg.trace_dir + "/openb_pod_list_default.csv",
                                     cfg.quick ? 200 : cfg.trace_allocations, 4, 0.9, cfg.seed}));
    out.push_back(std::move(w));
  }
  return out;
}

// The table both churn bounds run on (the workloads run on H100-80GB).
StatusOr<GpuTable> H100Table() {
  const mig::GpuModel* h100 = mig::Catalog::Default().FindModel("h100-80gb");
  if (h100 == nullptr) return InternalError("h100-80gb missing from the catalogue");
  return GpuTable::Build(*h100, false);
}

// The bound table row of one workload: on the allocations every policy
// served (a bound for serving a set is one for any superset of it).
Status BoundRow(const BenchConfig& cfg, const WorkloadRun& run, std::ostream& md) {
  std::set<int64_t> skip;
  for (const auto& r : run.results) skip.insert(r.failed_ids.begin(), r.failed_ids.end());
  MIGD_ASSIGN_OR_RETURN(GpuTable table, H100Table());
  MIGD_ASSIGN_OR_RETURN(BoundProblem bp, MakeBoundProblem(table, run.workload, skip));
  Stopwatch sw;
  MIGD_ASSIGN_OR_RETURN(RelaxedResult lb, RelaxedLowerBound(bp));
  const PositionalResult pos = PositionalSearch(bp, cfg.bound_states);
  const double secs = sw.Ms() / 1000;
  const uint64_t n = bp.allocations;
  const double lb1000 = Per1000(lb.creates, n);
  std::string opt = "-";
  if (pos.feasible) {
    opt = fmt::format("{}{:.0f}", pos.exact ? "= " : "<= ", Per1000(pos.creates, n));
  }
  auto per1000 = [&](Policy p) {
    const PolicyResult* r = Find(run, p);
    return r == nullptr ? std::string("-") : fmt::format("{:.0f}", r->CreatesPer1000());
  };
  auto ratio = [&](Policy p, double to) {
    const PolicyResult* r = Find(run, p);
    return r == nullptr || to <= 0 ? std::string("-")
                                   : fmt::format("{:.3f}", r->CreatesPer1000() / to);
  };
  const PolicyResult* dor = Find(run, Policy::kDestroyOnRelease);
  md << "| " << run.workload.name << " | " << n << " (" << bp.instances << ") | "
     << fmt::format("{:.0f}", Per1000(lb.peak_sum, n)) << " | " << fmt::format("{:.0f}", lb1000)
     << " | " << opt << " | " << per1000(Policy::kDestroyOnRelease) << " | "
     << per1000(Policy::kLazy) << " | " << ratio(Policy::kLazy, lb1000) << " | "
     << ratio(Policy::kLazy, dor == nullptr ? 0 : dor->CreatesPer1000()) << " | "
     << per1000(Policy::kLazyWarm) << " | " << ratio(Policy::kLazyWarm, lb1000) << " | "
     << fmt::format("{} / {} states, {:.1f} s", lb.max_states, pos.max_states, secs) << " |\n";
  return OkStatus();
}

// The online bound row of a Markovian workload (online_bound.h): the fewest
// creates per 1,000 served allocations that a policy knowing the demand, not
// the future, can expect while refusing as many requests as lazy did.
Status OnlineRow(const WorkloadRun& run, std::ostream& md) {
  const Workload& w = run.workload;
  const PolicyResult* lazy = Find(run, Policy::kLazy);
  if (w.markov_load.empty() || lazy == nullptr) return OkStatus();
  MIGD_ASSIGN_OR_RETURN(GpuTable table, H100Table());
  std::vector<double> load(static_cast<size_t>(table.num_profiles()), 0.0);
  for (const auto& [name, l] : w.markov_load) {
    MIGD_ASSIGN_OR_RETURN(const int c, WorkloadClass(table, w, name));
    load[static_cast<size_t>(c)] = l;
  }
  MIGD_ASSIGN_OR_RETURN(const int gpus, WorkloadGpus(table, w));
  Stopwatch sw;
  MIGD_ASSIGN_OR_RETURN(OnlineModel model, OnlineModel::Build(table, gpus, load));
  const uint64_t requests = lazy->allocations + lazy->failures;
  const double r = requests == 0 ? 0 : double(lazy->failures) / double(requests);
  MIGD_ASSIGN_OR_RETURN(
      CreatesBound b,
      model.CreatesLowerBound(r, {std::begin(kOnlinePrices), std::end(kOnlinePrices)}, {}));
  const double served = 1000.0 / (1.0 - r);  // per 1,000 served allocations
  const double lb = b.creates * served;
  md << "| " << w.name << " | " << fmt::format("{:.4f}", r) << " | " << fmt::format("{:.1f}", lb)
     << " | " << fmt::format("{:g}", b.price) << " | "
     << fmt::format("{:.1f} / {:.4f}", b.at.creates * 1000 / (1 - b.at.refusals), b.at.refusals)
     << " | " << fmt::format("{:.0f}", lazy->CreatesPer1000()) << " | "
     << fmt::format("{:.3f}", lb > 0 ? lazy->CreatesPer1000() / lb : 0) << " | "
     << model.num_states() << " states, " << b.at.sweeps << " sweeps"
     << (b.at.converged ? "" : " (not converged)") << ", "
     << fmt::format("{:.1f} s", sw.Ms() / 1000) << " |\n";
  return OkStatus();
}

void WriteDat(const BenchConfig& cfg, const std::vector<WorkloadRun>& runs) {
  if (cfg.dat_path.empty() || cfg.scenarios.empty()) return;
  std::ofstream dat(cfg.dat_path);
  for (Policy p : AllPolicies()) {
    dat << "\"" << PolicyName(p) << "\"";
    for (const WorkloadRun& w : runs) {
      const PolicyResult* r = Find(w, p);
      if (r == nullptr) {
        dat << " 0 0";
        continue;
      }
      const Summary s = Summarize(r->ReadyMs(cfg.scenarios.front()));
      dat << " " << s.mean / 1000 << " " << s.p99 / 1000;
    }
    dat << "\n";
  }
  std::ofstream gp(cfg.dat_path + ".gp");
  gp << "plot ";
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string wn = runs[i].workload.name.substr(0, runs[i].workload.name.find(':'));
    gp << (i ? ", " : "") << "'" << cfg.dat_path << "' using " << 2 + 2 * i << (i ? "" : ":xtic(1)")
       << " title '" << wn << " mean', '' using " << 3 + 2 * i << " title '" << wn << " p99'";
  }
  gp << "\n";
}

}  // namespace

Status WriteOpsSection(const BenchConfig& cfg, std::ostream& md) {
  OpsSpec spec;
  if (cfg.quick) spec = {200, 20, 20};
  MIGD_ASSIGN_OR_RETURN(std::vector<OpResult> rows, RunOps(cfg.base, LatencyModel::Zero(), spec));
  RigOptions nosync = cfg.base;
  nosync.store_sync = false;
  MIGD_ASSIGN_OR_RETURN(std::vector<OpResult> ns, RunOps(nosync, LatencyModel::Zero(), spec));
  md << "### Per operation, zero added latency (each scenario: measured + its model over the "
        "operation's NVML calls)\n\n";
  OpsTable(md, rows, cfg.scenarios);
  md << "With the record store's fsync off (what the same code costs on tmpfs, where fsync "
        "is free):\n\n";
  OpsTable(md, ns, cfg.scenarios);
  md << "### Time to ready and speed-up of reuse per scenario (record store synced)\n\n";
  SpeedupTable(md, rows, cfg.scenarios);
  if (!cfg.quick && !cfg.scenarios.empty()) {
    const LatencyModel& m = cfg.scenarios.front();
    MIGD_ASSIGN_OR_RETURN(std::vector<OpResult> slept, RunOps(cfg.base, m, {200, 10, 5}));
    md << "### Per operation, simulator sleeping per '" << m.name << "' (whole ms: " << m.EnvValue()
       << ")\n\n";
    OpsTable(md, slept, {});
    const OpResult* c = Row(slept, "create");
    const OpResult* zc = Row(rows, "create");
    if (c != nullptr && zc != nullptr) {
      md << fmt::format("Projection check: create p50 slept {} ms, projected {} ms.\n\n",
                        FormatMs(c->wall.p50), FormatMs(zc->Modeled(m).p50));
    }
  }
  std::cerr << "latency_bench: ops done\n";
  return OkStatus();
}

Status WritePoliciesSection(const BenchConfig& cfg, std::ostream& md) {
  MIGD_ASSIGN_OR_RETURN(std::vector<Workload> workloads, Workloads(cfg));
  std::vector<WorkloadRun> runs;
  for (Workload& w : workloads) {
    WorkloadRun run{std::move(w), {}};
    for (Policy p : AllPolicies()) {
      if (!cfg.policies.empty() && std::find(cfg.policies.begin(), cfg.policies.end(),
                                             PolicyName(p)) == cfg.policies.end()) {
        continue;
      }
      MIGD_ASSIGN_OR_RETURN(PolicyResult r, RunPolicy(cfg.base, run.workload, p));
      std::cerr << "latency_bench: " << run.workload.name << " " << r.policy << " " << r.run_s
                << " s\n";
      run.results.push_back(std::move(r));
    }
    runs.push_back(std::move(run));
  }
  md << "### Policies side by side: counts (" << (cfg.quick ? 200 : cfg.churn_allocations)
     << " allocations per workload, seed " << cfg.seed << ")\n\n"
     << "| workload | policy | allocations ok | failed | reuse / free / reclaim | GI creates "
        "/1000 | CI creates /1000 | background GI creates /1000 | GI destroys /1000 | NVML "
        "calls/alloc | NVML calls/release | background NVML calls | fsyncs/reuse |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const WorkloadRun& w : runs) {
    for (const PolicyResult& r : w.results) CountsRow(md, r);
  }
  md << "\n### Time to ready per scenario (measured at zero latency + the scenario's model)\n\n"
     << "| workload | policy | zero-latency p99 ms |";
  for (const auto& m : cfg.scenarios) md << " " << m.name << " mean | p50 | p99 |";
  md << "\n|---|---|---|";
  for (size_t i = 0; i < cfg.scenarios.size(); ++i) md << "---|---|---|";
  md << "\n";
  for (const WorkloadRun& w : runs) {
    for (const PolicyResult& r : w.results) ReadyRow(md, r, cfg.scenarios);
  }
  md << "\n### GI creates against the offline bound (per 1,000 allocations; CI creates are "
        "equal)\n\n"
     << "| workload | allocations (instances) served by every policy | peak-sum bound | "
        "relaxed bound (LB) | optimum | destroy-on-release | migd (lazy) | lazy / LB | lazy / "
        "destroy-on-release | lazy+warm | lazy+warm / LB | bound states (LB / positional), time "
        "|\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const WorkloadRun& w : runs) MIGD_RETURN_IF_ERROR(BoundRow(cfg, w, md));
  md << "\n### GI creates against the online bound (Markovian workloads; per 1,000 served "
        "allocations)\n\n"
     << "| workload | lazy's refused fraction r | online bound at r | refusal price | "
        "relaxed optimal policy at that price: creates / refused fraction | migd (lazy) | "
        "lazy / online bound | model |\n|---|---|---|---|---|---|---|---|\n";
  for (const WorkloadRun& w : runs) MIGD_RETURN_IF_ERROR(OnlineRow(w, md));
  md << "\n";
  WriteDat(cfg, runs);
  return OkStatus();
}

Status WriteRecoverySection(const BenchConfig& cfg, std::ostream& md) {
  md << "### Recovery (store open + Manager::Create; 7 x 1g.10gb per GPU, 4 Active + 3 Idle, "
        "records for all; zero latency)\n\n";
  md << "| GPUs | instances | p50 ms | max ms | NVML calls | full restart ms (NVML session + "
        "store + Manager) | full restart NVML calls |\n|---|---|---|---|---|---|---|\n";
  std::string by_fn;
  for (int g : cfg.recovery_gpus) {
    MIGD_ASSIGN_OR_RETURN(RecoveryResult r, RunRecovery(cfg.base, g, cfg.quick ? 2 : 10));
    md << "| " << g << " | " << r.instances << " | " << FormatMs(r.create_ms.p50) << " | "
       << FormatMs(r.create_ms.max) << " | " << r.nvml_calls << " | " << FormatMs(r.full_restart_ms)
       << " | " << r.full_restart_nvml_calls << " |\n";
    by_fn = fmt::format("{} GPUs: {}", g, r.nvml_by_function);
  }
  md << "\nNVML calls of one recovery, by function (" << by_fn << ").\n\n";
  return OkStatus();
}

Status WriteFootprintSection(const BenchConfig& cfg, std::ostream& md) {
  MIGD_ASSIGN_OR_RETURN(FootprintResult f, RunFootprint(cfg.base));
  md << "### Footprint (this process, engine only: no gRPC, no metrics)\n\n";
  md << "| measure | value |\n|---|---|\n";
  md << fmt::format("| RSS before the rig | {:.1f} MiB |\n", f.rss_kb_before / 1024.0);
  md << fmt::format(
      "| RSS with an 8-GPU Manager (56 instances), planner tables built | {:.1f} "
      "MiB |\n",
      f.rss_kb_idle / 1024.0);
  md << fmt::format("| heap held by NVML driver + store + Manager | {:.1f} KiB |\n",
                    f.heap_rig_bytes / 1024.0);
  md << fmt::format(
      "| heap kept by the planner after one Plan per GPU and profile | {:.1f} KiB "
      "|\n",
      f.heap_planner_bytes / 1024.0);
  md << fmt::format("| heap growth over 1000 reuse allocate+release | {:.1f} KiB |\n",
                    f.heap_after_1000_allocs / 1024.0);
  md << fmt::format("| CPU per 1000 reuse allocate+release | {:.3f} s |\n\n",
                    f.cpu_s_per_1000_reuse);
  return OkStatus();
}

}  // namespace migd::bench::latency
