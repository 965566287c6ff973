// File: metrics/registry.h
//
// A small metrics registry rendered in the Prometheus text exposition format
// 0.0.4 (https://prometheus.io/docs/instrumenting/exposition_formats/).
//
//   * Families: counter, gauge and histogram, each with a validated name,
//     help text and a fixed list of label names. A child (one time series, or
//     one histogram) exists per distinct list of label values and lives as
//     long as the registry; a family without labels has its single child from
//     the start (so it is exposed as 0 before the first update).
//   * Collectors: callbacks run at scrape time that emit counter or gauge
//     samples of families they declared up front — for values owned
//     elsewhere (engine counters, instance counts, NVML call counts).
//
// Names: metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
// [a-zA-Z_][a-zA-Z0-9_]* and must not start with "__"; histograms may not use
// the label "le"; label names of a family are distinct. A name may be
// registered once, and a histogram also reserves <name>_bucket, _sum and
// _count. Label values are any UTF-8 text (escaped on output).
//
// Example:
//   metrics::Registry registry;
//   MIGD_ASSIGN_OR_RETURN(metrics::CounterFamily* calls,
//       registry.AddCounter("migd_calls_total", "Calls by result.", {"result"}));
//   calls->WithLabels({"ok"}).Inc();
//   MIGD_RETURN_IF_ERROR(registry.AddCollector(
//       {{"migd_queue_length", "Items queued.", metrics::MetricType::kGauge, {}}},
//       [&](metrics::CollectSink& sink) { sink.Add("migd_queue_length", {}, queue.size()); }));
//   std::string text = registry.Expose();
//
// Thread-safety: every method of Registry, the families and their children
// is thread-safe. Children are never destroyed before the registry, so the
// references WithLabels returns may be cached. Collectors run on the thread
// that calls Expose(), outside the registry's locks (they may update
// families of the same registry), one Expose() at a time.
#ifndef MIGD_METRICS_REGISTRY_H_
#define MIGD_METRICS_REGISTRY_H_

#include <absl/base/thread_annotations.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"

namespace migd::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge", "histogram" (the TYPE line's word).
std::string_view MetricTypeName(MetricType type);

// Name checks (see the file comment).
bool IsValidMetricName(std::string_view name);
bool IsValidLabelName(std::string_view name);

// Text-format escaping: help text escapes '\' and newline; label values also
// escape '"'.
std::string EscapeHelp(std::string_view help);
std::string EscapeLabelValue(std::string_view value);
// A sample value as the text format writes it: "+Inf", "-Inf", "NaN"; whole
// numbers below 1e15 as plain digits ("3", "100000"); otherwise the shortest
// digits that read back as the same double, with an exponent only for small
// or huge magnitudes ("0.25", "0.0005", "1e-05", "1.5e+20").
std::string FormatValue(double value);

using LabelValues = std::vector<std::string>;

// A monotonically increasing value.
class Counter {
 public:
  // Adds `amount`. Negative or NaN amounts are ignored (a counter never goes
  // down).
  void Inc(double amount = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Inc(double amount = 1.0);
  void Dec(double amount = 1.0) { Inc(-amount); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Observations counted into fixed buckets (upper bounds, inclusive), plus
// their sum and count.
class Histogram {
 public:
  struct Snapshot {
    std::vector<double> upper_bounds;  // finite, ascending (no +Inf)
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (size bounds + 1)
    double sum = 0.0;
    uint64_t count = 0;
  };

  // REQUIRES: `upper_bounds` finite and strictly ascending (the family
  // checks).
  explicit Histogram(std::vector<double> upper_bounds);
  // NaN observations are ignored.
  void Observe(double value);
  Snapshot Read() const;

 private:
  const std::vector<double> bounds_;
  mutable Mutex mu_;
  // Per bucket, non-cumulative, +Inf last.
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);
  double sum_ ABSL_GUARDED_BY(mu_) = 0.0;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// Upper bounds start, start*factor, ... (`count` of them). Empty when
// start <= 0, factor <= 1 or count == 0.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// A family of children of type T keyed by label values.
template <typename T>
class Family {
 public:
  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // The child for `values` (one per label name, in order), created on first
  // use. REQUIRES: values.size() == label_names().size() (checked: a
  // mismatch is a programming error and aborts).
  T& WithLabels(const LabelValues& values);

  // Every child, sorted by label values.
  std::vector<std::pair<LabelValues, const T*>> Children() const;

 private:
  friend class Registry;
  Family(std::string name, std::vector<std::string> label_names,
         std::function<std::unique_ptr<T>()> make);

  const std::string name_;
  const std::vector<std::string> label_names_;
  const std::function<std::unique_ptr<T>()> make_;
  mutable Mutex mu_;
  std::map<LabelValues, std::unique_ptr<T>> children_ ABSL_GUARDED_BY(mu_);
};

// Defined (explicitly instantiated) in registry.cc.
extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// A family a collector emits: type kCounter or kGauge.
struct CollectedFamily {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<std::string> label_names;
};

// What a collector writes into during one scrape.
class CollectSink {
 public:
  // Adds one sample to the family `name` (declared by this collector).
  // Samples with the same label values are summed. A sample of an undeclared
  // family or with the wrong number of label values is dropped and counted
  // (Registry::dropped_samples()).
  virtual void Add(std::string_view name, const LabelValues& values, double value) = 0;

 protected:
  ~CollectSink() = default;
};

using Collector = std::function<void(CollectSink& sink)>;

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registers a family. kInvalidArgument naming the offending name for a bad
  // metric or label name, duplicate label names or (histograms) the label
  // "le" or bounds that are empty, not finite or not strictly ascending;
  // kAlreadyExists if the name (or a histogram's derived name) is taken.
  // The returned pointer lives as long as the registry.
  StatusOr<CounterFamily*> AddCounter(std::string name, std::string help,
                                      std::vector<std::string> label_names);
  StatusOr<GaugeFamily*> AddGauge(std::string name, std::string help,
                                  std::vector<std::string> label_names);
  StatusOr<HistogramFamily*> AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> upper_bounds);

  // Registers a collector and the families it emits, with the same checks as
  // above (types kCounter/kGauge only; kInvalidArgument otherwise). Nothing
  // is registered on error.
  Status AddCollector(std::vector<CollectedFamily> families, Collector collect);

  // Runs every collector and renders every family, sorted by name, in the
  // text format 0.0.4 (HELP, TYPE, samples sorted by label values; histogram
  // _bucket{le=...} cumulative with le="+Inf", then _sum and _count).
  std::string Expose() const;

  // Samples dropped by collectors (undeclared family, wrong label count).
  uint64_t dropped_samples() const { return dropped_.load(std::memory_order_relaxed); }

  // The content type of Expose()'s output.
  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  struct Entry;
  struct CollectorEntry;

  // Checks a new family against the rules and against reserved_ plus
  // `pending` (names of the same AddCollector call).
  Status CheckNewLocked(const std::string& name, MetricType type,
                        const std::vector<std::string>& label_names,
                        const std::set<std::string>& pending) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddEntryLocked(std::shared_ptr<Entry> entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> families_ ABSL_GUARDED_BY(mu_);
  // Family names and histogram suffixes.
  std::set<std::string> reserved_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<CollectorEntry>> collectors_ ABSL_GUARDED_BY(mu_);
  mutable Mutex expose_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Expose() at a time
  mutable std::atomic<uint64_t> dropped_{0};
};

}  // namespace migd::metrics

#endif  // MIGD_METRICS_REGISTRY_H_
