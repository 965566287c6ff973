// latency_bench: the engine-level latency benchmark. Runs the sections asked
// for (sections.h) and writes their tables as Markdown (--out-md) and the
// time-to-ready data for the plot (--out-dat). See bench/latency/run.sh.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "base/logging.h"
#include "bench/latency/latency_model.h"
#include "bench/latency/sections.h"
#include "planner/planner.h"

int main(int argc, char** argv) {
  using namespace migd::bench::latency;  // NOLINT: benchmark binary
  CLI::App app{"migd latency benchmark (engine level, simulated NVML)"};
  BenchConfig cfg;
  cfg.base.library = MIGD_SIM_LIBRARY;
  cfg.base.base_dir = "/tmp";
  cfg.base.sim_dir = "/dev/shm";
  std::string out_md = "-";
  std::string models_file = MIGD_LATENCY_MODELS;
  std::vector<std::string> scenario_names = {"a100-smi", "hami-claim"};
  std::vector<std::string> sections = {"ops", "policies", "recovery", "footprint"};
  bool no_fsync = false;
  std::string log_level = "info";
  std::string planner_policy = "value";
  app.add_option("--library", cfg.base.library, "libnvidia-ml-sim.so.1 to load");
  app.add_option("--dir", cfg.base.base_dir, "where the record stores live");
  app.add_option("--sim-dir", cfg.base.sim_dir, "where the simulator's state files live (tmpfs)");
  app.add_option("--out-md", out_md, "Markdown tables ('-': stdout)");
  app.add_option("--out-dat", cfg.dat_path, "time-to-ready data for gnuplot");
  app.add_option("--trace-dir", cfg.trace_dir, "Alibaba openb_pod_list_*.csv directory");
  app.add_option("--models", models_file, "latency models (JSON; latency_model.h)");
  app.add_option("--scenarios", scenario_names, "models to report, primary first")->delimiter(',');
  app.add_option("--sections", sections, "ops, policies, recovery, footprint")->delimiter(',');
  app.add_option("--churn-allocations", cfg.churn_allocations);
  app.add_option("--trace-allocations", cfg.trace_allocations);
  app.add_option("--seed", cfg.seed, "workload seed");
  app.add_option("--bound-states", cfg.bound_states, "offline bound: frontier limit");
  app.add_option("--policies", cfg.policies, "policies to run (default: all)")->delimiter(',');
  app.add_option("--recovery-gpus", cfg.recovery_gpus)->delimiter(',');
  app.add_flag("--quick", cfg.quick, "small sizes, no sleeping latency model (CI)");
  app.add_flag("--no-fsync", no_fsync, "record store without fsync (counts unchanged)");
  app.add_option("--planner", planner_policy,
                 "policies section: migd's planner.policy (value, the daemon's default, or cost)")
      ->check(CLI::IsMember({"value", "cost"}));
  std::string reuse_margin = "auto";  // planner.reuseMargin's default
  app.add_option("--reuse-margin", reuse_margin,
                 "migd's planner.reuseMargin: auto, off or a number (value policy only)")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "migd log level (info: as the daemon logs)");
  CLI11_PARSE(app, argc, argv);

  if (auto st = migd::InitLogging({.level = log_level}); !st.ok()) {
    std::cerr << "latency_bench: " << st << "\n";
    return 2;
  }
  auto models = LoadLatencyModels(models_file);
  if (!models.ok()) {
    std::cerr << "latency_bench: " << models.status() << "\n";
    return 2;
  }
  for (const std::string& name : scenario_names) {
    auto m = FindLatencyModel(*models, name);
    if (!m.ok()) {
      std::cerr << "latency_bench: --scenarios: " << m.status() << "\n";
      return 2;
    }
    cfg.scenarios.push_back(*m);
  }
  cfg.base.store_sync = !no_fsync;
  cfg.base.value_policy = planner_policy == "value";
  migd::StatusOr<migd::planner::ReuseMargins> margin =
      migd::planner::ParseReuseMargin(reuse_margin);
  if (!margin.ok()) {
    std::cerr << "latency_bench: " << margin.status() << "\n";
    return 2;
  }
  cfg.base.manager.reuse_margin = margin->one_gpu;
  cfg.base.manager.reuse_margin_several_gpus = margin->several_gpus;
  auto has = [&](const char* s) {
    return std::find(sections.begin(), sections.end(), s) != sections.end();
  };
  std::ostringstream md;
  struct Section {
    const char* name;
    migd::Status (*run)(const BenchConfig&, std::ostream&);
  };
  for (const Section& s :
       {Section{"ops", WriteOpsSection}, Section{"policies", WritePoliciesSection},
        Section{"recovery", WriteRecoverySection}, Section{"footprint", WriteFootprintSection}}) {
    if (!has(s.name)) continue;
    if (migd::Status st = s.run(cfg, md); !st.ok()) {
      std::cerr << "latency_bench: " << s.name << ": " << st << "\n";
      return 1;
    }
  }
  if (out_md == "-") {
    std::cout << md.str();
  } else {
    std::ofstream(out_md) << md.str();
  }
  return 0;
}
