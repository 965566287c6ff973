// placement_report: turns the JSON documents of placement_bench (written by
// bench/placement/run.sh into one results folder) into
// docs/benchmarks/placement.md by filling bench/placement/report_template.md,
// plus gnuplot data and scripts for the plots.
//
// Example:
//   placement_report --results build-bench/bench-placement --meta .../meta.json
//       --template bench/placement/report_template.md
//       --out docs/benchmarks/placement.md --plots-dir docs/benchmarks/placement
//       --data-dir build-bench/bench-placement/plots
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "bench/placement/report_goals.h"
#include "bench/placement/report_plots.h"
#include "bench/placement/report_tables.h"
#include "bench/placement/report_util.h"
#include "bench/placement/template_fill.h"

namespace {

namespace fs = std::filesystem;
using migd::bench::report::Json;
using migd::bench::report::Results;

// Every placeholder value of the template; trailing newlines dropped (the
// template puts each value on its own line).
std::map<std::string, std::string> Values(const Results& r, migd::bench::report::Plotter& plotter,
                                          const std::string& plots_rel) {
  namespace rep = migd::bench::report;
  const rep::GoalSection goals = rep::Goals(r);
  const Json* synth = r.Doc("synth");
  const Json* latency = r.Doc("latency");
  std::map<std::string, std::string> v = {
      {"meta_table", rep::MetaTable(r.meta())},
      {"goal_scope", goals.scope},
      {"goal_table", goals.table},
      {"deficit_list", goals.deficits},
      {"idle_table", rep::IdleTable(r)},
      {"large_profile_table", rep::LargeProfileTable(r)},
      {"headline_tables", rep::HeadlineTables(r)},
      {"b11_states", synth ? std::to_string((*synth)["tables"][0]["states"].get<int>()) : "?"},
      {"b11_table", rep::B11Table(r)},
      {"value_vs_order_table", rep::ValueVsOrderTable(r)},
      {"solve_table", rep::SolveTable(r)},
      {"plots", plotter.HeadlinePlots(r)},
      {"half_life", synth ? rep::Fix((*synth)["planner_half_life"].get<double>(), 0) : "?"},
      {"seed_sentence", rep::SeedSentence(r)},
      {"trace_files", rep::TraceFiles(r)},
      {"full_tables", rep::FullTables(r)},
      {"per_profile_tables", rep::PerProfileTables(r)},
      {"fragmentation_tables", rep::FragmentationTables(r)},
      {"ops_tables", rep::OpsTables(r)},
      {"latency_repeats",
       std::to_string(latency ? latency->value("planner_latency_repeats", 1) : 1)},
      {"latency_tables", rep::LatencyTables(r) + plotter.LatencyPlot(r)},
      {"queue_tables", rep::QueueTables(r)},
      {"lognormal_table", r.Doc("lognormal") ? rep::HeadlineTable(*r.Doc("lognormal"), 8) : ""},
      {"h200_table", r.Doc("h200") ? rep::HeadlineTable(*r.Doc("h200"), 8) : ""},
      {"script_table", rep::ScriptTable(r)},
      {"commands", rep::Commands(r.meta())},
      {"plots_dir", plots_rel},
  };
  for (auto& [key, value] : v) {
    while (!value.empty() && value.back() == '\n') value.pop_back();
  }
  return v;
}

// The sections of the template whose documents this run has.
std::set<std::string> Sections(const Results& r) {
  std::set<std::string> s;
  for (const char* name : {"synth", "diag", "latency", "lognormal", "h200"}) {
    if (r.Doc(name)) s.insert(name);
  }
  if (r.Doc("queue-fifo") || r.Doc("queue-backfill")) s.insert("queue");
  if (!r.Scripts().empty()) s.insert("scripts");
  return s;
}

bool ReadJson(const fs::path& p, Json* out) {
  try {
    std::ifstream in(p);
    *out = Json::parse(in);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "placement_report: %s: %s\n", p.c_str(), e.what());
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes docs/benchmarks/placement.md from placement_bench results"};
  std::string results, meta_path, out_path, plots_dir, data_dir;
  std::string template_path = "bench/placement/report_template.md";
  app.add_option("--results", results, "folder of placement_bench JSON documents")->required();
  app.add_option("--meta", meta_path, "run metadata JSON (machine, commit, commands)");
  app.add_option("--template", template_path, "the report's markdown template")
      ->capture_default_str();
  app.add_option("--out", out_path, "markdown to write")->required();
  app.add_option("--plots-dir", plots_dir, "where gnuplot writes PNGs")->required();
  app.add_option("--data-dir", data_dir, "where to write .dat and .gp files")->required();
  CLI11_PARSE(app, argc, argv);

  std::map<std::string, Json> docs;
  for (const auto& entry : fs::directory_iterator(results)) {
    const std::string stem = entry.path().stem().string();
    if (entry.path().extension() != ".json" || stem == "meta") continue;
    if (!ReadJson(entry.path(), &docs[stem])) return 1;
  }
  Json meta = Json::object();
  if (!meta_path.empty() && !ReadJson(meta_path, &meta)) return 1;
  std::ifstream tin(template_path);
  std::stringstream tmpl;
  tmpl << tin.rdbuf();
  if (!tin) {
    std::fprintf(stderr, "placement_report: cannot read template %s\n", template_path.c_str());
    return 1;
  }
  fs::create_directories(plots_dir);
  fs::create_directories(data_dir);
  // Plots are referenced relative to the markdown file.
  const std::string rel =
      fs::relative(fs::absolute(plots_dir), fs::absolute(fs::path(out_path).parent_path()))
          .string();
  const Results r(std::move(docs), std::move(meta));
  migd::bench::report::Plotter plotter(rel, fs::absolute(data_dir), fs::absolute(plots_dir));
  migd::StatusOr<std::string> md =
      migd::bench::FillTemplate(tmpl.str(), Values(r, plotter, rel), Sections(r));
  if (!md.ok()) {
    std::fprintf(stderr, "placement_report: %s: %s\n", template_path.c_str(),
                 md.status().ToString().c_str());
    return 1;
  }
  std::ofstream out(out_path);
  out << *md;
  if (!out) {
    std::fprintf(stderr, "placement_report: cannot write %s\n", out_path.c_str());
    return 1;
  }
  return 0;
}
