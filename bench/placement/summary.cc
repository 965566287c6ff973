#include "bench/placement/summary.h"

#include <algorithm>
#include <cstdio>

#include "bench/placement/baselines.h"

namespace migd::bench {
namespace {

using Json = nlohmann::json;

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Json PooledRatio(const std::vector<int64_t>& num, const std::vector<int64_t>& den) {
  Json out = Json::array();
  for (size_t i = 0; i < num.size(); ++i) {
    out.push_back(den[i] > 0 ? Json(static_cast<double>(num[i]) / static_cast<double>(den[i]))
                             : Json(nullptr));
  }
  return out;
}

// Sums over the seeds of one policy's runs.
struct Pooled {
  std::vector<double> acc, slice, frag, whole, util_compute, util_memory, wait_mean, wait_p99;
  std::vector<int64_t> class_offered, class_accepted;
  int64_t accepted = 0, multi_offered = 0, multi_accepted = 0, errors = 0, abandoned = 0;
  int64_t waiting = 0;
  OpCounters ops;
  std::string hash;    // of the first seed
  SolveReport solves;  // summed (max fields: maxima)
};

Pooled Pool(const GpuTable& t, const PolicyRuns& runs) {
  Pooled p;
  p.class_offered.assign(t.num_profiles(), 0);
  p.class_accepted.assign(t.num_profiles(), 0);
  for (const std::optional<RunResult>& r : runs.seeds) {
    if (!r) continue;
    p.acc.push_back(r->acceptance());
    p.slice.push_back(r->slice_acceptance());
    p.frag.push_back(r->frag_ratio);
    p.whole.push_back(r->whole_gpu_free);
    p.util_compute.push_back(r->util_compute);
    p.util_memory.push_back(r->util_memory);
    p.wait_mean.push_back(r->wait_mean);
    p.wait_p99.push_back(r->wait_p99);
    for (int k = 0; k < t.num_profiles(); ++k) {
      p.class_offered[k] += r->class_offered[k];
      p.class_accepted[k] += r->class_accepted[k];
    }
    p.accepted += r->accepted;
    p.multi_offered += r->multi_offered;
    p.multi_accepted += r->multi_accepted;
    p.errors += r->policy_errors;
    p.abandoned += r->abandoned;
    p.waiting += r->still_waiting;
    p.ops.creates += r->ops.creates;
    p.ops.destroys += r->ops.destroys;
    p.ops.reclaims += r->ops.reclaims;
    p.ops.reuses += r->ops.reuses;
    p.ops.clears += r->ops.clears;
    p.ops.plugin_restarts += r->ops.plugin_restarts;
    p.ops.substitutions += r->ops.substitutions;
    p.ops.exhaustive += r->ops.exhaustive;
    p.solves.solves += r->solves.solves;
    p.solves.failures += r->solves.failures;
    p.solves.total_ns += r->solves.total_ns;
    p.solves.max_ns = std::max(p.solves.max_ns, r->solves.max_ns);
    p.solves.max_bytes = std::max(p.solves.max_bytes, r->solves.max_bytes);
    p.solves.max_states = std::max(p.solves.max_states, r->solves.max_states);
    p.solves.value_decisions += r->solves.value_decisions;
    p.solves.cost_order_decisions += r->solves.cost_order_decisions;
    if (p.hash.empty()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(r->decision_hash));
      p.hash = buf;
    }
  }
  return p;
}

Json LatencyJson(const std::string& name, const LatSet& ls) {
  Json j{{"single", ls.single.ToJson()},
         {"multi", ls.multi.ToJson()},
         {"exhaustive", ls.exhaustive.ToJson()},
         {"core_single", ls.core_single.ToJson()},
         {"core_multi", ls.core_multi.ToJson()}};
  if (name.rfind("migd", 0) == 0) {
    j["core_single_cdf"] = ls.core_single.Cdf();
    j["core_multi_cdf"] = ls.core_multi.Cdf();
  }
  return j;
}

Json PolicyJson(const MatrixSpec& spec, const std::string& name, const Pooled& p,
                const PolicyRuns& runs) {
  const double per = p.accepted > 0 ? 1.0 / static_cast<double>(p.accepted) : 0;
  Json pj;
  pj["acc"] = MeanCiJson(p.acc);
  pj["slice"] = MeanCiJson(p.slice);
  pj["class_acc"] = PooledRatio(p.class_accepted, p.class_offered);
  pj["class_offered"] = p.class_offered;
  pj["multi_acc"] = p.multi_offered > 0
                        ? Json(static_cast<double>(p.multi_accepted) / p.multi_offered)
                        : Json(nullptr);
  pj["frag"] = Summarise(p.frag).mean;
  pj["whole_gpu"] = Summarise(p.whole).mean;
  pj["util_compute"] = Summarise(p.util_compute).mean;
  pj["util_memory"] = Summarise(p.util_memory).mean;
  pj["creates_per_acc"] = static_cast<double>(p.ops.creates) * per;
  pj["destroys_per_acc"] = static_cast<double>(p.ops.destroys) * per;
  pj["reclaims_per_acc"] = static_cast<double>(p.ops.reclaims) * per;
  pj["reuses_per_acc"] = static_cast<double>(p.ops.reuses) * per;
  pj["clears_per_acc"] = static_cast<double>(p.ops.clears) * per;
  pj["restarts_per_acc"] = static_cast<double>(p.ops.plugin_restarts) * per;
  pj["substitutions"] = p.ops.substitutions;
  pj["exhaustive_per_acc"] = static_cast<double>(p.ops.exhaustive) * per;
  pj["errors"] = p.errors;
  pj["hash_seed0"] = p.hash;
  pj["cpu_seconds"] = runs.seconds;
  if (spec.sim.mode == ArrivalMode::kQueue) {
    pj["queue"] = Json{{"wait_mean", Summarise(p.wait_mean).mean},
                       {"wait_p99", Summarise(p.wait_p99).mean},
                       {"abandoned", p.abandoned},
                       {"still_waiting", p.waiting}};
  }
  if (runs.lat.single.n() + runs.lat.multi.n() > 0) pj["latency"] = LatencyJson(name, runs.lat);
  if (p.solves.value_decisions + p.solves.cost_order_decisions > 0) {
    const SolveReport& s = p.solves;
    pj["solve"] = Json{{"solves", s.solves},
                       {"failures", s.failures},
                       {"mean_ms", s.solves > 0 ? 1e-6 * static_cast<double>(s.total_ns) /
                                                      static_cast<double>(s.solves)
                                                : 0.0},
                       {"max_ms", 1e-6 * static_cast<double>(s.max_ns)},
                       {"max_kib", static_cast<double>(s.max_bytes) / 1024.0},
                       {"max_states", s.max_states},
                       {"value_decisions", s.value_decisions},
                       {"cost_order_decisions", s.cost_order_decisions}};
  }
  return pj;
}

// The compared baseline (B1–B10) with the highest mean.
std::string BestOf(const std::map<std::string, std::vector<double>>& m) {
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
}

}  // namespace

void LatSet::Add(const Allocator::Latencies& l) {
  for (int64_t x : l.single) single.Add(x);
  for (int64_t x : l.multi) multi.Add(x);
  for (int64_t x : l.exhaustive) exhaustive.Add(x);
  for (int64_t x : l.core_single) core_single.Add(x);
  for (int64_t x : l.core_multi) core_multi.Add(x);
}

void LatSet::Merge(const LatSet& o) {
  single.Merge(o.single);
  multi.Merge(o.multi);
  exhaustive.Merge(o.exhaustive);
  core_single.Merge(o.core_single);
  core_multi.Merge(o.core_multi);
}

bool B11Eligible(const MatrixSpec& spec, const MatrixCell& c) {
  return c.kind == "synthetic" && c.gpus == 1 && c.mix.bundle_fraction == 0 &&
         spec.lifetime == LifetimeDist::kExponential;
}

std::vector<double> ClassRates(const MatrixCell& c) {
  const GpuTable& t = *c.table;
  const std::vector<double> w = MixClassWeights(t, c.mix);
  double mean_c = 0;
  for (int p = 0; p < t.num_profiles(); ++p) mean_c += w[p] * t.profile(p).compute;
  const double rate = c.load * t.compute_slices() * c.gpus / mean_c;
  std::vector<double> r(t.num_profiles());
  for (int p = 0; p < t.num_profiles(); ++p) r[p] = rate * w[p];
  return r;
}

Json CellJson(const MatrixSpec& spec, const MatrixCell& c, const std::vector<PolicyRuns>& runs,
              B11Cache& b11) {
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
  for (size_t pi = 0; pi < spec.policies.size(); ++pi) {
    const std::string& name = spec.policies[pi];
    const Pooled p = Pool(t, runs[pi]);
    if (p.acc.empty()) continue;
    acc[name] = p.acc;
    slice[name] = p.slice;
    cell["policies"][name] = PolicyJson(spec, name, p, runs[pi]);
  }
  cell["best"] = Json{{"acc", BestOf(acc)}, {"slice", BestOf(slice)}};
  for (const char* ref : {"migd", "migd-slice", "migd-order", "migd-separable", "migd-noidle"}) {
    if (!acc.count(ref)) continue;
    for (const auto& [name, v] : acc) {
      if (name == ref) continue;
      cell["paired"][std::string(ref) + "-" + name] =
          Json{{"acc", PairedJson(acc[ref], v)}, {"slice", PairedJson(slice[ref], slice[name])}};
    }
  }
  if (B11Eligible(spec, c)) {
    const std::pair<std::string, double> key{c.workload, c.load};
    if (!b11.count(key)) {
      const std::vector<double> rates = ClassRates(c);
      b11[key] = {SolveSingleGpuMdp(t, rates, false), SolveSingleGpuMdp(t, rates, true)};
    }
    const auto& [count, sliced] = b11[key];
    cell["b11"] = Json{{"acc", count.acceptance},
                       {"slice", sliced.acceptance},
                       {"iterations", count.iterations},
                       {"converged", count.converged && sliced.converged}};
  }
  return cell;
}

Json DocHeader(const MatrixSpec& spec, int seeds, const std::map<bool, GpuTable>& tables,
               const TraceSummary* trace) {
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
  if (spec.trace_path && trace != nullptr) {
    doc["trace"] =
        Json{{"file", Basename(*spec.trace_path)},
             {"mapping", TraceMappingName(spec.trace_mapping)},
             {"arrivals", spec.trace_arrivals == TraceArrivals::kPoisson ? "poisson" : "trace"},
             {"multi_gpu", spec.trace_multi_gpu ? "gang-7g" : "excluded"},
             {"pods", trace->pods},
             {"cpu_only", trace->cpu_only},
             {"single_gpu", trace->single_gpu},
             {"multi_gpu_used", trace->multi_gpu_used},
             {"multi_gpu_skipped", trace->multi_gpu_skipped},
             {"pending", trace->pending},
             {"timed", trace->timed},
             {"lifetime_cap_s", trace->lifetime_cap},
             {"per_class", trace->per_class}};
  }
  return doc;
}

}  // namespace migd::bench
