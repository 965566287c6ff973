// placement_bench: the MIG placement benchmark (placement.md §6). Runs the
// product planner (migd) and the baselines on common request sequences and
// writes per-cell summaries with paired 95% CIs as JSON.
//
// Example:
//   placement_bench --policies migd,B1,B2,B12 --mix uniform --load 0.9 --gpus 8
//       --seeds 10 --events 20000 --out-json out.json
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/placement/runner.h"

namespace {

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using migd::bench::MatrixSpec;
  CLI::App app{"MIG placement benchmark: migd's planner vs baselines B1-B14 (placement.md §6)"};
  MatrixSpec spec;
  std::string policies = "migd,B1,B2,B3,B4a,B4b,B5,B6,B8,B9,B10,B11,B11s,B12,B14";
  std::string mixes = "uniform";
  std::string loads = "0.9";
  std::string gpus = "8";
  std::string lifetime = "exp";
  std::string mode = "loss";
  std::string trace_mapping = "compute-ceil";
  std::string trace_arrivals = "poisson";
  std::string trace_multi = "gang";
  std::string trace, script, out_json;
  bool quiet = false;
  app.add_option("--policies", policies,
                 "comma list: migd, migd-noidle, B1, B2, B3, B4a, B4b, B5, B6, B8, B9, B10, B11 "
                 "and B11s (N=1 only), B12, B14")
      ->capture_default_str();
  app.add_option("--mix", mixes,
                 "comma list of mixes: uniform, small-heavy, no-7g, large-heavy, bimodal, "
                 "uniform-dm, multi, or class:weight,... (one custom mix)")
      ->capture_default_str();
  app.add_option("--load", loads, "comma list of offered loads rho")->capture_default_str();
  app.add_option("--gpus", gpus, "comma list of GPU counts N")->capture_default_str();
  app.add_option("--seeds", spec.seeds, "seeds per cell")->capture_default_str();
  app.add_option("--seed-base", spec.seed_base, "first seed")->capture_default_str();
  app.add_option("--events", spec.events, "arrivals per run")->capture_default_str();
  app.add_option("--warmup", spec.sim.warmup_fraction, "fraction of arrivals not measured")
      ->capture_default_str();
  app.add_option("--model", spec.model, "GPU model key of the catalogue (a100-40gb, h100-80gb, "
                                        "h200-141gb, ...)")
      ->capture_default_str();
  app.add_option("--lifetime", lifetime, "exp | lognormal (Alibaba fit)")->capture_default_str();
  app.add_option("--mode", mode, "loss | queue")->capture_default_str();
  app.add_flag("--backfill", spec.sim.backfill, "queue mode: later requests may pass the head");
  app.add_option("--patience", spec.sim.patience,
                 "queue mode: abandon after this many mean lifetimes")
      ->capture_default_str();
  app.add_option("--trace", trace, "Alibaba cluster-trace-gpu-v2023 pod list CSV (replaces --mix)");
  app.add_option("--trace-mapping", trace_mapping, "compute-ceil | memory-eighths")
      ->capture_default_str();
  app.add_option("--trace-arrivals", trace_arrivals,
                 "poisson (trace order, Poisson times) | trace (creation gaps, compressed)")
      ->capture_default_str();
  app.add_option("--trace-multi", trace_multi, "gang (k-GPU pods as k x 7g) | exclude")
      ->capture_default_str();
  app.add_option("--trace-lifetime-cap", spec.trace_lifetime_cap,
                 "cap lifetimes at this quantile of single-GPU pods (1 = no cap)")
      ->capture_default_str();
  app.add_option("--script", script, "adversarial script: dra933 | reverse | churn4g");
  app.add_option("--half-life", spec.planner.half_life,
                 "migd adapter: DemandMix half-life in mean lifetimes (0 = no decay)")
      ->capture_default_str();
  app.add_option("--latency-repeats", spec.planner.latency_repeats,
                 "migd adapter: time each MakePlan call this many times, keep the fastest")
      ->capture_default_str();
  app.add_option("--jobs", spec.jobs, "worker threads")->capture_default_str();
  app.add_flag("--validate", spec.validate, "check every layout with mig::Layout (slow)");
  app.add_flag("--progress", spec.progress, "progress on stderr");
  app.add_flag("--quiet", quiet, "no table on stdout");
  app.add_option("--out-json", out_json, "write the results document here");
  CLI11_PARSE(app, argc, argv);

  spec.policies = SplitList(policies);
  spec.mixes = SplitList(mixes);
  if (mixes.find(':') != std::string::npos) spec.mixes = {mixes};
  try {
    for (const std::string& l : SplitList(loads)) spec.loads.push_back(std::stod(l));
    for (const std::string& g : SplitList(gpus)) spec.gpus.push_back(std::stoi(g));
  } catch (const std::exception&) {
    std::fprintf(stderr, "placement_bench: bad --load or --gpus list\n");
    return 2;
  }
  auto fail = [](const migd::Status& s) {
    std::fprintf(stderr, "placement_bench: %s\n", s.ToString().c_str());
    return 2;
  };
  if (auto l = migd::bench::ParseLifetime(lifetime); l.ok()) {
    spec.lifetime = *l;
  } else {
    return fail(l.status());
  }
  if (auto m = migd::bench::ParseArrivalMode(mode); m.ok()) {
    spec.sim.mode = *m;
  } else {
    return fail(m.status());
  }
  if (auto m = migd::bench::ParseTraceMapping(trace_mapping); m.ok()) {
    spec.trace_mapping = *m;
  } else {
    return fail(m.status());
  }
  if (auto a = migd::bench::ParseTraceArrivals(trace_arrivals); a.ok()) {
    spec.trace_arrivals = *a;
  } else {
    return fail(a.status());
  }
  if (trace_multi != "gang" && trace_multi != "exclude") {
    return fail(migd::InvalidArgumentError("--trace-multi must be gang or exclude"));
  }
  spec.trace_multi_gpu = trace_multi == "gang";
  if (!trace.empty()) spec.trace_path = trace;
  if (!script.empty()) spec.script = script;

  migd::StatusOr<nlohmann::json> doc = migd::bench::RunMatrix(spec);
  if (!doc.ok()) return fail(doc.status());
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  (*doc)["command"] = cmd;
  if (!out_json.empty()) {
    std::ofstream out(out_json);
    out << doc->dump(1) << "\n";
    if (!out) return fail(migd::InternalError("cannot write " + out_json));
  }
  if (!quiet) {
    for (const nlohmann::json& cell : (*doc)["cells"]) {
      std::printf("%s load %.2f gpus %d (best baseline: %s / %s)\n",
                  cell["workload"].get<std::string>().c_str(), cell["load"].get<double>(),
                  cell["gpus"].get<int>(), cell["best"]["acc"].get<std::string>().c_str(),
                  cell["best"]["slice"].get<std::string>().c_str());
      for (const auto& [name, p] : cell["policies"].items()) {
        std::printf("  %-12s acc %.4f ±%.4f  slice %.4f ±%.4f  frag %.3f  cr/acc %.2f  "
                    "rc/acc %.3f  %.1fs\n",
                    name.c_str(), p["acc"]["mean"].get<double>(), p["acc"]["ci"].get<double>(),
                    p["slice"]["mean"].get<double>(), p["slice"]["ci"].get<double>(),
                    p["frag"].get<double>(), p["creates_per_acc"].get<double>(),
                    p["reclaims_per_acc"].get<double>(), p["cpu_seconds"].get<double>());
      }
      if (cell.contains("b11")) {
        std::printf("  %-12s acc %.4f         slice %.4f (analytic)\n", "B11*",
                    cell["b11"]["acc"].get<double>(), cell["b11"]["slice"].get<double>());
      }
      if (cell.contains("paired")) {
        for (const char* k : {"acc", "slice"}) {
          const std::string best = cell["best"][k].get<std::string>();
          const std::string key = "migd-" + best;
          if (cell["paired"].contains(key)) {
            const auto& d = cell["paired"][key][k];
            std::printf("  migd - %s (%s): %+.4f ±%.4f\n", best.c_str(), k,
                        d["mean"].get<double>(), d["ci"].get<double>());
          }
        }
      }
    }
  }
  return 0;
}
