#include "daemon/config_validate.h"

#include <algorithm>
#include <set>
#include <string>

#include "base/status_macros.h"
#include "daemon/config_schema.h"
#include "daemon/config_values.h"
#include "mig/catalog.h"

namespace migd::daemon {
namespace {

std::vector<std::string> AllProfileNames() {
  std::set<std::string> names;
  for (const mig::GpuModel& m : mig::Catalog::Default().models()) {
    for (const mig::GiProfile& p : m.gi_profiles) names.insert(p.name);
  }
  return {names.begin(), names.end()};
}

bool ProfileInCatalogue(const std::string& name) {
  for (const mig::GpuModel& m : mig::Catalog::Default().models()) {
    if (m.FindProfileByName(name) != nullptr) return true;
  }
  return false;
}

// "a, b or c".
std::string JoinOr(std::span<const std::string_view> words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

// Checks one Config; errors read "config <source>: <path>: <what>".
class Validator {
 public:
  Validator(const Config& config, std::string_view source) : c_(config), source_(source) {}

  Status Error(std::string_view path, std::string_view what) const {
    return InvalidArgumentError("config " + source_ + ": " + std::string(path) + ": " +
                                std::string(what));
  }

  // The schema's checks of one key.
  Status Key(const KeySpec& key) const {
    switch (key.type) {
      case KeyType::kString:
        return String(key, *ValueOf<std::string>(key, c_));
      case KeyType::kFileMode:
        return Checked(key, key.check_mode == nullptr
                                ? OkStatus()
                                : key.check_mode(*ValueOf<uint32_t>(key, c_)));
      case KeyType::kCount:
        return Count(key);
      case KeyType::kDuration:
        return DurationInRange(key);
      case KeyType::kProfileList:
        return ProfileList(key, *ValueOf<std::vector<std::string>>(key, c_));
      case KeyType::kProfileCounts:
        return ProfileCounts(key, *ValueOf<std::map<std::string, uint32_t>>(key, c_));
      case KeyType::kBool:
      case KeyType::kXidList:  // range and duplicates are checked by the parser
      case KeyType::kSection:
        break;
    }
    return OkStatus();
  }

  // The rules that involve more than one key (the Kubernetes integration).
  Status CrossKeyRules() const {
    const KubernetesConfig& k = c_.kubernetes;
    const bool needs_api_server = k.enabled || c_.recovery.owner_source == "hami" || c_.dra.enabled;
    if (k.api_server.in_cluster && !k.api_server.kubeconfig.empty()) {
      return Error("kubernetes.apiServer.kubeconfig",
                   "set together with inCluster: true; choose one (inCluster: false to use the "
                   "kubeconfig)");
    }
    if (!k.api_server.in_cluster && k.api_server.kubeconfig.empty() && needs_api_server) {
      return Error("kubernetes.apiServer",
                   "inCluster: false needs a kubeconfig (kubernetes.apiServer.kubeconfig)");
    }
    if (needs_api_server && k.node_name.empty()) {
      return Error("kubernetes.nodeName",
                   std::string("is empty and NODE_NAME is not set; ") +
                       (k.enabled        ? "kubernetes.enabled"
                        : c_.dra.enabled ? "dra.enabled"
                                         : "recovery.ownerSource: hami") +
                       " needs this node's name (set it, or NODE_NAME from the downward API "
                       "spec.nodeName)");
    }
    if (k.enabled && !k.hami) {
      return Error("kubernetes.hami",
                   "false is not supported yet: HAMi protocol mode is migd's only Kubernetes mode");
    }
    return DraRules();
  }

  // dra.enabled with the rest of the file.
  Status DraRules() const {
    const DraConfig& d = c_.dra;
    if (!d.enabled) return OkStatus();
    if (c_.kubernetes.enabled) {
      return Error("dra.enabled",
                   "true together with kubernetes.enabled: true; HAMi mode and DRA mode exclude "
                   "each other on one node (two schedulers would hand out the same GPUs); turn "
                   "one off");
    }
    if (!c_.cdi.enabled) {
      return Error("dra.enabled",
                   "needs cdi.enabled: true (DRA hands devices to containers as "
                   "CDI device ids only)");
    }
    if (c_.recovery.owner_source != "records") {
      return Error("recovery.ownerSource",
                   Quote(c_.recovery.owner_source) +
                       " with dra.enabled; DRA claims are recorded by migd itself: use records");
    }
    // kubelet's plugin registry path must fit a unix socket address.
    const std::string reg =
        c_.kubernetes.kubelet_dir + "/plugins_registry/" + d.driver_name + "-reg.sock";
    const std::string dra = c_.kubernetes.kubelet_dir + "/plugins/" + d.driver_name + "/dra.sock";
    for (const std::string& path : {reg, dra}) {
      if (path.size() > 107) {
        return Error("dra.driverName", "makes the socket path " + path +
                                           " longer than the 107 bytes of a unix socket "
                                           "address; use a shorter driver name or kubeletDir");
      }
    }
    return OkStatus();
  }

 private:
  // `s` with the key's path in front.
  Status Checked(const KeySpec& key, const Status& s) const {
    return s.ok() ? s : Error(key.path, s.message());
  }

  Status String(const KeySpec& key, const std::string& value) const {
    if (!key.choices.empty() &&
        std::find(key.choices.begin(), key.choices.end(), value) == key.choices.end()) {
      return Error(key.path, Quote(value) + " is not " + std::string(key.choice_noun) + " (use " +
                                 JoinOr(key.choices) + ")");
    }
    return Checked(key, key.check == nullptr ? OkStatus() : key.check(value));
  }

  Status Count(const KeySpec& key) const {
    std::optional<uint32_t> n;
    if (const auto* plain = ValueOf<uint32_t>(key, c_)) n = *plain;
    if (const auto* opt = ValueOf<std::optional<uint32_t>>(key, c_)) n = *opt;
    if (!n || *n <= key.max_count) return OkStatus();
    return Error(key.path, std::to_string(*n) + " is out of range (0.." +
                               std::to_string(key.max_count) + ")");
  }

  Status DurationInRange(const KeySpec& key) const {
    std::optional<Duration> d;
    if (const auto* plain = ValueOf<Duration>(key, c_)) d = *plain;
    if (const auto* opt = ValueOf<std::optional<Duration>>(key, c_)) d = *opt;
    const DurationRange& r = key.range;
    if (!d || (r.zero_ok && d->count() == 0) || (*d >= r.min && *d <= r.max)) return OkStatus();
    return Error(key.path, FormatDuration(*d) + " is out of range (" + (r.zero_ok ? "0 or " : "") +
                               FormatDuration(r.min) + ".." + FormatDuration(r.max) + ")");
  }

  Status Profile(std::string_view path, const std::string& name) const {
    if (ProfileInCatalogue(name)) return OkStatus();
    std::string what = "unknown MIG profile " + Quote(name);
    if (auto near = Nearest(name, AllProfileNames())) what += " (did you mean " + *near + "?)";
    return Error(path, what + "; profile names look like 1g.10gb, 3g.40gb, 7g.80gb");
  }

  Status ProfileList(const KeySpec& key, const std::vector<std::string>& names) const {
    std::set<std::string> seen;
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string path = std::string(key.path) + "[" + std::to_string(i) + "]";
      MIGD_RETURN_IF_ERROR(Profile(path, names[i]));
      if (!seen.insert(names[i]).second) return Error(path, Quote(names[i]) + " is listed twice");
    }
    return OkStatus();
  }

  Status ProfileCounts(const KeySpec& key, const std::map<std::string, uint32_t>& counts) const {
    for (const auto& [profile, n] : counts) {
      MIGD_RETURN_IF_ERROR(Profile(key.path, profile));
      if (n > key.max_count) {
        return Error(
            std::string(key.path) + "." + profile,
            std::to_string(n) + " is out of range (0.." + std::to_string(key.max_count) + ")");
      }
    }
    return OkStatus();
  }

  const Config& c_;
  const std::string source_;
};

}  // namespace

Status ValidateConfig(const Config& config, std::string_view source) {
  const Validator validator(config, source);
  for (const KeySpec& key : ConfigSchema()) MIGD_RETURN_IF_ERROR(validator.Key(key));
  return validator.CrossKeyRules();
}

}  // namespace migd::daemon
