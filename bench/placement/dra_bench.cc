#include "bench/placement/dra_bench.h"

#include <absl/strings/str_format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include "base/status_macros.h"
#include "bench/placement/runner.h"
#include "bench/placement/sim.h"
#include "bench/placement/table.h"
#include "mig/catalog.h"

namespace migd::bench {
namespace {

using Json = nlohmann::json;

constexpr DraOrder kOrders[] = {DraOrder::kNvidia, DraOrder::kMigd};
constexpr const char* kNames[] = {"dra-nvidia", "dra-migd"};
constexpr const char* kMetrics[] = {"acc",         "creates_per_1000", "destroys_per_1000",
                                    "reuse_share", "ttr_mean_ms",      "ttr_p50_ms",
                                    "ttr_p99_ms"};
constexpr size_t kNumMetrics = sizeof(kMetrics) / sizeof(kMetrics[0]);

struct Cell {
  std::string kind;  // synthetic, trace, script
  std::string workload;
  Mix mix;
  double load = 0;
  int gpus = 1;
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i =
      std::min(v.size() - 1, static_cast<size_t>(std::floor(q * (v.size() - 1) + 0.5)));
  return v[i];
}

// The metrics of one run, in kMetrics order.
std::vector<double> Metrics(const RunResult& r, const DraPolicy& p, int64_t warmup) {
  std::vector<double> ttr;
  for (const auto& [id, ms] : p.ready_ms()) {
    if (id >= warmup) ttr.push_back(ms);
  }
  const double acc = static_cast<double>(std::max<int64_t>(1, r.accepted));
  const double instances = static_cast<double>(r.ops.creates + r.ops.reuses);
  double mean = 0;
  for (double x : ttr) mean += x;
  if (!ttr.empty()) mean /= static_cast<double>(ttr.size());
  return {r.acceptance(),
          1000.0 * static_cast<double>(r.ops.creates) / acc,
          1000.0 * static_cast<double>(r.ops.destroys) / acc,
          instances > 0 ? static_cast<double>(r.ops.reuses) / instances : 0,
          mean,
          Quantile(ttr, 0.5),
          Quantile(ttr, 0.99)};
}

Json Stat(const std::vector<double>& x) {
  const MeanCi m = Summarise(x);
  return Json{{"mean", m.mean}, {"ci", m.half_width}};
}

StatusOr<std::vector<Cell>> Cells(const DraBenchSpec& spec) {
  std::vector<Cell> cells;
  if (spec.script) {
    cells.push_back({"script", "script:" + *spec.script, {}, 0, 1});
    return cells;
  }
  std::vector<std::string> workloads = spec.mixes;
  if (spec.trace_path) workloads = {"trace"};
  for (const std::string& w : workloads) {
    for (double load : spec.loads) {
      for (int g : spec.gpus) {
        Cell c{spec.trace_path ? "trace" : "synthetic", w, {}, load, g};
        if (!spec.trace_path) {
          StatusOr<Mix> mix = ParseMix(w);
          if (!mix.ok()) return mix.status();
          c.mix = *mix;
        } else {
          c.workload = "trace:" + std::string(TraceMappingName(spec.trace_mapping));
        }
        cells.push_back(std::move(c));
      }
    }
  }
  return cells;
}

// results[cell][order][metric][seed]
using Results = std::vector<std::vector<std::vector<std::vector<double>>>>;

// The request sequence and context of one (cell, seed).
StatusOr<std::vector<Request>> Workload(const DraBenchSpec& spec, const GpuTable& table,
                                        const std::vector<TracePod>& pods, const Cell& c,
                                        uint64_t seed, RunContext* ctx, SimOptions* so) {
  ctx->table = &table;
  ctx->gpus = c.gpus;
  so->warmup_fraction = spec.warmup_fraction;
  StatusOr<std::vector<Request>> reqs = InvalidArgumentError("no workload");
  if (c.kind == "synthetic") {
    reqs = GenerateSynthetic(
        table, {c.mix, c.load, c.gpus, spec.events, seed, LifetimeDist::kExponential});
    ctx->class_weights = MixClassWeights(table, c.mix);
  } else if (c.kind == "trace") {
    TraceSpec ts;
    ts.mapping = spec.trace_mapping;
    ts.load = c.load;
    ts.gpus = c.gpus;
    ts.events = spec.events;
    ts.seed = seed;
    reqs = BuildTraceRequests(table, pods, ts);
  } else {
    int gpus = 1;
    reqs = AdversarialScript(table, *spec.script, &gpus);
    ctx->gpus = gpus;
    so->warmup_fraction = 0;
  }
  if (!reqs.ok()) return reqs;
  if (ctx->class_weights.empty()) ctx->class_weights = EmpiricalClassWeights(table, *reqs);
  if (c.kind == "trace" && !reqs->empty()) {
    double sum = 0;
    for (const Request& r : *reqs) sum += r.lifetime;
    ctx->time_unit = sum / static_cast<double>(reqs->size());
  }
  return reqs;
}

// Both drivers on one (cell, seed): metrics[order][metric].
StatusOr<std::vector<std::vector<double>>> RunItem(const DraBenchSpec& spec, const GpuTable& table,
                                                   const std::vector<TracePod>& pods, const Cell& c,
                                                   uint64_t seed) {
  RunContext ctx;
  SimOptions so;
  MIGD_ASSIGN_OR_RETURN(std::vector<Request> reqs, Workload(spec, table, pods, c, seed, &ctx, &so));
  std::vector<std::vector<double>> out;
  for (DraOrder order : kOrders) {
    DraPolicyOptions po;
    po.order = order;
    po.kubernetes_minor = spec.kubernetes_minor;
    po.latency = spec.latency;
    PlacementAllocator alloc(std::make_unique<DraPolicy>(po), spec.validate);
    MIGD_ASSIGN_OR_RETURN(RunResult r, RunSimulation(alloc, ctx, reqs, so));
    const int64_t warmup =
        static_cast<int64_t>(so.warmup_fraction * static_cast<double>(reqs.size()));
    out.push_back(Metrics(r, static_cast<const DraPolicy&>(alloc.policy()), warmup));
  }
  return out;
}

Json ResultsDoc(const DraBenchSpec& spec, const std::vector<Cell>& cells, const Results& results,
                int seeds) {
  Json doc;
  doc["spec"] = {{"model", spec.model},
                 {"seeds", seeds},
                 {"events", spec.events},
                 {"warmup_fraction", spec.warmup_fraction},
                 {"kubernetes_minor", spec.kubernetes_minor},
                 {"latency_ms",
                  {{"create", spec.latency.create_ms},
                   {"destroy", spec.latency.destroy_ms},
                   {"reuse", spec.latency.reuse_ms}}}};
  for (size_t ci = 0; ci < cells.size(); ++ci) {
    Json cell{{"workload", cells[ci].workload}, {"load", cells[ci].load}, {"gpus", cells[ci].gpus}};
    for (size_t o = 0; o < 2; ++o) {
      for (size_t k = 0; k < kNumMetrics; ++k) {
        cell["policies"][kNames[o]][kMetrics[k]] = Stat(results[ci][o][k]);
      }
    }
    for (size_t k = 0; k < kNumMetrics; ++k) {
      std::vector<double> diff(seeds);
      for (int s = 0; s < seeds; ++s) diff[s] = results[ci][1][k][s] - results[ci][0][k][s];
      cell["paired"][kMetrics[k]] = Stat(diff);
    }
    doc["cells"].push_back(std::move(cell));
  }
  return doc;
}

}  // namespace

StatusOr<Json> RunDraBench(const DraBenchSpec& spec) {
  const mig::GpuModel* model = mig::Catalog::Default().FindModel(spec.model);
  if (model == nullptr) return InvalidArgumentError("unknown GPU model " + spec.model);
  MIGD_ASSIGN_OR_RETURN(std::vector<Cell> cells, Cells(spec));
  MIGD_ASSIGN_OR_RETURN(GpuTable table, GpuTable::Build(*model, false));
  std::vector<TracePod> pods;
  if (spec.trace_path) {
    MIGD_ASSIGN_OR_RETURN(pods, ReadAlibabaCsv(*spec.trace_path));
  }
  const int seeds = spec.script ? 1 : spec.seeds;
  Results results(cells.size(), std::vector<std::vector<std::vector<double>>>(
                                    2, std::vector<std::vector<double>>(
                                           kNumMetrics, std::vector<double>(seeds))));
  std::mutex mu;
  Status first_error;
  std::atomic<size_t> next{0};
  const size_t items = cells.size() * static_cast<size_t>(seeds);
  auto work = [&]() {
    for (size_t item = next.fetch_add(1); item < items; item = next.fetch_add(1)) {
      const int s = static_cast<int>(item % seeds);
      StatusOr<std::vector<std::vector<double>>> m =
          RunItem(spec, table, pods, cells[item / seeds], spec.seed_base + s);
      std::lock_guard<std::mutex> l(mu);
      if (!m.ok()) {
        if (first_error.ok()) first_error = m.status();
        return;
      }
      for (size_t o = 0; o < 2; ++o) {
        for (size_t k = 0; k < kNumMetrics; ++k) results[item / seeds][o][k][s] = (*m)[o][k];
      }
    }
  };
  std::vector<std::thread> workers;
  for (int j = 0; j < std::max(1, spec.jobs); ++j) workers.emplace_back(work);
  for (std::thread& t : workers) t.join();
  MIGD_RETURN_IF_ERROR(first_error);
  return ResultsDoc(spec, cells, results, seeds);
}

std::string DraBenchMarkdown(const Json& doc) {
  std::string out =
      "| workload | ρ | GPUs | driver | acceptance | creates / 1k claims | destroys / 1k claims | "
      "reused | time-to-ready mean / p50 / p99 (ms) |\n"
      "|---|---|---|---|---|---|---|---|---|\n";
  auto pm = [](const Json& s, const char* fmt) {
    return absl::StrFormat(fmt, s["mean"].get<double>(), s["ci"].get<double>());
  };
  for (const Json& cell : doc["cells"]) {
    for (const char* name : kNames) {
      const Json& p = cell["policies"][name];
      out += absl::StrFormat(
          "| %s | %.2f | %d | %s | %s | %s | %s | %s | %.0f / %.0f / %.0f |\n",
          cell["workload"].get<std::string>(), cell["load"].get<double>(), cell["gpus"].get<int>(),
          name, pm(p["acc"], "%.4f ± %.4f"), pm(p["creates_per_1000"], "%.0f ± %.0f"),
          pm(p["destroys_per_1000"], "%.0f ± %.0f"), pm(p["reuse_share"], "%.2f ± %.2f"),
          p["ttr_mean_ms"]["mean"].get<double>(), p["ttr_p50_ms"]["mean"].get<double>(),
          p["ttr_p99_ms"]["mean"].get<double>());
    }
    const Json& d = cell["paired"];
    out += absl::StrFormat("| | | | migd − NVIDIA | %s | %s | %s | | %s |\n",
                           pm(d["acc"], "%+.4f ± %.4f"), pm(d["creates_per_1000"], "%+.0f ± %.0f"),
                           pm(d["destroys_per_1000"], "%+.0f ± %.0f"),
                           pm(d["ttr_mean_ms"], "%+.0f ± %.0f"));
  }
  return out;
}

}  // namespace migd::bench
