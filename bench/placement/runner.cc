#include "bench/placement/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "base/status_macros.h"
#include "bench/placement/baselines.h"
#include "bench/placement/bounds.h"
#include "bench/placement/summary.h"
#include "mig/catalog.h"

namespace migd::bench {
namespace {

using Json = nlohmann::json;

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The tables of one model: base, and with the double-memory 1g when a mix
// needs it; built on first use.
class TableSet {
 public:
  explicit TableSet(const mig::GpuModel& model) : model_(model) {}
  StatusOr<const GpuTable*> Get(bool double_memory) {
    auto it = tables_.find(double_memory);
    if (it == tables_.end()) {
      MIGD_ASSIGN_OR_RETURN(GpuTable t, GpuTable::Build(model_, double_memory));
      it = tables_.emplace(double_memory, std::move(t)).first;
    }
    return &it->second;
  }
  // The enumeration of every 8-unit table is checked against the known state
  // counts (298 base layouts, 723 with the double-memory 1g).
  Status Check() const {
    for (const auto& [dm, t] : tables_) {
      const int expect = t.model().memory_slices == 8 ? (dm ? 723 : 298) : -1;
      if (expect > 0 && t.num_states() != expect) {
        return InternalError("table " + t.model().key + (dm ? " (+1g.dm)" : "") + " has " +
                             std::to_string(t.num_states()) + " states, expected " +
                             std::to_string(expect));
      }
    }
    return OkStatus();
  }
  const std::map<bool, GpuTable>& all() const { return tables_; }

 private:
  const mig::GpuModel& model_;
  std::map<bool, GpuTable> tables_;
};

StatusOr<std::vector<MatrixCell>> BuildCells(const MatrixSpec& spec, TableSet& tables) {
  std::vector<MatrixCell> cells;
  if (spec.script) {
    MIGD_ASSIGN_OR_RETURN(const GpuTable* t, tables.Get(false));
    int gpus = 1;
    MIGD_RETURN_IF_ERROR(AdversarialScript(*t, *spec.script, &gpus).status());
    cells.push_back({"script:" + *spec.script, "script", {}, 0, gpus, t});
  } else if (spec.trace_path) {
    MIGD_ASSIGN_OR_RETURN(const GpuTable* t, tables.Get(false));
    const std::string name = "trace:" + Basename(*spec.trace_path) + ":" +
                             std::string(TraceMappingName(spec.trace_mapping));
    for (int g : spec.gpus) {
      for (double load : spec.loads) cells.push_back({name, "trace", {}, load, g, t});
    }
  } else {
    for (const std::string& name : spec.mixes) {
      MIGD_ASSIGN_OR_RETURN(Mix mix, ParseMix(name));
      MIGD_ASSIGN_OR_RETURN(const GpuTable* t, tables.Get(mix.needs_double_memory));
      for (int g : spec.gpus) {
        for (double load : spec.loads) cells.push_back({name, "synthetic", mix, load, g, t});
      }
    }
  }
  return cells;
}

// Runs every (cell, seed) item on worker threads and keeps the results.
class MatrixRun {
 public:
  MatrixRun(const MatrixSpec& spec, const std::vector<MatrixCell>& cells,
            const std::vector<TracePod>& pods, int seeds)
      : spec_(spec),
        cells_(cells),
        pods_(pods),
        seeds_(seeds),
        runs_(cells.size(), std::vector<PolicyRuns>(spec.policies.size())) {
    for (auto& cell : runs_) {
      for (PolicyRuns& p : cell) p.seeds.resize(seeds);
    }
  }

  Status Run() {
    std::vector<std::thread> threads;
    for (int j = 0; j < std::max(1, spec_.jobs); ++j) threads.emplace_back([this] { Work(); });
    for (std::thread& th : threads) th.join();
    return first_error_;
  }

  const std::vector<std::vector<PolicyRuns>>& runs() const { return runs_; }
  const TraceSummary& trace_summary() const { return trace_summary_; }

 private:
  void Fail(Status s) {
    std::lock_guard<std::mutex> l(mu_);
    if (first_error_.ok()) first_error_ = std::move(s);
  }
  bool Failed() {
    std::lock_guard<std::mutex> l(mu_);
    return !first_error_.ok();
  }

  void Work() {
    const size_t items = cells_.size() * static_cast<size_t>(seeds_);
    while (true) {
      const size_t item = next_.fetch_add(1);
      if (item >= items || Failed()) return;
      if (!RunItem(item / seeds_, static_cast<int>(item % seeds_))) return;
      const size_t d = done_.fetch_add(1) + 1;
      if (spec_.progress) {
        std::lock_guard<std::mutex> l(mu_);
        std::fprintf(stderr, "\r  %zu/%zu runs", d, items);
        if (d == items) std::fprintf(stderr, "\n");
      }
    }
  }

  // The request sequence of (cell, seed) and what policies may know of it.
  StatusOr<std::vector<Request>> Workload(const MatrixCell& c, int s, RunContext& ctx) {
    const uint64_t seed = spec_.seed_base + static_cast<uint64_t>(s);
    const GpuTable& t = *c.table;
    StatusOr<std::vector<Request>> reqs = InvalidArgumentError("no workload");
    if (c.kind == "synthetic") {
      reqs = GenerateSynthetic(t, {c.mix, c.load, c.gpus, spec_.events, seed, spec_.lifetime});
      ctx.class_weights = MixClassWeights(t, c.mix);
      if (c.mix.bundle_fraction == 0) ctx.class_rates = ClassRates(c);
    } else if (c.kind == "trace") {
      TraceSpec ts;
      ts.mapping = spec_.trace_mapping;
      ts.arrivals = spec_.trace_arrivals;
      ts.include_multi_gpu = spec_.trace_multi_gpu;
      ts.lifetime_cap_quantile = spec_.trace_lifetime_cap;
      ts.lifetime = spec_.lifetime;
      ts.load = c.load;
      ts.gpus = c.gpus;
      ts.events = spec_.events;
      ts.seed = seed;
      TraceSummary sum;
      reqs = BuildTraceRequests(t, pods_, ts, &sum);
      if (s == 0) {
        std::lock_guard<std::mutex> l(mu_);
        trace_summary_ = sum;
      }
    } else {
      int gpus = 1;
      reqs = AdversarialScript(t, c.workload.substr(7), &gpus);
    }
    if (!reqs.ok()) return reqs;
    if (ctx.class_weights.empty()) ctx.class_weights = EmpiricalClassWeights(t, *reqs);
    if (c.kind == "trace") {
      double sum = 0;
      for (const Request& r : *reqs) sum += r.lifetime;
      ctx.time_unit = reqs->empty() ? 1 : sum / static_cast<double>(reqs->size());
    }
    return reqs;
  }

  // Every policy on the sequence of (cell ci, seed s); false on an error.
  bool RunItem(size_t ci, int s) {
    const MatrixCell& c = cells_[ci];
    RunContext ctx;
    ctx.table = c.table;
    ctx.gpus = c.gpus;
    StatusOr<std::vector<Request>> reqs = Workload(c, s, ctx);
    if (!reqs.ok()) {
      Fail(reqs.status());
      return false;
    }
    SimOptions so = spec_.sim;
    if (c.kind == "script") so.warmup_fraction = 0;
    for (size_t pi = 0; pi < spec_.policies.size(); ++pi) {
      const std::string& name = spec_.policies[pi];
      if ((name == "B11" || name == "B11s") && !B11Eligible(spec_, c)) continue;
      std::unique_ptr<Allocator> alloc = MakeAllocator(name, spec_.planner, spec_.validate);
      const auto t0 = std::chrono::steady_clock::now();
      StatusOr<RunResult> r = RunSimulation(*alloc, ctx, *reqs, so);
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!r.ok()) {
        Fail(r.status().WithContext(c.workload + " load " + std::to_string(c.load) + " gpus " +
                                    std::to_string(c.gpus) + " seed " +
                                    std::to_string(spec_.seed_base + s)));
        return false;
      }
      LatSet ls;
      if (const Allocator::Latencies* l = alloc->latencies()) ls.Add(*l);
      std::lock_guard<std::mutex> l(mu_);
      PolicyRuns& dst = runs_[ci][pi];
      dst.seeds[s] = std::move(r).value();
      dst.lat.Merge(ls);
      dst.seconds += secs;
    }
    return true;
  }

  const MatrixSpec& spec_;
  const std::vector<MatrixCell>& cells_;
  const std::vector<TracePod>& pods_;
  const int seeds_;
  std::mutex mu_;
  Status first_error_;                         // guarded by mu_
  std::vector<std::vector<PolicyRuns>> runs_;  // [cell][policy], guarded by mu_
  TraceSummary trace_summary_;                 // guarded by mu_
  std::atomic<size_t> next_{0};
  std::atomic<size_t> done_{0};
};

}  // namespace

std::vector<std::string> KnownPolicies() {
  std::vector<std::string> out = {"migd", "migd-slice", "migd-order", "migd-separable",
                                  "migd-noidle"};
  for (const std::string& b : BaselineNames()) out.push_back(b);
  out.push_back("B12");
  out.push_back("B14");
  return out;
}

std::unique_ptr<Allocator> MakeAllocator(const std::string& name,
                                         const PlannerPolicyOptions& planner, bool validate) {
  if (name.rfind("migd", 0) == 0 &&
      (name == "migd" || name == "migd-slice" || name == "migd-order" || name == "migd-separable" ||
       name == "migd-noidle")) {
    PlannerPolicyOptions o = planner;
    o.name = name;
    o.keep_idle = name != "migd-noidle";
    o.value_policy = name != "migd-order";
    o.separable = name == "migd-separable";
    o.objective =
        name == "migd-slice" ? planner::Objective::kSliceWeighted : planner::Objective::kCount;
    return std::make_unique<PlacementAllocator>(MakePlannerPolicy(o), validate);
  }
  if (name == "B12") return std::make_unique<CountingBound>(CountingBound::kRepack);
  if (name == "B14") return std::make_unique<CountingBound>(CountingBound::kCapacity);
  std::unique_ptr<Policy> p = MakeBaseline(name);
  if (!p) return nullptr;
  return std::make_unique<PlacementAllocator>(std::move(p), validate);
}

StatusOr<Json> RunMatrix(const MatrixSpec& spec) {
  const mig::GpuModel* model = mig::Catalog::Default().FindModel(spec.model);
  if (model == nullptr) return InvalidArgumentError("unknown model " + spec.model);
  for (const std::string& p : spec.policies) {
    if (!MakeAllocator(p, spec.planner, false)) return InvalidArgumentError("unknown policy " + p);
  }
  TableSet tables(*model);
  MIGD_ASSIGN_OR_RETURN(std::vector<MatrixCell> cells, BuildCells(spec, tables));
  std::vector<TracePod> pods;
  if (spec.trace_path && !spec.script) {
    MIGD_ASSIGN_OR_RETURN(pods, ReadAlibabaCsv(*spec.trace_path));
  }
  MIGD_RETURN_IF_ERROR(tables.Check());
  const int seeds = spec.script ? 1 : spec.seeds;
  MatrixRun run(spec, cells, pods, seeds);
  MIGD_RETURN_IF_ERROR(run.Run());
  Json doc = DocHeader(spec, seeds, tables.all(), &run.trace_summary());
  B11Cache b11;
  for (size_t ci = 0; ci < cells.size(); ++ci) {
    doc["cells"].push_back(CellJson(spec, cells[ci], run.runs()[ci], b11));
  }
  return doc;
}

}  // namespace migd::bench
