// File: bench/placement/report_util.h
//
// Shared pieces of placement_report: number formatting, lookups in the
// placement_bench result documents (cells by workload, load and N; policy
// order; pretty workload names) and Results, the set of documents of one
// run keyed by the name run.sh gave them ("synth", "trace-default-cc", ...).
//
// Thread-safety: plain functions and an immutable value type.
#ifndef MIGD_BENCH_PLACEMENT_REPORT_UTIL_H_
#define MIGD_BENCH_PLACEMENT_REPORT_UTIL_H_

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace migd::bench::report {

using Json = nlohmann::json;

// The baselines the goals compare against, and the loads in the goals' scope.
extern const std::vector<std::string> kCompared;
extern const std::vector<double> kGoalLoads;

// x with `decimals` digits after the point ("+" in front of non-negative
// values when `sign`); never "-0.00".
std::string Fix(double x, int decimals, bool sign = false);
std::string Pct(double x);               // 0.1234 -> "12.34"
std::string Pp(double mean, double ci);  // "+0.12 ± 0.30" (fractions in, pp out)
std::string Us(double ns);               // ns -> "12.3" µs
bool Near(double a, double b);
bool IsGoalLoad(double load);

const Json& Cells(const Json& doc);
const Json* FindCell(const Json& doc, const std::string& workload, double load, int gpus);
std::vector<std::string> Workloads(const Json& doc);
std::vector<int> DistinctGpus(const Json& doc);
std::vector<double> DistinctLoads(const Json& doc);
// The policies of `cell` in report order.
std::vector<std::string> PolicyOrder(const Json& cell);
// The mean of `metric` ("acc", "slice") of `policy` in `cell`.
double M(const Json& cell, const std::string& policy, const char* metric);
// "trace:openb_pod_list_default.csv:compute-ceil" -> "Alibaba default (compute-ceil)".
std::string PrettyWorkload(const std::string& w);
// Non-alphanumerics -> '-', for file names.
std::string Slug(std::string s);
std::string Join(const std::vector<std::string>& v, const char* sep = ", ");
std::string JoinInts(const std::vector<int>& v);  // "{1,2,8}"

// The documents of one run.
class Results {
 public:
  Results(std::map<std::string, Json> docs, Json meta)
      : docs_(std::move(docs)), meta_(std::move(meta)) {}
  // The document run.sh named `name`, or nullptr.
  const Json* Doc(const std::string& name) const;
  // The trace documents with that gpu_milli mapping, in name order.
  std::vector<const Json*> TraceDocs(const std::string& mapping) const;
  // The adversarial script documents, as (script name, document).
  std::vector<std::pair<std::string, const Json*>> Scripts() const;
  const Json& meta() const { return meta_; }

 private:
  std::map<std::string, Json> docs_;
  Json meta_;
};

}  // namespace migd::bench::report

#endif  // MIGD_BENCH_PLACEMENT_REPORT_UTIL_H_
