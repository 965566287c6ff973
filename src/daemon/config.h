// File: daemon/config.h
//
// migd's configuration file (migd.yaml, documented key by key in
// docs/config.md): parsing, validation and the SIGHUP diff.
//
// Parsing is strict, because a typo in a daemon's config must not silently
// fall back to a default: unknown keys (with the nearest known key as a
// suggestion), duplicate keys, wrong types, bad durations/modes/addresses,
// out-of-range numbers, YAML syntax errors, and text that is not UTF-8 (a NUL
// byte or an invalid sequence, reported with its line and column) are all
// kInvalidArgument with a message naming the file and the key's path, e.g.
//   config migd.yaml: lifecycle.idleTTL: "5x" is not a duration (use e.g. 30s, 10m, 2h)
//   config migd.yaml: unknown key api.sokcet (did you mean api.socket?)
// An empty file (or one with only comments) gives the defaults.
//
// What is checked here is what can be checked without the host: profile
// names in lifecycle.warmPool and migProfileAllowlist must exist in the
// catalogue (some GPU model); whether a GPU of *this* node offers them is
// checked by the daemon at start and at reload (engine::Manager::SetPolicy).
// api.socketGroup is resolved by the daemon at start.
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(daemon::Config cfg, daemon::LoadConfigFile("/etc/migd/migd.yaml"));
//   if (cfg.metrics.listen.empty()) { /* metrics disabled */ }
//
// Thread-safety: plain functions over values.
#ifndef MIGD_DAEMON_CONFIG_H_
#define MIGD_DAEMON_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace migd::daemon {

using Duration = std::chrono::milliseconds;

struct ApiConfig {
  std::string socket = "/run/migd/api.socket";  // api.socket
  uint32_t socket_mode = 0600;                  // api.socketMode
  std::string socket_group;                     // api.socketGroup ("" = the daemon's group)
  friend bool operator==(const ApiConfig&, const ApiConfig&) = default;
};

struct MetricsConfig {
  std::string listen = "127.0.0.1:9400";  // metrics.listen ("" = disabled)
  friend bool operator==(const MetricsConfig&, const MetricsConfig&) = default;
};

struct NvmlConfig {
  std::string library = "libnvidia-ml.so.1";  // nvml.library
  friend bool operator==(const NvmlConfig&, const NvmlConfig&) = default;
};

// The `cdi:` section; maps onto cdi::Options.
struct CdiConfig {
  bool enabled = true;
  std::string spec_dir = "/var/run/cdi";
  std::string vendor = "hami.io";
  std::string device_class = "mig";  // cdi.class
  std::string common_edits_from;
  std::string proc_root = "/proc";
  std::string dev_root = "/dev";
  friend bool operator==(const CdiConfig&, const CdiConfig&) = default;
};

struct LifecycleConfig {
  std::optional<Duration> idle_ttl;           // lifecycle.idleTTL (0 / unset = off)
  std::optional<uint32_t> max_idle_per_gpu;   // lifecycle.maxIdlePerGPU
  std::map<std::string, uint32_t> warm_pool;  // lifecycle.warmPool
  Duration reconcile_interval = std::chrono::seconds(30);
  Duration demand_half_life = std::chrono::hours(1);  // 0 = no decay
  friend bool operator==(const LifecycleConfig&, const LifecycleConfig&) = default;
};

struct LogConfig {
  std::string level = "info";  // trace, debug, info, warn, error, critical, off
  friend bool operator==(const LogConfig&, const LogConfig&) = default;
};

// kubernetes.apiServer: how migd reaches the API server (HAMi protocol mode,
// the pod watcher, recovery.ownerSource: hami).
struct ApiServerConfig {
  bool in_cluster = true;  // the pod's service account (token, CA, KUBERNETES_SERVICE_*)
  std::string kubeconfig;  // absolute path; only with inCluster: false
  friend bool operator==(const ApiServerConfig&, const ApiServerConfig&) = default;
};

// The `kubernetes:` section (docs/kubernetes.md).
struct KubernetesConfig {
  bool enabled = false;                          // serve the kubelet device plugin
  std::string node_name;                         // kubernetes.nodeName; "" in the file = $NODE_NAME
  std::string kubelet_dir = "/var/lib/kubelet";  // device-plugins/ and pod-resources/ below it
  std::string resource_name = "nvidia.com/gpu";  // the extended resource advertised
  ApiServerConfig api_server;
  bool hami = true;  // HAMi protocol mode (the only mode so far)
  friend bool operator==(const KubernetesConfig&, const KubernetesConfig&) = default;
};

// The `recovery:` section: where startup learns which instances are in use
// (engine/owner_source.h, DESIGN.md §4).
struct RecoveryConfig {
  // "records" (migd's own records), "podresources" (kubelet's PodResources
  // List joined with the records), "hami" (HAMi pod annotations).
  std::string owner_source = "records";
  friend bool operator==(const RecoveryConfig&, const RecoveryConfig&) = default;
};

struct Config {
  std::string state_dir = "/var/lib/migd";
  ApiConfig api;
  MetricsConfig metrics;
  NvmlConfig nvml;
  CdiConfig cdi;
  LifecycleConfig lifecycle;
  bool adopt_existing_mig_instances = false;
  std::vector<std::string> mig_profile_allowlist;  // empty = every profile
  LogConfig log;
  KubernetesConfig kubernetes;
  RecoveryConfig recovery;
  friend bool operator==(const Config&, const Config&) = default;
};

// Parses `yaml` (the content of the file called `source` in messages) over
// the defaults. kInvalidArgument as described in the file comment.
// kubernetes.nodeName left empty takes the NODE_NAME environment variable
// (the downward API in a DaemonSet), read here.
StatusOr<Config> ParseConfig(std::string_view yaml, std::string_view source);

// Reads and parses `path`. kNotFound / kPermissionDenied (with the path) if
// it cannot be read; kFailedPrecondition (naming the path and the fix) if the
// file or its directory is a symlink, is owned by someone other than root or
// migd's euid, or is writable by group or others (a sticky directory such as
// /tmp is accepted); kOutOfRange above 1 MiB; ParseConfig's errors otherwise.
StatusOr<Config> LoadConfigFile(const std::string& path);

// Checks the invariants ParseConfig enforces on a Config built or changed in
// code (command-line overrides): absolute paths, socket path length, listen
// address, log level, CDI vendor/class, the kubernetes/recovery keys (a
// resource name of the form domain/name outside kubernetes.io, a node name
// when kubernetes.enabled or recovery.ownerSource: hami needs one, inCluster
// and kubeconfig not both, a known owner source). kInvalidArgument naming the key, with
// `source` as ParseConfig's.
Status ValidateConfig(const Config& config, std::string_view source);

// Values of the textual forms, exposed for the command line and for tests.
// "30s", "10m", "2h", "500ms", "1h30m"; "0" is zero.
StatusOr<Duration> ParseDuration(std::string_view text);
std::string FormatDuration(Duration d);
// "host:port" (IPv4 literal, hostname, or [IPv6]; 0.0.0.0 for every
// interface); port 0..65535, 0 = a free port chosen at start (tests). OK for
// "" (disabled).
Status ValidateListenAddress(std::string_view listen);

// The keys whose values differ between two configs, split by whether SIGHUP
// applies them (lifecycle.idleTTL, lifecycle.maxIdlePerGPU,
// lifecycle.warmPool, migProfileAllowlist, log.level) or they need a restart
// (everything else). Paths as in the file, e.g. "api.socket".
struct ConfigDiff {
  std::vector<std::string> applied;
  std::vector<std::string> needs_restart;
  bool empty() const { return applied.empty() && needs_restart.empty(); }
};
ConfigDiff DiffConfigs(const Config& before, const Config& after);

// The config with `reloaded`'s reloadable keys and `current`'s others: what
// the daemon runs with after a SIGHUP.
Config MergeReloadable(const Config& current, const Config& reloaded);

// Every key path the file accepts (for docs and tests), e.g. "cdi.specDir".
const std::vector<std::string>& KnownKeys();

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_CONFIG_H_
