#include "bench/latency/latency_model.h"

#include <cmath>
#include <set>

#include "base/file_util.h"
#include "base/json_reader.h"
#include "base/status_macros.h"

namespace migd::bench::latency {

LatencyModel LatencyModel::Zero() { return LatencyModel{}; }

std::string LatencyModel::EnvValue() const {
  std::string s;
  for (const auto& [f, v] : ms) {
    const long rounded = std::lround(v);
    if (rounded == 0) continue;
    if (!s.empty()) s += ",";
    s += f + "=" + std::to_string(rounded);
  }
  return s;
}

double LatencyModel::ModeledMs(const CallCounts& delta) const {
  double t = 0;
  for (const auto& [k, v] : delta) {
    auto it = ms.find(k.first);
    if (it != ms.end()) t += static_cast<double>(v) * it->second;
  }
  return t;
}

double LatencyModel::CreateMs() const {
  return ModeledMs({{{"nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS"}, 1},
                    {{"nvmlGpuInstanceCreateComputeInstance", "SUCCESS"}, 1}});
}

double LatencyModel::DestroyMs() const {
  return ModeledMs(
      {{{"nvmlComputeInstanceDestroy", "SUCCESS"}, 1}, {{"nvmlGpuInstanceDestroy", "SUCCESS"}, 1}});
}

StatusOr<std::vector<LatencyModel>> LoadLatencyModels(const std::string& path) {
  MIGD_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 1 << 20));
  MIGD_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, path));
  JsonReader root(doc, path);
  MIGD_RETURN_IF_ERROR(root.ExpectObject());
  MIGD_RETURN_IF_ERROR(root.NoUnknownKeys({"comment", "models"}));
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> entries, root.Array("models"));
  std::vector<LatencyModel> out;
  std::set<std::string> names = {"zero"};
  for (const JsonReader& e : entries) {
    MIGD_RETURN_IF_ERROR(e.ExpectObject());
    MIGD_RETURN_IF_ERROR(e.NoUnknownKeys({"name", "source", "method", "ms"}));
    LatencyModel m;
    MIGD_ASSIGN_OR_RETURN(m.name, e.String("name"));
    if (!names.insert(m.name).second) {
      return e.ErrorAt("name", "model \"" + m.name + "\" is defined twice (or is \"zero\")");
    }
    MIGD_ASSIGN_OR_RETURN(m.source, e.OptionalString("source"));
    MIGD_ASSIGN_OR_RETURN(JsonReader costs, e.Object("ms"));
    MIGD_RETURN_IF_ERROR(costs.ExpectObject());
    for (const auto& [fn, v] : costs.value().items()) {
      if (fn.rfind("nvml", 0) != 0) {
        return costs.ErrorAt(fn, "not an NVML function name (they start with \"nvml\")");
      }
      MIGD_ASSIGN_OR_RETURN(double cost, costs.Double(fn));
      if (!std::isfinite(cost) || cost < 0) {
        return costs.ExpectedAt(fn, "a finite number of milliseconds >= 0");
      }
      m.ms[fn] = cost;
    }
    out.push_back(std::move(m));
  }
  return out;
}

StatusOr<LatencyModel> FindLatencyModel(const std::vector<LatencyModel>& models,
                                        const std::string& name) {
  if (name == "zero") return LatencyModel::Zero();
  std::string choices = "zero";
  for (const LatencyModel& m : models) {
    if (m.name == name) return m;
    choices += ", " + m.name;
  }
  return NotFoundError("no latency model \"" + name + "\" (have " + choices + ")");
}

}  // namespace migd::bench::latency
