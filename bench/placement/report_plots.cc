#include "bench/placement/report_plots.h"

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace migd::bench::report {
namespace {

// The gnuplot line style of a policy: migd bold black, bounds dashed grey.
std::string Style(const std::string& policy) {
  if (policy == "migd") return " lw 3 lc rgb 'black' pt 7";
  if (policy == "B12" || policy == "B14") return " dt 2 lc rgb 'gray40'";
  return "";
}

}  // namespace

void Plotter::WriteFile(const std::string& name, const std::string& text) const {
  std::ofstream out(data_dir_ / name);
  out << text;
}

std::string Plotter::Data(const std::string& name) const { return (data_dir_ / name).string(); }
std::string Plotter::Png(const std::string& name) const { return (plots_dir_ / name).string(); }
std::string Plotter::Image(const std::string& alt, const std::string& name) const {
  return "![" + alt + "](" + plots_rel_ + "/" + name + ")\n\n";
}

// Acceptance vs ρ, two panels (count, slice), for one workload at N.
std::string Plotter::AccPlot(const Json& doc, const std::string& w, int gpus,
                             const std::string& name) {
  const std::vector<std::string> want = {"migd", "B1", "B2",  "B3",  "B4b", "B6",
                                         "B8",   "B9", "B10", "B12", "B14"};
  const std::vector<double> loads = DistinctLoads(doc);
  std::vector<std::string> pols;
  for (const std::string& p : want) {
    const Json* c = FindCell(doc, w, loads[0], gpus);
    if (c && (*c)["policies"].contains(p)) pols.push_back(p);
  }
  std::ostringstream dat;
  dat << "# load";
  for (const std::string& p : pols) dat << " " << p << "_acc " << p << "_slice";
  dat << "\n";
  for (double l : loads) {
    const Json* c = FindCell(doc, w, l, gpus);
    if (!c) continue;
    dat << l;
    for (const std::string& p : pols)
      dat << " " << 100 * M(*c, p, "acc") << " " << 100 * M(*c, p, "slice");
    dat << "\n";
  }
  WriteFile(name + ".dat", dat.str());
  std::ostringstream gp;
  gp << "reset\nset terminal pngcairo size 1200,450 font 'sans,10'\n"
     << "set output '" << Png(name + ".png") << "'\n"
     << "set multiplot layout 1,2 title '" << PrettyWorkload(w) << ", N = " << gpus
     << " (mean of seeds)'\n"
     << "set key outside right top box font 'sans,8'\nset grid\nset xlabel 'offered load ρ'\n";
  for (int panel = 0; panel < 2; ++panel) {
    gp << "set ylabel '" << (panel ? "slice-weighted" : "count") << " acceptance (%)'\n"
       << "set title '" << (panel ? "slice-weighted" : "count") << "'\nplot ";
    for (size_t i = 0; i < pols.size(); ++i) {
      gp << (i ? ", " : "") << "'" << Data(name + ".dat") << "' using 1:" << 2 + 2 * i + panel
         << " with linespoints title '" << pols[i] << "'" << Style(pols[i]);
    }
    gp << "\n";
  }
  gp << "unset multiplot\n";
  WriteFile(name + ".gp", gp.str());
  return Image(name, name + ".png");
}

// migd − best baseline (with the paired CI) vs ρ, every synthetic mix and
// the compute-ceil traces, N = 8.
std::string Plotter::DiffPlot(const Results& r) {
  std::vector<std::pair<std::string, const Json*>> series;
  if (const Json* s = r.Doc("synth")) {
    for (const std::string& w : Workloads(*s)) series.push_back({w, s});
  }
  for (const Json* d : r.TraceDocs("compute-ceil")) series.push_back({Workloads(*d)[0], d});
  std::ostringstream gp;
  gp << "reset\nset terminal pngcairo size 1200,620 font 'sans,10'\nset output '"
     << Png("diff_best_n8.png") << "'\n"
     << "set multiplot layout 1,2 title 'migd − best of B1–B10 (95% CI of paired "
        "differences), N = 8'\n"
     << "set grid\nset xlabel 'offered load ρ'\nset key below horizontal maxrows 5 font 'sans,8'\n"
     << "set xrange [0.45:1.35]\n";
  for (int panel = 0; panel < 2; ++panel) {
    const char* metric = panel ? "slice" : "acc";
    gp << "set title '" << (panel ? "slice-weighted" : "count") << "'\n"
       << "set ylabel 'pp'\nplot 0 notitle lc rgb 'black' dt 2";
    for (size_t i = 0; i < series.size(); ++i) {
      const auto& [w, doc] = series[i];
      std::ostringstream dat;
      for (double l : DistinctLoads(*doc)) {
        const Json* c = FindCell(*doc, w, l, 8);
        if (!c || !c->contains("paired")) continue;
        const std::string best = (*c)["best"][metric];
        const Json& p = (*c)["paired"]["migd-" + best][metric];
        dat << l + 0.006 * (static_cast<double>(i) - static_cast<double>(series.size()) / 2.0)
            << " " << 100 * p["mean"].get<double>() << " " << 100 * p["ci"].get<double>() << "\n";
      }
      const std::string f = "diff_" + std::string(metric) + "_" + Slug(w) + ".dat";
      WriteFile(f, dat.str());
      gp << ", '" << Data(f) << "' using 1:2:3 with yerrorlines title '" << PrettyWorkload(w)
         << "'";
    }
    gp << "\n";
  }
  gp << "unset multiplot\n";
  WriteFile("diff_best_n8.gp", gp.str());
  return Image("migd minus best baseline", "diff_best_n8.png");
}

// Frag ratio vs load, uniform N = 8.
std::string Plotter::FragPlot(const Json& synth) {
  const std::vector<std::string> pols = {"migd", "B1", "B2", "B4b", "B8", "B9", "B10"};
  std::ostringstream dat;
  for (double l : DistinctLoads(synth)) {
    const Json* c = FindCell(synth, "uniform", l, 8);
    if (!c) continue;
    dat << l;
    for (const std::string& p : pols) {
      dat << " "
          << ((*c)["policies"].contains(p) ? (*c)["policies"][p]["frag"].get<double>() : 0.0);
    }
    dat << "\n";
  }
  WriteFile("frag_uniform_n8.dat", dat.str());
  std::ostringstream gp;
  gp << "reset\nset terminal pngcairo size 700,450 font 'sans,10'\nset output '"
     << Png("frag_uniform_n8.png") << "'\n"
     << "set title 'FGD frag ratio at arrivals, uniform, N = 8'\nset grid\n"
     << "set xlabel 'offered load ρ'\nset ylabel 'F / Σ free'\nset key left top\nplot ";
  for (size_t i = 0; i < pols.size(); ++i) {
    gp << (i ? ", " : "") << "'" << Data("frag_uniform_n8.dat") << "' using 1:" << 2 + i
       << " with linespoints title '" << pols[i] << "'" << (pols[i] == "migd" ? Style("migd") : "");
  }
  gp << "\n";
  WriteFile("frag_uniform_n8.gp", gp.str());
  return Image("frag", "frag_uniform_n8.png");
}

// Per-profile acceptance, uniform N = 8 ρ = 0.9.
std::string Plotter::ClassPlot(const Json& synth) {
  const Json* c = FindCell(synth, "uniform", 0.9, 8);
  if (c == nullptr) return "";
  const std::vector<std::string> pols = {"migd", "B1", "B2", "B8", "B9", "B10", "B12"};
  std::ostringstream dat;
  dat << "# class";
  for (const std::string& p : pols) dat << " " << p;
  dat << "\n";
  for (size_t k = 0; k < (*c)["classes"].size(); ++k) {
    dat << (*c)["classes"][k].get<std::string>();
    for (const std::string& p : pols) {
      const Json& x = (*c)["policies"][p]["class_acc"][k];
      dat << " " << (x.is_null() ? 0.0 : 100 * x.get<double>());
    }
    dat << "\n";
  }
  WriteFile("class_uniform_n8.dat", dat.str());
  std::ostringstream gp;
  gp << "reset\nset terminal pngcairo size 800,450 font 'sans,10'\nset output '"
     << Png("class_uniform_n8.png") << "'\n"
     << "set title 'Per-profile acceptance, uniform, N = 8, ρ = 0.9'\n"
     << "set style data histogram\nset style histogram cluster gap 1\n"
     << "set style fill solid 0.8 border -1\nset ylabel 'acceptance (%)'\n"
     << "set yrange [0:105]\nset grid ytics\nset key outside right\nplot ";
  for (size_t i = 0; i < pols.size(); ++i) {
    gp << (i ? ", " : "") << "'" << Data("class_uniform_n8.dat") << "' using " << 2 + i
       << (i == 0 ? ":xtic(1)" : "") << " title '" << pols[i] << "'";
  }
  gp << "\n";
  WriteFile("class_uniform_n8.gp", gp.str());
  return Image("per-profile", "class_uniform_n8.png");
}

std::string Plotter::HeadlinePlots(const Results& r) {
  std::string out;
  const Json* s = r.Doc("synth");
  if (s != nullptr) {
    for (const std::string& w : Workloads(*s)) out += AccPlot(*s, w, 8, "acc_" + Slug(w) + "_n8");
  }
  for (const Json* d : r.TraceDocs("compute-ceil")) {
    const std::string w = Workloads(*d)[0];
    out += AccPlot(*d, w, 8, "acc_" + Slug(PrettyWorkload(w)) + "_n8");
  }
  out += DiffPlot(r);
  if (s != nullptr) out += FragPlot(*s) + ClassPlot(*s);
  return out;
}

std::string Plotter::LatencyPlot(const Results& r) {
  const Json* l = r.Doc("latency");
  if (l == nullptr) return "";
  std::ostringstream gp;
  gp << "reset\nset terminal pngcairo size 700,450 font 'sans,10'\nset output '"
     << Png("latency_cdf.png") << "'\n"
     << "set title 'migd MakePlan latency, single-instance requests, uniform ρ = 0.9'\n"
     << "set logscale x\nset grid\nset xlabel 'µs'\nset ylabel 'CDF'\n"
     << "set key right bottom\nset yrange [0:1.01]\nplot ";
  int i = 0;
  for (const Json& c : Cells(*l)) {
    const int g = c["gpus"];
    std::ostringstream dat;
    for (const Json& pt : c["policies"]["migd"]["latency"]["core_single_cdf"]) {
      dat << pt[0].get<double>() / 1000.0 << " " << pt[1].get<double>() << "\n";
    }
    const std::string f = "latency_cdf_n" + std::to_string(g) + ".dat";
    WriteFile(f, dat.str());
    gp << (i++ ? ", " : "") << "'" << Data(f) << "' using 1:2 with steps lw 2 title 'N = " << g
       << "'";
  }
  gp << "\n";
  WriteFile("latency_cdf.gp", gp.str());
  return Image("latency CDF", "latency_cdf.png");
}

}  // namespace migd::bench::report
