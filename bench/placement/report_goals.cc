#include "bench/placement/report_goals.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace migd::bench::report {
namespace {

struct Comparison {
  std::string where;
  double diff = 0, ci = 0;
  std::string best;
};

struct GoalTally {
  int cells = 0;
  int at_or_above = 0;  // mean diff ≥ 0
  int tied_below = 0;   // mean diff < 0, CI includes 0
  int below = 0;        // CI excludes 0, below
  int leads = 0;        // mean diff > 0
  int leads_sig = 0;    // CI excludes 0, above
  std::vector<Comparison> deficits;
};

void Tally(const Json& cell, const char* metric, const std::string& where, GoalTally* t) {
  const std::string best = cell["best"][metric];
  if (best.empty() || !cell.contains("paired")) return;
  const std::string key = "migd-" + best;
  if (!cell["paired"].contains(key)) return;
  const double d = cell["paired"][key][metric]["mean"].get<double>();
  const double ci = cell["paired"][key][metric]["ci"].get<double>();
  ++t->cells;
  if (d >= 0) {
    ++t->at_or_above;
  } else if (d + ci >= 0) {
    ++t->tied_below;
  } else {
    ++t->below;
  }
  if (d > 0) {
    ++t->leads;
    if (d - ci > 0) ++t->leads_sig;
  }
  if (d < 0) t->deficits.push_back({where, d, ci, best});
}

struct Tallies {
  GoalTally count, slice;
  std::vector<std::string> scope;
};

void TallyDoc(const Json& doc, bool trace, Tallies& t) {
  for (const Json& c : Cells(doc)) {
    const double l = c["load"];
    if (!IsGoalLoad(l)) continue;
    const std::string w = c["workload"];
    const std::string where = (trace ? PrettyWorkload(w) : w) +
                              " N=" + std::to_string(c["gpus"].get<int>()) + " ρ=" + Fix(l, 1);
    Tally(c, "acc", where, &t.count);
    Tally(c, "slice", where, &t.slice);
  }
}

Tallies CollectTallies(const Results& r) {
  Tallies t;
  if (const Json* s = r.Doc("synth")) {
    TallyDoc(*s, false, t);
    t.scope.push_back("synthetic mixes " + Join(Workloads(*s)) + " × N " +
                      JoinInts(DistinctGpus(*s)));
  }
  for (const char* mapping : {"compute-ceil", "memory-eighths"}) {
    for (const Json* d : r.TraceDocs(mapping)) {
      TallyDoc(*d, true, t);
      t.scope.push_back(PrettyWorkload(Cells(*d)[0]["workload"]) + " × N " +
                        JoinInts(DistinctGpus(*d)));
    }
  }
  return t;
}

std::vector<Comparison> Sorted(std::vector<Comparison> d) {
  std::sort(d.begin(), d.end(),
            [](const Comparison& a, const Comparison& b) { return a.diff < b.diff; });
  return d;
}

std::string AtLeastRow(const char* label, const GoalTally& t) {
  const std::vector<Comparison> d = Sorted(t.deficits);
  std::string worst;
  for (size_t i = 0; i < std::min<size_t>(3, d.size()); ++i) {
    if (i > 0) worst += "; ";
    worst += d[i].where + " vs " + d[i].best + " " + Pp(d[i].diff, d[i].ci) + " pp";
  }
  std::ostringstream out;
  out << "| migd ≥ every B1–B10, " << label << " acceptance | " << t.at_or_above << " of "
      << t.cells << " cells at or above the best baseline; " << t.tied_below
      << " below but CI includes 0; " << t.below << " below with CI excluding 0"
      << (worst.empty() ? "" : ". Largest deficits: " + worst) << " | "
      << (t.cells > 0 && t.at_or_above == t.cells
              ? "met"
              : "**not met** in " + std::to_string(t.cells - t.at_or_above) + " cells (max " +
                    Fix(d.empty() ? 0.0 : -100 * d[0].diff, 2) + " pp)")
      << " |\n";
  return out.str();
}

std::string LeadRow(const char* label, const GoalTally& t) {
  std::ostringstream out;
  out << "| where migd leads the best baseline (" << label << "), the paired CI excludes 0 | "
      << t.leads_sig << " of " << t.leads << " leading cells | "
      << (t.leads == t.leads_sig ? "met"
                                 : "**not met** in " + std::to_string(t.leads - t.leads_sig) +
                                       " cells (lead within noise)")
      << " |\n";
  return out.str();
}

// B11: the paired simulated gap (B11 policy − migd on the same sequences) is
// the precise estimate; the analytic value carries the simulation's sampling
// noise (≈ ±0.3 pp at N = 1).
struct Gap {
  double mean = -1, ci = 0, analytic = 0;
  std::string where;
};

void UpdateGap(const Json& c, const char* pol, const char* metric, Gap* g) {
  const std::string key = std::string("migd-") + pol;
  if (!c["paired"].contains(key)) return;
  const double d = -c["paired"][key][metric]["mean"].get<double>();
  if (d > g->mean) {
    *g = {d, c["paired"][key][metric]["ci"].get<double>(),
          c["b11"][metric].get<double>() - M(c, "migd", metric),
          c["workload"].get<std::string>() + " ρ=" + Fix(c["load"].get<double>(), 1)};
  }
}

std::string B11Rows(const Results& r) {
  Gap count_gap, slice_gap;
  int cells = 0;
  if (const Json* s = r.Doc("synth")) {
    for (const Json& c : Cells(*s)) {
      if (!c.contains("b11") || !c.contains("paired") || !IsGoalLoad(c["load"])) continue;
      ++cells;
      UpdateGap(c, "B11", "acc", &count_gap);
      UpdateGap(c, "B11s", "slice", &slice_gap);
    }
  }
  std::ostringstream out;
  auto row = [&](const char* label, const Gap& g) {
    out << "| within 0.5 pp of the single-GPU MDP optimum " << label << " | largest gap "
        << Pp(g.mean, g.ci) << " pp (" << g.where << "; analytic optimum − migd "
        << Fix(100 * g.analytic, 2) << " pp) over " << cells
        << " cells (N = 1, single-instance mixes, ρ ∈ {0.7, 0.9, 1.1}) | "
        << (g.mean <= 0.005 ? "met" : "**not met** (by " + Fix(100 * g.mean - 0.5, 2) + " pp)")
        << " |\n";
  };
  row("B11 (count)", count_gap);
  row("B11s (slice-weighted)", slice_gap);
  return out.str();
}

std::string LatencyRows(const Results& r) {
  std::ostringstream out;
  if (const Json* l = r.Doc("latency")) {
    if (const Json* c = FindCell(*l, "uniform", 0.9, 8)) {
      const Json& lat = (*c)["policies"]["migd"]["latency"]["core_single"];
      const double p99 = lat["p99_ns"];
      out << "| p99 decision time ≤ 50 µs, single-instance request, N=8 | p99 " << Us(p99)
          << " µs, p50 " << Us(lat["p50_ns"]) << " µs, max " << Us(lat["max_ns"].get<double>())
          << " µs (MakePlan), " << lat["n"].get<uint64_t>() << " decisions | "
          << (p99 <= 50000 ? "met" : "**not met** (by " + Us(p99 - 50000) + " µs)") << " |\n";
    }
  }
  if (const Json* l = r.Doc("latency-multi")) {
    double worst = 0, max = 0;
    uint64_t n = 0;
    for (const Json& c : Cells(*l)) {
      const Json& e = c["policies"]["migd"]["latency"]["exhaustive"];
      n += e["n"].get<uint64_t>();
      worst = std::max(worst, e["p99_ns"].get<double>());
      max = std::max(max, e["max_ns"].get<double>());
    }
    out << "| p99 ≤ 1 ms with the exhaustive fallback | " << n
        << " MakePlan calls ran the exhaustive search (multi mix, N = 1–8): worst per-N p99 "
        << Us(worst) << " µs, max " << Us(max) << " µs | "
        << (n == 0         ? "not exercised"
            : worst <= 1e6 ? "met"
                           : "**not met**")
        << " |\n";
  }
  return out.str();
}

std::string OpsRow(const Results& r) {
  const Json* s = r.Doc("synth");
  const Json* c = s != nullptr ? FindCell(*s, "uniform", 0.9, 8) : nullptr;
  if (c == nullptr) return "";
  const Json& p = (*c)["policies"]["migd"];
  std::ostringstream out;
  out << "| zero evictions; ≤ 1 create + 1 destroy per accepted single-instance request | "
         "evictions are rejected by the simulator (none occurred); uniform N=8 ρ=0.9: "
      << Fix(p["creates_per_acc"], 3) << " creates, " << Fix(p["destroys_per_acc"], 3)
      << " destroys, " << Fix(p["reuses_per_acc"], 3) << " reuses per accepted request | "
      << (p["creates_per_acc"].get<double>() <= 1 && p["destroys_per_acc"].get<double>() <= 1
              ? "met"
              : "**not met**")
      << " |\n";
  return out.str();
}

std::string DeficitList(const Tallies& t) {
  std::vector<Comparison> all = t.count.deficits;
  for (Comparison c : t.slice.deficits) {
    c.where += " (slice)";
    all.push_back(c);
  }
  all = Sorted(all);
  if (all.empty()) return "";
  std::ostringstream out;
  out << "<details><summary>Every cell where migd is below the best baseline (" << all.size()
      << ")</summary>\n\n| cell | best | migd − best (pp) | CI excludes 0 |\n|---|---|---|---|\n";
  for (const Comparison& c : all) {
    out << "| " << c.where << " | " << c.best << " | " << Pp(c.diff, c.ci) << " | "
        << (c.diff + c.ci < 0 ? "yes" : "no") << " |\n";
  }
  out << "\n</details>";
  return out.str();
}

}  // namespace

GoalSection Goals(const Results& results) {
  const Tallies t = CollectTallies(results);
  GoalSection out;
  out.scope = Join(t.scope, "; ");
  out.table = "| goal | result | status |\n|---|---|---|\n" + AtLeastRow("count", t.count) +
              AtLeastRow("slice-weighted", t.slice) + LeadRow("count", t.count) +
              LeadRow("slice-weighted", t.slice) + B11Rows(results) + LatencyRows(results) +
              OpsRow(results);
  out.deficits = DeficitList(t);
  return out;
}

}  // namespace migd::bench::report
