#include "metrics/registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <utility>

#include "base/status_macros.h"

namespace migd::metrics {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// name{a="x",b="y"} (no braces without labels). `extra` is appended as one
// more label (histogram le) when not empty.
void AppendSeries(std::string& out, std::string_view name, const std::vector<std::string>& names,
                  const LabelValues& values, std::string_view extra_name = {},
                  std::string_view extra_value = {}) {
  out += name;
  if (names.empty() && extra_name.empty()) return;
  out += '{';
  bool first = true;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!first) out += ',';
    first = false;
    out += names[i];
    out += "=\"";
    out += EscapeLabelValue(values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out += ',';
    out += extra_name;
    out += "=\"";
    out += EscapeLabelValue(extra_value);
    out += '"';
  }
  out += '}';
}

void AppendSample(std::string& out, std::string_view name, const std::vector<std::string>& names,
                  const LabelValues& values, double value) {
  AppendSeries(out, name, names, values);
  out += ' ';
  out += FormatValue(value);
  out += '\n';
}

void AppendHeader(std::string& out, const std::string& name, const std::string& help,
                  MetricType type) {
  out += "# HELP " + name + " " + EscapeHelp(help) + "\n";
  out += "# TYPE " + name + " " + std::string(MetricTypeName(type)) + "\n";
}

}  // namespace

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

bool IsValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  if (!IsNameStart(name[0]) && name[0] != ':') return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [](char c) { return IsNameStart(c) || IsDigit(c) || c == ':'; });
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || !IsNameStart(name[0])) return false;
  if (name.substr(0, 2) == "__") return false;  // reserved for Prometheus itself
  return std::all_of(name.begin() + 1, name.end(),
                     [](char c) { return IsNameStart(c) || IsDigit(c); });
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Whole numbers (counts) in plain digits; others like Go's
  // strconv.FormatFloat(v, 'g', -1) as Prometheus' own clients write them:
  // shortest round-trip digits, exponent only below 1e-4 ("0.0005", "1e-05").
  if (std::floor(value) == value && std::fabs(value) < 1e15) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), static_cast<int64_t>(value));
    return std::string(buf, end);
  }
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::general);
  if (ec != std::errc()) return "NaN";  // cannot happen with 64 bytes
  return std::string(buf, end);
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  if (!(start > 0) || !(factor > 1) || count <= 0) return out;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) out.push_back(b);
  return out;
}

// ---------------------------------------------------------------- children

void Counter::Inc(double amount) {
  if (!(amount >= 0)) return;  // negative or NaN
  value_.fetch_add(amount, std::memory_order_relaxed);
}

void Gauge::Inc(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  // First bound >= value: buckets are "less than or equal".
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  MutexLock lock(&mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  MutexLock lock(&mu_);
  s.cumulative.resize(counts_.size());
  uint64_t acc = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    acc += counts_[i];
    s.cumulative[i] = acc;
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

// ---------------------------------------------------------------- families

template <typename T>
Family<T>::Family(std::string name, std::vector<std::string> label_names,
                  std::function<std::unique_ptr<T>()> make)
    : name_(std::move(name)), label_names_(std::move(label_names)), make_(std::move(make)) {}

template <typename T>
T& Family<T>::WithLabels(const LabelValues& values) {
  MIGD_CHECK(values.size() == label_names_.size());
  MutexLock lock(&mu_);
  auto it = children_.find(values);
  if (it == children_.end()) it = children_.emplace(values, make_()).first;
  return *it->second;
}

template <typename T>
std::vector<std::pair<LabelValues, const T*>> Family<T>::Children() const {
  MutexLock lock(&mu_);
  std::vector<std::pair<LabelValues, const T*>> out;
  out.reserve(children_.size());
  for (const auto& [values, child] : children_) out.emplace_back(values, child.get());
  return out;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// ---------------------------------------------------------------- registry

struct Registry::CollectorEntry {
  std::vector<CollectedFamily> families;
  Collector collect;
};

struct Registry::Entry {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<std::string> label_names;
  std::unique_ptr<CounterFamily> counter;
  std::unique_ptr<GaugeFamily> gauge;
  std::unique_ptr<HistogramFamily> histogram;
  bool collected = false;  // samples come from a collector
};

namespace {

std::vector<std::string> DerivedNames(const std::string& name, MetricType type) {
  if (type != MetricType::kHistogram) return {name};
  return {name, name + "_bucket", name + "_sum", name + "_count"};
}

// Collects the samples of one collector's declared families.
class SinkImpl final : public CollectSink {
 public:
  struct Declared {
    size_t label_count = 0;
    std::map<LabelValues, double> samples;
  };
  SinkImpl(const std::vector<CollectedFamily>& families, std::atomic<uint64_t>* dropped)
      : dropped_(dropped) {
    for (const CollectedFamily& f : families) declared_[f.name].label_count = f.label_names.size();
  }
  void Add(std::string_view name, const LabelValues& values, double value) override {
    auto it = declared_.find(name);
    if (it == declared_.end() || values.size() != it->second.label_count) {
      dropped_->fetch_add(1, std::memory_order_relaxed);
      return;
    }
    it->second.samples[values] += value;
  }
  std::map<std::string, Declared, std::less<>>& declared() { return declared_; }

 private:
  std::atomic<uint64_t>* const dropped_;
  std::map<std::string, Declared, std::less<>> declared_;
};

}  // namespace

Status Registry::CheckNewLocked(const std::string& name, MetricType type,
                                const std::vector<std::string>& label_names,
                                const std::set<std::string>& pending) const {
  if (!IsValidMetricName(name)) {
    return InvalidArgumentError("invalid metric name " + Quote(name) +
                                " (want [a-zA-Z_:][a-zA-Z0-9_:]*)");
  }
  std::set<std::string> seen;
  for (const std::string& l : label_names) {
    if (!IsValidLabelName(l)) {
      return InvalidArgumentError("metric " + name + ": invalid label name " + Quote(l) +
                                  " (want [a-zA-Z_][a-zA-Z0-9_]*, not starting with __)");
    }
    if (type == MetricType::kHistogram && l == "le") {
      return InvalidArgumentError("histogram " + name + ": the label name \"le\" is reserved");
    }
    if (!seen.insert(l).second) {
      return InvalidArgumentError("metric " + name + ": duplicate label name " + Quote(l));
    }
  }
  for (const std::string& n : DerivedNames(name, type)) {
    if (reserved_.count(n) || pending.count(n)) {
      return AlreadyExistsError("metric name " + Quote(n) + " is already registered");
    }
  }
  return OkStatus();
}

void Registry::AddEntryLocked(std::shared_ptr<Entry> entry) {
  for (std::string& n : DerivedNames(entry->name, entry->type)) reserved_.insert(std::move(n));
  std::string name = entry->name;
  families_.emplace(std::move(name), std::move(entry));
}

StatusOr<CounterFamily*> Registry::AddCounter(std::string name, std::string help,
                                              std::vector<std::string> label_names) {
  MutexLock lock(&mu_);
  MIGD_RETURN_IF_ERROR(CheckNewLocked(name, MetricType::kCounter, label_names, {}));
  auto e = std::make_shared<Entry>();
  e->name = name;
  e->help = std::move(help);
  e->type = MetricType::kCounter;
  e->label_names = label_names;
  e->counter.reset(new CounterFamily(std::move(name), std::move(label_names),
                                     [] { return std::make_unique<Counter>(); }));
  if (e->label_names.empty()) e->counter->WithLabels({});
  CounterFamily* f = e->counter.get();
  AddEntryLocked(std::move(e));
  return f;
}

StatusOr<GaugeFamily*> Registry::AddGauge(std::string name, std::string help,
                                          std::vector<std::string> label_names) {
  MutexLock lock(&mu_);
  MIGD_RETURN_IF_ERROR(CheckNewLocked(name, MetricType::kGauge, label_names, {}));
  auto e = std::make_shared<Entry>();
  e->name = name;
  e->help = std::move(help);
  e->type = MetricType::kGauge;
  e->label_names = label_names;
  e->gauge.reset(new GaugeFamily(std::move(name), std::move(label_names),
                                 [] { return std::make_unique<Gauge>(); }));
  if (e->label_names.empty()) e->gauge->WithLabels({});
  GaugeFamily* f = e->gauge.get();
  AddEntryLocked(std::move(e));
  return f;
}

StatusOr<HistogramFamily*> Registry::AddHistogram(std::string name, std::string help,
                                                  std::vector<std::string> label_names,
                                                  std::vector<double> upper_bounds) {
  if (upper_bounds.empty()) {
    return InvalidArgumentError("histogram " + name + ": no bucket bounds");
  }
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    if (!std::isfinite(upper_bounds[i])) {
      return InvalidArgumentError("histogram " + name + ": bucket bound " + std::to_string(i) +
                                  " is not finite (+Inf is implicit)");
    }
    if (i > 0 && !(upper_bounds[i] > upper_bounds[i - 1])) {
      return InvalidArgumentError("histogram " + name +
                                  ": bucket bounds are not strictly ascending at " +
                                  FormatValue(upper_bounds[i]));
    }
  }
  MutexLock lock(&mu_);
  MIGD_RETURN_IF_ERROR(CheckNewLocked(name, MetricType::kHistogram, label_names, {}));
  auto e = std::make_shared<Entry>();
  e->name = name;
  e->help = std::move(help);
  e->type = MetricType::kHistogram;
  e->label_names = label_names;
  e->histogram.reset(new HistogramFamily(
      std::move(name), std::move(label_names),
      [bounds = std::move(upper_bounds)] { return std::make_unique<Histogram>(bounds); }));
  if (e->label_names.empty()) e->histogram->WithLabels({});
  HistogramFamily* f = e->histogram.get();
  AddEntryLocked(std::move(e));
  return f;
}

Status Registry::AddCollector(std::vector<CollectedFamily> families, Collector collect) {
  if (!collect) return InvalidArgumentError("collector without a callback");
  MutexLock lock(&mu_);
  std::set<std::string> pending;
  for (const CollectedFamily& f : families) {
    if (f.type == MetricType::kHistogram) {
      return InvalidArgumentError("collected metric " + f.name +
                                  ": only counters and gauges can be collected");
    }
    MIGD_RETURN_IF_ERROR(CheckNewLocked(f.name, f.type, f.label_names, pending));
    pending.insert(f.name);
  }
  for (const CollectedFamily& f : families) {
    auto e = std::make_shared<Entry>();
    e->name = f.name;
    e->help = f.help;
    e->type = f.type;
    e->label_names = f.label_names;
    e->collected = true;
    AddEntryLocked(std::move(e));
  }
  auto c = std::make_shared<CollectorEntry>();
  c->families = std::move(families);
  c->collect = std::move(collect);
  collectors_.push_back(std::move(c));
  return OkStatus();
}

std::string Registry::Expose() const {
  MutexLock expose_lock(&expose_mu_);
  std::vector<std::shared_ptr<Entry>> entries;
  std::vector<std::shared_ptr<CollectorEntry>> collectors;
  {
    MutexLock lock(&mu_);
    for (const auto& [name, e] : families_) entries.push_back(e);
    collectors = collectors_;
  }
  // Collectors run first and outside mu_: they may take other locks (the
  // Manager's) and update families of this registry.
  std::map<std::string, std::map<LabelValues, double>> collected;
  for (const auto& c : collectors) {
    SinkImpl sink(c->families, &dropped_);
    c->collect(sink);
    for (auto& [name, d] : sink.declared()) collected[name] = std::move(d.samples);
  }

  std::string out;
  for (const auto& e : entries) {
    AppendHeader(out, e->name, e->help, e->type);
    if (e->collected) {
      for (const auto& [values, v] : collected[e->name]) {
        AppendSample(out, e->name, e->label_names, values, v);
      }
    } else if (e->counter) {
      for (const auto& [values, c] : e->counter->Children()) {
        AppendSample(out, e->name, e->label_names, values, c->Value());
      }
    } else if (e->gauge) {
      for (const auto& [values, g] : e->gauge->Children()) {
        AppendSample(out, e->name, e->label_names, values, g->Value());
      }
    } else if (e->histogram) {
      const std::string bucket = e->name + "_bucket";
      for (const auto& [values, h] : e->histogram->Children()) {
        const Histogram::Snapshot s = h->Read();
        for (size_t i = 0; i < s.cumulative.size(); ++i) {
          const std::string le =
              i < s.upper_bounds.size() ? FormatValue(s.upper_bounds[i]) : "+Inf";
          AppendSeries(out, bucket, e->label_names, values, "le", le);
          out += ' ';
          out += FormatValue(static_cast<double>(s.cumulative[i]));
          out += '\n';
        }
        AppendSample(out, e->name + "_sum", e->label_names, values, s.sum);
        AppendSample(out, e->name + "_count", e->label_names, values, static_cast<double>(s.count));
      }
    }
  }
  return out;
}

}  // namespace migd::metrics
