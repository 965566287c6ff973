// latency_bench: the engine-level latency benchmark (issue 9). Runs the
// sections asked for and writes their tables as Markdown (--out-md) and the
// time-to-ready data for the plot (--out-dat). See bench/latency/run.sh.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/logging.h"
#include "bench/latency/harness.h"
#include "bench/latency/policy.h"
#include "bench/latency/scenarios.h"

namespace {

using namespace migd::bench::latency;  // NOLINT: benchmark binary

std::string Ms(double v) {
  if (v < 1) return fmt::format("{:.3f}", v);
  if (v < 100) return fmt::format("{:.2f}", v);
  return fmt::format("{:.0f}", v);
}

void OpsTable(std::ostream& md, const std::vector<OpResult>& rows, bool projected) {
  md << "| operation | latency model | store fsync | n | p50 ms | p99 ms | mean ms |"
     << (projected ? " modeled p50 ms | modeled p99 ms |" : "")
     << " NVML calls/op (max) | record fsyncs/op | GI+CI creates | GI+CI destroys |\n";
  md << "|---|---|---|---|---|---|---|" << (projected ? "---|---|" : "")
     << "---|---|---|---|\n";
  for (const auto& r : rows) {
    md << "| " << r.op << " | " << r.model << " | " << (r.store_sync ? "on" : "off") << " | "
       << r.wall.n << " | " << Ms(r.wall.p50) << " | " << Ms(r.wall.p99) << " | "
       << Ms(r.wall.mean) << " | ";
    if (projected) md << Ms(r.modeled.p50) << " | " << Ms(r.modeled.p99) << " | ";
    md << fmt::format("{:.2f} ({})", r.nvml_calls, r.nvml_calls_max) << " | "
       << fmt::format("{:.1f}", r.fsyncs) << " | " << r.hw.gi_creates + r.hw.ci_creates << " | "
       << r.hw.gi_destroys + r.hw.ci_destroys << " |\n";
  }
  md << "\n";
}

double Per1000(uint64_t n, uint64_t allocs) {
  return allocs == 0 ? 0 : 1000.0 * static_cast<double>(n) / static_cast<double>(allocs);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"migd latency benchmark (engine level, simulated NVML)"};
  std::string library = MIGD_SIM_LIBRARY;
  std::string dir = "/tmp";
  std::string sim_dir = "/dev/shm";
  std::string out_md = "-";
  std::string out_dat;
  std::string trace_dir;
  std::vector<std::string> sections = {"ops", "policies", "recovery", "footprint"};
  bool quick = false;
  bool no_fsync = false;
  std::string log_level = "info";
  int churn_allocs = 2000, trace_allocs = 2000;
  std::vector<int> recovery_gpus = {1, 2, 4, 8};
  app.add_option("--library", library, "libnvidia-ml-sim.so.1 to load");
  app.add_option("--dir", dir, "where the record stores live (on disk, as on a node)");
  app.add_option("--sim-dir", sim_dir, "where the simulator's state files live (tmpfs)");
  app.add_option("--out-md", out_md, "Markdown tables ('-': stdout)");
  app.add_option("--out-dat", out_dat, "time-to-ready data for gnuplot");
  app.add_option("--trace-dir", trace_dir, "Alibaba openb_pod_list_*.csv directory");
  app.add_option("--sections", sections, "ops, policies, recovery, footprint")->delimiter(',');
  app.add_option("--churn-allocations", churn_allocs);
  app.add_option("--trace-allocations", trace_allocs);
  app.add_option("--recovery-gpus", recovery_gpus)->delimiter(',');
  app.add_flag("--quick", quick, "small sizes, no sleeping latency model (CI)");
  app.add_flag("--no-fsync", no_fsync, "record store without fsync (counts unchanged)");
  app.add_option("--log-level", log_level, "migd log level (info: as the daemon logs)");
  CLI11_PARSE(app, argc, argv);

  if (auto st = migd::InitLogging({.level = log_level}); !st.ok()) {
    std::cerr << "latency_bench: " << st << "\n";
    return 2;
  }
  RigOptions base;
  base.library = library;
  base.store_sync = !no_fsync;
  base.base_dir = dir;
  base.sim_dir = sim_dir;
  std::ostringstream md;
  std::ofstream dat;
  if (!out_dat.empty()) dat.open(out_dat);
  auto has = [&](const char* s) {
    return std::find(sections.begin(), sections.end(), s) != sections.end();
  };
  auto fail = [](const migd::Status& s, const char* what) {
    std::cerr << "latency_bench: " << what << ": " << s << "\n";
    return 1;
  };
  const LatencyModel assumed = LatencyModel::Assumed();

  if (has("ops")) {
    OpsSpec zero_spec;
    if (quick) zero_spec = {200, 20, 20};
    auto zero = RunOps(base, LatencyModel::Zero(), assumed, zero_spec);
    if (!zero.ok()) return fail(zero.status(), "ops (zero latency)");
    std::vector<OpResult> rows = *zero;
    RigOptions nosync = base;
    nosync.store_sync = false;
    auto ns = RunOps(nosync, LatencyModel::Zero(), assumed, zero_spec);
    if (!ns.ok()) return fail(ns.status(), "ops (no fsync)");
    rows.insert(rows.end(), ns->begin(), ns->end());
    md << "### Per operation, zero added latency (modeled = measured + assumed model over the "
          "op's NVML calls)\n\n";
    OpsTable(md, rows, true);
    if (!quick) {
      auto slept = RunOps(base, assumed, LatencyModel::Zero(), {200, 10, 5});
      if (!slept.ok()) return fail(slept.status(), "ops (assumed latency)");
      md << "### Per operation, simulator sleeping per the assumed model\n\n";
      OpsTable(md, *slept, false);
      const double reuse_p99 = (*slept)[0].wall.p99;
      const double create_p50 = (*slept)[1].wall.p50;
      md << fmt::format(
          "Reuse vs create under the model: create p50 {} ms / reuse p99 {} ms = **{:.0f}x**.\n\n",
          Ms(create_p50), Ms(reuse_p99), reuse_p99 > 0 ? create_p50 / reuse_p99 : 0);
    }
    std::cerr << "latency_bench: ops done\n";
  }

  if (has("policies")) {
    std::vector<Workload> workloads;
    workloads.push_back(ChurnWorkload({quick ? 200 : churn_allocs, 1, false}));
    workloads.push_back(ChurnWorkload({quick ? 200 : churn_allocs, 1, true}));
    if (!trace_dir.empty()) {
      auto w = AlibabaWorkload({trace_dir + "/openb_pod_list_default.csv",
                                quick ? 200 : trace_allocs, 4, 0.9, 1});
      if (!w.ok()) return fail(w.status(), "alibaba workload");
      workloads.push_back(std::move(*w));
    }
    md << "### Policies side by side (time to ready = measured at zero latency + assumed model)"
          "\n\n";
    md << "| workload | policy | allocations ok | failed | reuse / free / reclaim | mean ms | "
          "p50 ms | p99 ms | zero-latency p99 ms | GI creates /1000 | CI creates /1000 | GI "
          "destroys /1000 | CI destroys /1000 | NVML calls/alloc | NVML calls/release | "
          "background GI+CI creates | background NVML calls | fsyncs/reuse |\n";
    md << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    std::map<std::string, std::vector<std::pair<double, double>>> ready_by_policy;
    for (const Workload& w : workloads) {
      for (Policy p : AllPolicies()) {
        auto r = RunPolicy(base, w, p, assumed);
        if (!r.ok()) return fail(r.status(), "policy run");
        const Summary ready = Summarize(r->ready_ms);
        const Summary wall = Summarize(r->wall_ms);
        auto st = [&](const char* k) {
          auto it = r->stages.find(k);
          return it == r->stages.end() ? uint64_t{0} : it->second;
        };
        const uint64_t n = r->allocations;
        md << "| " << w.name << " | " << r->policy << " | " << n << " | " << r->failures << " | "
           << st("reuse") << " / " << st("free") << " / " << st("reclaim") << " | "
           << Ms(ready.mean) << " | " << Ms(ready.p50) << " | " << Ms(ready.p99) << " | "
           << Ms(wall.p99) << " | " << fmt::format("{:.0f}", Per1000(r->request_ops.gi_creates, n))
           << " | " << fmt::format("{:.0f}", Per1000(r->request_ops.ci_creates, n)) << " | "
           << fmt::format("{:.0f}", Per1000(r->request_ops.gi_destroys, n)) << " | "
           << fmt::format("{:.0f}", Per1000(r->request_ops.ci_destroys, n)) << " | "
           << fmt::format("{:.2f}", n ? double(r->allocate_nvml_calls) / double(n) : 0) << " | "
           << fmt::format("{:.2f}", n ? double(r->release_nvml_calls) / double(n) : 0) << " | "
           << r->background_ops.gi_creates + r->background_ops.ci_creates << " | "
           << r->background_nvml_calls << " | "
           << fmt::format("{:.1f}", r->reuse_only_allocations
                                        ? double(r->record_fsyncs_per_reuse_sum) /
                                              double(r->reuse_only_allocations)
                                        : 0)
           << " |\n";
        ready_by_policy[r->policy].push_back({ready.mean / 1000, ready.p99 / 1000});
        std::cerr << "latency_bench: " << w.name << " " << r->policy << " " << r->run_s
                  << " s\n";
      }
    }
    md << "\n";
    // One row per policy: mean and p99 (seconds) per workload, in order;
    // and the gnuplot plot command that names the columns.
    if (dat.is_open()) {
      for (Policy p : AllPolicies()) {
        const std::string name(PolicyName(p));
        dat << "\"" << name << "\"";
        for (const auto& [mean, p99] : ready_by_policy[name]) dat << " " << mean << " " << p99;
        dat << "\n";
      }
      std::ofstream gp(out_dat + ".gp");
      gp << "plot ";
      for (size_t i = 0; i < workloads.size(); ++i) {
        const std::string wn = workloads[i].name.substr(0, workloads[i].name.find(':'));
        gp << (i ? ", " : "") << "'" << out_dat << "' using " << 2 + 2 * i
           << (i ? "" : ":xtic(1)") << " title '" << wn << " mean', '' using " << 3 + 2 * i
           << " title '" << wn << " p99'";
      }
      gp << "\n";
    }
  }

  if (has("recovery")) {
    md << "### Recovery (store open + Manager::Create; 7 x 1g.10gb per GPU, 4 Active + 3 Idle, "
          "records for all; zero latency)\n\n";
    md << "| GPUs | instances | p50 ms | max ms | NVML calls | full restart ms (NVML session + "
          "store + Manager) | full restart NVML calls |\n|---|---|---|---|---|---|---|\n";
    std::string by_fn;
    for (int g : recovery_gpus) {
      auto r = RunRecovery(base, g, quick ? 2 : 10);
      if (!r.ok()) return fail(r.status(), "recovery");
      md << "| " << g << " | " << r->instances << " | " << Ms(r->create_ms.p50) << " | "
         << Ms(r->create_ms.max) << " | " << r->nvml_calls << " | " << Ms(r->full_restart_ms)
         << " | " << r->full_restart_nvml_calls << " |\n";
      by_fn = fmt::format("{} GPUs: {}", g, r->nvml_by_function);
    }
    md << "\nNVML calls of one recovery, by function (" << by_fn << ").\n\n";
  }

  if (has("footprint")) {
    auto f = RunFootprint(base);
    if (!f.ok()) return fail(f.status(), "footprint");
    md << "### Footprint (this process, engine only: no gRPC, no metrics)\n\n";
    md << "| measure | value |\n|---|---|\n";
    md << fmt::format("| RSS before the rig | {:.1f} MiB |\n", f->rss_kb_before / 1024.0);
    md << "| RSS with an 8-GPU Manager (56 instances), planner tables built | "
       << fmt::format("{:.1f}", f->rss_kb_idle / 1024.0) << " MiB |\n";
    md << "| heap held by NVML driver + store + Manager | "
       << fmt::format("{:.1f}", f->heap_rig_bytes / 1024.0) << " KiB |\n";
    md << "| heap kept by the planner after one Plan per GPU and profile | "
       << fmt::format("{:.1f}", f->heap_planner_bytes / 1024.0) << " KiB |\n";
    md << "| heap growth over 1000 reuse allocate+release | "
       << fmt::format("{:.1f}", f->heap_after_1000_allocs / 1024.0) << " KiB |\n";
    md << "| CPU per 1000 reuse allocate+release | "
       << fmt::format("{:.3f}", f->cpu_s_per_1000_reuse) << " s |\n\n";
  }

  if (out_md == "-") {
    std::cout << md.str();
  } else {
    std::ofstream(out_md) << md.str();
  }
  return 0;
}
