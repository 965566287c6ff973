// File: daemon/config.h
//
// migd's configuration (migd.yaml) as values. Every key of the file is one
// row of the schema table (config_schema.cc: path, type, default, reload,
// validation, documentation); parsing, validation, the SIGHUP diff and the
// key table of docs/config.md are derived from that table:
//   config_parse.h     ParseConfig: YAML text -> Config (strict)
//   config_files.h     LoadConfigFile: the file, with its permission checks
//   config_validate.h  ValidateConfig: the schema's checks and cross-key rules
//   config_reload.h    DiffConfigs / MergeReloadable: what SIGHUP applies
//   config_values.h    durations, listen addresses, the per-value checks
//   config_doc.h       the docs/config.md key table rendered from the schema
// A default-constructed Config holds the schema's defaults. How to add a key:
// docs/config.md, "Adding a key".
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(daemon::Config cfg, daemon::LoadConfigFile("/etc/migd/migd.yaml"));
//   if (cfg.metrics.listen.empty()) { /* metrics disabled */ }
//
// Thread-safety: value types.
#ifndef MIGD_DAEMON_CONFIG_H_
#define MIGD_DAEMON_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace migd::daemon {

using Duration = std::chrono::milliseconds;

// Each field names its key. The fields are zero here; their defaults are the
// schema's (a default-constructed Config carries them).

struct ApiConfig {
  std::string socket;        // api.socket
  uint32_t socket_mode{};    // api.socketMode
  std::string socket_group;  // api.socketGroup ("" = the daemon's group)
  friend bool operator==(const ApiConfig&, const ApiConfig&) = default;
};

struct MetricsConfig {
  std::string listen;  // metrics.listen ("" = disabled)
  friend bool operator==(const MetricsConfig&, const MetricsConfig&) = default;
};

struct NvmlConfig {
  std::string library;  // nvml.library
  friend bool operator==(const NvmlConfig&, const NvmlConfig&) = default;
};

// The `cdi:` section; maps onto cdi::Options.
struct CdiConfig {
  bool enabled{};                 // cdi.enabled
  std::string spec_dir;           // cdi.specDir
  std::string vendor;             // cdi.vendor
  std::string device_class;       // cdi.class
  std::string common_edits_from;  // cdi.commonEditsFrom ("" = none)
  std::string proc_root;          // cdi.procRoot
  std::string dev_root;           // cdi.devRoot
  friend bool operator==(const CdiConfig&, const CdiConfig&) = default;
};

struct LifecycleConfig {
  std::optional<Duration> idle_ttl;           // lifecycle.idleTTL (unset = off; 0 in the file)
  std::optional<uint32_t> max_idle_per_gpu;   // lifecycle.maxIdlePerGPU (unset = no cap)
  std::map<std::string, uint32_t> warm_pool;  // lifecycle.warmPool
  Duration reconcile_interval{};              // lifecycle.reconcileInterval
  Duration demand_half_life{};                // lifecycle.demandHalfLife (0 = no decay)
  friend bool operator==(const LifecycleConfig&, const LifecycleConfig&) = default;
};

// The `planner:` section (docs/planner.md, "The value policy").
struct PlannerConfig {
  std::string policy;              // planner.policy: "value" or "cost"
  std::string objective;           // planner.objective: "count" or "slices"
  std::string drift_threshold;     // planner.driftThreshold: a number in 0.01..1 (validated)
  std::string multi_gpu;           // planner.multiGpu: "tie-break" or "separable"
  std::string half_life_arrivals;  // planner.halfLifeArrivals: a number in 1..1e9 (validated)
  std::string min_arrivals;        // planner.minArrivals: a whole number in 1..1000000
  std::string reuse_margin;        // planner.reuseMargin: "auto", "off" or 0..1000 (validated)
  friend bool operator==(const PlannerConfig&, const PlannerConfig&) = default;
};

struct LogConfig {
  std::string level;  // log.level: trace, debug, info, warn, error, critical, off
  friend bool operator==(const LogConfig&, const LogConfig&) = default;
};

// kubernetes.apiServer: how migd reaches the API server (HAMi protocol mode,
// the pod watcher, recovery.ownerSource: hami).
struct ApiServerConfig {
  bool in_cluster{};       // kubernetes.apiServer.inCluster: the pod's service account
  std::string kubeconfig;  // kubernetes.apiServer.kubeconfig; only with inCluster: false
  friend bool operator==(const ApiServerConfig&, const ApiServerConfig&) = default;
};

// The `kubernetes:` section (docs/kubernetes.md).
struct KubernetesConfig {
  bool enabled{};           // kubernetes.enabled: serve the kubelet device plugin
  std::string node_name;    // kubernetes.nodeName; "" in the file = $NODE_NAME
  std::string kubelet_dir;  // kubernetes.kubeletDir
  // kubernetes.devicePluginDir / podResourcesDir; "" = below kubelet_dir.
  std::string device_plugin_dir;
  std::string pod_resources_dir;
  std::string resource_name;    // kubernetes.resourceName
  Duration node_lock_expiry{};  // kubernetes.nodeLockExpiry (HAMi's NodeLockTimeout)
  ApiServerConfig api_server;
  bool hami{};  // kubernetes.hami: HAMi protocol mode (the only mode so far)
  friend bool operator==(const KubernetesConfig&, const KubernetesConfig&) = default;

  // The directories in effect: the key, or its default below kubelet_dir.
  std::string DevicePluginDir() const {
    return device_plugin_dir.empty() ? kubelet_dir + "/device-plugins" : device_plugin_dir;
  }
  std::string PodResourcesDir() const {
    return pod_resources_dir.empty() ? kubelet_dir + "/pod-resources" : pod_resources_dir;
  }
};

// The `dra:` section: migd as a Kubernetes DRA driver (docs/kubernetes.md,
// "DRA mode"); node name, kubelet directory and API server come from the
// `kubernetes:` section.
struct DraConfig {
  bool enabled{};                  // dra.enabled
  std::string driver_name;         // dra.driverName
  std::string counter_set_layout;  // dra.counterSetLayout: auto, combined, split
  Duration resync_interval{};      // dra.resyncInterval
  friend bool operator==(const DraConfig&, const DraConfig&) = default;
};

// The `recovery:` section: where startup learns which instances are in use
// (engine/owner_source.h).
struct RecoveryConfig {
  // recovery.ownerSource: "records" (migd's own records), "podresources"
  // (kubelet's PodResources List joined with the records), "hami" (HAMi pod
  // annotations).
  std::string owner_source;
  friend bool operator==(const RecoveryConfig&, const RecoveryConfig&) = default;
};

// The `health:` section (docs/health.md): the Xid and GPU-lost policy of the
// health monitor.
struct HealthConfig {
  bool enabled{};                     // health.enabled: run the NVML event monitor
  std::vector<uint32_t> ignored_xids;  // health.ignoredXids: never change health
  bool clear_recovered_gpus{};         // health.clearRecoveredGpus: policy clear of a lost GPU
  Duration recovery_probe_interval{};  // health.recoveryProbeInterval
  friend bool operator==(const HealthConfig&, const HealthConfig&) = default;
};

struct Config {
  // The schema's defaults (what an empty migd.yaml gives).
  Config();
  // Every field zero or empty, not the defaults: for the parser that fills
  // in the defaults (config_parse.cc).
  struct Zero {};
  explicit Config(Zero) {}

  std::string state_dir;  // stateDir
  ApiConfig api;
  MetricsConfig metrics;
  NvmlConfig nvml;
  CdiConfig cdi;
  LifecycleConfig lifecycle;
  PlannerConfig planner;
  bool adopt_existing_mig_instances{};             // adoptExistingMIGInstances
  std::vector<std::string> mig_profile_allowlist;  // migProfileAllowlist (empty = every profile)
  LogConfig log;
  KubernetesConfig kubernetes;
  DraConfig dra;
  RecoveryConfig recovery;
  HealthConfig health;
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_CONFIG_H_
