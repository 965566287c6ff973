#include "bench/placement/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "base/status_macros.h"
#include "bench/placement/baselines.h"
#include "bench/placement/bounds.h"
#include "bench/placement/mdp.h"
#include "mig/catalog.h"

namespace migd::bench {
namespace {

using Json = nlohmann::json;

// Log-spaced latency histogram: 100 bins per decade from 1 ns.
class LatHist {
 public:
  void Add(int64_t ns) {
    const double x = std::log10(static_cast<double>(std::max<int64_t>(ns, 1)));
    const size_t b = std::min<size_t>(bins_.size() - 1, static_cast<size_t>(x * kPerDecade));
    ++bins_[b];
    ++n_;
    max_ = std::max(max_, ns);
  }
  void Merge(const LatHist& o) {
    for (size_t i = 0; i < bins_.size(); ++i) bins_[i] += o.bins_[i];
    n_ += o.n_;
    max_ = std::max(max_, o.max_);
  }
  // Upper edge of the bin holding quantile q (ns).
  double Quantile(double q) const {
    if (n_ == 0) return 0;
    const uint64_t target = static_cast<uint64_t>(std::ceil(q * static_cast<double>(n_)));
    uint64_t acc = 0;
    for (size_t i = 0; i < bins_.size(); ++i) {
      acc += bins_[i];
      if (acc >= std::max<uint64_t>(target, 1)) {
        return std::min(std::pow(10.0, static_cast<double>(i + 1) / kPerDecade),
                        static_cast<double>(max_));
      }
    }
    return static_cast<double>(max_);
  }
  Json ToJson() const {
    return Json{{"n", n_}, {"p50_ns", Quantile(0.5)}, {"p99_ns", Quantile(0.99)},
                {"max_ns", max_}};
  }
  // [[upper edge ns, cumulative fraction], ...] over non-empty bins.
  Json Cdf() const {
    Json out = Json::array();
    uint64_t acc = 0;
    for (size_t i = 0; i < bins_.size(); ++i) {
      if (bins_[i] == 0) continue;
      acc += bins_[i];
      out.push_back(Json::array({std::pow(10.0, static_cast<double>(i + 1) / kPerDecade),
                                 static_cast<double>(acc) / static_cast<double>(n_)}));
    }
    return out;
  }
  uint64_t n() const { return n_; }

 private:
  static constexpr int kPerDecade = 100;
  std::vector<uint64_t> bins_ = std::vector<uint64_t>(10 * kPerDecade, 0);
  uint64_t n_ = 0;
  int64_t max_ = 0;
};

struct LatSet {
  LatHist single, multi, exhaustive, core_single, core_multi;
};

struct Cell {
  std::string workload;  // mix name, "trace:<file>", "script:<name>"
  std::string kind;      // synthetic | trace | script
  Mix mix;
  double load = 0;
  int gpus = 1;
  const GpuTable* table = nullptr;
};

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool B11Eligible(const MatrixSpec& spec, const Cell& c) {
  return c.kind == "synthetic" && c.gpus == 1 && c.mix.bundle_fraction == 0 &&
         spec.lifetime == LifetimeDist::kExponential;
}

// λ_p per mean lifetime of a single-instance synthetic mix.
std::vector<double> ClassRates(const Cell& c) {
  const GpuTable& t = *c.table;
  const std::vector<double> w = MixClassWeights(t, c.mix);
  double mean_c = 0;
  for (int p = 0; p < t.num_profiles(); ++p) mean_c += w[p] * t.profile(p).compute;
  const double rate = c.load * t.compute_slices() * c.gpus / mean_c;
  std::vector<double> r(t.num_profiles());
  for (int p = 0; p < t.num_profiles(); ++p) r[p] = rate * w[p];
  return r;
}

Json PooledRatio(const std::vector<int64_t>& num, const std::vector<int64_t>& den) {
  Json out = Json::array();
  for (size_t i = 0; i < num.size(); ++i) {
    out.push_back(den[i] > 0 ? Json(static_cast<double>(num[i]) / static_cast<double>(den[i]))
                             : Json(nullptr));
  }
  return out;
}

Json MeanCiJson(const std::vector<double>& x) {
  const MeanCi m = Summarise(x);
  return Json{{"mean", m.mean}, {"ci", m.half_width}, {"n", m.n}, {"values", x}};
}

}  // namespace

double TQuantile975(int df) {
  static const double kTable[] = {0,      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                                  2.306,  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                                  2.120,  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
                                  2.064,  2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (df <= 0) return 0;
  if (df <= 30) return kTable[df];
  return 1.959964 + 2.4 / df;
}

MeanCi Summarise(const std::vector<double>& x) {
  MeanCi m;
  m.n = static_cast<int>(x.size());
  if (x.empty()) return m;
  m.mean = std::accumulate(x.begin(), x.end(), 0.0) / m.n;
  if (m.n < 2) return m;
  double ss = 0;
  for (double v : x) ss += (v - m.mean) * (v - m.mean);
  const double sd = std::sqrt(ss / (m.n - 1));
  m.half_width = TQuantile975(m.n - 1) * sd / std::sqrt(static_cast<double>(m.n));
  return m;
}

std::vector<std::string> KnownPolicies() {
  std::vector<std::string> out = {"migd", "migd-noidle"};  // + baselines, bounds
  for (const std::string& b : BaselineNames()) out.push_back(b);
  out.push_back("B12");
  out.push_back("B14");
  return out;
}

std::unique_ptr<Allocator> MakeAllocator(const std::string& name,
                                         const PlannerPolicyOptions& planner, bool validate) {
  if (name == "migd" || name == "migd-noidle") {
    PlannerPolicyOptions o = planner;
    o.keep_idle = name == "migd";
    return std::make_unique<PlacementAllocator>(MakePlannerPolicy(o), validate);
  }
  if (name == "B12") return std::make_unique<CountingBound>(CountingBound::kRepack);
  if (name == "B14") return std::make_unique<CountingBound>(CountingBound::kCapacity);
  std::unique_ptr<Policy> p = MakeBaseline(name);
  if (!p) return nullptr;
  return std::make_unique<PlacementAllocator>(std::move(p), validate);
}

StatusOr<Json> RunMatrix(const MatrixSpec& spec) {
  const mig::GpuModel* model = mig::Catalog::Default().FindModel(spec.model);
  if (model == nullptr) return InvalidArgumentError("unknown model " + spec.model);
  for (const std::string& p : spec.policies) {
    if (!MakeAllocator(p, spec.planner, false)) return InvalidArgumentError("unknown policy " + p);
  }
  // Tables: base, and with the double-memory 1g when a mix needs it.
  std::map<bool, GpuTable> tables;
  auto table_for = [&](bool dm) -> StatusOr<const GpuTable*> {
    auto it = tables.find(dm);
    if (it == tables.end()) {
      MIGD_ASSIGN_OR_RETURN(GpuTable t, GpuTable::Build(*model, dm));
      it = tables.emplace(dm, std::move(t)).first;
    }
    return &it->second;
  };

  std::vector<Cell> cells;
  std::vector<TracePod> pods;
  TraceSummary trace_summary;
  if (spec.script) {
    MIGD_ASSIGN_OR_RETURN(const GpuTable* t, table_for(false));
    int gpus = 1;
    MIGD_RETURN_IF_ERROR(AdversarialScript(*t, *spec.script, &gpus).status());
    cells.push_back({"script:" + *spec.script, "script", {}, 0, gpus, t});
  } else if (spec.trace_path) {
    MIGD_ASSIGN_OR_RETURN(pods, ReadAlibabaCsv(*spec.trace_path));
    MIGD_ASSIGN_OR_RETURN(const GpuTable* t, table_for(false));
    for (int g : spec.gpus) {
      for (double load : spec.loads) {
        cells.push_back({"trace:" + Basename(*spec.trace_path) + ":" +
                             std::string(TraceMappingName(spec.trace_mapping)),
                         "trace", {}, load, g, t});
      }
    }
  } else {
    for (const std::string& name : spec.mixes) {
      MIGD_ASSIGN_OR_RETURN(Mix mix, ParseMix(name));
      MIGD_ASSIGN_OR_RETURN(const GpuTable* t, table_for(mix.needs_double_memory));
      for (int g : spec.gpus) {
        for (double load : spec.loads) cells.push_back({name, "synthetic", mix, load, g, t});
      }
    }
  }
  for (const auto& [dm, t] : tables) {
    // placement.md §4.1: verify the enumeration at start-up.
    const int expect = t.model().memory_slices == 8 ? (dm ? 723 : 298) : -1;
    if (expect > 0 && t.num_states() != expect) {
      return InternalError("table " + t.model().key + (dm ? " (+1g.dm)" : "") + " has " +
                           std::to_string(t.num_states()) + " states, expected " +
                           std::to_string(expect));
    }
  }

  const int seeds = spec.script ? 1 : spec.seeds;
  const size_t P = spec.policies.size();
  // results[cell][policy][seed]
  std::vector<std::vector<std::vector<std::optional<RunResult>>>> results(
      cells.size(), std::vector<std::vector<std::optional<RunResult>>>(
                        P, std::vector<std::optional<RunResult>>(seeds)));
  std::vector<std::vector<LatSet>> lat(cells.size(), std::vector<LatSet>(P));
  std::vector<std::vector<double>> run_seconds(cells.size(), std::vector<double>(P, 0.0));
  std::mutex mu;
  Status first_error;
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  const size_t items = cells.size() * static_cast<size_t>(seeds);

  auto work = [&]() {
    while (true) {
      const size_t item = next.fetch_add(1);
      if (item >= items) return;
      {
        std::lock_guard<std::mutex> l(mu);
        if (!first_error.ok()) return;
      }
      const Cell& c = cells[item / seeds];
      const int s = static_cast<int>(item % seeds);
      const uint64_t seed = spec.seed_base + static_cast<uint64_t>(s);
      const GpuTable& t = *c.table;
      StatusOr<std::vector<Request>> reqs = InvalidArgumentError("no workload");
      RunContext ctx;
      ctx.table = &t;
      ctx.gpus = c.gpus;
      if (c.kind == "synthetic") {
        SyntheticSpec ss{c.mix, c.load, c.gpus, spec.events, seed, spec.lifetime};
        reqs = GenerateSynthetic(t, ss);
        ctx.class_weights = MixClassWeights(t, c.mix);
        if (c.mix.bundle_fraction == 0) ctx.class_rates = ClassRates(c);
      } else if (c.kind == "trace") {
        TraceSpec ts;
        ts.mapping = spec.trace_mapping;
        ts.arrivals = spec.trace_arrivals;
        ts.include_multi_gpu = spec.trace_multi_gpu;
        ts.lifetime_cap_quantile = spec.trace_lifetime_cap;
        ts.load = c.load;
        ts.gpus = c.gpus;
        ts.events = spec.events;
        ts.seed = seed;
        TraceSummary sum;
        reqs = BuildTraceRequests(t, pods, ts, &sum);
        if (s == 0) {
          std::lock_guard<std::mutex> l(mu);
          trace_summary = sum;
        }
      } else {
        int gpus = 1;
        reqs = AdversarialScript(t, c.workload.substr(7), &gpus);
      }
      if (!reqs.ok()) {
        std::lock_guard<std::mutex> l(mu);
        if (first_error.ok()) first_error = reqs.status();
        return;
      }
      if (ctx.class_weights.empty()) ctx.class_weights = EmpiricalClassWeights(t, *reqs);
      if (c.kind == "trace") {
        double sum = 0;
        for (const Request& r : *reqs) sum += r.lifetime;
        ctx.time_unit = reqs->empty() ? 1 : sum / static_cast<double>(reqs->size());
      }
      SimOptions so = spec.sim;
      if (c.kind == "script") so.warmup_fraction = 0;
      for (size_t pi = 0; pi < P; ++pi) {
        const std::string& name = spec.policies[pi];
        if ((name == "B11" || name == "B11s") && !B11Eligible(spec, c)) continue;
        std::unique_ptr<Allocator> alloc = MakeAllocator(name, spec.planner, spec.validate);
        const auto t0 = std::chrono::steady_clock::now();
        StatusOr<RunResult> r = RunSimulation(*alloc, ctx, *reqs, so);
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!r.ok()) {
          std::lock_guard<std::mutex> l(mu);
          if (first_error.ok()) {
            first_error = r.status().WithContext(c.workload + " load " + std::to_string(c.load) +
                                                 " gpus " + std::to_string(c.gpus) + " seed " +
                                                 std::to_string(seed));
          }
          return;
        }
        LatSet ls;
        if (const Allocator::Latencies* l = alloc->latencies()) {
          for (int64_t x : l->single) ls.single.Add(x);
          for (int64_t x : l->multi) ls.multi.Add(x);
          for (int64_t x : l->exhaustive) ls.exhaustive.Add(x);
          for (int64_t x : l->core_single) ls.core_single.Add(x);
          for (int64_t x : l->core_multi) ls.core_multi.Add(x);
        }
        std::lock_guard<std::mutex> l(mu);
        results[item / seeds][pi][s] = std::move(r).value();
        LatSet& dst = lat[item / seeds][pi];
        dst.single.Merge(ls.single);
        dst.multi.Merge(ls.multi);
        dst.exhaustive.Merge(ls.exhaustive);
        dst.core_single.Merge(ls.core_single);
        dst.core_multi.Merge(ls.core_multi);
        run_seconds[item / seeds][pi] += secs;
      }
      const size_t d = done.fetch_add(1) + 1;
      if (spec.progress) {
        std::lock_guard<std::mutex> l(mu);
        std::fprintf(stderr, "\r  %zu/%zu runs", d, items);
        if (d == items) std::fprintf(stderr, "\n");
      }
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < std::max(1, spec.jobs); ++j) threads.emplace_back(work);
  for (std::thread& th : threads) th.join();
  MIGD_RETURN_IF_ERROR(first_error);

  // ---- summaries ----
  Json doc;
  doc["model"] = spec.model;
  doc["events"] = spec.events;
  doc["seeds"] = seeds;
  doc["seed_base"] = spec.seed_base;
  doc["warmup_fraction"] = spec.sim.warmup_fraction;
  doc["mode"] = spec.sim.mode == ArrivalMode::kLoss ? "loss" : "queue";
  doc["backfill"] = spec.sim.backfill;
  doc["patience"] = spec.sim.patience;
  doc["lifetime"] = spec.lifetime == LifetimeDist::kExponential ? "exp" : "lognormal";
  doc["planner_half_life"] = spec.planner.half_life;
  doc["planner_latency_repeats"] = spec.planner.latency_repeats;
  doc["jobs"] = spec.jobs;
  for (const auto& [dm, t] : tables) {
    doc["tables"].push_back(Json{{"double_memory", dm},
                                 {"states", t.num_states()},
                                 {"maximal", t.maximal_states().size()},
                                 {"pairs", t.num_pairs()}});
  }
  if (spec.trace_path) {
    doc["trace"] = Json{{"file", Basename(*spec.trace_path)},
                        {"mapping", TraceMappingName(spec.trace_mapping)},
                        {"arrivals", spec.trace_arrivals == TraceArrivals::kPoisson ? "poisson"
                                                                                    : "trace"},
                        {"multi_gpu", spec.trace_multi_gpu ? "gang-7g" : "excluded"},
                        {"pods", trace_summary.pods},
                        {"cpu_only", trace_summary.cpu_only},
                        {"single_gpu", trace_summary.single_gpu},
                        {"multi_gpu_used", trace_summary.multi_gpu_used},
                        {"multi_gpu_skipped", trace_summary.multi_gpu_skipped},
                        {"pending", trace_summary.pending},
                        {"lifetime_cap_s", trace_summary.lifetime_cap},
                        {"per_class", trace_summary.per_class}};
  }
  std::map<std::pair<std::string, double>, MdpResult> b11_count, b11_slice;
  for (size_t ci = 0; ci < cells.size(); ++ci) {
    const Cell& c = cells[ci];
    const GpuTable& t = *c.table;
    Json cell;
    cell["workload"] = c.workload;
    cell["kind"] = c.kind;
    cell["load"] = c.load;
    cell["gpus"] = c.gpus;
    std::vector<std::string> keys;
    for (const ProfileClass& pc : t.profiles()) keys.push_back(pc.key);
    cell["classes"] = keys;
    std::map<std::string, std::vector<double>> acc, slice;
    for (size_t pi = 0; pi < P; ++pi) {
      const std::string& name = spec.policies[pi];
      std::vector<double> a, sl, frag, whole, uc, um, wait_mean, wait_p99;
      std::vector<int64_t> co(t.num_profiles(), 0), ca(t.num_profiles(), 0);
      int64_t acc_total = 0, multi_o = 0, multi_a = 0, errors = 0, abandoned = 0, waiting = 0;
      OpCounters ops;
      std::string hash;
      for (const std::optional<RunResult>& r : results[ci][pi]) {
        if (!r) continue;
        a.push_back(r->acceptance());
        sl.push_back(r->slice_acceptance());
        frag.push_back(r->frag_ratio);
        whole.push_back(r->whole_gpu_free);
        uc.push_back(r->util_compute);
        um.push_back(r->util_memory);
        wait_mean.push_back(r->wait_mean);
        wait_p99.push_back(r->wait_p99);
        for (int p = 0; p < t.num_profiles(); ++p) {
          co[p] += r->class_offered[p];
          ca[p] += r->class_accepted[p];
        }
        acc_total += r->accepted;
        multi_o += r->multi_offered;
        multi_a += r->multi_accepted;
        errors += r->policy_errors;
        abandoned += r->abandoned;
        waiting += r->still_waiting;
        ops.creates += r->ops.creates;
        ops.destroys += r->ops.destroys;
        ops.reclaims += r->ops.reclaims;
        ops.reuses += r->ops.reuses;
        ops.clears += r->ops.clears;
        ops.plugin_restarts += r->ops.plugin_restarts;
        ops.substitutions += r->ops.substitutions;
        ops.exhaustive += r->ops.exhaustive;
        if (hash.empty()) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%016llx",
                        static_cast<unsigned long long>(r->decision_hash));
          hash = buf;
        }
      }
      if (a.empty()) continue;
      acc[name] = a;
      slice[name] = sl;
      const double per = acc_total > 0 ? 1.0 / static_cast<double>(acc_total) : 0;
      Json pj;
      pj["acc"] = MeanCiJson(a);
      pj["slice"] = MeanCiJson(sl);
      pj["class_acc"] = PooledRatio(ca, co);
      pj["class_offered"] = co;
      pj["multi_acc"] = multi_o > 0 ? Json(static_cast<double>(multi_a) / multi_o) : Json(nullptr);
      pj["frag"] = Summarise(frag).mean;
      pj["whole_gpu"] = Summarise(whole).mean;
      pj["util_compute"] = Summarise(uc).mean;
      pj["util_memory"] = Summarise(um).mean;
      pj["creates_per_acc"] = static_cast<double>(ops.creates) * per;
      pj["destroys_per_acc"] = static_cast<double>(ops.destroys) * per;
      pj["reclaims_per_acc"] = static_cast<double>(ops.reclaims) * per;
      pj["reuses_per_acc"] = static_cast<double>(ops.reuses) * per;
      pj["clears_per_acc"] = static_cast<double>(ops.clears) * per;
      pj["restarts_per_acc"] = static_cast<double>(ops.plugin_restarts) * per;
      pj["substitutions"] = ops.substitutions;
      pj["exhaustive_per_acc"] = static_cast<double>(ops.exhaustive) * per;
      pj["errors"] = errors;
      pj["hash_seed0"] = hash;
      pj["cpu_seconds"] = run_seconds[ci][pi];
      if (spec.sim.mode == ArrivalMode::kQueue) {
        pj["queue"] = Json{{"wait_mean", Summarise(wait_mean).mean},
                           {"wait_p99", Summarise(wait_p99).mean},
                           {"abandoned", abandoned},
                           {"still_waiting", waiting}};
      }
      const LatSet& ls = lat[ci][pi];
      if (ls.single.n() + ls.multi.n() > 0) {
        pj["latency"] = Json{{"single", ls.single.ToJson()},
                             {"multi", ls.multi.ToJson()},
                             {"exhaustive", ls.exhaustive.ToJson()},
                             {"core_single", ls.core_single.ToJson()},
                             {"core_multi", ls.core_multi.ToJson()}};
        if (name.rfind("migd", 0) == 0) {
          pj["latency"]["core_single_cdf"] = ls.core_single.Cdf();
          pj["latency"]["core_multi_cdf"] = ls.core_multi.Cdf();
        }
      }
      cell["policies"][name] = pj;
    }
    // Best compared baseline (B1–B10) by mean, per metric.
    auto best_of = [&](const std::map<std::string, std::vector<double>>& m) {
      std::string best;
      double best_mean = -1;
      for (const auto& [name, v] : m) {
        if (!IsComparedBaseline(name)) continue;
        const double mean = Summarise(v).mean;
        if (mean > best_mean) {
          best = name;
          best_mean = mean;
        }
      }
      return best;
    };
    const std::string best_acc = best_of(acc), best_slice = best_of(slice);
    cell["best"] = Json{{"acc", best_acc}, {"slice", best_slice}};
    auto paired = [](const std::vector<double>& x, const std::vector<double>& y) {
      std::vector<double> d;
      for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) d.push_back(x[i] - y[i]);
      const MeanCi m = Summarise(d);
      return Json{{"mean", m.mean}, {"ci", m.half_width}, {"n", m.n}};
    };
    for (const char* ref : {"migd", "migd-noidle"}) {
      if (!acc.count(ref)) continue;
      for (const auto& [name, v] : acc) {
        if (name == ref) continue;
        cell["paired"][std::string(ref) + "-" + name] =
            Json{{"acc", paired(acc[ref], v)}, {"slice", paired(slice[ref], slice[name])}};
      }
    }
    if (B11Eligible(spec, c)) {
      const std::pair<std::string, double> key{c.workload, c.load};
      if (!b11_count.count(key)) {
        const std::vector<double> rates = ClassRates(c);
        b11_count[key] = SolveSingleGpuMdp(t, rates, false);
        b11_slice[key] = SolveSingleGpuMdp(t, rates, true);
      }
      cell["b11"] = Json{{"acc", b11_count[key].acceptance},
                         {"slice", b11_slice[key].acceptance},
                         {"iterations", b11_count[key].iterations},
                         {"converged", b11_count[key].converged && b11_slice[key].converged}};
    }
    doc["cells"].push_back(cell);
  }
  return doc;
}

}  // namespace migd::bench
