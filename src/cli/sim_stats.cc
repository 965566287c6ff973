#include "cli/sim_stats.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "cli/probe.h"

namespace migd::cli {

StatusOr<std::vector<SimCounter>> ParseSimCounters(std::string_view json_text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    return DataLossError(std::string("state file is not valid JSON: ") + e.what());
  }
  std::vector<SimCounter> out;
  if (!doc.is_object()) return DataLossError("state file is not a JSON object");
  auto it = doc.find("counters");
  if (it == doc.end() || it->is_null()) return out;
  if (!it->is_object()) return DataLossError("\"counters\" is not an object");
  for (const auto& [function, results] : it->items()) {
    if (!results.is_object()) {
      return DataLossError("counters of \"" + function + "\" are not an object");
    }
    for (const auto& [result, count] : results.items()) {
      if (!count.is_number_unsigned() && !(count.is_number_integer() && count.get<int64_t>() >= 0)) {
        return DataLossError("counter \"" + function + "\"/\"" + result +
                             "\" is not a non-negative integer");
      }
      out.push_back(SimCounter{function, result, count.get<uint64_t>()});
    }
  }
  std::sort(out.begin(), out.end(), [](const SimCounter& a, const SimCounter& b) {
    return a.function != b.function ? a.function < b.function : a.result < b.result;
  });
  return out;
}

int RunSimStats(const SimStatsOptions& options, std::ostream& out, std::ostream& err) {
  if (options.output != "table" && options.output != "json") {
    err << "migctl sim-stats: unknown output format '" << options.output
        << "' (want table or json)\n";
    return kExitUsage;
  }
  std::string path = options.state_file;
  if (path.empty()) {
    const char* env = std::getenv("MIGD_SIM_STATE");
    if (env != nullptr) path = env;
  }
  if (path.empty()) {
    err << "migctl sim-stats: no state file: pass --state FILE or set MIGD_SIM_STATE\n";
    return kExitUsage;
  }
  StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    err << "migctl sim-stats: cannot read " << path << ": " << text.status().ToString() << "\n";
    return kExitNvmlUnavailable;
  }
  StatusOr<std::vector<SimCounter>> counters = ParseSimCounters(*text);
  if (!counters.ok()) {
    err << "migctl sim-stats: " << path << ": " << counters.status().ToString() << "\n";
    return kExitNvmlUnavailable;
  }
  uint64_t total = 0;
  for (const SimCounter& c : *counters) total += c.count;
  if (options.output == "json") {
    nlohmann::json doc;
    doc["state_file"] = path;
    doc["counters"] = nlohmann::json::object();
    for (const SimCounter& c : *counters) doc["counters"][c.function][c.result] = c.count;
    doc["total"] = total;
    out << doc.dump(2) << "\n";
    return kExitOk;
  }
  size_t fw = std::string("FUNCTION").size();
  size_t rw = std::string("RESULT").size();
  for (const SimCounter& c : *counters) {
    fw = std::max(fw, c.function.size());
    rw = std::max(rw, c.result.size());
  }
  auto row = [&](const std::string& f, const std::string& r, const std::string& n) {
    out << f << std::string(fw - f.size() + 2, ' ') << r << std::string(rw - r.size() + 2, ' ')
        << n << "\n";
  };
  out << "State file: " << path << "\n";
  row("FUNCTION", "RESULT", "COUNT");
  for (const SimCounter& c : *counters) row(c.function, c.result, std::to_string(c.count));
  row("TOTAL", "", std::to_string(total));
  return kExitOk;
}

}  // namespace migd::cli
