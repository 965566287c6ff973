#include "bench/placement/trace.h"

#include <absl/strings/ascii.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "base/status_macros.h"

namespace migd::bench {
namespace {

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> out;
  for (absl::string_view field : absl::StrSplit(line, ',')) {
    out.emplace_back(absl::StripAsciiWhitespace(field));
  }
  return out;
}

StatusOr<int64_t> ParseInt(const std::string& s, const std::string& what) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(s, &v)) {
    return InvalidArgumentError(what + ": not an integer: \"" + s + "\"");
  }
  return v;
}

// Where the columns are; optional ones may be absent.
struct Columns {
  size_t count = 0;  // fields in the header
  size_t name = 0, num_gpu = 0, gpu_milli = 0;
  std::optional<size_t> phase, creation, deletion, scheduled;
};

StatusOr<Columns> FindColumns(const std::vector<std::string>& header) {
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  Columns c;
  c.count = header.size();
  for (const auto& [need, field] : {std::pair<const char*, size_t*>{"name", &c.name},
                                    {"num_gpu", &c.num_gpu},
                                    {"gpu_milli", &c.gpu_milli}}) {
    auto it = col.find(need);
    if (it == col.end()) {
      return InvalidArgumentError(std::string("trace: header lacks column ") + need);
    }
    *field = it->second;
  }
  auto optional = [&col](const char* name) -> std::optional<size_t> {
    auto it = col.find(name);
    return it == col.end() ? std::nullopt : std::optional<size_t>(it->second);
  };
  c.phase = optional("pod_phase");
  c.creation = optional("creation_time");
  c.deletion = optional("deletion_time");
  c.scheduled = optional("scheduled_time");
  if (c.creation.has_value() != c.deletion.has_value()) {
    return InvalidArgumentError(std::string("trace: header has ") +
                                (c.creation ? "creation_time" : "deletion_time") + " without " +
                                (c.creation ? "deletion_time" : "creation_time"));
  }
  return c;
}

StatusOr<TracePod> ParseRow(const Columns& cols, const std::vector<std::string>& f, int lineno) {
  const std::string where = "trace line " + std::to_string(lineno);
  if (f.size() < cols.count) {
    return InvalidArgumentError(where + ": " + std::to_string(f.size()) + " fields, header has " +
                                std::to_string(cols.count));
  }
  TracePod p;
  p.name = f[cols.name];
  MIGD_ASSIGN_OR_RETURN(int64_t ng, ParseInt(f[cols.num_gpu], where + " num_gpu"));
  MIGD_ASSIGN_OR_RETURN(int64_t gm, ParseInt(f[cols.gpu_milli], where + " gpu_milli"));
  if (ng < 0 || gm < 0) return InvalidArgumentError(where + ": negative num_gpu or gpu_milli");
  p.num_gpu = static_cast<int>(ng);
  p.gpu_milli = static_cast<int>(gm);
  if (cols.phase) p.phase = f[*cols.phase];
  if (cols.creation) {
    p.timed = true;
    MIGD_ASSIGN_OR_RETURN(p.creation, ParseInt(f[*cols.creation], where + " creation_time"));
    MIGD_ASSIGN_OR_RETURN(p.deletion, ParseInt(f[*cols.deletion], where + " deletion_time"));
  }
  if (cols.scheduled && !f[*cols.scheduled].empty()) {
    MIGD_ASSIGN_OR_RETURN(int64_t s, ParseInt(f[*cols.scheduled], where + " scheduled_time"));
    p.scheduled = s;
  }
  return p;
}

// One trace pod turned into a request template.
struct Item {
  int64_t creation;
  std::string name;
  std::vector<int> profiles;
  double lifetime;
  int row;
};

// The GPU pods of the trace in creation order (ties by name), counted in
// `sum`; single-GPU lifetimes in *single_lifetimes.
StatusOr<std::vector<Item>> CollectItems(const GpuTable& table, const std::vector<TracePod>& pods,
                                         const TraceSpec& spec, TraceSummary& sum,
                                         std::vector<double>* single_lifetimes) {
  const int p7 = table.FindProfile("7g");
  std::vector<Item> items;
  sum.timed = std::all_of(pods.begin(), pods.end(), [](const TracePod& p) { return p.timed; });
  for (size_t i = 0; i < pods.size(); ++i) {
    const TracePod& pod = pods[i];
    ++sum.pods;
    if (pod.num_gpu == 0) {
      ++sum.cpu_only;
      continue;
    }
    if (pod.phase == "Pending") ++sum.pending;
    Item it{pod.creation,
            pod.name,
            {},
            static_cast<double>(std::max<int64_t>(1, pod.deletion - pod.creation)),
            static_cast<int>(i)};
    if (pod.num_gpu == 1) {
      const std::optional<std::string> key = MapGpuMilli(pod.gpu_milli, spec.mapping);
      if (!key) continue;
      const int p = table.FindProfile(*key);
      if (p < 0) return InvalidArgumentError("mapped class " + *key + " not in table");
      it.profiles = {p};
      ++sum.single_gpu;
      ++sum.per_class[p];
      single_lifetimes->push_back(it.lifetime);
    } else {
      if (!spec.include_multi_gpu || pod.num_gpu > spec.gpus || p7 < 0) {
        ++sum.multi_gpu_skipped;
        continue;
      }
      it.profiles.assign(pod.num_gpu, p7);
      ++sum.multi_gpu_used;
    }
    items.push_back(std::move(it));
  }
  if (items.empty()) return InvalidArgumentError("trace has no GPU pods");
  if (sum.timed) {
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      return a.creation != b.creation ? a.creation < b.creation : a.name < b.name;
    });
  }
  return items;
}

// Caps every lifetime at the `quantile` of the single-GPU lifetimes (1 = no
// cap); returns the cap (0 without one).
double CapLifetimes(std::vector<Item>& items, std::vector<double> single_lifetimes,
                    double quantile) {
  if (single_lifetimes.empty() || quantile >= 1.0) return 0;
  std::sort(single_lifetimes.begin(), single_lifetimes.end());
  const size_t k =
      std::min(single_lifetimes.size() - 1,
               static_cast<size_t>(quantile * static_cast<double>(single_lifetimes.size())));
  const double cap = single_lifetimes[k];
  for (Item& it : items) it.lifetime = std::min(it.lifetime, cap);
  return cap;
}

// Poisson arrivals at the rate giving `load` for the window's work Σ c·L.
void PoissonArrivals(const TraceSpec& spec, double capacity, double work,
                     std::vector<Request>& out) {
  const double rate = spec.load * capacity * spec.events / work;
  Rng arrivals(spec.seed, Rng::kArrivals);
  double t = 0;
  for (Request& r : out) {
    t += arrivals.Exponential(1.0 / rate);
    r.arrival = t;
  }
}

// The trace's creation gaps (the wrap-around gap = the mean gap), scaled so
// that Σ c·L / (capacity · span) = load.
void CompressedTraceArrivals(const std::vector<Item>& items, size_t offset, const TraceSpec& spec,
                             double capacity, double work, std::vector<Request>& out) {
  const size_t n = items.size();
  const double mean_gap = static_cast<double>(items.back().creation - items.front().creation) /
                          static_cast<double>(std::max<size_t>(1, n - 1));
  std::vector<double> gaps(spec.events, 0.0);
  double span = 0;
  for (int i = 1; i < spec.events; ++i) {
    const size_t a = (offset + static_cast<size_t>(i) - 1) % n;
    const size_t b = (offset + static_cast<size_t>(i)) % n;
    gaps[i] = b == 0 ? mean_gap : static_cast<double>(items[b].creation - items[a].creation);
    span += gaps[i];
  }
  span += mean_gap;  // the last request's share
  const double factor = work / (spec.load * capacity * span);
  double t = mean_gap * factor;
  for (int i = 0; i < spec.events; ++i) {
    t += gaps[i] * factor;
    out[i].arrival = t;
  }
}

}  // namespace

StatusOr<std::vector<TracePod>> ParseAlibabaCsv(std::istream& in) {
  std::string line;
  if (!std::getline(in, line)) return InvalidArgumentError("trace: empty input");
  MIGD_ASSIGN_OR_RETURN(const Columns cols, FindColumns(SplitCsvLine(line)));
  std::vector<TracePod> pods;
  int lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    MIGD_ASSIGN_OR_RETURN(TracePod p, ParseRow(cols, SplitCsvLine(line), lineno));
    pods.push_back(std::move(p));
  }
  return pods;
}

StatusOr<std::vector<TracePod>> ReadAlibabaCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot open trace " + path);
  StatusOr<std::vector<TracePod>> pods = ParseAlibabaCsv(in);
  if (!pods.ok()) return pods.status().WithContext(path);
  return pods;
}

StatusOr<TraceMapping> ParseTraceMapping(std::string_view name) {
  if (name == "compute-ceil") return TraceMapping::kComputeCeil;
  if (name == "memory-eighths") return TraceMapping::kMemoryEighths;
  return InvalidArgumentError("trace mapping must be compute-ceil or memory-eighths, got \"" +
                              std::string(name) + "\"");
}

std::string_view TraceMappingName(TraceMapping m) {
  return m == TraceMapping::kComputeCeil ? "compute-ceil" : "memory-eighths";
}

StatusOr<TraceArrivals> ParseTraceArrivals(std::string_view name) {
  if (name == "poisson") return TraceArrivals::kPoisson;
  if (name == "trace") return TraceArrivals::kTrace;
  return InvalidArgumentError("trace arrivals must be poisson or trace");
}

std::optional<std::string> MapGpuMilli(int gpu_milli, TraceMapping mapping) {
  if (gpu_milli <= 0) return std::nullopt;
  const int milli = std::min(gpu_milli, 1000);
  if (mapping == TraceMapping::kComputeCeil) {
    const int k = (milli * 7 + 999) / 1000;
    for (int c : {1, 2, 3, 4, 7}) {
      if (c >= k) return std::to_string(c) + "g";
    }
    return "7g";
  }
  const int k = (milli * 8 + 999) / 1000;
  if (k <= 1) return "1g";
  if (k <= 2) return "2g";
  if (k <= 4) return "3g";
  return "7g";
}

StatusOr<std::vector<Request>> BuildTraceRequests(const GpuTable& table,
                                                  const std::vector<TracePod>& pods,
                                                  const TraceSpec& spec, TraceSummary* summary) {
  TraceSummary sum;
  sum.per_class.assign(table.num_profiles(), 0);
  std::vector<double> single_lifetimes;
  MIGD_ASSIGN_OR_RETURN(std::vector<Item> items,
                        CollectItems(table, pods, spec, sum, &single_lifetimes));
  if (!sum.timed && spec.arrivals == TraceArrivals::kTrace) {
    return InvalidArgumentError(
        "trace has no timing columns (creation_time, deletion_time): use Poisson arrivals");
  }
  if (sum.timed) {
    sum.lifetime_cap = CapLifetimes(items, std::move(single_lifetimes), spec.lifetime_cap_quantile);
  }
  const size_t n = items.size();
  Rng offset_rng(spec.seed, Rng::kOffset);
  const size_t offset = static_cast<size_t>(offset_rng.Next() % n);
  const double capacity = static_cast<double>(table.compute_slices()) * spec.gpus;
  std::vector<Request> out;
  out.reserve(spec.events);
  double work = 0;                            // Σ c·L over the window
  Rng lifetimes(spec.seed, Rng::kLifetimes);  // untimed pods only
  for (int i = 0; i < spec.events; ++i) {
    const Item& it = items[(offset + static_cast<size_t>(i)) % n];
    Request r;
    r.id = i;
    r.profiles = it.profiles;
    r.same_gpu = false;
    r.lifetime = sum.timed ? it.lifetime : DrawLifetime(lifetimes, spec.lifetime);
    r.source = it.row;
    work += RequestCompute(table, r) * r.lifetime;
    out.push_back(std::move(r));
  }
  if (spec.arrivals == TraceArrivals::kPoisson) {
    PoissonArrivals(spec, capacity, work, out);
  } else {
    CompressedTraceArrivals(items, offset, spec, capacity, work, out);
  }
  if (summary != nullptr) *summary = sum;
  return out;
}

}  // namespace migd::bench
