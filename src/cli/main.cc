// migctl: the command-line tool of migd. Subcommands live in migd_cli
// (probe.h, plan.h, sim_stats.h); main() only parses flags and sets up logging.
//
// Exit codes: 0 ok, 1 usage error, 2 NVML (or simulator state) unavailable,
// 3 catalogue mismatch (probe --compare-catalog), 4 no plan (plan).
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "base/logging.h"
#include "cli/plan.h"
#include "cli/probe.h"
#include "cli/sim_stats.h"

int main(int argc, char** argv) {
  CLI::App app{"migctl: inspect NVIDIA MIG on this node (migd's command-line tool)"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level,
                 "trace, debug, info, warn, error, critical or off (stderr)")
      ->capture_default_str();

  migd::cli::ProbeOptions probe;
  CLI::App* probe_cmd = app.add_subcommand(
      "probe",
      "Read-only NVML inventory: versions, bound symbols, GPUs, GI profiles and placements, "
      "live GI/CI pairs. Never creates, destroys or changes MIG mode.");
  probe_cmd->add_option("--nvml-library", probe.nvml_library,
                        "Path of the NVML library (default libnvidia-ml.so.1)");
  probe_cmd->add_option("-o,--output", probe.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  probe_cmd->add_flag("--compare-catalog", probe.compare_catalog,
                      "Compare NVML's profiles with the built-in catalogue; exit 3 on "
                      "differences");

  migd::cli::SimStatsOptions stats;
  CLI::App* stats_cmd = app.add_subcommand(
      "sim-stats", "Per-function NVML call counters stored in a simulator state file");
  stats_cmd->add_option("--state", stats.state_file,
                        "Simulator state file (default $MIGD_SIM_STATE)");
  stats_cmd->add_option("-o,--output", stats.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  migd::cli::PlanOptions plan;
  CLI::App* plan_cmd = app.add_subcommand(
      "plan",
      "Offline placement: run migd's planner on a layout file and print the plan and why "
      "(touches no GPU)");
  plan_cmd->add_option("--layout", plan.layout_file,
                       "Planner input document (GPUs, models, occupied placements); see "
                       "docs/planner.md")
      ->required();
  plan_cmd->add_option("--request", plan.request,
                       "Instances to place, e.g. '3g.40gb,1g.10gb' or 'gpu1/3g.40gb@4:4' "
                       "(overrides the file's request)");
  plan_cmd->add_option("-o,--output", plan.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the error
    return rc == 0 ? migd::cli::kExitOk : migd::cli::kExitUsage;
  }

  migd::Status logging = migd::InitLogging({.level = log_level, .to_stderr = true});
  if (!logging.ok()) {
    std::cerr << "migctl: " << logging.message() << "\n";
    return migd::cli::kExitUsage;
  }
  if (probe_cmd->parsed()) return migd::cli::RunProbe(probe, std::cout, std::cerr);
  if (plan_cmd->parsed()) return migd::cli::RunPlan(plan, std::cout, std::cerr);
  if (stats_cmd->parsed()) return migd::cli::RunSimStats(stats, std::cout, std::cerr);
  std::cerr << app.help();
  return migd::cli::kExitUsage;
}
