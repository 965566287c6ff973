#include "bench/placement/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numbers>
#include <numeric>
#include <sstream>

#include "base/status_macros.h"

namespace migd::bench {
namespace {

uint64_t SplitMix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Lognormal fitted to the Alibaba single-GPU lifetimes (median 544 s, p90
// 6,005 s), rescaled to mean 1.
const double kLognormalSigma = std::log(6005.0 / 544.0) / 1.2815515655446004;

}  // namespace

double DrawLifetime(Rng& rng, LifetimeDist dist) {
  if (dist == LifetimeDist::kExponential) return rng.Exponential(1.0);
  const double sigma = kLognormalSigma;
  return std::exp(-0.5 * sigma * sigma + sigma * rng.Normal());
}

int RequestCompute(const GpuTable& table, const Request& r) {
  int c = 0;
  for (int p : r.profiles) c += table.profile(p).compute;
  return c;
}

Rng::Rng(uint64_t seed, uint64_t stream) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (stream + 0x632BE59BD9B4E019ull);
  for (uint64_t& s : s_) s = SplitMix(x);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) * 0x1.0p-53; }

double Rng::Exponential(double mean) { return -mean * std::log(Uniform()); }

double Rng::Normal() {
  const double u1 = Uniform();
  const double u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

int Rng::Pick(const std::vector<double>& weights) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  double u = Uniform() * total;
  int last = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    last = static_cast<int>(i);
    if (u < weights[i]) return last;
    u -= weights[i];
  }
  return last;
}

std::vector<std::string> NamedMixes() {
  return {"uniform", "small-heavy", "no-7g", "large-heavy", "bimodal", "uniform-dm", "multi"};
}

StatusOr<Mix> ParseMix(std::string_view spec) {
  Mix m;
  m.name = std::string(spec);
  auto five = [&m](double a, double b, double c, double d, double e) {
    m.weights = {{"1g", a}, {"2g", b}, {"3g", c}, {"4g", d}, {"7g", e}};
  };
  if (spec == "uniform") {
    five(1, 1, 1, 1, 1);
  } else if (spec == "small-heavy") {
    five(6, 3, 1, 0.5, 0.5);
  } else if (spec == "no-7g") {
    five(4, 2, 2, 1, 0);
  } else if (spec == "large-heavy") {
    five(1, 1, 2, 3, 3);
  } else if (spec == "bimodal") {
    five(1, 0, 0, 0, 1);
  } else if (spec == "uniform-dm") {
    m.weights = {{"1g", 1}, {"1g.dm", 1}, {"2g", 1}, {"3g", 1}, {"4g", 1}, {"7g", 1}};
    m.needs_double_memory = true;
  } else if (spec == "multi") {
    five(1, 1, 1, 1, 1);
    m.bundle_fraction = 1.0 / 3.0;
    m.bundles = {
        {{"4g", "2g", "1g"}, true, 1},  // one GPU (kubernetes-sigs/dra-driver-nvidia-gpu issue 897)
        {{"1g", "1g", "2g"}, true, 1},  // 2×1g+2g on one GPU
        {{"3g", "3g"}, false, 1},       // two 3g anywhere
        {{"2g", "2g", "1g"}, false, 1},  // anywhere
        {{"7g", "7g"}, false, 1},        // 2-GPU gang
    };
  } else {
    // "1g:6,2g:3,..."
    std::string text(spec);
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
      const size_t colon = item.find(':');
      if (colon == std::string::npos) {
        return InvalidArgumentError("mix \"" + text + "\": expected a named mix (" +
                                    "uniform, small-heavy, no-7g, large-heavy, bimodal, " +
                                    "uniform-dm, multi) or class:weight,...");
      }
      double w = 0;
      try {
        w = std::stod(item.substr(colon + 1));
      } catch (const std::exception&) {
        return InvalidArgumentError("mix \"" + text + "\": bad weight in \"" + item + "\"");
      }
      if (!(w >= 0) || !std::isfinite(w)) {
        return InvalidArgumentError("mix \"" + text + "\": negative weight");
      }
      const std::string key = item.substr(0, colon);
      if (key == "1g.dm") m.needs_double_memory = true;
      m.weights.emplace_back(key, w);
    }
    if (m.weights.empty()) return InvalidArgumentError("empty mix");
  }
  return m;
}

StatusOr<LifetimeDist> ParseLifetime(std::string_view name) {
  if (name == "exp") return LifetimeDist::kExponential;
  if (name == "lognormal") return LifetimeDist::kLognormal;
  return InvalidArgumentError("lifetime must be exp or lognormal, got \"" + std::string(name) +
                              "\"");
}

std::vector<double> MixClassWeights(const GpuTable& table, const Mix& mix) {
  std::vector<double> w(table.num_profiles(), 0.0);
  double total = 0;
  for (const auto& [key, weight] : mix.weights) {
    const int p = table.FindProfile(key);
    if (p >= 0) {
      w[p] += weight;
      total += weight;
    }
  }
  if (total > 0) {
    for (double& x : w) x /= total;
  }
  return w;
}

StatusOr<std::vector<Request>> GenerateSynthetic(const GpuTable& table, const SyntheticSpec& spec) {
  std::vector<int> single_class;
  std::vector<double> single_weight;
  for (const auto& [key, weight] : spec.mix.weights) {
    const int p = table.FindProfile(key);
    if (p < 0) {
      return InvalidArgumentError("mix " + spec.mix.name + ": class " + key + " not on " +
                                  table.model().key);
    }
    single_class.push_back(p);
    single_weight.push_back(weight);
  }
  struct B {
    std::vector<int> profiles;
    bool same_gpu;
  };
  std::vector<B> bundles;
  std::vector<double> bundle_weight;
  for (const Bundle& b : spec.mix.bundles) {
    B x{{}, b.same_gpu};
    int whole_gpus = 0;
    for (const std::string& key : b.profiles) {
      const int p = table.FindProfile(key);
      if (p < 0) return InvalidArgumentError("bundle class " + key + " not in table");
      x.profiles.push_back(p);
      if (table.profile(p).memory == table.memory_slices()) ++whole_gpus;
    }
    if (whole_gpus > spec.gpus) continue;  // could never fit: not offered
    bundles.push_back(std::move(x));
    bundle_weight.push_back(b.weight);
  }
  const double fb = bundles.empty() ? 0.0 : spec.mix.bundle_fraction;
  // Mean compute per request.
  double wsum = std::accumulate(single_weight.begin(), single_weight.end(), 0.0);
  if (wsum <= 0) return InvalidArgumentError("mix has no positive weight");
  double single_c = 0;
  for (size_t i = 0; i < single_class.size(); ++i) {
    single_c += single_weight[i] / wsum * table.profile(single_class[i]).compute;
  }
  double bundle_c = 0;
  if (!bundles.empty()) {
    const double bsum = std::accumulate(bundle_weight.begin(), bundle_weight.end(), 0.0);
    for (size_t i = 0; i < bundles.size(); ++i) {
      int c = 0;
      for (int p : bundles[i].profiles) c += table.profile(p).compute;
      bundle_c += bundle_weight[i] / bsum * c;
    }
  }
  const double mean_c = (1 - fb) * single_c + fb * bundle_c;
  const double capacity = static_cast<double>(table.compute_slices()) * spec.gpus;
  const double rate = spec.load * capacity / mean_c;  // mean lifetime 1

  Rng arrivals(spec.seed, Rng::kArrivals);
  Rng profiles(spec.seed, Rng::kProfiles);
  Rng lifetimes(spec.seed, Rng::kLifetimes);
  std::vector<Request> out;
  out.reserve(spec.events);
  double t = 0;
  for (int i = 0; i < spec.events; ++i) {
    t += arrivals.Exponential(1.0 / rate);
    Request r;
    r.id = i;
    r.arrival = t;
    r.lifetime = DrawLifetime(lifetimes, spec.lifetime);
    // Two draws per request always, so the single-class sequence does not
    // depend on whether bundles are enabled.
    const double u = profiles.Uniform();
    const int single = single_class[profiles.Pick(single_weight)];
    if (fb > 0 && u < fb) {
      const B& b = bundles[profiles.Pick(bundle_weight)];
      r.profiles = b.profiles;
      r.same_gpu = b.same_gpu;
    } else {
      r.profiles = {single};
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<double> EmpiricalClassWeights(const GpuTable& table,
                                          const std::vector<Request>& requests) {
  std::vector<double> w(table.num_profiles(), 0.0);
  double total = 0;
  for (const Request& r : requests) {
    for (int p : r.profiles) {
      w[p] += 1;
      total += 1;
    }
  }
  if (total > 0) {
    for (double& x : w) x /= total;
  }
  return w;
}

// ---- adversarial scripts ----

std::vector<std::string> AdversarialScripts() { return {"dra933", "reverse", "churn4g"}; }

StatusOr<std::vector<Request>> AdversarialScript(const GpuTable& table, std::string_view name,
                                                 int* gpus) {
  auto cls = [&table](const char* key) { return table.FindProfile(key); };
  for (const char* k : {"1g", "2g", "3g", "4g", "7g"}) {
    if (cls(k) < 0) return InvalidArgumentError(std::string("script needs class ") + k);
  }
  std::vector<Request> out;
  auto add = [&out](double at, double life, int p) {
    Request r;
    r.id = static_cast<int64_t>(out.size());
    r.arrival = at;
    r.lifetime = life;
    r.profiles = {p};
    out.push_back(r);
  };
  if (name == "dra933") {
    *gpus = 1;
    // Requests 2, 3, 4 and 6 (0-based) depart: under first-fit those sit at
    // slices 2, 3, 4, 6, leaving 1g at 0, 1, 5 as in
    // kubernetes-sigs/dra-driver-nvidia-gpu issue 933.
    for (int i = 0; i < 7; ++i) {
      const bool departs = i == 2 || i == 3 || i == 4 || i == 6;
      add(static_cast<double>(i), departs ? 10.0 - i : 100.0, cls("1g"));
    }
    add(20.0, 10.0, cls("3g"));
  } else if (name == "reverse") {
    *gpus = 2;
    double t = 0;
    for (int i = 0; i < 6; ++i) add(t += 1, 1000, cls("1g"));
    for (int i = 0; i < 3; ++i) add(t += 1, 1000, cls("2g"));
    for (int i = 0; i < 2; ++i) add(t += 1, 1000, cls("3g"));
    add(t += 1, 1000, cls("4g"));
    add(t += 1, 1000, cls("7g"));
    add(t += 1, 1000, cls("4g"));
    add(t += 1, 1000, cls("3g"));
    add(t += 1, 1000, cls("7g"));
  } else if (name == "churn4g") {
    *gpus = 1;
    // Seven 1g with staggered departures, a 4g that must wait, then a stream
    // of short 1g arriving every 0.5 with lifetime 2.
    for (int i = 0; i < 7; ++i) add(0.01 * i, 1.0 + i, cls("1g"));
    add(0.5, 5.0, cls("4g"));
    for (int i = 0; i < 40; ++i) add(0.75 + 0.5 * i, 2.0, cls("1g"));
  } else {
    return InvalidArgumentError("unknown script \"" + std::string(name) +
                                "\" (dra933, reverse, churn4g)");
  }
  return out;
}

}  // namespace migd::bench
