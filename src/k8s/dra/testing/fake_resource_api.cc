#include "k8s/dra/testing/fake_resource_api.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace migd::k8s::dra::testing {
namespace {

using Json = nlohmann::json;

constexpr char kSlicesPath[] = "/apis/resource.k8s.io/v1/resourceslices";

bool IsDnsLabel(const std::string& s, size_t max = 63) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return s.front() != '-' && s.back() != '-';
}

bool IsDnsSubdomain(const std::string& s, size_t max = 253) {
  if (s.empty() || s.size() > max) return false;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t dot = s.find('.', start);
    const std::string label =
        s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!IsDnsLabel(label)) return false;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return true;
}

bool IsCIdentifier(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

bool IsQualifiedName(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos) return IsCIdentifier(s, 32);
  return IsDnsSubdomain(s.substr(0, slash), 63) && IsCIdentifier(s.substr(slash + 1), 32);
}

bool IsQuantity(const Json& q) {
  if (!q.is_object() || !q.contains("value") || !q["value"].is_string()) return false;
  const std::string v = q["value"].get<std::string>();
  return !v.empty() && std::isdigit(static_cast<unsigned char>(v[0]));
}

const Json& Arr(const Json& o, const char* k) {
  static const Json kEmpty = Json::array();
  return o.is_object() && o.contains(k) && o[k].is_array() ? o[k] : kEmpty;
}

void ValidateCounters(const Json& counters, const std::string& where,
                      std::vector<std::string>& errs) {
  if (!counters.is_object()) {
    errs.push_back(where + ": must be a map");
    return;
  }
  for (const auto& [name, q] : counters.items()) {
    if (!IsDnsLabel(name))
      errs.push_back(where + "[" + name + "]: counter name must be a DNS label");
    if (!IsQuantity(q)) errs.push_back(where + "[" + name + "]: value must be a quantity");
  }
}

void ValidateDevice(const Json& d, const std::string& where, int minor,
                    const std::map<std::string, std::set<std::string>>& local_sets,
                    size_t* counters_in_slice, std::vector<std::string>& errs) {
  const std::string name = d.value("name", "");
  if (!IsDnsLabel(name)) errs.push_back(where + ".name: '" + name + "' must be a DNS label");
  size_t entries = 0;
  for (const char* map : {"attributes", "capacity"}) {
    if (!d.contains(map)) continue;
    if (!d[map].is_object()) {
      errs.push_back(where + "." + map + ": must be a map");
      continue;
    }
    for (const auto& [k, v] : d[map].items()) {
      ++entries;
      if (!IsQualifiedName(k))
        errs.push_back(where + "." + map + "[" + k + "]: not a qualified name");
      if (std::string(map) == "capacity") {
        if (!v.is_object() || !v.contains("value") || !IsQuantity(Json{{"value", v["value"]}})) {
          errs.push_back(where + ".capacity[" + k + "]: value must be a quantity");
        }
        continue;
      }
      int set = 0;
      for (const char* t : {"int", "bool", "string", "version"}) set += v.contains(t) ? 1 : 0;
      if (set != 1) errs.push_back(where + ".attributes[" + k + "]: exactly one value type");
      for (const char* t : {"string", "version"}) {
        if (v.contains(t) && (!v[t].is_string() || v[t].get<std::string>().size() > 64)) {
          errs.push_back(where + ".attributes[" + k + "]: at most 64 characters");
        }
      }
      if (v.contains("int") && !v["int"].is_number_integer()) {
        errs.push_back(where + ".attributes[" + k + "]: int must be an integer");
      }
    }
  }
  if (entries > 32) errs.push_back(where + ": more than 32 attributes and capacities");
  const Json& consumes = Arr(d, "consumesCounters");
  if (minor >= 35 && consumes.size() > 2) errs.push_back(where + ".consumesCounters: at most 2");
  std::set<std::string> sets;
  size_t device_counters = 0;
  for (size_t i = 0; i < consumes.size(); ++i) {
    const std::string w = where + ".consumesCounters[" + std::to_string(i) + "]";
    const std::string set = consumes[i].value("counterSet", "");
    if (!IsDnsLabel(set)) errs.push_back(w + ".counterSet: must be a DNS label");
    if (!sets.insert(set).second) errs.push_back(w + ".counterSet: duplicate");
    const Json& c = consumes[i].value("counters", Json::object());
    ValidateCounters(c, w + ".counters", errs);
    if (c.is_object()) {
      device_counters += c.size();
      if (minor >= 35 && c.size() > 32) errs.push_back(w + ".counters: at most 32");
      if (minor < 35) {
        auto it = local_sets.find(set);
        if (it == local_sets.end()) {
          errs.push_back(w +
                         ".counterSet: must reference a counterSet defined in the "
                         "ResourceSlice sharedCounters");
        } else {
          for (const auto& [cn, cv] : c.items()) {
            if (it->second.count(cn) == 0) {
              errs.push_back(w + ".counters[" + cn +
                             "]: must reference a counter defined in the "
                             "ResourceSlice sharedCounters");
            }
          }
        }
      }
    }
  }
  if (minor < 35 && device_counters > 32)
    errs.push_back(where + ": more than 32 consumed counters");
  *counters_in_slice += device_counters;
}

}  // namespace

Json MakeClaim(const std::string& ns, const std::string& name, const std::string& uid,
               const std::string& node, const std::vector<AllocatedDevice>& devices) {
  Json c;
  c["apiVersion"] = "resource.k8s.io/v1";
  c["kind"] = "ResourceClaim";
  c["metadata"] = {{"namespace", ns}, {"name", name}, {"uid", uid}};
  std::set<std::string> requests;
  for (const AllocatedDevice& d : devices) {
    const std::string base = d.request.substr(0, d.request.find('/'));
    if (!requests.insert(base).second) continue;
    c["spec"]["devices"]["requests"].push_back(
        {{"name", base},
         {"exactly",
          {{"deviceClassName", "mig.migd.io"}, {"allocationMode", "ExactCount"}, {"count", 1}}}});
  }
  if (devices.empty()) return c;
  Json results = Json::array();
  for (const AllocatedDevice& d : devices) {
    Json r{{"request", d.request}, {"driver", d.driver}, {"pool", d.pool}, {"device", d.device}};
    if (d.admin_access) r["adminAccess"] = true;
    results.push_back(r);
  }
  c["status"]["allocation"]["devices"]["results"] = results;
  c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"] = Json::array(
      {{{"matchFields",
         Json::array(
             {{{"key", "metadata.name"}, {"operator", "In"}, {"values", Json::array({node})}}})}}});
  c["status"]["allocation"]["allocationTimestamp"] = "2026-11-29T10:00:00Z";
  c["status"]["reservedFor"] =
      Json::array({{{"resource", "pods"}, {"name", name + "-pod"}, {"uid", "pod-" + uid}}});
  return c;
}

std::vector<std::string> ValidateSlice(const Json& slice, int minor) {
  std::vector<std::string> errs;
  const Json& meta = slice.value("metadata", Json::object());
  const std::string name = meta.is_object() ? meta.value("name", "") : "";
  if (name.empty() && !(meta.is_object() && meta.contains("generateName"))) {
    errs.push_back("metadata.name: required");
  } else if (!name.empty() && !IsDnsSubdomain(name)) {
    errs.push_back("metadata.name: '" + name + "' must be a DNS subdomain");
  }
  if (!slice.contains("spec") || !slice["spec"].is_object()) return {"spec: required"};
  const Json& spec = slice["spec"];
  if (!IsDnsSubdomain(spec.value("driver", ""), 63))
    errs.push_back("spec.driver: DNS subdomain <= 63");
  const Json& pool = spec.value("pool", Json::object());
  if (!pool.is_object() || pool.value("name", "").empty() || pool.value("name", "").size() > 253) {
    errs.push_back("spec.pool.name: required, at most 253 characters");
  }
  if (!pool.is_object() || !pool.contains("generation") ||
      !pool["generation"].is_number_integer() || pool["generation"].get<int64_t>() < 0) {
    errs.push_back("spec.pool.generation: a non-negative integer");
  }
  if (!pool.is_object() || !pool.contains("resourceSliceCount") ||
      !pool["resourceSliceCount"].is_number_integer() ||
      pool["resourceSliceCount"].get<int64_t>() <= 0) {
    errs.push_back("spec.pool.resourceSliceCount: must be greater than zero");
  }
  int selectors = 0;
  if (spec.contains("nodeName") && spec["nodeName"].is_string() &&
      !spec["nodeName"].get<std::string>().empty())
    ++selectors;
  if (spec.contains("nodeSelector")) ++selectors;
  if (spec.value("allNodes", false)) ++selectors;
  if (spec.value("perDeviceNodeSelection", false)) ++selectors;
  if (selectors != 1) {
    errs.push_back(
        "spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection "
        "is required");
  }
  const Json& devices = Arr(spec, "devices");
  const Json& counters = Arr(spec, "sharedCounters");
  if (minor >= 35 && !devices.empty() && !counters.empty()) {
    errs.push_back("spec: only one of devices and sharedCounters may be set");
  }
  std::map<std::string, std::set<std::string>> local_sets;
  size_t total_counters = 0;
  for (size_t i = 0; i < counters.size(); ++i) {
    const std::string w = "spec.sharedCounters[" + std::to_string(i) + "]";
    const std::string cs = counters[i].value("name", "");
    if (!IsDnsLabel(cs)) errs.push_back(w + ".name: must be a DNS label");
    if (local_sets.count(cs) != 0) errs.push_back(w + ".name: duplicate");
    const Json& c = counters[i].value("counters", Json::object());
    ValidateCounters(c, w + ".counters", errs);
    if (c.is_object()) {
      for (const auto& [cn, cv] : c.items()) local_sets[cs].insert(cn);
      total_counters += c.size();
      if (minor >= 35 && c.size() > 32) errs.push_back(w + ".counters: at most 32");
    }
  }
  if (minor >= 35 && counters.size() > 8) errs.push_back("spec.sharedCounters: at most 8");
  if (minor < 35 && total_counters > 32) errs.push_back("spec.sharedCounters: at most 32 counters");
  bool any_consumes = false;
  std::set<std::string> names;
  size_t consumed = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string w = "spec.devices[" + std::to_string(i) + "]";
    ValidateDevice(devices[i], w, minor, local_sets, &consumed, errs);
    if (!names.insert(devices[i].value("name", "")).second) errs.push_back(w + ".name: duplicate");
    any_consumes = any_consumes || !Arr(devices[i], "consumesCounters").empty() ||
                   !Arr(devices[i], "taints").empty();
  }
  const size_t max_devices = (minor >= 35 && any_consumes) ? 64 : 128;
  if (devices.size() > max_devices) {
    errs.push_back("spec.devices: at most " + std::to_string(max_devices));
  }
  if (minor < 35 && consumed > 1024)
    errs.push_back("spec.devices: more than 1024 consumed counters");
  return errs;
}

struct FakeResourceApi::State {
  mutable Mutex mu;
  int major ABSL_GUARDED_BY(mu) = 1;
  int minor ABSL_GUARDED_BY(mu) = 35;
  bool partitionable ABSL_GUARDED_BY(mu) = true;
  uint64_t rv ABSL_GUARDED_BY(mu) = 1000;
  uint64_t uid ABSL_GUARDED_BY(mu) = 0;
  std::map<std::string, Json> slices ABSL_GUARDED_BY(mu);
  std::map<std::pair<std::string, std::string>, Json> claims ABSL_GUARDED_BY(mu);
  std::map<std::string, int> counts ABSL_GUARDED_BY(mu);
  std::vector<std::string> rejections ABSL_GUARDED_BY(mu);
  int fail_writes ABSL_GUARDED_BY(mu) = 0;
  int fail_code ABSL_GUARDED_BY(mu) = 0;

  static Json StatusBody(int code, const std::string& reason, const std::string& message) {
    return Json{{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
                {"status", "Failure"}, {"message", message}, {"reason", reason},
                {"code", code}};
  }
  static void Reply(httplib::Response& res, int code, const Json& body) {
    res.status = code;
    res.set_content(body.dump(), "application/json");
  }
  // An injected failure for a write; true if one was answered.
  bool InjectedLocked(httplib::Response& res) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (fail_writes <= 0) return false;
    --fail_writes;
    Reply(res, fail_code, StatusBody(fail_code, "InternalError", "injected failure"));
    return true;
  }
  void DropGatedLocked(Json& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (partitionable) return;
    Json& spec = slice["spec"];
    spec.erase("sharedCounters");
    spec.erase("perDeviceNodeSelection");
    if (spec.contains("devices") && spec["devices"].is_array()) {
      for (Json& d : spec["devices"]) d.erase("consumesCounters");
    }
  }
  // Validation; true if the write may proceed.
  bool AdmitLocked(const Json& slice, httplib::Response& res) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<std::string> errs = ValidateSlice(slice, minor);
    if (errs.empty()) return true;
    std::string msg = "ResourceSlice is invalid:";
    for (const std::string& e : errs) {
      msg += " " + e + ";";
      rejections.push_back(e);
    }
    Reply(res, 422, StatusBody(422, "Invalid", msg));
    return false;
  }
  void StampLocked(Json& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    slice["metadata"]["resourceVersion"] = std::to_string(++rv);
  }
  static bool Parse(const httplib::Request& req, httplib::Response& res, Json* out) {
    try {
      *out = Json::parse(req.body);
    } catch (const std::exception& e) {
      Reply(res, 400, StatusBody(400, "BadRequest", e.what()));
      return false;
    }
    if (!out->is_object()) {
      Reply(res, 400, StatusBody(400, "BadRequest", "not a JSON object"));
      return false;
    }
    return true;
  }
  // The routes.
  void Version(httplib::Response& res);
  void List(const httplib::Request& req, httplib::Response& res);
  void Create(const httplib::Request& req, httplib::Response& res);
  void Update(const httplib::Request& req, httplib::Response& res);
  void Delete(const httplib::Request& req, httplib::Response& res);
  void Claim(const httplib::Request& req, httplib::Response& res);
};

void FakeResourceApi::State::Version(httplib::Response& res) {
  MutexLock l(&mu);
  ++counts["version"];
  Reply(res, 200,
        Json{{"major", std::to_string(major)},
             {"minor", std::to_string(minor)},
             {"gitVersion", "v" + std::to_string(major) + "." + std::to_string(minor) + ".0"},
             {"platform", "linux/amd64"}});
}

void FakeResourceApi::State::List(const httplib::Request& req, httplib::Response& res) {
  std::string driver, node;
  const std::string sel = req.get_param_value("fieldSelector");
  size_t start = 0;
  while (!sel.empty() && start <= sel.size()) {
    const size_t comma = sel.find(',', start);
    const std::string term =
        sel.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t eq = term.find('=');
    const std::string key = term.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : term.substr(eq + 1);
    if (key == "spec.driver") {
      driver = value;
    } else if (key == "spec.nodeName") {
      node = value;
    } else {
      Reply(res, 400, StatusBody(400, "BadRequest", "field label not supported: " + key));
      return;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  MutexLock l(&mu);
  ++counts["list"];
  Json list{{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceSliceList"},
            {"metadata", {{"resourceVersion", std::to_string(rv)}}},
            {"items", Json::array()}};
  for (const auto& [name, slice] : slices) {
    const Json& spec = slice["spec"];
    if (!driver.empty() && spec.value("driver", "") != driver) continue;
    if (!node.empty() && spec.value("nodeName", "") != node) continue;
    list["items"].push_back(slice);
  }
  Reply(res, 200, list);
}

void FakeResourceApi::State::Create(const httplib::Request& req, httplib::Response& res) {
  Json slice;
  if (!Parse(req, res, &slice)) return;
  MutexLock l(&mu);
  ++counts["create"];
  if (InjectedLocked(res)) return;
  if (!slice.contains("metadata") || !slice["metadata"].is_object()) {
    slice["metadata"] = Json::object();
  }
  if (slice["metadata"].value("name", "").empty() && slice["metadata"].contains("generateName")) {
    slice["metadata"]["name"] =
        slice["metadata"]["generateName"].get<std::string>() + std::to_string(++uid);
  }
  DropGatedLocked(slice);
  if (!AdmitLocked(slice, res)) return;
  const std::string name = slice["metadata"]["name"];
  if (slices.count(name) != 0) {
    Reply(res, 409,
          StatusBody(409, "AlreadyExists", "resourceslices \"" + name + "\" already exists"));
    return;
  }
  slice["metadata"]["uid"] = "slice-uid-" + std::to_string(++uid);
  slice["metadata"]["creationTimestamp"] = "2026-11-29T10:00:00Z";
  StampLocked(slice);
  slices[name] = slice;
  Reply(res, 201, slice);
}

void FakeResourceApi::State::Update(const httplib::Request& req, httplib::Response& res) {
  const std::string name = req.matches[1];
  Json slice;
  if (!Parse(req, res, &slice)) return;
  MutexLock l(&mu);
  ++counts["update"];
  if (InjectedLocked(res)) return;
  auto it = slices.find(name);
  if (it == slices.end()) {
    Reply(res, 404, StatusBody(404, "NotFound", "resourceslices \"" + name + "\" not found"));
    return;
  }
  if (!slice.contains("metadata") || !slice["metadata"].is_object()) {
    Reply(res, 422, StatusBody(422, "Invalid", "metadata: required"));
    return;
  }
  const std::string want = slice["metadata"].value("resourceVersion", "");
  if (!want.empty() && want != it->second["metadata"]["resourceVersion"]) {
    Reply(res, 409,
          StatusBody(409, "Conflict",
                     "Operation cannot be fulfilled on resourceslices \"" + name +
                         "\": the object has been modified"));
    return;
  }
  DropGatedLocked(slice);
  if (!AdmitLocked(slice, res)) return;
  const Json& old = it->second["spec"];
  const Json& now = slice["spec"];
  if (now.value("driver", "") != old.value("driver", "") ||
      now.value("nodeName", "") != old.value("nodeName", "") ||
      now["pool"].value("name", "") != old["pool"].value("name", "")) {
    Reply(res, 422,
          StatusBody(422, "Invalid",
                     "spec.driver, spec.nodeName and spec.pool.name: field is immutable"));
    return;
  }
  slice["metadata"]["uid"] = it->second["metadata"]["uid"];
  slice["metadata"]["creationTimestamp"] = it->second["metadata"]["creationTimestamp"];
  StampLocked(slice);
  it->second = slice;
  Reply(res, 200, slice);
}

void FakeResourceApi::State::Delete(const httplib::Request& req, httplib::Response& res) {
  const std::string name = req.matches[1];
  MutexLock l(&mu);
  ++counts["delete"];
  if (InjectedLocked(res)) return;
  auto it = slices.find(name);
  if (it == slices.end()) {
    Reply(res, 404, StatusBody(404, "NotFound", "resourceslices \"" + name + "\" not found"));
    return;
  }
  Json obj = it->second;
  slices.erase(it);
  Reply(res, 200, obj);
}

void FakeResourceApi::State::Claim(const httplib::Request& req, httplib::Response& res) {
  MutexLock l(&mu);
  ++counts["claim"];
  auto it = claims.find({req.matches[1], req.matches[2]});
  if (it == claims.end()) {
    Reply(res, 404,
          StatusBody(
              404, "NotFound",
              "resourceclaims.resource.k8s.io \"" + std::string(req.matches[2]) + "\" not found"));
    return;
  }
  Reply(res, 200, it->second);
}

FakeResourceApi::FakeResourceApi(k8s::testing::FakeApiServer& server)
    : state_(std::make_shared<State>()) {
  std::shared_ptr<State> st = state_;
  server.AddRoutes([st](httplib::Server& s) {
    const std::string item = std::string(kSlicesPath) + "/([^/]+)";
    s.Get("/version", [st](const httplib::Request&, httplib::Response& res) { st->Version(res); });
    s.Get(kSlicesPath, [st](const httplib::Request& q, httplib::Response& r) { st->List(q, r); });
    s.Post(kSlicesPath,
           [st](const httplib::Request& q, httplib::Response& r) { st->Create(q, r); });
    s.Put(item, [st](const httplib::Request& q, httplib::Response& r) { st->Update(q, r); });
    s.Delete(item, [st](const httplib::Request& q, httplib::Response& r) { st->Delete(q, r); });
    s.Get("/apis/resource.k8s.io/v1/namespaces/([^/]+)/resourceclaims/([^/]+)",
          [st](const httplib::Request& q, httplib::Response& r) { st->Claim(q, r); });
  });
}

void FakeResourceApi::SetVersion(int major, int minor) {
  MutexLock l(&state_->mu);
  state_->major = major;
  state_->minor = minor;
}

void FakeResourceApi::SetPartitionableDevices(bool enabled) {
  MutexLock l(&state_->mu);
  state_->partitionable = enabled;
}

void FakeResourceApi::AddClaim(const Json& claim) {
  MutexLock l(&state_->mu);
  Json c = claim;
  c["metadata"]["resourceVersion"] = std::to_string(++state_->rv);
  const std::pair<std::string, std::string> key{c["metadata"]["namespace"], c["metadata"]["name"]};
  state_->claims[key] = std::move(c);
}

bool FakeResourceApi::RemoveClaim(const std::string& ns, const std::string& name) {
  MutexLock l(&state_->mu);
  return state_->claims.erase({ns, name}) > 0;
}

std::vector<Json> FakeResourceApi::Slices() const {
  MutexLock l(&state_->mu);
  std::vector<Json> out;
  for (const auto& [name, s] : state_->slices) out.push_back(s);
  return out;
}

std::optional<Json> FakeResourceApi::Slice(const std::string& name) const {
  MutexLock l(&state_->mu);
  auto it = state_->slices.find(name);
  if (it == state_->slices.end()) return std::nullopt;
  return it->second;
}

int FakeResourceApi::DeleteNodeSlices(const std::string& node) {
  MutexLock l(&state_->mu);
  int n = 0;
  for (auto it = state_->slices.begin(); it != state_->slices.end();) {
    if (it->second["spec"].value("nodeName", "") == node) {
      it = state_->slices.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

void FakeResourceApi::FailNextWrites(int count, int code) {
  MutexLock l(&state_->mu);
  state_->fail_writes = count;
  state_->fail_code = code;
}

int FakeResourceApi::count(const std::string& what) const {
  MutexLock l(&state_->mu);
  auto it = state_->counts.find(what);
  return it == state_->counts.end() ? 0 : it->second;
}

std::vector<std::string> FakeResourceApi::rejections() const {
  MutexLock l(&state_->mu);
  return state_->rejections;
}

}  // namespace migd::k8s::dra::testing
