// dra_bench: kube-scheduler's DRA allocator fed by NVIDIA's device order
// (destroy on unprepare) vs migd's order with Idle reuse, on the placement
// benchmark's workloads (docs/benchmarks/dra.md).
//
// Example:
//   dra_bench --mix uniform,small-heavy --load 0.7,0.9 --gpus 1,8 --seeds 5
//       --events 4000 --latency create=100,destroy=120,reuse=1 --out-json out.json
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/placement/dra_bench.h"

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
  CLI::App app{
      "DRA: NVIDIA's device order vs migd's order with Idle reuse (docs/benchmarks/dra.md)"};
  migd::bench::DraBenchSpec spec;
  std::string mixes = "uniform", loads = "0.9", gpus = "8", latency, mapping = "compute-ceil";
  std::string trace, script, out_json;
  app.add_option("--model", spec.model, "GPU model key of the catalogue")->capture_default_str();
  app.add_option("--mix", mixes, "comma list of mixes (placement_bench --mix)")
      ->capture_default_str();
  app.add_option("--load", loads, "comma list of offered loads rho")->capture_default_str();
  app.add_option("--gpus", gpus, "comma list of GPU counts")->capture_default_str();
  app.add_option("--seeds", spec.seeds, "seeds per cell")->capture_default_str();
  app.add_option("--events", spec.events, "arrivals per run")->capture_default_str();
  app.add_option("--trace", trace, "Alibaba cluster-trace-gpu-v2023 pod list CSV (replaces --mix)");
  app.add_option("--trace-mapping", mapping, "compute-ceil | memory-eighths")
      ->capture_default_str();
  app.add_option("--script", script, "adversarial script: dra933 | reverse");
  app.add_option("--latency", latency,
                 "latency model, ms: create=...,destroy=...,reuse=... (defaults 100, 120, 1)");
  app.add_option("--kubernetes-minor", spec.kubernetes_minor,
                 "allocator modelled: 36 (slices sorted by name) or 35 (unsorted)")
      ->capture_default_str();
  app.add_option("--jobs", spec.jobs, "worker threads")->capture_default_str();
  app.add_flag("--validate", spec.validate, "check every layout with mig::Layout");
  app.add_option("--out-json", out_json, "write the results document here");
  CLI11_PARSE(app, argc, argv);

  auto fail = [](const migd::Status& s) {
    std::fprintf(stderr, "dra_bench: %s\n", s.ToString().c_str());
    return 2;
  };
  spec.mixes = SplitList(mixes);
  try {
    spec.loads.clear();
    spec.gpus.clear();
    for (const std::string& l : SplitList(loads)) spec.loads.push_back(std::stod(l));
    for (const std::string& g : SplitList(gpus)) spec.gpus.push_back(std::stoi(g));
  } catch (const std::exception&) {
    return fail(migd::InvalidArgumentError("bad --load or --gpus list"));
  }
  if (auto l = migd::bench::ParseDraLatency(latency); l.ok()) {
    spec.latency = *l;
  } else {
    return fail(l.status());
  }
  if (auto m = migd::bench::ParseTraceMapping(mapping); m.ok()) {
    spec.trace_mapping = *m;
  } else {
    return fail(m.status());
  }
  if (!trace.empty()) spec.trace_path = trace;
  if (!script.empty()) spec.script = script;
  migd::StatusOr<nlohmann::json> doc = migd::bench::RunDraBench(spec);
  if (!doc.ok()) return fail(doc.status());
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  (*doc)["command"] = cmd;
  if (!out_json.empty()) {
    std::ofstream out(out_json);
    out << doc->dump(1) << "\n";
    if (!out) return fail(migd::InternalError("cannot write " + out_json));
  }
  std::fputs(migd::bench::DraBenchMarkdown(*doc).c_str(), stdout);
  return 0;
}
