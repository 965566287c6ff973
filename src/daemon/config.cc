#include "daemon/config.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>

#include "base/file_util.h"
#include "base/status_macros.h"
#include "cdi/names.h"
#include "mig/catalog.h"

namespace migd::daemon {
namespace {

constexpr char kDurationHint[] = "(use e.g. 30s, 10m, 2h)";

// The schema: every key path, in file order. Maps that take arbitrary keys
// (lifecycle.warmPool) list only their own path.
const std::vector<std::string>& Keys() {
  static const std::vector<std::string>* const kKeys = new std::vector<std::string>{
      "stateDir",
      "api",
      "api.socket",
      "api.socketMode",
      "api.socketGroup",
      "metrics",
      "metrics.listen",
      "nvml",
      "nvml.library",
      "cdi",
      "cdi.enabled",
      "cdi.specDir",
      "cdi.vendor",
      "cdi.class",
      "cdi.commonEditsFrom",
      "cdi.procRoot",
      "cdi.devRoot",
      "lifecycle",
      "lifecycle.idleTTL",
      "lifecycle.maxIdlePerGPU",
      "lifecycle.warmPool",
      "lifecycle.reconcileInterval",
      "lifecycle.demandHalfLife",
      "adoptExistingMIGInstances",
      "migProfileAllowlist",
      "log",
      "log.level",
      "kubernetes",
      "kubernetes.enabled",
      "kubernetes.nodeName",
      "kubernetes.kubeletDir",
      "kubernetes.resourceName",
      "kubernetes.apiServer",
      "kubernetes.apiServer.inCluster",
      "kubernetes.apiServer.kubeconfig",
      "kubernetes.hami",
      "recovery",
      "recovery.ownerSource",
  };
  return *kKeys;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The nearest of `candidates` to `word` (case-insensitive), if close enough
// to be a likely typo.
std::optional<std::string> Nearest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  const std::string w = Lower(word);
  std::optional<std::string> best;
  size_t best_d = 0;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(w, Lower(c));
    if (!best || d < best_d) {
      best = c;
      best_d = d;
    }
  }
  const size_t limit = std::max<size_t>(2, w.size() / 3);
  if (best && best_d <= limit) return best;
  return std::nullopt;
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string KindOf(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Scalar:
      return Quote(n.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

bool IsAbsolutePath(std::string_view p) { return !p.empty() && p.front() == '/'; }

const std::set<std::string>& LogLevels() {
  static const std::set<std::string>* const kLevels =
      new std::set<std::string>{"trace", "debug", "info", "warn", "error", "critical", "off"};
  return *kLevels;
}

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

// Walks the YAML tree and fills a Config. Errors carry "config <source>: ".
class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Status Error(const std::string& path, const std::string& what) const {
    return InvalidArgumentError("config " + source_ + ": " + path + ": " + what);
  }

  // The entries of a mapping node, checked for duplicate and unknown keys.
  // `allowed` = nullptr accepts any key (warmPool). A null node is an empty
  // mapping (the key written with no value).
  Status Entries(const YAML::Node& node, const std::string& path,
                 const std::vector<std::string>* allowed,
                 std::vector<std::pair<std::string, YAML::Node>>* out) const {
    if (node.IsNull()) return OkStatus();
    if (!node.IsMap()) {
      return path.empty() ? InvalidArgumentError("config " + source_ +
                                                 ": the top level must be a mapping of keys (e.g. "
                                                 "\"stateDir: /var/lib/migd\"), got " +
                                                 KindOf(node))
                          : Error(path, "expected a mapping of keys, got " + KindOf(node));
    }
    std::map<std::string, int> seen;  // key -> line
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        return Error(path.empty() ? "(top level)" : path, "keys must be plain strings");
      }
      const std::string key = kv.first.Scalar();
      const std::string full = Join(path, key);
      const int line = kv.first.Mark().line + 1;
      if (auto it = seen.find(key); it != seen.end()) {
        return InvalidArgumentError("config " + source_ + ": duplicate key " + full + " (lines " +
                                    std::to_string(it->second) + " and " + std::to_string(line) +
                                    ")");
      }
      seen.emplace(key, line);
      if (allowed != nullptr &&
          std::find(allowed->begin(), allowed->end(), key) == allowed->end()) {
        return UnknownKey(path, key, *allowed);
      }
      out->emplace_back(key, kv.second);
    }
    return OkStatus();
  }

  Status UnknownKey(const std::string& path, const std::string& key,
                    const std::vector<std::string>& siblings) const {
    std::string msg = "config " + source_ + ": unknown key " + Join(path, key);
    if (auto near = Nearest(key, siblings)) {
      msg += " (did you mean " + Join(path, *near) + "?)";
    } else {
      // The right key in the wrong section, e.g. "socket" at the top level.
      std::vector<std::string> leaves;
      for (const std::string& k : Keys()) {
        const size_t dot = k.rfind('.');
        if (dot != std::string::npos && Lower(k.substr(dot + 1)) == Lower(key)) {
          leaves.push_back(k);
        }
      }
      if (leaves.size() == 1) {
        msg += " (did you mean " + leaves[0] + "?)";
      } else {
        msg += " (known keys here: ";
        for (size_t i = 0; i < siblings.size(); ++i) {
          msg += (i ? ", " : "") + siblings[i];
        }
        msg += ")";
      }
    }
    return InvalidArgumentError(msg);
  }

  StatusOr<std::string> String(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) return Error(path, "expected a string, got " + KindOf(n));
    return n.Scalar();
  }

  StatusOr<bool> Bool(const YAML::Node& n, const std::string& path) const {
    if (n.IsScalar()) {
      const std::string v = Lower(n.Scalar());
      if (v == "true") return true;
      if (v == "false") return false;
    }
    return Error(path, "expected true or false, got " + KindOf(n));
  }

  StatusOr<uint64_t> Uint(const YAML::Node& n, const std::string& path, uint64_t max) const {
    if (!n.IsScalar() || n.Scalar().empty() ||
        !std::all_of(n.Scalar().begin(), n.Scalar().end(),
                     [](unsigned char c) { return std::isdigit(c); })) {
      return Error(path, "expected a whole number, got " + KindOf(n));
    }
    if (n.Scalar().size() > 9 || std::stoull(n.Scalar()) > max) {
      return Error(path, n.Scalar() + " is out of range (0.." + std::to_string(max) + ")");
    }
    return std::stoull(n.Scalar());
  }

  StatusOr<Duration> DurationOf(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) {
      return Error(path,
                   "expected a duration " + std::string(kDurationHint) + ", got " + KindOf(n));
    }
    StatusOr<Duration> d = ParseDuration(n.Scalar());
    if (!d.ok()) return Error(path, Quote(n.Scalar()) + " is not a duration " + kDurationHint);
    return d;
  }

  StatusOr<uint32_t> Mode(const YAML::Node& n, const std::string& path) const {
    const std::string hint = " (use e.g. \"0600\", or \"0660\" with api.socketGroup)";
    if (!n.IsScalar()) return Error(path, "expected an octal mode" + hint + ", got " + KindOf(n));
    const std::string& s = n.Scalar();
    const bool octal = (s.size() == 3 || (s.size() == 4 && s[0] == '0')) &&
                       std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '7'; });
    if (!octal) return Error(path, Quote(s) + " is not an octal file mode" + hint);
    return static_cast<uint32_t>(std::stoul(s, nullptr, 8));
  }

  Status Parse(const YAML::Node& root, Config* c) const {
    std::vector<std::string> top;
    for (const std::string& k : Keys()) {
      if (k.find('.') == std::string::npos) top.push_back(k);
    }
    std::vector<std::pair<std::string, YAML::Node>> entries;
    MIGD_RETURN_IF_ERROR(Entries(root, "", &top, &entries));
    for (const auto& [key, node] : entries) {
      if (node.IsNull()) continue;  // "key:" with no value keeps the default
      if (key == "stateDir") {
        MIGD_ASSIGN_OR_RETURN(c->state_dir, String(node, key));
      } else if (key == "adoptExistingMIGInstances") {
        MIGD_ASSIGN_OR_RETURN(c->adopt_existing_mig_instances, Bool(node, key));
      } else if (key == "migProfileAllowlist") {
        MIGD_RETURN_IF_ERROR(ParseAllowlist(node, c));
      } else {
        MIGD_RETURN_IF_ERROR(ParseSection(key, node, c));
      }
    }
    return OkStatus();
  }

 private:
  Status ParseAllowlist(const YAML::Node& node, Config* c) const {
    const std::string path = "migProfileAllowlist";
    if (!node.IsSequence()) {
      return Error(
          path, "expected a list of profile names (e.g. [1g.10gb, 3g.40gb]), got " + KindOf(node));
    }
    c->mig_profile_allowlist.clear();
    for (size_t i = 0; i < node.size(); ++i) {
      MIGD_ASSIGN_OR_RETURN(std::string name,
                            String(node[i], path + "[" + std::to_string(i) + "]"));
      c->mig_profile_allowlist.push_back(name);
    }
    return OkStatus();
  }

  std::vector<std::string> ChildrenOf(const std::string& section) const {
    std::vector<std::string> out;
    for (const std::string& k : Keys()) {
      if (k.rfind(section + ".", 0) != 0) continue;
      const std::string child = k.substr(section.size() + 1);
      if (child.find('.') == std::string::npos) out.push_back(child);  // direct children only
    }
    return out;
  }

  Status ParseSection(const std::string& section, const YAML::Node& node, Config* c) const {
    const std::vector<std::string> children = ChildrenOf(section);
    std::vector<std::pair<std::string, YAML::Node>> entries;
    MIGD_RETURN_IF_ERROR(Entries(node, section, &children, &entries));
    for (const auto& [key, v] : entries) {
      const std::string path = section + "." + key;
      if (v.IsNull()) continue;
      if (path == "api.socket") {
        MIGD_ASSIGN_OR_RETURN(c->api.socket, String(v, path));
      } else if (path == "api.socketMode") {
        MIGD_ASSIGN_OR_RETURN(c->api.socket_mode, Mode(v, path));
      } else if (path == "api.socketGroup") {
        MIGD_ASSIGN_OR_RETURN(c->api.socket_group, String(v, path));
      } else if (path == "metrics.listen") {
        MIGD_ASSIGN_OR_RETURN(c->metrics.listen, String(v, path));
      } else if (path == "nvml.library") {
        MIGD_ASSIGN_OR_RETURN(c->nvml.library, String(v, path));
      } else if (path == "cdi.enabled") {
        MIGD_ASSIGN_OR_RETURN(c->cdi.enabled, Bool(v, path));
      } else if (path == "cdi.specDir") {
        MIGD_ASSIGN_OR_RETURN(c->cdi.spec_dir, String(v, path));
      } else if (path == "cdi.vendor") {
        MIGD_ASSIGN_OR_RETURN(c->cdi.vendor, String(v, path));
      } else if (path == "cdi.class") {
        MIGD_ASSIGN_OR_RETURN(c->cdi.device_class, String(v, path));
      } else if (path == "cdi.commonEditsFrom") {
        MIGD_ASSIGN_OR_RETURN(c->cdi.common_edits_from, String(v, path));
      } else if (path == "cdi.procRoot") {
        MIGD_ASSIGN_OR_RETURN(c->cdi.proc_root, String(v, path));
      } else if (path == "cdi.devRoot") {
        MIGD_ASSIGN_OR_RETURN(c->cdi.dev_root, String(v, path));
      } else if (path == "lifecycle.idleTTL") {
        MIGD_ASSIGN_OR_RETURN(Duration d, DurationOf(v, path));
        c->lifecycle.idle_ttl = d.count() == 0 ? std::nullopt : std::optional<Duration>(d);
      } else if (path == "lifecycle.maxIdlePerGPU") {
        MIGD_ASSIGN_OR_RETURN(uint64_t n, Uint(v, path, 64));
        c->lifecycle.max_idle_per_gpu = static_cast<uint32_t>(n);
      } else if (path == "lifecycle.warmPool") {
        MIGD_RETURN_IF_ERROR(ParseWarmPool(v, c));
      } else if (path == "lifecycle.reconcileInterval") {
        MIGD_ASSIGN_OR_RETURN(c->lifecycle.reconcile_interval, DurationOf(v, path));
      } else if (path == "lifecycle.demandHalfLife") {
        MIGD_ASSIGN_OR_RETURN(c->lifecycle.demand_half_life, DurationOf(v, path));
      } else if (path == "log.level") {
        MIGD_ASSIGN_OR_RETURN(c->log.level, String(v, path));
      } else if (path == "kubernetes.enabled") {
        MIGD_ASSIGN_OR_RETURN(c->kubernetes.enabled, Bool(v, path));
      } else if (path == "kubernetes.nodeName") {
        MIGD_ASSIGN_OR_RETURN(c->kubernetes.node_name, String(v, path));
      } else if (path == "kubernetes.kubeletDir") {
        MIGD_ASSIGN_OR_RETURN(c->kubernetes.kubelet_dir, String(v, path));
      } else if (path == "kubernetes.resourceName") {
        MIGD_ASSIGN_OR_RETURN(c->kubernetes.resource_name, String(v, path));
      } else if (path == "kubernetes.apiServer") {
        MIGD_RETURN_IF_ERROR(ParseSection(path, v, c));
      } else if (path == "kubernetes.apiServer.inCluster") {
        MIGD_ASSIGN_OR_RETURN(c->kubernetes.api_server.in_cluster, Bool(v, path));
      } else if (path == "kubernetes.apiServer.kubeconfig") {
        MIGD_ASSIGN_OR_RETURN(c->kubernetes.api_server.kubeconfig, String(v, path));
      } else if (path == "kubernetes.hami") {
        MIGD_ASSIGN_OR_RETURN(c->kubernetes.hami, Bool(v, path));
      } else if (path == "recovery.ownerSource") {
        MIGD_ASSIGN_OR_RETURN(c->recovery.owner_source, String(v, path));
      } else {
        return InternalError("config key " + path + " has no parser");
      }
    }
    return OkStatus();
  }

  Status ParseWarmPool(const YAML::Node& node, Config* c) const {
    const std::string path = "lifecycle.warmPool";
    if (!node.IsMap()) {
      return Error(path, "expected a mapping of profile to count (e.g. {\"1g.10gb\": 2}), got " +
                             KindOf(node));
    }
    std::vector<std::pair<std::string, YAML::Node>> entries;
    MIGD_RETURN_IF_ERROR(Entries(node, path, nullptr, &entries));
    c->lifecycle.warm_pool.clear();
    for (const auto& [profile, v] : entries) {
      MIGD_ASSIGN_OR_RETURN(uint64_t n, Uint(v, path + "." + profile, 64));
      c->lifecycle.warm_pool[profile] = static_cast<uint32_t>(n);
    }
    return OkStatus();
  }

  const std::string source_;
};

Status CheckProfile(const std::string& source, const std::string& path, const std::string& name) {
  if (ProfileInCatalogue(name)) return OkStatus();
  std::string msg = "config " + source + ": " + path + ": unknown MIG profile " + Quote(name);
  if (auto near = Nearest(name, AllProfileNames())) msg += " (did you mean " + *near + "?)";
  return InvalidArgumentError(msg + "; profile names look like 1g.10gb, 3g.40gb, 7g.80gb");
}

Status CheckRange(const std::string& source, const std::string& path, Duration d, Duration min,
                  Duration max, bool zero_ok) {
  if ((zero_ok && d.count() == 0) || (d >= min && d <= max)) return OkStatus();
  return InvalidArgumentError("config " + source + ": " + path + ": " + FormatDuration(d) +
                              " is out of range (" + (zero_ok ? "0 or " : "") +
                              FormatDuration(min) + ".." + FormatDuration(max) + ")");
}

// A DNS-1123 subdomain: lower-case alphanumerics, '-' and '.', at most 253
// characters, starting and ending alphanumeric (node names, resource domains).
bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  auto alnum = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char ch) { return alnum(ch) || ch == '-' || ch == '.'; });
}

// An extended resource name as kubelet's Register accepts it
// (kubelet-apis.md §1.4): "<domain>/<name>", domain a DNS subdomain outside
// kubernetes.io, name a qualified-name part (<= 63 chars).
bool IsExtendedResourceName(std::string_view s, std::string* why) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos || s.find('/', slash + 1) != std::string_view::npos) {
    *why = "is not of the form <domain>/<name>";
    return false;
  }
  const std::string_view domain = s.substr(0, slash), name = s.substr(slash + 1);
  if (!IsDnsSubdomain(domain)) {
    *why = "has a domain that is not a DNS name";
    return false;
  }
  if (domain == "kubernetes.io" || domain.ends_with(".kubernetes.io")) {
    *why = "is in the kubernetes.io namespace, which kubelet reserves";
    return false;
  }
  auto alnum = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; };
  if (name.empty() || name.size() > 63 || !alnum(name.front()) || !alnum(name.back()) ||
      !std::all_of(name.begin(), name.end(),
                   [&](char ch) { return alnum(ch) || ch == '-' || ch == '_' || ch == '.'; })) {
    *why = "has a name part that is not 1..63 letters, digits, '-', '_' or '.'";
    return false;
  }
  return true;
}

template <typename Err>
Status ValidateKubernetes(const Config& c, const Err& err) {
  const KubernetesConfig& k = c.kubernetes;
  const std::string& source_of = c.recovery.owner_source;
  if (source_of != "records" && source_of != "podresources" && source_of != "hami") {
    return err("recovery.ownerSource",
               Quote(source_of) + " is not an owner source (use records, podresources or hami)");
  }
  if (k.kubelet_dir.empty() || k.kubelet_dir.front() != '/') {
    return err("kubernetes.kubeletDir", Quote(k.kubelet_dir) + " must be an absolute path");
  }
  // <kubeletDir>/pod-resources/kubelet.sock and device-plugins/kubelet.sock
  // must fit in sun_path.
  const size_t longest = k.kubelet_dir.size() + std::string("/device-plugins/kubelet.sock").size();
  if (longest >= sizeof(sockaddr_un{}.sun_path)) {
    return err("kubernetes.kubeletDir", Quote(k.kubelet_dir) +
                                            " is too long: kubelet's sockets below it would not "
                                            "fit in a unix socket path");
  }
  if (std::string why; !IsExtendedResourceName(k.resource_name, &why)) {
    return err("kubernetes.resourceName",
               Quote(k.resource_name) + " " + why + " (use e.g. nvidia.com/gpu)");
  }
  if (!k.node_name.empty() && !IsDnsSubdomain(k.node_name)) {
    return err("kubernetes.nodeName", Quote(k.node_name) + " is not a Kubernetes node name");
  }
  if (k.api_server.in_cluster && !k.api_server.kubeconfig.empty()) {
    return err("kubernetes.apiServer.kubeconfig",
               "set together with inCluster: true; choose one (inCluster: false to use the "
               "kubeconfig)");
  }
  if (!k.api_server.kubeconfig.empty() && k.api_server.kubeconfig.front() != '/') {
    return err("kubernetes.apiServer.kubeconfig",
               Quote(k.api_server.kubeconfig) + " must be an absolute path");
  }
  if (!k.api_server.in_cluster && k.api_server.kubeconfig.empty() &&
      (k.enabled || source_of == "hami")) {
    return err("kubernetes.apiServer",
               "inCluster: false needs a kubeconfig (kubernetes.apiServer.kubeconfig)");
  }
  if ((k.enabled || source_of == "hami") && k.node_name.empty()) {
    return err("kubernetes.nodeName",
               std::string("is empty and NODE_NAME is not set; ") +
                   (k.enabled ? "kubernetes.enabled" : "recovery.ownerSource: hami") +
                   " needs this node's name (set it, or NODE_NAME from the downward API "
                   "spec.nodeName)");
  }
  if (k.enabled && !k.hami) {
    return err("kubernetes.hami",
               "false is not supported yet: HAMi protocol mode is migd's only Kubernetes mode");
  }
  return OkStatus();
}

}  // namespace

StatusOr<Duration> ParseDuration(std::string_view text) {
  if (text == "0") return Duration(0);
  if (text.empty()) return InvalidArgumentError("empty duration");
  Duration total(0);
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j == i || j - i > 9) return InvalidArgumentError("bad duration");
    const int64_t n = std::stoll(std::string(text.substr(i, j - i)));
    size_t k = j;
    while (k < text.size() && std::isalpha(static_cast<unsigned char>(text[k]))) ++k;
    const std::string_view unit = text.substr(j, k - j);
    if (unit == "ms") {
      total += Duration(n);
    } else if (unit == "s") {
      total += std::chrono::seconds(n);
    } else if (unit == "m") {
      total += std::chrono::minutes(n);
    } else if (unit == "h") {
      total += std::chrono::hours(n);
    } else if (unit == "d") {
      total += std::chrono::hours(24 * n);
    } else {
      return InvalidArgumentError("bad duration unit");
    }
    i = k;
  }
  return total;
}

std::string FormatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0";
  std::string out;
  const std::pair<int64_t, const char*> units[] = {
      {86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}, {1, "ms"}};
  for (const auto& [size, name] : units) {
    if (ms >= size) {
      out += std::to_string(ms / size) + name;
      ms %= size;
    }
  }
  return out;
}

Status ValidateListenAddress(std::string_view listen) {
  if (listen.empty()) return OkStatus();
  const std::string hint =
      " (use host:port, e.g. 127.0.0.1:9400, [::1]:9400 or 0.0.0.0:9400 for every "
      "interface; \"\" disables metrics)";
  std::string_view host, port;
  if (listen.front() == '[') {
    const size_t close = listen.find(']');
    if (close == std::string_view::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      return InvalidArgumentError(Quote(listen) + " is not a listen address" + hint);
    }
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
    if (host.empty() || host.find_first_not_of("0123456789abcdefABCDEF:.") != host.npos) {
      return InvalidArgumentError(Quote(listen) + " is not a listen address" + hint);
    }
  } else {
    const size_t colon = listen.rfind(':');
    if (colon == std::string_view::npos) {
      return InvalidArgumentError(Quote(listen) + " has no port" + hint);
    }
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
    if (host.empty() || host.find(':') != host.npos ||
        host.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != host.npos) {
      return InvalidArgumentError(Quote(listen) + " is not a listen address" + hint);
    }
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos) {
    return InvalidArgumentError(Quote(listen) + " has no valid port" + hint);
  }
  const int p = std::stoi(std::string(port));
  if (p > 65535) {
    return InvalidArgumentError(Quote(listen) + ": port " + std::to_string(p) +
                                " is out of range (0..65535; 0 picks a free port)");
  }
  return OkStatus();
}

Status ValidateConfig(const Config& c, std::string_view source_view) {
  const std::string source(source_view);
  auto err = [&](const std::string& path, const std::string& what) {
    return InvalidArgumentError("config " + source + ": " + path + ": " + what);
  };
  auto absolute = [&](const std::string& path, const std::string& value) -> Status {
    if (IsAbsolutePath(value)) return OkStatus();
    return err(path, Quote(value) + " must be an absolute path");
  };
  MIGD_RETURN_IF_ERROR(absolute("stateDir", c.state_dir));
  MIGD_RETURN_IF_ERROR(absolute("api.socket", c.api.socket));
  if (c.api.socket.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return err("api.socket", Quote(c.api.socket) + " is longer than a unix socket path may be (" +
                                 std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes)");
  }
  const std::string mode_hint = " (use \"0600\", or \"0660\" with api.socketGroup)";
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%04o", c.api.socket_mode);
  if ((c.api.socket_mode & ~0660u) != 0) {
    return err("api.socketMode",
               Quote(mode) + " gives other users or execute rights to the API socket" + mode_hint);
  }
  if ((c.api.socket_mode & 0600u) != 0600u) {
    return err("api.socketMode",
               Quote(mode) + " must give the owner read and write access" + mode_hint);
  }
  if (c.api.socket_group.find_first_of(" \t:/") != std::string::npos) {
    return err("api.socketGroup", Quote(c.api.socket_group) + " is not a group name or id");
  }
  if (Status s = ValidateListenAddress(c.metrics.listen); !s.ok()) {
    return err("metrics.listen", std::string(s.message()));
  }
  if (c.nvml.library.empty()) {
    return err("nvml.library", "must name the NVML library (e.g. libnvidia-ml.so.1)");
  }
  MIGD_RETURN_IF_ERROR(absolute("cdi.specDir", c.cdi.spec_dir));
  if (Status s = cdi::ValidateVendor(c.cdi.vendor); !s.ok()) {
    return err("cdi.vendor", std::string(s.message()));
  }
  if (Status s = cdi::ValidateClass(c.cdi.device_class); !s.ok()) {
    return err("cdi.class", std::string(s.message()));
  }
  if (!c.cdi.common_edits_from.empty()) {
    MIGD_RETURN_IF_ERROR(absolute("cdi.commonEditsFrom", c.cdi.common_edits_from));
  }
  MIGD_RETURN_IF_ERROR(absolute("cdi.procRoot", c.cdi.proc_root));
  MIGD_RETURN_IF_ERROR(absolute("cdi.devRoot", c.cdi.dev_root));
  if (c.lifecycle.idle_ttl) {
    MIGD_RETURN_IF_ERROR(CheckRange(source, "lifecycle.idleTTL", *c.lifecycle.idle_ttl,
                                    std::chrono::seconds(1), std::chrono::hours(24 * 30), true));
  }
  if (c.lifecycle.max_idle_per_gpu && *c.lifecycle.max_idle_per_gpu > 64) {
    return err("lifecycle.maxIdlePerGPU",
               std::to_string(*c.lifecycle.max_idle_per_gpu) + " is out of range (0..64)");
  }
  for (const auto& [profile, n] : c.lifecycle.warm_pool) {
    MIGD_RETURN_IF_ERROR(CheckProfile(source, "lifecycle.warmPool", profile));
    if (n > 64) {
      return err("lifecycle.warmPool." + profile, std::to_string(n) + " is out of range (0..64)");
    }
  }
  MIGD_RETURN_IF_ERROR(CheckRange(source, "lifecycle.reconcileInterval",
                                  c.lifecycle.reconcile_interval, std::chrono::seconds(1),
                                  std::chrono::hours(24), false));
  MIGD_RETURN_IF_ERROR(CheckRange(source, "lifecycle.demandHalfLife", c.lifecycle.demand_half_life,
                                  std::chrono::minutes(1), std::chrono::hours(24 * 30), true));
  std::set<std::string> seen;
  for (size_t i = 0; i < c.mig_profile_allowlist.size(); ++i) {
    const std::string& name = c.mig_profile_allowlist[i];
    const std::string path = "migProfileAllowlist[" + std::to_string(i) + "]";
    MIGD_RETURN_IF_ERROR(CheckProfile(source, path, name));
    if (!seen.insert(name).second) return err(path, Quote(name) + " is listed twice");
  }
  if (LogLevels().count(c.log.level) == 0) {
    return err("log.level", Quote(c.log.level) +
                                " is not a log level (use trace, debug, info, warn, error, "
                                "critical or off)");
  }
  return ValidateKubernetes(c, err);
}

namespace {

// Length of the UTF-8 sequence at s[i] (1..4), or 0 if it is not a valid one
// (truncated, overlong, a surrogate, above U+10FFFF, a stray continuation).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  }
  return n;
}

// A config is UTF-8 text (YAML 1.2 §5.2). yaml-cpp would take invalid bytes
// into values (paths, group names) as they are, and reports a NUL as an
// "unknown escape character"; both are refused here with their position.
Status CheckConfigText(std::string_view text, const std::string& source) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < text.size();) {
    const auto at = [&] {
      return "config " + source + ": line " + std::to_string(line) + ", column " +
             std::to_string(column) + ": ";
    };
    if (text[i] == '\0') {
      return InvalidArgumentError(at() +
                                  "a NUL byte; a config file is UTF-8 text (is this the right "
                                  "file?)");
    }
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      return InvalidArgumentError(at() + "invalid UTF-8; a config file is UTF-8 text (is this "
                                         "the right file?)");
    }
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += n;
  }
  return OkStatus();
}

}  // namespace

StatusOr<Config> ParseConfig(std::string_view yaml, std::string_view source_view) {
  const std::string source(source_view);
  MIGD_RETURN_IF_ERROR(CheckConfigText(yaml, source));
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("config " + source + ": line " + std::to_string(e.mark.line + 1) +
                                ", column " + std::to_string(e.mark.column + 1) +
                                ": YAML syntax error: " + e.msg);
  }
  Config config;
  try {
    MIGD_RETURN_IF_ERROR(Parser(source).Parse(root, &config));
    if (config.kubernetes.node_name.empty()) {
      if (const char* node = std::getenv("NODE_NAME"); node != nullptr) {
        config.kubernetes.node_name = node;
      }
    }
  } catch (const std::exception& e) {
    // yaml-cpp throws on malformed trees it accepted lazily; never let it out.
    return InvalidArgumentError("config " + source + ": " + e.what());
  }
  MIGD_RETURN_IF_ERROR(ValidateConfig(config, source));
  return config;
}

namespace {

// Whoever can change migd's config controls it (where records and CDI specs
// are written, which group may use the socket, which profiles are handed
// out), so the file and the directory holding it must be changeable only by
// migd's own user or root. Checking the directory also closes the window
// between this check and the read: nobody else can swap the file in between.
Status CheckConfigFileSafe(const std::string& path) {
  const uid_t euid = ::geteuid();
  auto check = [euid, &path](const std::string& what, const std::string& p, bool dir) -> Status {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return ErrnoToStatus(errno, "reading config file " + path);
    if (S_ISLNK(st.st_mode)) {
      return FailedPreconditionError("config " + what + " " + p +
                                     " is a symbolic link; refusing to follow it (point --config "
                                     "at the file itself)");
    }
    if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
      return FailedPreconditionError("config " + what + " " + p + " is not a " +
                                     (dir ? "directory" : "regular file"));
    }
    if (st.st_uid != euid && st.st_uid != 0) {
      return FailedPreconditionError("config " + what + " " + p + " is owned by uid " +
                                     std::to_string(st.st_uid) + ", not by root or migd's uid " +
                                     std::to_string(euid) +
                                     "; that user could rewrite migd's "
                                     "configuration. Fix: chown root " +
                                     p);
    }
    // A sticky directory (/tmp) lets others add files but not replace ours.
    const bool writable = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if (writable && !(dir && (st.st_mode & S_ISVTX) != 0)) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return FailedPreconditionError("config " + what + " " + p +
                                     " is writable by group or others (mode " + mode +
                                     "); anyone who can write it controls migd. Fix: chmod "
                                     "go-w " +
                                     p);
    }
    return OkStatus();
  };
  const size_t slash = path.rfind('/');
  const std::string parent =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  MIGD_RETURN_IF_ERROR(check("file", path, /*dir=*/false));
  return check("directory", parent, /*dir=*/true);
}

}  // namespace

StatusOr<Config> LoadConfigFile(const std::string& path) {
  MIGD_RETURN_IF_ERROR(CheckConfigFileSafe(path));
  StatusOr<std::string> text = ReadFileToString(path, 1 << 20);
  if (!text.ok()) return text.status().WithContext("reading config file " + path);
  return ParseConfig(*text, path);
}

ConfigDiff DiffConfigs(const Config& a, const Config& b) {
  ConfigDiff d;
  auto check = [&](bool differs, const char* path, bool reloadable) {
    if (!differs) return;
    (reloadable ? d.applied : d.needs_restart).push_back(path);
  };
  check(a.state_dir != b.state_dir, "stateDir", false);
  check(a.api.socket != b.api.socket, "api.socket", false);
  check(a.api.socket_mode != b.api.socket_mode, "api.socketMode", false);
  check(a.api.socket_group != b.api.socket_group, "api.socketGroup", false);
  check(a.metrics.listen != b.metrics.listen, "metrics.listen", false);
  check(a.nvml.library != b.nvml.library, "nvml.library", false);
  check(a.cdi.enabled != b.cdi.enabled, "cdi.enabled", false);
  check(a.cdi.spec_dir != b.cdi.spec_dir, "cdi.specDir", false);
  check(a.cdi.vendor != b.cdi.vendor, "cdi.vendor", false);
  check(a.cdi.device_class != b.cdi.device_class, "cdi.class", false);
  check(a.cdi.common_edits_from != b.cdi.common_edits_from, "cdi.commonEditsFrom", false);
  check(a.cdi.proc_root != b.cdi.proc_root, "cdi.procRoot", false);
  check(a.cdi.dev_root != b.cdi.dev_root, "cdi.devRoot", false);
  check(a.lifecycle.idle_ttl != b.lifecycle.idle_ttl, "lifecycle.idleTTL", true);
  check(a.lifecycle.max_idle_per_gpu != b.lifecycle.max_idle_per_gpu, "lifecycle.maxIdlePerGPU",
        true);
  check(a.lifecycle.warm_pool != b.lifecycle.warm_pool, "lifecycle.warmPool", true);
  check(a.lifecycle.reconcile_interval != b.lifecycle.reconcile_interval,
        "lifecycle.reconcileInterval", false);
  check(a.lifecycle.demand_half_life != b.lifecycle.demand_half_life, "lifecycle.demandHalfLife",
        false);
  check(a.adopt_existing_mig_instances != b.adopt_existing_mig_instances,
        "adoptExistingMIGInstances", false);
  check(a.mig_profile_allowlist != b.mig_profile_allowlist, "migProfileAllowlist", true);
  check(a.log.level != b.log.level, "log.level", true);
  check(a.kubernetes.enabled != b.kubernetes.enabled, "kubernetes.enabled", false);
  check(a.kubernetes.node_name != b.kubernetes.node_name, "kubernetes.nodeName", false);
  check(a.kubernetes.kubelet_dir != b.kubernetes.kubelet_dir, "kubernetes.kubeletDir", false);
  check(a.kubernetes.resource_name != b.kubernetes.resource_name, "kubernetes.resourceName", false);
  check(a.kubernetes.api_server.in_cluster != b.kubernetes.api_server.in_cluster,
        "kubernetes.apiServer.inCluster", false);
  check(a.kubernetes.api_server.kubeconfig != b.kubernetes.api_server.kubeconfig,
        "kubernetes.apiServer.kubeconfig", false);
  check(a.kubernetes.hami != b.kubernetes.hami, "kubernetes.hami", false);
  check(a.recovery.owner_source != b.recovery.owner_source, "recovery.ownerSource", false);
  return d;
}

Config MergeReloadable(const Config& current, const Config& reloaded) {
  Config out = current;
  out.lifecycle.idle_ttl = reloaded.lifecycle.idle_ttl;
  out.lifecycle.max_idle_per_gpu = reloaded.lifecycle.max_idle_per_gpu;
  out.lifecycle.warm_pool = reloaded.lifecycle.warm_pool;
  out.mig_profile_allowlist = reloaded.mig_profile_allowlist;
  out.log.level = reloaded.log.level;
  return out;
}

const std::vector<std::string>& KnownKeys() { return Keys(); }

}  // namespace migd::daemon
