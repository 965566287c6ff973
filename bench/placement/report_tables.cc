#include "bench/placement/report_tables.h"

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

namespace migd::bench::report {
namespace {

// Index of class `key` in the cell's class list, or -1.
int ClassIndex(const Json& cell, const char* key) {
  const Json& classes = cell["classes"];
  for (size_t i = 0; i < classes.size(); ++i) {
    if (classes[i] == key) return static_cast<int>(i);
  }
  return -1;
}

// " 12.34 / 56.78". Appended piece by piece: `"literal" + std::string` trips
// GCC 12's -Wrestrict false positive at -O3 (GCC PR 105329).
std::string CountSlice(double acc, double slice) {
  std::string s = " ";
  s += Pct(acc);
  s += " / ";
  s += Pct(slice);
  return s;
}

void PolicyTable(std::ostringstream& out, const Json& doc, const std::string& w, int gpus) {
  const std::vector<double> loads = DistinctLoads(doc);
  const Json* first = nullptr;
  for (double l : loads) {
    if ((first = FindCell(doc, w, l, gpus))) break;
  }
  if (!first) return;
  out << "| policy |";
  for (double l : loads) out << " ρ=" << Fix(l, 1) << " |";
  out << "\n|---|";
  for (size_t i = 0; i < loads.size(); ++i) out << "---|";
  out << "\n";
  auto row = [&](const std::string& label, auto&& entry) {
    out << "| " << label << " |";
    for (double l : loads) {
      const Json* c = FindCell(doc, w, l, gpus);
      out << (c != nullptr ? entry(*c) : std::string()) << " |";
    }
    out << "\n";
  };
  for (const std::string& p : PolicyOrder(*first)) {
    row(p, [&](const Json& c) {
      return c["policies"].contains(p) ? CountSlice(M(c, p, "acc"), M(c, p, "slice"))
                                       : std::string();
    });
  }
  bool any_b11 = false;
  for (double l : loads) {
    const Json* c = FindCell(doc, w, l, gpus);
    any_b11 = any_b11 || (c && c->contains("b11"));
  }
  if (any_b11) {
    row("B11 analytic", [&](const Json& c) {
      return c.contains("b11") ? CountSlice(c["b11"]["acc"], c["b11"]["slice"]) : std::string();
    });
  }
  out << "\n";
}

void OpsTable(std::ostringstream& out, const Json& c, const std::string& title) {
  out << "**" << title << "**\n\n| policy | creates | destroys | reclaims (Idle) | reuses | "
      << "whole-GPU clears | plugin restarts | substitutions | exhaustive searches |\n"
      << "|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& p : PolicyOrder(c)) {
    if (p == "B12" || p == "B14") continue;
    const Json& pj = c["policies"][p];
    out << "| " << p << " | " << Fix(pj["creates_per_acc"], 3) << " | "
        << Fix(pj["destroys_per_acc"], 3) << " | " << Fix(pj["reclaims_per_acc"], 3) << " | "
        << Fix(pj["reuses_per_acc"], 3) << " | " << Fix(pj["clears_per_acc"], 4) << " | "
        << Fix(pj["restarts_per_acc"], 4) << " | " << pj["substitutions"].get<int64_t>() << " | "
        << Fix(pj["exhaustive_per_acc"], 4) << " |\n";
  }
  out << "\n";
}

// One script row per policy: accepted / offered overall and for 3g, 4g, 7g.
void ScriptRows(std::ostringstream& out, const std::string& name, const Json& c) {
  for (const std::string& p : PolicyOrder(c)) {
    const Json& pj = c["policies"][p];
    int64_t offered = 0;
    double accepted = 0;
    for (size_t i = 0; i < pj["class_offered"].size(); ++i) {
      offered += pj["class_offered"][i].get<int64_t>();
      if (!pj["class_acc"][i].is_null()) {
        accepted += pj["class_acc"][i].get<double>() * pj["class_offered"][i].get<double>();
      }
    }
    auto got = [&](const char* k) -> std::string {
      const int i = ClassIndex(c, k);
      if (i < 0 || pj["class_offered"][i].get<int64_t>() == 0) return "–";
      return Fix(pj["class_acc"][i].get<double>() * pj["class_offered"][i].get<double>(), 0) + "/" +
             pj["class_offered"][i].dump();
    };
    out << "| " << name << " | " << p << " | " << Fix(accepted, 0) << " / " << offered << " | "
        << got("3g") << " | " << got("4g") << " | " << got("7g") << " | "
        << (pj.contains("queue") ? Fix(pj["queue"]["wait_mean"], 2) : "–") << " |\n";
  }
}

// "optimum − subject" of the simulated optimal policy `pol`, paired, pp.
std::string SimGap(const Json& c, const std::string& subject, const char* pol, const char* metric) {
  const std::string key = subject + "-" + pol;
  if (!c.contains("paired") || !c["paired"].contains(key)) return "";
  const Json& d = c["paired"][key][metric];
  return Pp(-d["mean"].get<double>(), d["ci"]);
}

// "subject − other" paired, pp, or "" without the pair.
std::string PairedText(const Json& c, const std::string& subject, const std::string& other,
                       const char* metric) {
  const std::string key = subject + "-" + other;
  if (!c.contains("paired") || !c["paired"].contains(key)) return "";
  const Json& d = c["paired"][key][metric];
  return Pp(d["mean"], d["ci"]);
}

}  // namespace

std::string MetaTable(const Json& meta) {
  std::ostringstream out;
  const int nproc = std::max(1, meta.value("nproc", 1));
  out << "| | |\n|---|---|\n";
  out << "| date | " << meta.value("date", "?") << " |\n";
  out << "| commit | `" << meta.value("commit", "?") << "`"
      << (meta.value("dirty", false) ? " (+ uncommitted changes in the working tree)" : "")
      << " |\n";
  out << "| machine | " << meta.value("nproc", 0) << " CPUs (`nproc`), " << meta.value("cpu", "?")
      << " |\n";
  out << "| compiler / build | " << meta.value("compiler", "?") << "; " << meta.value("build", "?")
      << " |\n";
  out << "| runtime of `make bench-placement` | " << Fix(meta.value("runtime_s", 0.0), 0)
      << " s wall (of which build " << Fix(meta.value("build_s", 0.0), 0) << " s), "
      << meta.value("jobs", 0) << " worker threads; " << Fix(meta.value("cpu_s", 0.0), 0)
      << " CPU-seconds (user + sys), i.e. ≈ " << Fix(meta.value("cpu_s", 0.0) / nproc, 0)
      << " s on " << meta.value("nproc", 0) << " otherwise idle cores; load average at the end "
      << meta.value("load_average", "?") << " (other processes share this machine) |\n";
  out << "| gnuplot | " << meta.value("gnuplot", "?") << " |";
  return out.str();
}

std::string IdleTable(const Results& r) {
  const Json* d = r.Doc("diag");
  if (d == nullptr) return "";
  std::ostringstream out;
  out << "| mix | N | ρ | migd − migd-noidle count | slice | migd reuses / accepted | "
         "migd − B10 count | migd-noidle − B10 count | migd-separable − B10 count | "
         "migd-separable − migd count |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Json& c : Cells(*d)) {
    if (!c.contains("paired")) continue;
    out << "| " << c["workload"].get<std::string>() << " | " << c["gpus"].get<int>() << " | "
        << Fix(c["load"], 1) << " | " << PairedText(c, "migd", "migd-noidle", "acc") << " | "
        << PairedText(c, "migd", "migd-noidle", "slice") << " | "
        << (c["policies"].contains("migd") ? Fix(c["policies"]["migd"]["reuses_per_acc"], 3) : "")
        << " | " << PairedText(c, "migd", "B10", "acc") << " | "
        << PairedText(c, "migd-noidle", "B10", "acc") << " | "
        << PairedText(c, "migd-separable", "B10", "acc") << " | "
        << PairedText(c, "migd-separable", "migd", "acc") << " |\n";
  }
  return out.str();
}

std::string LargeProfileTable(const Results& r) {
  const Json* s = r.Doc("synth");
  if (s == nullptr) return "";
  std::ostringstream out;
  out << "| mix | migd 7g % | B8 7g % | B9 7g % | B10 7g % | migd whole-GPU | B8 | B9 | B10 | "
         "migd 4g % | B10 4g % |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& w : Workloads(*s)) {
    const Json* c = FindCell(*s, w, 0.9, 8);
    if (!c) continue;
    const int k7 = ClassIndex(*c, "7g");
    const int k4 = ClassIndex(*c, "4g");
    auto cls = [&](const char* p, int k) -> std::string {
      if (k < 0 || !(*c)["policies"].contains(p)) return "–";
      const Json& x = (*c)["policies"][p]["class_acc"][k];
      return x.is_null() ? "–" : Pct(x);
    };
    auto whole = [&](const char* p) -> std::string {
      return (*c)["policies"].contains(p) ? Fix((*c)["policies"][p]["whole_gpu"], 2) : "–";
    };
    out << "| " << w << " | " << cls("migd", k7) << " | " << cls("B8", k7) << " | " << cls("B9", k7)
        << " | " << cls("B10", k7) << " | " << whole("migd") << " | " << whole("B8") << " | "
        << whole("B9") << " | " << whole("B10") << " | " << cls("migd", k4) << " | "
        << cls("B10", k4) << " |\n";
  }
  return out.str();
}

std::string HeadlineTable(const Json& doc, int gpus) {
  std::ostringstream out;
  out << "| workload | ρ | migd count | best B1–B10 (count) | migd − best | migd-order − best | "
         "migd-slice slice | best B1–B10 (slice) | migd-slice − best | B12 count / slice | "
         "B14 count / slice |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& w : Workloads(doc)) {
    for (double l : kGoalLoads) {
      const Json* c = FindCell(doc, w, l, gpus);
      if (c == nullptr || !(*c)["policies"].contains("migd")) continue;
      const std::string ba = (*c)["best"]["acc"], bs = (*c)["best"]["slice"];
      const std::string ss = (*c)["policies"].contains("migd-slice") ? "migd-slice" : "migd";
      out << "| " << PrettyWorkload(w) << " | " << Fix(l, 1) << " | " << Pct(M(*c, "migd", "acc"))
          << " | " << ba << " " << Pct(M(*c, ba, "acc")) << " | "
          << PairedText(*c, "migd", ba, "acc") << " | " << PairedText(*c, "migd-order", ba, "acc")
          << " | " << Pct(M(*c, ss, "slice")) << " | " << bs << " " << Pct(M(*c, bs, "slice"))
          << " | " << PairedText(*c, ss, bs, "slice") << " | ";
      for (const char* bound : {"B12", "B14"}) {
        if ((*c)["policies"].contains(bound)) {
          out << Pct(M(*c, bound, "acc")) << " / " << Pct(M(*c, bound, "slice"));
        }
        out << (std::string(bound) == "B12" ? " | " : " |\n");
      }
    }
  }
  return out.str();
}

std::string HeadlineTables(const Results& r) {
  std::ostringstream out;
  if (const Json* s = r.Doc("synth")) {
    out << "### N = 8 GPUs, synthetic mixes (" << (*s)["model"].get<std::string>() << ")\n\n"
        << HeadlineTable(*s, 8) << "\n";
  }
  for (const char* mapping : {"compute-ceil", "memory-eighths"}) {
    for (const Json* d : r.TraceDocs(mapping)) {
      for (int g : DistinctGpus(*d)) {
        out << "### N = " << g << ", " << PrettyWorkload(Workloads(*d)[0]) << "\n\n"
            << HeadlineTable(*d, g) << "\n";
      }
    }
  }
  return out.str();
}

std::string B11Table(const Results& r) {
  const Json* s = r.Doc("synth");
  if (s == nullptr) return "";
  std::ostringstream out;
  out << "| mix | ρ | migd count | B11 analytic | B11 sim − migd (pp) | B11 sim − migd-order (pp) "
         "| "
         "migd-slice slice | B11s analytic | B11s sim − migd-slice (pp) | "
         "B11s sim − migd-order (pp) | best B1–B10 count |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& w : Workloads(*s)) {
    for (double l : DistinctLoads(*s)) {
      const Json* c = FindCell(*s, w, l, 1);
      if (c == nullptr || !c->contains("b11")) continue;
      const Json& b = (*c)["b11"];
      const std::string ss = (*c)["policies"].contains("migd-slice") ? "migd-slice" : "migd";
      out << "| " << w << " | " << Fix(l, 1) << " | " << Pct(M(*c, "migd", "acc")) << " | "
          << Pct(b["acc"]) << " | " << SimGap(*c, "migd", "B11", "acc") << " | "
          << SimGap(*c, "migd-order", "B11", "acc") << " | " << Pct(M(*c, ss, "slice")) << " | "
          << Pct(b["slice"]) << " | " << SimGap(*c, ss, "B11s", "slice") << " | "
          << SimGap(*c, "migd-order", "B11s", "slice") << " | "
          << (*c)["best"]["acc"].get<std::string>() << " " << Pct(M(*c, (*c)["best"]["acc"], "acc"))
          << " |\n";
    }
  }
  return out.str();
}

std::string ValueVsOrderTable(const Results& r) {
  std::vector<const Json*> docs;
  if (const Json* s = r.Doc("synth")) docs.push_back(s);
  for (const char* mapping : {"compute-ceil", "memory-eighths"}) {
    for (const Json* d : r.TraceDocs(mapping)) docs.push_back(d);
  }
  std::ostringstream out;
  out << "| workload | N | cells | migd − migd-order, count: mean (pp) / cells above, below "
         "(CI excludes 0) | migd-slice − migd-order, slice-weighted: mean / above, below |\n"
      << "|---|---|---|---|---|\n";
  for (const Json* d : docs) {
    for (int g : DistinctGpus(*d)) {
      int cells = 0, up_c = 0, down_c = 0, up_s = 0, down_s = 0;
      double sum_c = 0, sum_s = 0;
      for (const Json& c : Cells(*d)) {
        if (c["gpus"].get<int>() != g || !c.contains("paired")) continue;
        const Json& p = c["paired"];
        if (!p.contains("migd-migd-order")) continue;
        ++cells;
        const Json& pc = p["migd-migd-order"]["acc"];
        sum_c += pc["mean"].get<double>();
        up_c += pc["mean"].get<double>() - pc["ci"].get<double>() > 0;
        down_c += pc["mean"].get<double>() + pc["ci"].get<double>() < 0;
        const std::string key =
            p.contains("migd-slice-migd-order") ? "migd-slice-migd-order" : "migd-migd-order";
        const Json& ps = p[key]["slice"];
        sum_s += ps["mean"].get<double>();
        up_s += ps["mean"].get<double>() - ps["ci"].get<double>() > 0;
        down_s += ps["mean"].get<double>() + ps["ci"].get<double>() < 0;
      }
      if (cells == 0) continue;
      out << "| "
          << (d == r.Doc("synth") ? "synthetic (all mixes, loads)"
                                  : PrettyWorkload(Workloads(*d)[0]))
          << " | " << g << " | " << cells << " | " << Fix(100 * sum_c / cells, 2, true) << " / "
          << up_c << ", " << down_c << " | " << Fix(100 * sum_s / cells, 2, true) << " / " << up_s
          << ", " << down_s << " |\n";
    }
  }
  return out.str();
}

std::string SolveTable(const Results& r) {
  std::ostringstream out;
  out << "| run | policy | value tables solved | refused | mean solve ms | max solve ms | "
         "largest table (states) | largest table KiB | decisions by values / by the cost order "
         "(before the first solve) |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const char* name : {"synth", "trace-default-cc", "trace-gpushare100-cc", "h200"}) {
    const Json* d = r.Doc(name);
    if (d == nullptr) continue;
    for (const char* pol : {"migd", "migd-slice"}) {
      int64_t solves = 0, failures = 0, by_values = 0, by_order = 0, states = 0;
      double total_ms = 0, max_ms = 0, kib = 0;
      for (const Json& c : Cells(*d)) {
        if (!c["policies"].contains(pol) || !c["policies"][pol].contains("solve")) continue;
        const Json& s = c["policies"][pol]["solve"];
        solves += s["solves"].get<int64_t>();
        failures += s["failures"].get<int64_t>();
        total_ms += s["mean_ms"].get<double>() * s["solves"].get<double>();
        max_ms = std::max(max_ms, s["max_ms"].get<double>());
        states = std::max(states, s["max_states"].get<int64_t>());
        kib = std::max(kib, s["max_kib"].get<double>());
        by_values += s["value_decisions"].get<int64_t>();
        by_order += s["cost_order_decisions"].get<int64_t>();
      }
      if (solves + failures == 0) continue;
      out << "| " << name << " | " << pol << " | " << solves << " | " << failures << " | "
          << Fix(solves > 0 ? total_ms / static_cast<double>(solves) : 0.0, 1) << " | "
          << Fix(max_ms, 1) << " | " << states << " | " << Fix(kib, 1) << " | " << by_values
          << " / " << by_order << " |\n";
    }
  }
  return out.str();
}

std::string SeedSentence(const Results& r) {
  const Json* s = r.Doc("synth");
  if (s == nullptr) return "";
  const int seeds = (*s)["seeds"];
  const int base = (*s)["seed_base"];
  return std::to_string(seeds) + " seeds per cell (" + std::to_string(base) + "…" +
         std::to_string(base + seeds - 1) + "), " + std::to_string((*s)["events"].get<int>()) +
         " arrivals per run, the first " + Fix(100 * (*s)["warmup_fraction"].get<double>(), 0) +
         "% not measured (warm-up).";
}

std::string TraceFiles(const Results& r) {
  std::ostringstream out;
  for (const char* mapping : {"compute-ceil", "memory-eighths"}) {
    for (const Json* d : r.TraceDocs(mapping)) {
      const Json& t = (*d)["trace"];
      std::string cls;
      for (const Json& x : t["per_class"]) {
        if (!cls.empty()) cls += '/';
        cls += x.dump();
      }
      out << "- " << t["file"].get<std::string>() << " (" << mapping
          << "): " << t["pods"].get<int>() << " pods, " << t["cpu_only"].get<int>() << " CPU-only, "
          << t["single_gpu"].get<int>() << " single-GPU (" << t["pending"].get<int>()
          << " GPU pods Pending), multi-GPU used " << t["multi_gpu_used"].get<int>()
          << " / skipped " << t["multi_gpu_skipped"].get<int>()
          << "; single-GPU pods per class 1g/2g/3g/4g/7g = " << cls << "; lifetime cap "
          << Fix(t["lifetime_cap_s"].get<double>(), 0) << " s.\n";
    }
  }
  return out.str();
}

std::string FullTables(const Results& r) {
  std::vector<const Json*> docs;
  if (const Json* s = r.Doc("synth")) docs.push_back(s);
  for (const char* mapping : {"compute-ceil", "memory-eighths"}) {
    for (const Json* d : r.TraceDocs(mapping)) docs.push_back(d);
  }
  std::ostringstream out;
  for (const Json* d : docs) {
    for (const std::string& w : Workloads(*d)) {
      out << "<details><summary>" << PrettyWorkload(w) << "</summary>\n\n";
      for (int g : DistinctGpus(*d)) {
        out << "**N = " << g << "**\n\n";
        PolicyTable(out, *d, w, g);
      }
      out << "</details>\n\n";
    }
  }
  return out.str();
}

std::string PerProfileTables(const Results& r) {
  const Json* s = r.Doc("synth");
  if (s == nullptr) return "";
  std::vector<std::pair<std::string, const Json*>> cells;
  for (const std::string& w : Workloads(*s)) {
    if (const Json* c = FindCell(*s, w, 0.9, 8)) cells.push_back({w, c});
  }
  for (const Json* d : r.TraceDocs("compute-ceil")) {
    if (const Json* c = FindCell(*d, Workloads(*d)[0], 0.9, 8)) {
      cells.push_back({PrettyWorkload(Workloads(*d)[0]), c});
    }
  }
  std::ostringstream out;
  for (const auto& [w, c] : cells) {
    out << "**" << w << "**\n\n| policy |";
    for (const Json& k : (*c)["classes"]) out << " " << k.get<std::string>() << " |";
    out << " multi-instance |\n|---|";
    for (size_t i = 0; i <= (*c)["classes"].size(); ++i) out << "---|";
    out << "\n";
    for (const std::string& p : PolicyOrder(*c)) {
      const Json& pj = (*c)["policies"][p];
      out << "| " << p << " |";
      for (const Json& x : pj["class_acc"]) out << " " << (x.is_null() ? "–" : Pct(x)) << " |";
      out << " " << (pj["multi_acc"].is_null() ? "–" : Pct(pj["multi_acc"])) << " |\n";
    }
    out << "\n";
  }
  return out.str();
}

std::string FragmentationTables(const Results& r) {
  const Json* s = r.Doc("synth");
  if (s == nullptr) return "";
  std::ostringstream out;
  for (const std::string& w : Workloads(*s)) {
    const Json* c = FindCell(*s, w, 0.9, 8);
    if (!c) continue;
    out << "<details><summary>" << w << "</summary>\n\n| policy | frag | whole | util compute | "
        << "util memory |\n|---|---|---|---|---|\n";
    for (const std::string& p : PolicyOrder(*c)) {
      if (p == "B12" || p == "B14") continue;
      const Json& pj = (*c)["policies"][p];
      out << "| " << p << " | " << Fix(pj["frag"], 3) << " | " << Fix(pj["whole_gpu"], 2) << " | "
          << Pct(pj["util_compute"]) << " | " << Pct(pj["util_memory"]) << " |\n";
    }
    out << "\n</details>\n\n";
  }
  return out.str();
}

std::string OpsTables(const Results& r) {
  std::ostringstream out;
  if (const Json* s = r.Doc("synth")) {
    for (const char* w : {"uniform", "multi"}) {
      if (const Json* c = FindCell(*s, w, 0.9, 8)) {
        OpsTable(out, *c, std::string(w) + ", N=8, ρ=0.9");
      }
    }
  }
  for (const Json* d : r.TraceDocs("compute-ceil")) {
    if (const Json* c = FindCell(*d, Workloads(*d)[0], 0.9, 8)) {
      OpsTable(out, *c, PrettyWorkload(Workloads(*d)[0]) + ", N=8, ρ=0.9");
    }
  }
  return out.str();
}

std::string LatencyTables(const Results& r) {
  std::ostringstream out;
  for (const char* name : {"latency", "latency-multi"}) {
    const Json* l = r.Doc(name);
    if (!l) continue;
    out << "**" << Workloads(*l)[0] << " mix, ρ = " << Fix(Cells(*l)[0]["load"], 1)
        << "**\n\n| N | single-instance decisions | p50 µs | p99 µs | max µs | multi-instance "
           "decisions | multi p50 µs | multi p99 µs | exhaustive calls | exhaustive p50 µs | "
           "exhaustive p99 µs | exhaustive max µs |\n"
        << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const Json& c : Cells(*l)) {
      const Json& lat = c["policies"]["migd"]["latency"];
      const Json& s = lat["core_single"];
      const Json& m = lat["core_multi"];
      const Json& e = lat["exhaustive"];
      out << "| " << c["gpus"].get<int>() << " | " << s["n"].get<uint64_t>() << " | "
          << Us(s["p50_ns"]) << " | " << Us(s["p99_ns"]) << " | " << Us(s["max_ns"].get<double>())
          << " | " << m["n"].get<uint64_t>() << " | " << Us(m["p50_ns"]) << " | " << Us(m["p99_ns"])
          << " | " << e["n"].get<uint64_t>() << " | " << Us(e["p50_ns"]) << " | " << Us(e["p99_ns"])
          << " | " << Us(e["max_ns"].get<double>()) << " |\n";
    }
    out << "\n";
  }
  return out.str();
}

std::string QueueTables(const Results& r) {
  std::ostringstream out;
  for (const auto& [label, d] : {std::pair<const char*, const Json*>{"FIFO", r.Doc("queue-fifo")},
                                 {"FIFO + backfill", r.Doc("queue-backfill")}}) {
    if (!d) continue;
    for (const Json& c : Cells(*d)) {
      out << "**" << label << ", " << c["workload"].get<std::string>()
          << ", N=" << c["gpus"].get<int>() << ", ρ=" << Fix(c["load"], 1) << "** (patience "
          << Fix((*d)["patience"].get<double>(), 1) << ")\n\n"
          << "| policy | served % | slice % | mean wait | p99 wait | abandoned |\n"
          << "|---|---|---|---|---|---|\n";
      for (const std::string& p : PolicyOrder(c)) {
        const Json& q = c["policies"][p]["queue"];
        out << "| " << p << " | " << Pct(M(c, p, "acc")) << " | " << Pct(M(c, p, "slice")) << " | "
            << Fix(q["wait_mean"], 3) << " | " << Fix(q["wait_p99"], 3) << " | "
            << q["abandoned"].get<int64_t>() << " |\n";
      }
      out << "\n";
    }
  }
  return out.str();
}

std::string ScriptTable(const Results& r) {
  std::ostringstream out;
  out << "| script | policy | accepted / offered | 3g accepted | 4g accepted | 7g accepted | "
         "mean wait |\n|---|---|---|---|---|---|---|\n";
  for (const auto& [name, d] : r.Scripts()) ScriptRows(out, name, Cells(*d)[0]);
  return out.str();
}

std::string Commands(const Json& meta) {
  std::string out;
  for (const Json& c : meta.value("commands", Json::array())) {
    if (!out.empty()) out += '\n';
    out += c.get<std::string>();
  }
  return out;
}

}  // namespace migd::bench::report
