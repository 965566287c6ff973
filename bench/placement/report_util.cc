#include "bench/placement/report_util.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace migd::bench::report {

const std::vector<std::string> kCompared = {"B1", "B2", "B3", "B4a", "B4b",
                                            "B5", "B6", "B8", "B9",  "B10"};
const std::vector<double> kGoalLoads = {0.7, 0.9, 1.1};

std::string Fix(double x, int decimals, bool sign) {
  if (std::abs(x) < 0.5 * std::pow(10.0, -decimals)) x = 0;  // no "-0.00"
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(decimals);
  if (sign && x >= 0) s << '+';
  s << x;
  return s.str();
}

std::string Pct(double x) { return Fix(100 * x, 2); }
std::string Pp(double mean, double ci) {
  return Fix(100 * mean, 2, true) + " ± " + Fix(100 * ci, 2);
}
std::string Us(double ns) { return Fix(ns / 1000.0, 1); }
bool Near(double a, double b) { return std::abs(a - b) < 1e-9; }

bool IsGoalLoad(double load) {
  return std::any_of(kGoalLoads.begin(), kGoalLoads.end(), [&](double g) { return Near(g, load); });
}

const Json& Cells(const Json& doc) {
  static const Json kEmpty = Json::array();
  return doc.contains("cells") ? doc["cells"] : kEmpty;
}

const Json* FindCell(const Json& doc, const std::string& workload, double load, int gpus) {
  for (const Json& c : Cells(doc)) {
    if (c["workload"] == workload && Near(c["load"].get<double>(), load) && c["gpus"] == gpus) {
      return &c;
    }
  }
  return nullptr;
}

std::vector<std::string> Workloads(const Json& doc) {
  std::vector<std::string> out;
  for (const Json& c : Cells(doc)) {
    const std::string w = c["workload"];
    if (std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
  }
  return out;
}

std::vector<int> DistinctGpus(const Json& doc) {
  std::set<int> s;
  for (const Json& c : Cells(doc)) s.insert(c["gpus"].get<int>());
  return {s.begin(), s.end()};
}

std::vector<double> DistinctLoads(const Json& doc) {
  std::set<double> s;
  for (const Json& c : Cells(doc)) s.insert(c["load"].get<double>());
  return {s.begin(), s.end()};
}

std::vector<std::string> PolicyOrder(const Json& cell) {
  static const std::vector<std::string> kOrder = {
      "migd",        "migd-slice", "migd-order", "migd-separable",
      "migd-noidle", "B1",         "B2",         "B3",
      "B4a",         "B4b",        "B5",         "B6",
      "B8",          "B9",         "B10",        "B11",
      "B11s",        "B12",        "B14"};
  std::vector<std::string> out;
  for (const std::string& p : kOrder) {
    if (cell["policies"].contains(p)) out.push_back(p);
  }
  return out;
}

double M(const Json& cell, const std::string& policy, const char* metric) {
  return cell["policies"][policy][metric]["mean"].get<double>();
}

std::string PrettyWorkload(const std::string& w) {
  if (w.rfind("trace:", 0) != 0) return w;
  std::string rest = w.substr(6);
  const size_t dot = rest.find(".csv");
  std::string file = rest.substr(0, dot);
  const std::string prefix = "openb_pod_list_";
  if (file.rfind(prefix, 0) == 0) file = file.substr(prefix.size());
  std::string out = "Alibaba ";
  out += file;
  out += " (";
  out += rest.substr(rest.rfind(':') + 1);
  out += ")";
  return out;
}

std::string Slug(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
  }
  return s;
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

std::string JoinInts(const std::vector<int>& v) {
  std::string out;
  for (int x : v) {
    if (!out.empty()) out += ',';
    out += std::to_string(x);
  }
  return "{" + out + "}";
}

const Json* Results::Doc(const std::string& name) const {
  auto it = docs_.find(name);
  return it == docs_.end() ? nullptr : &it->second;
}

std::vector<const Json*> Results::TraceDocs(const std::string& mapping) const {
  std::vector<const Json*> out;
  for (const auto& [name, doc] : docs_) {
    if (name.rfind("trace-", 0) == 0 && doc.contains("trace") &&
        doc["trace"]["mapping"] == mapping) {
      out.push_back(&doc);
    }
  }
  return out;
}

std::vector<std::pair<std::string, const Json*>> Results::Scripts() const {
  std::vector<std::pair<std::string, const Json*>> out;
  for (const auto& [name, doc] : docs_) {
    if (name.rfind("script-", 0) == 0) out.push_back({name.substr(7), &doc});
  }
  return out;
}

}  // namespace migd::bench::report
