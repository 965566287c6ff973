// File: bench/placement/report_plots.h
//
// The plots of the placement report: writes gnuplot data (.dat) and scripts
// (.gp) into a data folder (run.sh runs every script; they write PNGs into
// the plots folder) and returns the markdown image references.
//
// Thread-safety: one Plotter per thread (it writes files).
#ifndef MIGD_BENCH_PLACEMENT_REPORT_PLOTS_H_
#define MIGD_BENCH_PLACEMENT_REPORT_PLOTS_H_

#include <filesystem>
#include <string>

#include "bench/placement/report_util.h"

namespace migd::bench::report {

class Plotter {
 public:
  // `plots_rel`: the plots folder relative to the markdown file; `data_dir`
  // and `plots_dir`: absolute folders for the gnuplot inputs and outputs.
  Plotter(std::string plots_rel, std::filesystem::path data_dir, std::filesystem::path plots_dir)
      : plots_rel_(std::move(plots_rel)),
        data_dir_(std::move(data_dir)),
        plots_dir_(std::move(plots_dir)) {}

  // Acceptance vs ρ per workload at N = 8, migd − best baseline, frag ratio,
  // per-profile acceptance.
  std::string HeadlinePlots(const Results& r);
  // The latency CDF ("" without the latency run).
  std::string LatencyPlot(const Results& r);

 private:
  void WriteFile(const std::string& name, const std::string& text) const;
  std::string Data(const std::string& name) const;  // absolute .dat path
  std::string Png(const std::string& name) const;   // absolute .png path
  std::string Image(const std::string& alt, const std::string& name) const;
  std::string AccPlot(const Json& doc, const std::string& w, int gpus, const std::string& name);
  std::string DiffPlot(const Results& r);
  std::string FragPlot(const Json& synth);
  std::string ClassPlot(const Json& synth);

  std::string plots_rel_;
  std::filesystem::path data_dir_, plots_dir_;
};

}  // namespace migd::bench::report

#endif  // MIGD_BENCH_PLACEMENT_REPORT_PLOTS_H_
