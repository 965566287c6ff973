#include "planner/plan_json.h"

#include <charconv>
#include <exception>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <system_error>

#include "base/status_macros.h"

namespace migd::planner {
namespace {

using Json = nlohmann::json;

Status FieldError(const std::string& where, const std::string& what) {
  return InvalidArgumentError(where + ": " + what);
}

// Rejects fields of `obj` not in `allowed`.
Status CheckFields(const Json& obj, const std::string& where,
                   std::initializer_list<std::string_view> allowed) {
  if (!obj.is_object()) return FieldError(where, "must be a JSON object");
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (std::string_view a : allowed) known = known || it.key() == a;
    if (!known) return FieldError(where, "unknown field '" + it.key() + "'");
  }
  return OkStatus();
}

const Json* Find(const Json& obj, const std::string& field) {
  auto it = obj.find(field);
  return it == obj.end() ? nullptr : &*it;
}

StatusOr<const Json*> Require(const Json& obj, const std::string& field, const std::string& where) {
  const Json* v = Find(obj, field);
  if (v == nullptr) return FieldError(where, "missing field '" + field + "'");
  return v;
}

StatusOr<std::string> AsString(const Json& v, const std::string& where) {
  if (!v.is_string()) return FieldError(where, "must be a string");
  return v.get<std::string>();
}

StatusOr<uint64_t> AsUnsigned(const Json& v, const std::string& where, uint64_t max) {
  // nlohmann keeps non-negative integer literals as number_unsigned.
  if (!v.is_number_unsigned()) return FieldError(where, "must be a non-negative integer");
  const auto n = v.get<uint64_t>();
  if (n > max) return FieldError(where, "out of range: " + std::to_string(n));
  return n;
}

StatusOr<int64_t> AsInt64(const Json& v, const std::string& where) {
  if (v.is_number_unsigned()) {
    const auto n = v.get<uint64_t>();
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return FieldError(where, "out of range: " + std::to_string(n));
    }
    return static_cast<int64_t>(n);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return FieldError(where, "must be an integer");
}

StatusOr<mig::Placement> AsPlacement(const Json& v, const std::string& where) {
  MIGD_ASSIGN_OR_RETURN(std::string text, AsString(v, where));
  StatusOr<mig::Placement> p = mig::ParsePlacement(text);
  if (!p.ok()) return FieldError(where, std::string(p.status().message()));
  return *p;
}

StatusOr<std::vector<InstanceRequest>> RequestFromJson(const Json& v, const std::string& where) {
  if (v.is_string()) {
    StatusOr<std::vector<InstanceRequest>> r = ParseRequest(v.get<std::string>());
    if (!r.ok()) return r.status().WithContext(where);
    return r;
  }
  if (!v.is_array()) return FieldError(where, "must be an array or a request string");
  std::vector<InstanceRequest> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string w = where + "[" + std::to_string(i) + "]";
    const Json& item = v[i];
    MIGD_RETURN_IF_ERROR(CheckFields(item, w, {"profile", "gpu", "placement"}));
    InstanceRequest req;
    MIGD_ASSIGN_OR_RETURN(const Json* profile, Require(item, "profile", w));
    MIGD_ASSIGN_OR_RETURN(req.profile, AsString(*profile, w + ".profile"));
    if (req.profile.empty()) return FieldError(w + ".profile", "is empty");
    if (const Json* gpu = Find(item, "gpu"); gpu != nullptr) {
      MIGD_ASSIGN_OR_RETURN(uint64_t index,
                            AsUnsigned(*gpu, w + ".gpu", std::numeric_limits<uint32_t>::max()));
      req.gpu = GpuIndex(static_cast<uint32_t>(index));
    }
    if (const Json* pl = Find(item, "placement"); pl != nullptr) {
      MIGD_ASSIGN_OR_RETURN(req.placement, AsPlacement(*pl, w + ".placement"));
    }
    out.push_back(std::move(req));
  }
  return out;
}

StatusOr<PlanInput> InputFromJson(const Json& doc, const mig::Catalog& catalog) {
  MIGD_RETURN_IF_ERROR(CheckFields(doc, "input", {"gpus", "request", "demand"}));
  PlanInput in;
  MIGD_ASSIGN_OR_RETURN(const Json* gpus, Require(doc, "gpus", "input"));
  if (!gpus->is_array()) return FieldError("gpus", "must be an array");
  for (size_t i = 0; i < gpus->size(); ++i) {
    const std::string w = "gpus[" + std::to_string(i) + "]";
    const Json& gj = (*gpus)[i];
    MIGD_RETURN_IF_ERROR(CheckFields(gj, w, {"index", "model", "instances"}));
    GpuLayout g;
    MIGD_ASSIGN_OR_RETURN(const Json* index, Require(gj, "index", w));
    MIGD_ASSIGN_OR_RETURN(uint64_t idx,
                          AsUnsigned(*index, w + ".index", std::numeric_limits<uint32_t>::max()));
    g.index = GpuIndex(static_cast<uint32_t>(idx));
    MIGD_ASSIGN_OR_RETURN(const Json* model, Require(gj, "model", w));
    MIGD_ASSIGN_OR_RETURN(std::string key, AsString(*model, w + ".model"));
    g.model = catalog.FindModel(key);
    if (g.model == nullptr) return FieldError(w + ".model", "unknown model '" + key + "'");
    if (const Json* insts = Find(gj, "instances"); insts != nullptr) {
      if (!insts->is_array()) return FieldError(w + ".instances", "must be an array");
      for (size_t k = 0; k < insts->size(); ++k) {
        const std::string iw = w + ".instances[" + std::to_string(k) + "]";
        const Json& ij = (*insts)[k];
        MIGD_RETURN_IF_ERROR(
            CheckFields(ij, iw, {"profile", "placement", "state", "key", "lastUsed"}));
        Occupant o;
        MIGD_ASSIGN_OR_RETURN(const Json* profile, Require(ij, "profile", iw));
        MIGD_ASSIGN_OR_RETURN(o.profile, AsString(*profile, iw + ".profile"));
        MIGD_ASSIGN_OR_RETURN(const Json* placement, Require(ij, "placement", iw));
        MIGD_ASSIGN_OR_RETURN(o.placement, AsPlacement(*placement, iw + ".placement"));
        MIGD_ASSIGN_OR_RETURN(const Json* state, Require(ij, "state", iw));
        MIGD_ASSIGN_OR_RETURN(std::string state_text, AsString(*state, iw + ".state"));
        StatusOr<OccupantState> st = ParseOccupantState(state_text);
        if (!st.ok()) return st.status().WithContext(iw + ".state");
        o.state = *st;
        if (const Json* key_json = Find(ij, "key"); key_json != nullptr) {
          MIGD_ASSIGN_OR_RETURN(o.key, AsString(*key_json, iw + ".key"));
        }
        if (const Json* lu = Find(ij, "lastUsed"); lu != nullptr) {
          MIGD_ASSIGN_OR_RETURN(o.last_used, AsInt64(*lu, iw + ".lastUsed"));
        }
        g.occupants.push_back(std::move(o));
      }
    }
    in.gpus.push_back(std::move(g));
  }
  if (const Json* req = Find(doc, "request"); req != nullptr) {
    MIGD_ASSIGN_OR_RETURN(in.request, RequestFromJson(*req, "request"));
  }
  if (const Json* demand = Find(doc, "demand"); demand != nullptr) {
    if (!demand->is_object()) return FieldError("demand", "must be an object");
    for (auto it = demand->begin(); it != demand->end(); ++it) {
      const std::string w = "demand['" + it.key() + "']";
      if (!it.value().is_number()) return FieldError(w, "must be a number");
      const double weight = it.value().get<double>();
      if (!(weight >= 0.0)) return FieldError(w, "must be >= 0");
      in.demand[it.key()] = weight;
    }
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

StatusOr<ReclaimedInstance> ReclaimFromJson(const Json& j, const std::string& w) {
  MIGD_RETURN_IF_ERROR(CheckFields(j, w, {"gpu", "key", "profile", "placement", "lastUsed"}));
  ReclaimedInstance r;
  MIGD_ASSIGN_OR_RETURN(const Json* gpu, Require(j, "gpu", w));
  MIGD_ASSIGN_OR_RETURN(uint64_t g,
                        AsUnsigned(*gpu, w + ".gpu", std::numeric_limits<uint32_t>::max()));
  r.gpu = GpuIndex(static_cast<uint32_t>(g));
  MIGD_ASSIGN_OR_RETURN(const Json* key, Require(j, "key", w));
  MIGD_ASSIGN_OR_RETURN(r.key, AsString(*key, w + ".key"));
  MIGD_ASSIGN_OR_RETURN(const Json* profile, Require(j, "profile", w));
  MIGD_ASSIGN_OR_RETURN(r.profile, AsString(*profile, w + ".profile"));
  MIGD_ASSIGN_OR_RETURN(const Json* pl, Require(j, "placement", w));
  MIGD_ASSIGN_OR_RETURN(r.placement, AsPlacement(*pl, w + ".placement"));
  MIGD_ASSIGN_OR_RETURN(const Json* lu, Require(j, "lastUsed", w));
  MIGD_ASSIGN_OR_RETURN(r.last_used, AsInt64(*lu, w + ".lastUsed"));
  return r;
}

// (JSON name, member) pairs of PlanScore and PlanStats, in one place so that
// writer and reader cannot drift apart.
struct ScoreField {
  const char* name;
  int64_t PlanScore::*member;
};
constexpr ScoreField kScoreFields[] = {
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
};

StatusOr<Plan> PlanFromJsonValue(const Json& doc) {
  MIGD_RETURN_IF_ERROR(
      CheckFields(doc, "plan", {"stage", "search", "instances", "score", "stats"}));
  Plan plan;
  MIGD_ASSIGN_OR_RETURN(const Json* stage, Require(doc, "stage", "plan"));
  MIGD_ASSIGN_OR_RETURN(std::string stage_text, AsString(*stage, "stage"));
  StatusOr<Stage> st = ParseStage(stage_text);
  if (!st.ok()) return st.status().WithContext("stage");
  plan.stage = *st;
  MIGD_ASSIGN_OR_RETURN(const Json* search, Require(doc, "search", "plan"));
  MIGD_ASSIGN_OR_RETURN(std::string search_text, AsString(*search, "search"));
  StatusOr<Search> se = ParseSearch(search_text);
  if (!se.ok()) return se.status().WithContext("search");
  plan.search = *se;
  MIGD_ASSIGN_OR_RETURN(const Json* insts, Require(doc, "instances", "plan"));
  if (!insts->is_array()) return FieldError("instances", "must be an array");
  for (size_t i = 0; i < insts->size(); ++i) {
    const std::string w = "instances[" + std::to_string(i) + "]";
    const Json& ij = (*insts)[i];
    MIGD_RETURN_IF_ERROR(CheckFields(
        ij, w, {"stage", "gpu", "profile", "profileId", "placement", "reuseKey", "reclaim"}));
    InstancePlan ip;
    MIGD_ASSIGN_OR_RETURN(const Json* ist, Require(ij, "stage", w));
    MIGD_ASSIGN_OR_RETURN(std::string ist_text, AsString(*ist, w + ".stage"));
    StatusOr<Stage> s = ParseStage(ist_text);
    if (!s.ok()) return s.status().WithContext(w + ".stage");
    ip.stage = *s;
    MIGD_ASSIGN_OR_RETURN(const Json* gpu, Require(ij, "gpu", w));
    MIGD_ASSIGN_OR_RETURN(uint64_t g,
                          AsUnsigned(*gpu, w + ".gpu", std::numeric_limits<uint32_t>::max()));
    ip.gpu = GpuIndex(static_cast<uint32_t>(g));
    MIGD_ASSIGN_OR_RETURN(const Json* profile, Require(ij, "profile", w));
    MIGD_ASSIGN_OR_RETURN(ip.profile, AsString(*profile, w + ".profile"));
    MIGD_ASSIGN_OR_RETURN(const Json* pid, Require(ij, "profileId", w));
    MIGD_ASSIGN_OR_RETURN(uint64_t id,
                          AsUnsigned(*pid, w + ".profileId", std::numeric_limits<uint32_t>::max()));
    ip.profile_id = GiProfileId(static_cast<uint32_t>(id));
    MIGD_ASSIGN_OR_RETURN(const Json* pl, Require(ij, "placement", w));
    MIGD_ASSIGN_OR_RETURN(ip.placement, AsPlacement(*pl, w + ".placement"));
    if (const Json* rk = Find(ij, "reuseKey"); rk != nullptr) {
      MIGD_ASSIGN_OR_RETURN(ip.reuse_key, AsString(*rk, w + ".reuseKey"));
    }
    if (const Json* rc = Find(ij, "reclaim"); rc != nullptr) {
      if (!rc->is_array()) return FieldError(w + ".reclaim", "must be an array");
      for (size_t k = 0; k < rc->size(); ++k) {
        MIGD_ASSIGN_OR_RETURN(ReclaimedInstance r,
                              ReclaimFromJson((*rc)[k], w + ".reclaim[" + std::to_string(k) + "]"));
        ip.reclaim.push_back(std::move(r));
      }
    }
    plan.instances.push_back(std::move(ip));
  }
  MIGD_ASSIGN_OR_RETURN(const Json* score, Require(doc, "score", "plan"));
  if (!score->is_object()) return FieldError("score", "must be an object");
  for (const ScoreField& f : kScoreFields) {
    MIGD_ASSIGN_OR_RETURN(const Json* v, Require(*score, f.name, "score"));
    MIGD_ASSIGN_OR_RETURN(plan.score.*f.member, AsInt64(*v, std::string("score.") + f.name));
  }
  if (score->size() != std::size(kScoreFields)) {
    return FieldError("score", "unexpected fields (want exactly " +
                                   std::to_string(std::size(kScoreFields)) + ")");
  }
  if (const Json* stats = Find(doc, "stats"); stats != nullptr) {
    MIGD_RETURN_IF_ERROR(CheckFields(
        *stats, "stats",
        {"candidatesExamined", "exhaustiveOptions", "exhaustiveStates", "greedyFailed"}));
    for (const StatsField& f : kStatsFields) {
      const Json* v = Find(*stats, f.name);
      if (v == nullptr) continue;
      MIGD_ASSIGN_OR_RETURN(plan.stats.*f.member, AsUnsigned(*v, std::string("stats.") + f.name,
                                                             std::numeric_limits<uint64_t>::max()));
    }
    if (const Json* v = Find(*stats, "greedyFailed"); v != nullptr) {
      if (!v->is_boolean()) return FieldError("stats.greedyFailed", "must be true or false");
      plan.stats.greedy_failed = v->get<bool>();
    }
  }
  return plan;
}

std::string Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\n");
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace

StatusOr<PlanInput> PlanInputFromJsonValue(const nlohmann::json& doc, const mig::Catalog& catalog) {
  try {
    return InputFromJson(doc, catalog);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("input: ") + e.what());
  }
}

StatusOr<PlanInput> PlanInputFromJson(std::string_view text, const mig::Catalog& catalog) {
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("input: malformed JSON: ") + e.what());
  }
  return PlanInputFromJsonValue(doc, catalog);
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
  std::vector<InstanceRequest> out;
  size_t item_no = 0;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string item = Trim(
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    const std::string where = "request item " + std::to_string(item_no) + " '" + item + "'";
    if (item.empty()) {
      return InvalidArgumentError("request item " + std::to_string(item_no) + ": empty");
    }
    InstanceRequest req;
    std::string_view rest = item;
    if (rest.substr(0, 3) == "gpu") {
      const size_t slash = rest.find('/');
      if (slash == std::string_view::npos) {
        return InvalidArgumentError(where + ": want gpuN/PROFILE");
      }
      const std::string_view digits = rest.substr(3, slash - 3);
      uint32_t index = 0;
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
      if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
        return InvalidArgumentError(where + ": bad GPU index '" + std::string(digits) + "'");
      }
      req.gpu = GpuIndex(index);
      rest.remove_prefix(slash + 1);
    }
    const size_t at = rest.find('@');
    req.profile = Trim(rest.substr(0, at));
    if (req.profile.empty()) return InvalidArgumentError(where + ": missing profile");
    if (at != std::string_view::npos) {
      StatusOr<mig::Placement> p = mig::ParsePlacement(Trim(rest.substr(at + 1)));
      if (!p.ok()) return p.status().WithContext(where);
      req.placement = *p;
    }
    out.push_back(std::move(req));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
    ++item_no;
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
  doc["stats"] = std::move(stats);
  return doc;
}

std::string PlanToJson(const Plan& plan) { return PlanToJsonValue(plan).dump(2); }

StatusOr<Plan> PlanFromJson(std::string_view text) {
  try {
    return PlanFromJsonValue(Json::parse(text));
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("plan: malformed JSON: ") + e.what());
  }
}

}  // namespace migd::planner
