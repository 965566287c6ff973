// placement_bench: the MIG placement benchmark (docs/benchmarks/placement.md).
// Runs the product planner (migd) and the baselines on common request
// sequences and writes per-cell summaries with paired 95% CIs as JSON.
//
// Example:
//   placement_bench --policies migd,B1,B2,B12 --mix uniform --load 0.9 --gpus 8
//       --seeds 10 --events 20000 --out-json out.json
#include <absl/strings/str_split.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "bench/placement/runner.h"
#include "planner/planner.h"

namespace {

using migd::bench::MatrixSpec;

// The flags that are not MatrixSpec fields as they stand.
struct Args {
  std::string policies =
      "migd,migd-slice,migd-order,B1,B2,B3,B4a,B4b,B5,B6,B8,B9,B10,B11,B11s,B12,B14";
  std::string mixes = "uniform";
  std::string loads = "0.9";
  std::string gpus = "8";
  std::string lifetime = "exp";
  std::string mode = "loss";
  std::string trace_mapping = "compute-ceil";
  std::string trace_arrivals = "poisson";
  std::string trace_multi = "gang";
  std::string trace, script, out_json;
  std::string reuse_margin = "auto";  // planner.reuseMargin's default
  bool quiet = false;
};

std::vector<std::string> SplitList(const std::string& s) {
  return absl::StrSplit(s, ',', absl::SkipEmpty());
}

void AddWorkloadOptions(CLI::App& app, MatrixSpec& spec, Args& a) {
  app.add_option("--mix", a.mixes,
                 "comma list of mixes: uniform, small-heavy, no-7g, large-heavy, bimodal, "
                 "uniform-dm, multi, or class:weight,... (one custom mix)")
      ->capture_default_str();
  app.add_option("--load", a.loads, "comma list of offered loads rho")->capture_default_str();
  app.add_option("--gpus", a.gpus, "comma list of GPU counts N")->capture_default_str();
  app.add_option("--seeds", spec.seeds, "seeds per cell")->capture_default_str();
  app.add_option("--seed-base", spec.seed_base, "first seed")->capture_default_str();
  app.add_option("--events", spec.events, "arrivals per run")->capture_default_str();
  app.add_option("--warmup", spec.sim.warmup_fraction, "fraction of arrivals not measured")
      ->capture_default_str();
  app.add_option("--model", spec.model,
                 "GPU model key of the catalogue (a100-40gb, h100-80gb, h200-141gb, ...)")
      ->capture_default_str();
  app.add_option("--lifetime", a.lifetime, "exp | lognormal (Alibaba fit)")->capture_default_str();
  app.add_option("--mode", a.mode, "loss | queue")->capture_default_str();
  app.add_flag("--backfill", spec.sim.backfill, "queue mode: later requests may pass the head");
  app.add_option("--patience", spec.sim.patience,
                 "queue mode: abandon after this many mean lifetimes")
      ->capture_default_str();
  app.add_option("--trace", a.trace,
                 "Alibaba cluster-trace-gpu-v2023 pod list CSV (replaces --mix)");
  app.add_option("--trace-mapping", a.trace_mapping, "compute-ceil | memory-eighths")
      ->capture_default_str();
  app.add_option("--trace-arrivals", a.trace_arrivals,
                 "poisson (trace order, Poisson times) | trace (creation gaps, compressed)")
      ->capture_default_str();
  app.add_option("--trace-multi", a.trace_multi, "gang (k-GPU pods as k x 7g) | exclude")
      ->capture_default_str();
  app.add_option("--trace-lifetime-cap", spec.trace_lifetime_cap,
                 "cap lifetimes at this quantile of single-GPU pods (1 = no cap)")
      ->capture_default_str();
  app.add_option("--script", a.script, "adversarial script: dra933 | reverse | churn4g");
}

void AddRunOptions(CLI::App& app, MatrixSpec& spec, Args& a) {
  app.add_option("--policies", a.policies,
                 "comma list: migd (value policy, count objective), migd-slice (value policy, "
                 "slice-weighted), migd-order (the cost order, no values), migd-noidle, B1, B2, "
                 "B3, B4a, B4b, B5, B6, B8, B9, B10, B11 and B11s (N=1 only), B12, B14")
      ->capture_default_str();
  app.add_option("--half-life", spec.planner.half_life,
                 "migd adapter: DemandMix half-life in mean lifetimes (0 = no decay)")
      ->capture_default_str();
  app.add_option("--reuse-margin", a.reuse_margin,
                 "migd adapter: planner.reuseMargin, auto, off or the value a reuse may give "
                 "up against the best create")
      ->capture_default_str();
  app.add_option("--latency-repeats", spec.planner.latency_repeats,
                 "migd adapter: time each MakePlan call this many times, keep the fastest")
      ->capture_default_str();
  app.add_option("--jobs", spec.jobs, "worker threads")->capture_default_str();
  app.add_flag("--validate", spec.validate, "check every layout with mig::Layout (slow)");
  app.add_flag("--progress", spec.progress, "progress on stderr");
  app.add_flag("--quiet", a.quiet, "no table on stdout");
  app.add_option("--out-json", a.out_json, "write the results document here");
}

migd::Status ApplyArgs(const Args& a, MatrixSpec& spec) {
  spec.policies = SplitList(a.policies);
  spec.mixes = a.mixes.find(':') != std::string::npos ? std::vector<std::string>{a.mixes}
                                                      : SplitList(a.mixes);
  try {
    for (const std::string& l : SplitList(a.loads)) spec.loads.push_back(std::stod(l));
    for (const std::string& g : SplitList(a.gpus)) spec.gpus.push_back(std::stoi(g));
  } catch (const std::exception&) {
    return migd::InvalidArgumentError("bad --load or --gpus list");
  }
  MIGD_ASSIGN_OR_RETURN(spec.lifetime, migd::bench::ParseLifetime(a.lifetime));
  MIGD_ASSIGN_OR_RETURN(spec.planner.reuse_margin, migd::planner::ParseReuseMargin(a.reuse_margin));
  MIGD_ASSIGN_OR_RETURN(spec.sim.mode, migd::bench::ParseArrivalMode(a.mode));
  MIGD_ASSIGN_OR_RETURN(spec.trace_mapping, migd::bench::ParseTraceMapping(a.trace_mapping));
  MIGD_ASSIGN_OR_RETURN(spec.trace_arrivals, migd::bench::ParseTraceArrivals(a.trace_arrivals));
  if (a.trace_multi != "gang" && a.trace_multi != "exclude") {
    return migd::InvalidArgumentError("--trace-multi must be gang or exclude");
  }
  spec.trace_multi_gpu = a.trace_multi == "gang";
  if (!a.trace.empty()) spec.trace_path = a.trace;
  if (!a.script.empty()) spec.script = a.script;
  return migd::OkStatus();
}

void PrintCells(const nlohmann::json& doc) {
  for (const nlohmann::json& cell : doc["cells"]) {
    std::printf("%s load %.2f gpus %d (best baseline: %s / %s)\n",
                cell["workload"].get<std::string>().c_str(), cell["load"].get<double>(),
                cell["gpus"].get<int>(), cell["best"]["acc"].get<std::string>().c_str(),
                cell["best"]["slice"].get<std::string>().c_str());
    for (const auto& [name, p] : cell["policies"].items()) {
      std::printf(
          "  %-12s acc %.4f ±%.4f  slice %.4f ±%.4f  frag %.3f  cr/acc %.2f  "
          "rc/acc %.3f  %.1fs\n",
          name.c_str(), p["acc"]["mean"].get<double>(), p["acc"]["ci"].get<double>(),
          p["slice"]["mean"].get<double>(), p["slice"]["ci"].get<double>(), p["frag"].get<double>(),
          p["creates_per_acc"].get<double>(), p["reclaims_per_acc"].get<double>(),
          p["cpu_seconds"].get<double>());
    }
    if (cell.contains("b11")) {
      std::printf("  %-12s acc %.4f         slice %.4f (analytic)\n", "B11*",
                  cell["b11"]["acc"].get<double>(), cell["b11"]["slice"].get<double>());
    }
    if (!cell.contains("paired")) continue;
    for (const char* k : {"acc", "slice"}) {
      const std::string best = cell["best"][k].get<std::string>();
      const std::string key = "migd-" + best;
      if (!cell["paired"].contains(key)) continue;
      const auto& d = cell["paired"][key][k];
      std::printf("  migd - %s (%s): %+.4f ±%.4f\n", best.c_str(), k, d["mean"].get<double>(),
                  d["ci"].get<double>());
    }
  }
}

int Fail(const migd::Status& s) {
  std::fprintf(stderr, "placement_bench: %s\n", s.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"MIG placement benchmark: migd's planner vs baselines B1-B14"};
  MatrixSpec spec;
  Args a;
  AddWorkloadOptions(app, spec, a);
  AddRunOptions(app, spec, a);
  CLI11_PARSE(app, argc, argv);
  if (migd::Status s = ApplyArgs(a, spec); !s.ok()) return Fail(s);

  migd::StatusOr<nlohmann::json> doc = migd::bench::RunMatrix(spec);
  if (!doc.ok()) return Fail(doc.status());
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  (*doc)["command"] = cmd;
  if (!a.out_json.empty()) {
    std::ofstream out(a.out_json);
    out << doc->dump(1) << "\n";
    if (!out) return Fail(migd::InternalError("cannot write " + a.out_json));
  }
  if (!a.quiet) PrintCells(*doc);
  return 0;
}
