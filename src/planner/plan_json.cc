#include "planner/plan_json.h"

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "base/json_reader.h"
#include "base/status_macros.h"

namespace migd::planner {
namespace {

using Json = nlohmann::json;

// "start:size" at `r`.
StatusOr<mig::Placement> PlacementAt(const JsonReader& r) {
  MIGD_ASSIGN_OR_RETURN(std::string text, r.AsString());
  if (!mig::ParsePlacement(text).ok()) return r.Expected("a placement \"start:size\"");
  return *mig::ParsePlacement(text);
}

StatusOr<mig::Placement> PlacementMember(const JsonReader& r, std::string_view key) {
  MIGD_RETURN_IF_ERROR(r.String(key).status());
  return PlacementAt(r.Child(key));
}

StatusOr<std::string> ProfileMember(const JsonReader& r) {
  MIGD_ASSIGN_OR_RETURN(std::string profile, r.String("profile"));
  if (profile.empty()) return r.ExpectedAt("profile", "a profile name");
  return profile;
}

StatusOr<InstanceRequest> RequestItemFromJson(const JsonReader& item) {
  MIGD_RETURN_IF_ERROR(item.NoUnknownKeys({"profile", "gpu", "placement"}));
  InstanceRequest req;
  MIGD_ASSIGN_OR_RETURN(req.profile, ProfileMember(item));
  if (item.Has("gpu")) {
    MIGD_ASSIGN_OR_RETURN(uint32_t index, item.Uint32("gpu"));
    req.gpu = GpuIndex(index);
  }
  if (item.Has("placement")) {
    MIGD_ASSIGN_OR_RETURN(req.placement, PlacementMember(item, "placement"));
  }
  return req;
}

StatusOr<std::vector<InstanceRequest>> RequestFromJson(const JsonReader& r) {
  if (r.value().is_string()) {
    StatusOr<std::vector<InstanceRequest>> parsed = ParseRequest(r.value().get<std::string>());
    if (!parsed.ok()) return r.Error(parsed.status().message());
    return parsed;
  }
  if (!r.value().is_array()) return r.Expected("an array of instances or a request string");
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> items, r.Elements());
  std::vector<InstanceRequest> out;
  for (const JsonReader& item : items) {
    MIGD_ASSIGN_OR_RETURN(InstanceRequest req, RequestItemFromJson(item));
    out.push_back(std::move(req));
  }
  return out;
}

StatusOr<Occupant> OccupantFromJson(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys({"profile", "placement", "state", "key", "lastUsed"}));
  Occupant o;
  MIGD_ASSIGN_OR_RETURN(o.profile, ProfileMember(r));
  MIGD_ASSIGN_OR_RETURN(o.placement, PlacementMember(r, "placement"));
  MIGD_ASSIGN_OR_RETURN(size_t state, r.Enum("state", {"active", "idle", "error", "foreign"}));
  constexpr OccupantState kStates[] = {OccupantState::kActive, OccupantState::kIdle,
                                       OccupantState::kError, OccupantState::kForeign};
  o.state = kStates[state];
  MIGD_ASSIGN_OR_RETURN(o.key, r.OptionalString("key"));
  MIGD_ASSIGN_OR_RETURN(o.last_used, r.OptionalInt("lastUsed", 0));
  return o;
}

std::string ModelKeys(const mig::Catalog& catalog) {
  std::vector<std::string> keys;
  for (const mig::GpuModel& m : catalog.models()) keys.push_back(m.key);
  return absl::StrJoin(keys, ", ");
}

StatusOr<GpuLayout> GpuFromJson(const JsonReader& r, const mig::Catalog& catalog) {
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys({"index", "model", "instances"}));
  GpuLayout g;
  MIGD_ASSIGN_OR_RETURN(uint32_t index, r.Uint32("index"));
  g.index = GpuIndex(index);
  MIGD_ASSIGN_OR_RETURN(std::string key, r.String("model"));
  g.model = catalog.FindModel(key);
  if (g.model == nullptr) {
    return r.ExpectedAt("model", "a model key of the catalogue (" + ModelKeys(catalog) + ")");
  }
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> instances, r.OptionalArray("instances"));
  for (const JsonReader& ij : instances) {
    MIGD_ASSIGN_OR_RETURN(Occupant o, OccupantFromJson(ij));
    g.occupants.push_back(std::move(o));
  }
  return g;
}

StatusOr<DemandWeights> DemandFromJson(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.ExpectObject());
  DemandWeights out;
  for (auto it = r.value().begin(); it != r.value().end(); ++it) {
    const JsonReader w = r.Child(it.key());
    MIGD_ASSIGN_OR_RETURN(double weight, w.AsDouble());
    if (!(weight >= 0.0)) return w.Expected("a weight >= 0");
    out[it.key()] = weight;
  }
  return out;
}

StatusOr<PlanInput> InputFromJson(const JsonReader& r, const mig::Catalog& catalog) {
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys({"gpus", "request", "demand"}));
  PlanInput in;
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> gpus, r.Array("gpus"));
  for (const JsonReader& gj : gpus) {
    MIGD_ASSIGN_OR_RETURN(GpuLayout g, GpuFromJson(gj, catalog));
    in.gpus.push_back(std::move(g));
  }
  if (r.Has("request")) {
    MIGD_ASSIGN_OR_RETURN(in.request, RequestFromJson(r.Child("request")));
  }
  if (r.Has("demand")) {
    MIGD_ASSIGN_OR_RETURN(in.demand, DemandFromJson(r.Child("demand")));
  }
  return in;
}

Json ReclaimToJson(const ReclaimedInstance& r) {
  Json j = Json::object();
  j["gpu"] = r.gpu.value();
  j["key"] = r.key;
  j["profile"] = r.profile;
  j["placement"] = r.placement.ToString();
  j["lastUsed"] = r.last_used;
  return j;
}

StatusOr<ReclaimedInstance> ReclaimFromJson(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys({"gpu", "key", "profile", "placement", "lastUsed"}));
  ReclaimedInstance out;
  MIGD_ASSIGN_OR_RETURN(uint32_t gpu, r.Uint32("gpu"));
  out.gpu = GpuIndex(gpu);
  MIGD_ASSIGN_OR_RETURN(out.key, r.String("key"));
  MIGD_ASSIGN_OR_RETURN(out.profile, r.String("profile"));
  MIGD_ASSIGN_OR_RETURN(out.placement, PlacementMember(r, "placement"));
  MIGD_ASSIGN_OR_RETURN(out.last_used, r.Int("lastUsed"));
  return out;
}

// (JSON name, member) pairs of PlanScore and PlanStats, in one place so that
// writer and reader cannot drift apart.
struct ScoreField {
  const char* name;
  int64_t PlanScore::*member;
  bool optional = false;  // absent from documents written before the value policy
};
constexpr ScoreField kScoreFields[] = {
    {"valueLoss", &PlanScore::value_loss, true},
    {"nodeLoss", &PlanScore::node_loss},
    {"openedGpus", &PlanScore::opened_gpus},
    {"pinLoss", &PlanScore::pin_loss},
    {"destroyedSlices", &PlanScore::destroyed_slices},
    {"destroyedInstances", &PlanScore::destroyed_instances},
    {"creates", &PlanScore::creates},
    {"reclaimedLastUsedSum", &PlanScore::reclaimed_last_used_sum},
    {"loss", &PlanScore::loss},
    {"fill", &PlanScore::fill},
    {"uniformLoss", &PlanScore::uniform_loss},
};

struct StatsField {
  const char* name;
  uint64_t PlanStats::*member;
};
constexpr StatsField kStatsFields[] = {
    {"candidatesExamined", &PlanStats::candidates_examined},
    {"exhaustiveOptions", &PlanStats::exhaustive_options},
    {"exhaustiveStates", &PlanStats::exhaustive_states},
    {"valueVersion", &PlanStats::value_version},
    {"marginReuses", &PlanStats::margin_reuses},
};

constexpr Stage kStages[] = {Stage::kReuse, Stage::kFree, Stage::kReclaim};

StatusOr<InstancePlan> InstancePlanFromJson(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys(
      {"stage", "gpu", "profile", "profileId", "placement", "reuseKey", "reclaim"}));
  InstancePlan ip;
  MIGD_ASSIGN_OR_RETURN(size_t stage, r.Enum("stage", {"reuse", "free", "reclaim"}));
  ip.stage = kStages[stage];
  MIGD_ASSIGN_OR_RETURN(uint32_t gpu, r.Uint32("gpu"));
  ip.gpu = GpuIndex(gpu);
  MIGD_ASSIGN_OR_RETURN(ip.profile, r.String("profile"));
  MIGD_ASSIGN_OR_RETURN(uint32_t id, r.Uint32("profileId"));
  ip.profile_id = GiProfileId(id);
  MIGD_ASSIGN_OR_RETURN(ip.placement, PlacementMember(r, "placement"));
  MIGD_ASSIGN_OR_RETURN(ip.reuse_key, r.OptionalString("reuseKey"));
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> reclaims, r.OptionalArray("reclaim"));
  for (const JsonReader& rc : reclaims) {
    MIGD_ASSIGN_OR_RETURN(ReclaimedInstance rec, ReclaimFromJson(rc));
    ip.reclaim.push_back(std::move(rec));
  }
  return ip;
}

StatusOr<PlanScore> ScoreFromJson(const JsonReader& r) {
  PlanScore score;
  for (const ScoreField& f : kScoreFields) {
    if (f.optional) {
      MIGD_ASSIGN_OR_RETURN(score.*f.member, r.OptionalInt(f.name, 0));
    } else {
      MIGD_ASSIGN_OR_RETURN(score.*f.member, r.Int(f.name));
    }
  }
  for (auto it = r.value().begin(); it != r.value().end(); ++it) {
    bool known = false;
    for (const ScoreField& f : kScoreFields) known = known || it.key() == f.name;
    if (!known) return r.ErrorAt(it.key(), "unknown member (a typo, or a newer format?)");
  }
  return score;
}

StatusOr<PlanStats> StatsFromJson(const JsonReader& r) {
  // The known keys: kStatsFields and the two flags read below.
  MIGD_RETURN_IF_ERROR(r.ExpectObject());
  for (auto it = r.value().begin(); it != r.value().end(); ++it) {
    bool known = it.key() == "greedyFailed" || it.key() == "valuePolicy";
    for (const StatsField& f : kStatsFields) known = known || it.key() == f.name;
    if (!known) return r.ErrorAt(it.key(), "unknown member (a typo, or a newer format?)");
  }
  PlanStats stats;
  for (const StatsField& f : kStatsFields) {
    MIGD_ASSIGN_OR_RETURN(stats.*f.member, r.OptionalUint(f.name, 0));
  }
  MIGD_ASSIGN_OR_RETURN(stats.greedy_failed, r.OptionalBool("greedyFailed", false));
  MIGD_ASSIGN_OR_RETURN(stats.value_policy, r.OptionalBool("valuePolicy", false));
  return stats;
}

StatusOr<Plan> PlanFromJsonValue(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys({"stage", "search", "instances", "score", "stats"}));
  Plan plan;
  MIGD_ASSIGN_OR_RETURN(size_t stage, r.Enum("stage", {"reuse", "free", "reclaim"}));
  plan.stage = kStages[stage];
  MIGD_ASSIGN_OR_RETURN(size_t search, r.Enum("search", {"greedy", "exhaustive"}));
  plan.search = search == 0 ? Search::kGreedy : Search::kExhaustive;
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> instances, r.Array("instances"));
  for (const JsonReader& ij : instances) {
    MIGD_ASSIGN_OR_RETURN(InstancePlan ip, InstancePlanFromJson(ij));
    plan.instances.push_back(std::move(ip));
  }
  MIGD_ASSIGN_OR_RETURN(JsonReader score, r.Object("score"));
  MIGD_ASSIGN_OR_RETURN(plan.score, ScoreFromJson(score));
  MIGD_ASSIGN_OR_RETURN(std::optional<JsonReader> stats, r.OptionalObject("stats"));
  if (stats.has_value()) {
    MIGD_ASSIGN_OR_RETURN(plan.stats, StatsFromJson(*stats));
  }
  return plan;
}

}  // namespace

StatusOr<PlanInput> PlanInputFromJsonValue(const nlohmann::json& doc, const mig::Catalog& catalog,
                                           std::string_view source) {
  return InputFromJson(JsonReader(doc, std::string(source)), catalog);
}

StatusOr<PlanInput> PlanInputFromJson(std::string_view text, const mig::Catalog& catalog,
                                      std::string_view source) {
  MIGD_ASSIGN_OR_RETURN(Json doc, ParseJson(text, source));
  return PlanInputFromJsonValue(doc, catalog, source);
}

nlohmann::json PlanInputToJsonValue(const PlanInput& input) {
  Json doc = Json::object();
  Json gpus = Json::array();
  for (const GpuLayout& g : input.gpus) {
    Json gj = Json::object();
    gj["index"] = g.index.value();
    gj["model"] = g.model != nullptr ? g.model->key : std::string();
    Json insts = Json::array();
    for (const Occupant& o : g.occupants) {
      Json ij = Json::object();
      ij["profile"] = o.profile;
      ij["placement"] = o.placement.ToString();
      ij["state"] = std::string(OccupantStateName(o.state));
      if (!o.key.empty()) ij["key"] = o.key;
      if (o.state == OccupantState::kIdle || o.last_used != 0) ij["lastUsed"] = o.last_used;
      insts.push_back(std::move(ij));
    }
    gj["instances"] = std::move(insts);
    gpus.push_back(std::move(gj));
  }
  doc["gpus"] = std::move(gpus);
  if (!input.request.empty()) {
    Json req = Json::array();
    for (const InstanceRequest& r : input.request) {
      Json rj = Json::object();
      rj["profile"] = r.profile;
      if (r.gpu.has_value()) rj["gpu"] = r.gpu->value();
      if (r.placement.has_value()) rj["placement"] = r.placement->ToString();
      req.push_back(std::move(rj));
    }
    doc["request"] = std::move(req);
  }
  if (!input.demand.empty()) {
    Json d = Json::object();
    for (const auto& [name, weight] : input.demand) d[name] = weight;
    doc["demand"] = std::move(d);
  }
  return doc;
}

std::string PlanInputToJson(const PlanInput& input) { return PlanInputToJsonValue(input).dump(2); }

StatusOr<std::vector<InstanceRequest>> ParseRequest(std::string_view text) {
  // Debian's abseil has its own string_view type (not std::string_view).
  const std::vector<absl::string_view> items =
      absl::StrSplit(absl::string_view(text.data(), text.size()), ',');
  std::vector<InstanceRequest> out;
  for (size_t item_no = 0; item_no < items.size(); ++item_no) {
    const absl::string_view item = absl::StripAsciiWhitespace(items[item_no]);
    const std::string where = absl::StrCat("request item ", item_no, " '", item, "'");
    if (item.empty())
      return InvalidArgumentError(absl::StrCat("request item ", item_no, ": empty"));
    InstanceRequest req;
    absl::string_view rest = item;
    if (absl::ConsumePrefix(&rest, "gpu")) {
      const size_t slash = rest.find('/');
      if (slash == absl::string_view::npos) {
        return InvalidArgumentError(where + ": want gpuN/PROFILE");
      }
      const absl::string_view digits = rest.substr(0, slash);
      uint32_t index = 0;
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
      if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
        return InvalidArgumentError(absl::StrCat(where, ": bad GPU index '", digits, "'"));
      }
      req.gpu = GpuIndex(index);
      rest.remove_prefix(slash + 1);
    }
    const size_t at = rest.find('@');
    req.profile = std::string(absl::StripAsciiWhitespace(rest.substr(0, at)));
    if (req.profile.empty()) return InvalidArgumentError(where + ": missing profile");
    if (at != absl::string_view::npos) {
      const std::string placement(absl::StripAsciiWhitespace(rest.substr(at + 1)));
      StatusOr<mig::Placement> p = mig::ParsePlacement(placement);
      if (!p.ok()) return p.status().WithContext(where);
      req.placement = *p;
    }
    out.push_back(std::move(req));
  }
  return out;
}

std::string RequestToString(const std::vector<InstanceRequest>& request) {
  std::string out;
  for (const InstanceRequest& r : request) {
    if (!out.empty()) out += ", ";
    // Appended piece by piece: `"literal" + std::string` trips GCC 12's
    // -Wrestrict false positive at -O3 (GCC PR 105329).
    if (r.gpu.has_value()) {
      out += "gpu";
      out += std::to_string(r.gpu->value());
      out += '/';
    }
    out += r.profile;
    if (r.placement.has_value()) {
      out += '@';
      out += r.placement->ToString();
    }
  }
  return out;
}

nlohmann::json PlanToJsonValue(const Plan& plan) {
  Json doc = Json::object();
  doc["stage"] = std::string(StageName(plan.stage));
  doc["search"] = std::string(SearchName(plan.search));
  Json insts = Json::array();
  for (const InstancePlan& ip : plan.instances) {
    Json ij = Json::object();
    ij["stage"] = std::string(StageName(ip.stage));
    ij["gpu"] = ip.gpu.value();
    ij["profile"] = ip.profile;
    ij["profileId"] = ip.profile_id.value();
    ij["placement"] = ip.placement.ToString();
    if (!ip.reuse_key.empty()) ij["reuseKey"] = ip.reuse_key;
    if (!ip.reclaim.empty()) {
      Json rc = Json::array();
      for (const ReclaimedInstance& r : ip.reclaim) rc.push_back(ReclaimToJson(r));
      ij["reclaim"] = std::move(rc);
    }
    insts.push_back(std::move(ij));
  }
  doc["instances"] = std::move(insts);
  Json score = Json::object();
  for (const ScoreField& f : kScoreFields) score[f.name] = plan.score.*f.member;
  doc["score"] = std::move(score);
  Json stats = Json::object();
  for (const StatsField& f : kStatsFields) stats[f.name] = plan.stats.*f.member;
  stats["greedyFailed"] = plan.stats.greedy_failed;
  stats["valuePolicy"] = plan.stats.value_policy;
  doc["stats"] = std::move(stats);
  return doc;
}

std::string PlanToJson(const Plan& plan) { return PlanToJsonValue(plan).dump(2); }

StatusOr<Plan> PlanFromJson(std::string_view text, std::string_view source) {
  MIGD_ASSIGN_OR_RETURN(Json doc, ParseJson(text, source));
  return PlanFromJsonValue(JsonReader(doc, std::string(source)));
}

}  // namespace migd::planner
