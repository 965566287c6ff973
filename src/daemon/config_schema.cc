#include "daemon/config_schema.h"

#include <chrono>

#include "daemon/config_values.h"

namespace migd::daemon {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

// spdlog's level names (spdlog::level::from_str).
constexpr std::string_view kLogLevels[] = {"trace", "debug",    "info", "warn",
                                           "error", "critical", "off"};
// engine/owner_source.h.
constexpr std::string_view kOwnerSources[] = {"records", "podresources", "hami"};
constexpr std::string_view kCounterSetLayouts[] = {"auto", "combined", "split"};
// planner/value_service.h; planner/value_table.h (Objective).
constexpr std::string_view kPlannerPolicies[] = {"value", "cost"};
constexpr std::string_view kPlannerObjectives[] = {"count", "slices"};
// MultiGpuValues::kTieBreak, kSeparable (daemon/planner_wiring.cc maps them).
constexpr std::string_view kPlannerMultiGpu[] = {"tie-break", "separable"};

// The schema. To add a key: a field in config.h, a row here (in file order,
// under its section), then `make config-doc` (docs/config.md, "Adding a key").
constexpr KeySpec kSchema[] = {
    {.path = "stateDir",
     .type = KeyType::kString,
     .default_value = "/run/migd/state",
     .field = [](Config& c) -> FieldRef { return &c.state_dir; },
     .check = CheckAbsolutePath,
     .type_doc = "absolute path",
     .doc = "Ownership records (one file per instance) and migd's lock. Created with mode 0700. "
            "migd refuses to start (exit 5) if it is writable by group or others, is not a "
            "directory, or another migd holds its lock. The default is on tmpfs (`/run`): MIG "
            "instances do not survive a reboot and migd discards records of another boot, so "
            "records need to outlive a restart of migd, not of the node. A directory on a "
            "persistent filesystem works too (each record write fsyncs the file and the directory, "
            "a disk flush there); see "
            "docs/operations.md, \"Where the records live\"."},
    {.path = "api"},
    {.path = "api.socket",
     .type = KeyType::kString,
     .default_value = "/run/migd/api.socket",
     .field = [](Config& c) -> FieldRef { return &c.api.socket; },
     .check = CheckSocketPath,
     .type_doc = "absolute path, < 108 bytes",
     .doc = "The gRPC API (`migd.v1.MigManager`) unix socket. If another live migd serves "
            "there, migd exits 4; a stale socket file is removed."},
    {.path = "api.socketMode",
     .type = KeyType::kFileMode,
     .default_value = "0600",
     .field = [](Config& c) -> FieldRef { return &c.api.socket_mode; },
     .check_mode = CheckSocketMode,
     .doc = "Mode of the socket. Owner read+write required; group read/write allowed "
            "(`\"0660\"`); nothing for others."},
    {.path = "api.socketGroup",
     .type = KeyType::kString,
     .field = [](Config& c) -> FieldRef { return &c.api.socket_group; },
     .check = CheckGroupName,
     .type_doc = "group name or gid",
     .default_note = "(migd's group)",
     .doc = "Group of the socket, for `\"0660\"`: members of this group may use migctl."},
    {.path = "metrics"},
    {.path = "metrics.listen",
     .type = KeyType::kString,
     .default_value = "127.0.0.1:9400",
     .field = [](Config& c) -> FieldRef { return &c.metrics.listen; },
     .check = ValidateListenAddress,
     .type_doc = "`host:port` or `\"\"`",
     .doc = "Prometheus `/metrics` (docs/metrics.md). `\"\"` disables the endpoint. "
            "`0.0.0.0:9400` listens on every interface; port 0 picks a free port (tests; the "
            "`migd ready` line shows it)."},
    {.path = "nvml"},
    {.path = "nvml.library",
     .type = KeyType::kString,
     .default_value = "libnvidia-ml.so.1",
     .field = [](Config& c) -> FieldRef { return &c.nvml.library; },
     .check = CheckNotEmptyLibrary,
     .type_doc = "path or soname",
     .doc = "The NVML library. migd never falls back to the simulator: if this cannot be "
            "loaded, migd exits 2."},
    {.path = "cdi"},
    {.path = "cdi.enabled",
     .type = KeyType::kBool,
     .default_value = "true",
     .field = [](Config& c) -> FieldRef { return &c.cdi.enabled; },
     .doc = "Write one CDI spec per MIG instance. `false`: only the legacy form "
            "(`NVIDIA_VISIBLE_DEVICES`, device nodes) is returned."},
    {.path = "cdi.specDir",
     .type = KeyType::kString,
     .default_value = "/var/run/cdi",
     .field = [](Config& c) -> FieldRef { return &c.cdi.spec_dir; },
     .check = CheckAbsolutePath,
     .type_doc = "absolute path",
     .doc = "Where the specs are written (created 0755 if missing)."},
    {.path = "cdi.vendor",
     .type = KeyType::kString,
     .default_value = "hami.io",
     .field = [](Config& c) -> FieldRef { return &c.cdi.vendor; },
     .check = CheckCdiVendor,
     .type_doc = "CDI vendor",
     .doc = "The CDI kind is `<vendor>/<class>`, e.g. `hami.io/mig=MIG-…`."},
    {.path = "cdi.class",
     .type = KeyType::kString,
     .default_value = "mig",
     .field = [](Config& c) -> FieldRef { return &c.cdi.device_class; },
     .check = CheckCdiClass,
     .type_doc = "CDI class",
     .doc = "See `cdi.vendor`."},
    {.path = "cdi.commonEditsFrom",
     .type = KeyType::kString,
     .field = [](Config& c) -> FieldRef { return &c.cdi.common_edits_from; },
     .check = CheckAbsolutePathOrEmpty,
     .type_doc = "absolute path or `\"\"`",
     .doc = "A CDI spec (e.g. from `nvidia-ctk cdi generate`) whose spec-level container edits "
            "(driver libraries, hooks) are added to every spec; migd refuses to start if it is "
            "unusable. `\"\"`: detected — an `nvidia.com/gpu` spec in `/var/run/cdi` or "
            "`/etc/cdi`, else `nvidia-ctk cdi generate` run once, else a startup warning "
            "(operations.md §2.4)."},
    {.path = "cdi.procRoot",
     .type = KeyType::kString,
     .default_value = "/proc",
     .field = [](Config& c) -> FieldRef { return &c.cdi.proc_root; },
     .check = CheckAbsolutePath,
     .type_doc = "absolute path",
     .doc = "Where the MIG capability minors are read (`driver/nvidia-caps/…`). In a "
            "container: the host's `/proc` mount. With `--simulate`: the simulator's fake "
            "tree."},
    {.path = "cdi.devRoot",
     .type = KeyType::kString,
     .default_value = "/dev",
     .field = [](Config& c) -> FieldRef { return &c.cdi.dev_root; },
     .check = CheckAbsolutePath,
     .type_doc = "absolute path",
     .doc = "Where device nodes are stat'ed."},
    {.path = "lifecycle"},
    {.path = "lifecycle.idleTTL",
     .type = KeyType::kDuration,
     .default_value = "0",
     .reload = Reload::kOnSighup,
     .field = [](Config& c) -> FieldRef { return &c.lifecycle.idle_ttl; },
     .range = {.min = seconds(1), .max = hours(24 * 30), .zero_ok = true},
     .default_note = "(off)",
     .doc = "Idle instances unused for longer are destroyed by the reconciler."},
    {.path = "lifecycle.maxIdlePerGPU",
     .type = KeyType::kCount,
     .reload = Reload::kOnSighup,
     .field = [](Config& c) -> FieldRef { return &c.lifecycle.max_idle_per_gpu; },
     .max_count = 64,
     .default_note = "(no cap)",
     .doc = "At most this many Idle instances per GPU; the least recently used go first."},
    {.path = "lifecycle.warmPool",
     .type = KeyType::kProfileCounts,
     .default_value = "{}",
     .reload = Reload::kOnSighup,
     .field = [](Config& c) -> FieldRef { return &c.lifecycle.warm_pool; },
     .max_count = 64,
     .doc = "Idle instances to keep ready, e.g. `{\"1g.10gb\": 2}`; created only in free "
            "space, never by reclaiming."},
    {.path = "lifecycle.reconcileInterval",
     .type = KeyType::kDuration,
     .default_value = "30s",
     .field = [](Config& c) -> FieldRef { return &c.lifecycle.reconcile_interval; },
     .range = {.min = seconds(1), .max = hours(24)},
     .doc = "Period of the reconciler (Error retries, TTL, cap, warm pool, drift)."},
    {.path = "lifecycle.demandHalfLife",
     .type = KeyType::kDuration,
     .default_value = "1h",
     .field = [](Config& c) -> FieldRef { return &c.lifecycle.demand_half_life; },
     .range = {.min = minutes(1), .max = hours(24 * 30), .zero_ok = true},
     .doc = "Half-life of the learned demand mix the planner uses; `0`: no decay."},
    {.path = "planner"},
    {.path = "planner.policy",
     .type = KeyType::kString,
     .default_value = "value",
     .field = [](Config& c) -> FieldRef { return &c.planner.policy; },
     .choices = kPlannerPolicies,
     .choice_noun = "a planner policy",
     .doc = "How the planner orders the placements that fit (docs/planner.md). `value`: by the "
            "expected future acceptances each gives up, from values solved on a background "
            "thread for the demand learned from requests (the cost order serves until the "
            "first solve; no decision waits). `cost`: the fixed cost order alone. Both keep "
            "the same safety rules. `value` is the default because on the placement "
            "benchmark it is no worse anywhere and better on one GPU "
            "(docs/benchmarks/placement-value.md)."},
    {.path = "planner.objective",
     .type = KeyType::kString,
     .default_value = "count",
     .field = [](Config& c) -> FieldRef { return &c.planner.objective; },
     .choices = kPlannerObjectives,
     .choice_noun = "a planner objective",
     .doc = "What `planner.policy: value` maximises: `count`, accepted requests; `slices`, "
            "accepted compute slices (a 7g counts 7 times a 1g)."},
    {.path = "planner.driftThreshold",
     .type = KeyType::kString,
     .default_value = "0.05",
     .field = [](Config& c) -> FieldRef { return &c.planner.drift_threshold; },
     .check = CheckDriftThreshold,
     .type_doc = "number, `0.01`..`1`",
     .doc = "`planner.policy: value` re-solves its values when the learned demand drifts "
            "further than this from the demand they were solved for (the larger of the total "
            "variation distance of the profile mixes and the relative load change / 4). "
            "Lower: fresher values, more solves (each takes milliseconds on one core)."},
    {.path = "planner.multiGpu",
     .type = KeyType::kString,
     .default_value = "tie-break",
     .field = [](Config& c) -> FieldRef { return &c.planner.multi_gpu; },
     .choices = kPlannerMultiGpu,
     .choice_noun = "a multi-GPU value mode",
     .doc = "How `planner.policy: value` orders placements on a node of several GPUs (on one "
            "GPU the values always lead). `tie-break`: the cost order's node term, opened GPUs "
            "and pinned loss lead and the value loss breaks their ties. `separable`: the sum "
            "of the GPUs' value losses leads, each GPU solved for its share of the load; on "
            "the placement benchmark it trails `tie-break` by up to 5.4 pp count acceptance "
            "on 2-8 GPUs (docs/benchmarks/placement-value.md)."},
    {.path = "planner.halfLifeArrivals",
     .type = KeyType::kString,
     .default_value = "2000",
     .field = [](Config& c) -> FieldRef { return &c.planner.half_life_arrivals; },
     .check = CheckHalfLifeArrivals,
     .type_doc = "number, `1`..`1000000000`",
     .doc = "Half-life, in requests, of the demand `planner.policy: value` learns (the profile "
            "mix and the load): a request counts half as much this many requests later. "
            "Lower: follows a changing mix sooner, noisier estimates and more re-solves."},
    {.path = "planner.minArrivals",
     .type = KeyType::kString,
     .default_value = "50",
     .field = [](Config& c) -> FieldRef { return &c.planner.min_arrivals; },
     .check = CheckMinArrivals,
     .type_doc = "whole number, `1`..`1000000`",
     .doc = "`planner.policy: value` solves its first values after this many requests arrived "
            "(the cost order decides until then): fewer requests, an earlier but rougher first "
            "estimate."},
    {.path = "planner.reuseMargin",
     .type = KeyType::kString,
     .default_value = "auto",
     .field = [](Config& c) -> FieldRef { return &c.planner.reuse_margin; },
     .check = CheckReuseMargin,
     .type_doc = "`auto`, `off` or a number, `0`..`1000`",
     .doc = "Under `planner.policy: value`, once values are solved: whether a free or "
            "reclaiming create may displace an Idle instance that fits. A number: only when the "
            "create keeps more profiles placeable on the node, or gives up more than this much "
            "less value (in `planner.objective` units: expected future accepted requests, or "
            "slices); the cost order's other terms do not count against a reuse. `0` keeps an "
            "Idle instance unless the create gives up less value; larger margins create less "
            "and may accept less (docs/planner.md, \"Reuse margin\"). `auto`: `0` on a "
            "one-GPU node, where the values are exact, and `0.1` on a node of several GPUs, "
            "where that margin gave up no measured acceptance and a third of the creates. "
            "`off`: the cost order decides, as before this key existed."},
    {.path = "adoptExistingMIGInstances",
     .type = KeyType::kBool,
     .default_value = "false",
     .field = [](Config& c) -> FieldRef { return &c.adopt_existing_mig_instances; },
     .doc = "At start, claim MIG instances migd did not create (complete GI/CI pairs) as Idle, "
            "and destroy CI-less GIs on GPUs with no live allocation. Off: they are kept as "
            "*foreign* and never touched."},
    {.path = "migProfileAllowlist",
     .type = KeyType::kProfileList,
     .default_value = "[]",
     .reload = Reload::kOnSighup,
     .field = [](Config& c) -> FieldRef { return &c.mig_profile_allowlist; },
     .default_note = "(all)",
     .doc = "Profiles Allocate may hand out. A request for another profile fails with "
            "`PERMISSION_DENIED` naming the profile and the list. Existing instances are "
            "untouched."},
    {.path = "log"},
    {.path = "log.level",
     .type = KeyType::kString,
     .default_value = "info",
     .reload = Reload::kOnSighup,
     .field = [](Config& c) -> FieldRef { return &c.log.level; },
     .choices = kLogLevels,
     .choice_noun = "a log level",
     .doc = "Log level (stderr)."},
    {.path = "kubernetes"},
    {.path = "kubernetes.enabled",
     .type = KeyType::kBool,
     .default_value = "false",
     .field = [](Config& c) -> FieldRef { return &c.kubernetes.enabled; },
     .doc = "Serve the kubelet device plugin (`<devicePluginDir>/migd-mig.sock`, "
            "registered with kubelet before recovery) in HAMi protocol mode, publish "
            "`hami.io/node-nvidia-register` on this node and release the instances of ended "
            "pods (docs/kubernetes.md). Needs `kubernetes.nodeName` and API-server access."},
    {.path = "kubernetes.nodeName",
     .type = KeyType::kString,
     .field = [](Config& c) -> FieldRef { return &c.kubernetes.node_name; },
     .check = CheckNodeNameIfSet,
     .type_doc = "Kubernetes node name",
     .default_note = "(`$NODE_NAME`)",
     .doc = "This node's name (the pods of `spec.nodeName` = it are the ones migd serves). "
            "Empty in the file: the `NODE_NAME` environment variable (downward API "
            "`spec.nodeName`). Required by `kubernetes.enabled` and `recovery.ownerSource: "
            "hami`."},
    {.path = "kubernetes.kubeletDir",
     .type = KeyType::kString,
     .default_value = "/var/lib/kubelet",
     .field = [](Config& c) -> FieldRef { return &c.kubernetes.kubelet_dir; },
     .check = CheckKubeletDir,
     .type_doc = "absolute path",
     .doc = "kubelet's `--root-dir`: `devicePluginDir` and `podResourcesDir` default to "
            "`device-plugins/` and `pod-resources/` below it. Mount those **directories** (not "
            "the socket files) into the migd pod: kubelet recreates its sockets when it "
            "restarts."},
    {.path = "kubernetes.devicePluginDir",
     .type = KeyType::kString,
     .field = [](Config& c) -> FieldRef { return &c.kubernetes.device_plugin_dir; },
     .check = CheckKubeletSocketDirOrEmpty,
     .type_doc = "absolute path or `\"\"`",
     .default_note = "(`<kubeletDir>/device-plugins`)",
     .doc = "Where kubelet's `kubelet.sock` for device plugins lives and migd creates its "
            "socket. A stock kubelet keeps it at `/var/lib/kubelet/device-plugins` whatever its "
            "`--root-dir` (the compiled-in `DevicePluginPath`): with another `kubeletDir`, set "
            "this to `/var/lib/kubelet/device-plugins`."},
    {.path = "kubernetes.podResourcesDir",
     .type = KeyType::kString,
     .field = [](Config& c) -> FieldRef { return &c.kubernetes.pod_resources_dir; },
     .check = CheckKubeletSocketDirOrEmpty,
     .type_doc = "absolute path or `\"\"`",
     .default_note = "(`<kubeletDir>/pod-resources`)",
     .doc = "Where kubelet's PodResources socket `kubelet.sock` lives (`recovery.ownerSource: "
            "podresources`). It follows kubelet's `--root-dir`."},
    {.path = "kubernetes.resourceName",
     .type = KeyType::kString,
     .default_value = "nvidia.com/gpu",
     .field = [](Config& c) -> FieldRef { return &c.kubernetes.resource_name; },
     .check = CheckResourceName,
     .type_doc = "`<domain>/<name>`",
     .doc = "The extended resource advertised to kubelet and joined in `podresources` "
            "recovery. HAMi's scheduler counts `nvidia.com/gpu` (its `resourceCountName`). "
            "Checked at load with kubelet's own rule (IsExtendedResourceName): no "
            "`kubernetes.io/` anywhere, no `requests.` prefix, a DNS-1123 domain of at most "
            "244 characters and a name part of at most 63."},
    {.path = "kubernetes.nodeLockExpiry",
     .type = KeyType::kDuration,
     .default_value = "5m",
     .field = [](Config& c) -> FieldRef { return &c.kubernetes.node_lock_expiry; },
     .range = {.min = seconds(1), .max = hours(24)},
     .doc = "HAMi's node-lock expiry (its `NodeLockTimeout`, Helm `scheduler.nodeLockExpire`, "
            "env `HAMI_NODELOCK_EXPIRE`): `Allocate` serves only the pod named by a "
            "`hami.io/mutex.lock` no older than this. Keep it equal to the scheduler's."},
    {.path = "kubernetes.apiServer"},
    {.path = "kubernetes.apiServer.inCluster",
     .type = KeyType::kBool,
     .default_value = "true",
     .field = [](Config& c) -> FieldRef { return &c.kubernetes.api_server.in_cluster; },
     .doc = "Reach the API server with the pod's service account "
            "(`KUBERNETES_SERVICE_HOST/PORT`, token and CA under "
            "`/var/run/secrets/kubernetes.io/serviceaccount`)."},
    {.path = "kubernetes.apiServer.kubeconfig",
     .type = KeyType::kString,
     .field = [](Config& c) -> FieldRef { return &c.kubernetes.api_server.kubeconfig; },
     .check = CheckAbsolutePathOrEmpty,
     .type_doc = "absolute path or `\"\"`",
     .doc = "A kubeconfig file (its current context) instead; only with `inCluster: false`."},
    {.path = "kubernetes.hami",
     .type = KeyType::kBool,
     .default_value = "true",
     .field = [](Config& c) -> FieldRef { return &c.kubernetes.hami; },
     .doc = "HAMi protocol mode (placeholder replicas, reservations in pod annotations). "
            "`false` is refused: it is the only mode so far."},
    {.path = "dra"},
    {.path = "dra.enabled",
     .type = KeyType::kBool,
     .default_value = "false",
     .field = [](Config& c) -> FieldRef { return &c.dra.enabled; },
     .doc = "Be this node's Kubernetes DRA driver (docs/kubernetes.md, \"DRA mode\"): register "
            "with kubelet through `<kubeletDir>/plugins_registry/<driverName>-reg.sock`, serve "
            "`<kubeletDir>/plugins/<driverName>/dra.sock`, publish the node's MIG devices as "
            "ResourceSlices ordered by the planner, prepare claims through the engine. Excludes "
            "`kubernetes.enabled` (HAMi mode); needs `kubernetes.nodeName`, API-server access, "
            "`cdi.enabled` and `recovery.ownerSource: records`."},
    {.path = "dra.driverName",
     .type = KeyType::kString,
     .default_value = "mig.migd.io",
     .field = [](Config& c) -> FieldRef { return &c.dra.driver_name; },
     .check = CheckDraDriverName,
     .type_doc = "DNS subdomain (≤ 63)",
     .doc = "The DRA driver name: `spec.driver` of the ResourceSlices, the name kubelet matches "
            "to claims' allocation results, and the DeviceClass selector's driver. One driver "
            "per node: do not share it with another DRA driver."},
    {.path = "dra.counterSetLayout",
     .type = KeyType::kString,
     .default_value = "auto",
     .field = [](Config& c) -> FieldRef { return &c.dra.counter_set_layout; },
     .choices = kCounterSetLayouts,
     .choice_noun = "a counter-set layout",
     .doc = "Where the per-GPU counter sets go. `combined`: in each GPU's device slice "
            "(Kubernetes 1.34). `split`: in slices of their own (1.35 and later; the alpha API "
            "changed incompatibly). `auto`: from the API server's `/version`."},
    {.path = "dra.resyncInterval",
     .type = KeyType::kDuration,
     .default_value = "30s",
     .field = [](Config& c) -> FieldRef { return &c.dra.resync_interval; },
     .range = {.min = seconds(1), .max = hours(1)},
     .doc = "How often migd compares its ResourceSlices with the API server and rewrites them "
            "if they differ or vanished (they are also republished on every layout change and "
            "every kubelet registration)."},
    {.path = "recovery"},
    {.path = "recovery.ownerSource",
     .type = KeyType::kString,
     .default_value = "records",
     .field = [](Config& c) -> FieldRef { return &c.recovery.owner_source; },
     .choices = kOwnerSources,
     .choice_noun = "an owner source",
     .doc = "Where startup learns which instances are in use. `records`: migd's own Active "
            "records. `podresources`: kubelet's PodResources `List` joined with the records by "
            "pod namespace/name/container (docs/kubernetes.md, \"Restart recovery\"). `hami`: "
            "the `hami.io/vgpu-mig-allocations` annotations of this node's live pods (API "
            "server; needs `kubernetes.nodeName`). If the source cannot be reached or disagrees "
            "with the records, migd exits 3 without touching the GPUs."},
    {.path = "health"},
    {.path = "health.enabled",
     .type = KeyType::kBool,
     .default_value = "true",
     .field = [](Config& c) -> FieldRef { return &c.health.enabled; },
     .doc = "Watch NVML events (Xid critical errors, MIG configuration changes, lost GPUs) and "
            "mark the affected instance or GPU Unhealthy: never reused, destroyed at release, "
            "no new allocation on an Unhealthy GPU (docs/health.md). `false`: no event "
            "monitor; marks already recorded still apply."},
    {.path = "health.ignoredXids",
     .type = KeyType::kXidList,
     .default_value = "[13, 31, 43, 45, 68, 109]",
     .field = [](Config& c) -> FieldRef { return &c.health.ignored_xids; },
     .max_count = 65535,
     .doc = "Xids that never change health (counted and logged only). The default is the "
            "application-error list NVIDIA's device plugin skips "
            "(NVIDIA/k8s-device-plugin internal/rm/health.go). Every other Xid marks the "
            "instance NVML attributes it to, or the GPU when it is not attributable."},
    {.path = "health.clearRecoveredGpus",
     .type = KeyType::kBool,
     .default_value = "false",
     .field = [](Config& c) -> FieldRef { return &c.health.clear_recovered_gpus; },
     .doc = "Clear the mark of a GPU that was lost (fell off the bus) once it answers again "
            "under its UUID (after a reset, say): it takes new allocations again; the marks "
            "of its instances stay, so none of them is reused. A fault's mark (an "
            "unattributed Xid) is only cleared by `migctl health clear`. `false`: the "
            "operator clears every mark."},
    {.path = "health.recoveryProbeInterval",
     .type = KeyType::kDuration,
     .default_value = "10s",
     .field = [](Config& c) -> FieldRef { return &c.health.recovery_probe_interval; },
     .range = {.min = seconds(1), .max = hours(1)},
     .doc = "How often, with `health.clearRecoveredGpus`, migd lists the GPUs to see whether "
            "a lost one answers again (only while a GPU's only mark is a loss)."},
};

// Reads a field of a const Config through the one accessor each row has.
FieldRef ConstFieldOf(const KeySpec& key, const Config& config) {
  return FieldOf(key, const_cast<Config&>(config));  // only read by the callers below
}

}  // namespace

std::span<const KeySpec> ConfigSchema() { return kSchema; }

const KeySpec* FindKey(std::string_view path) {
  for (const KeySpec& key : kSchema) {
    if (key.path == path) return &key;
  }
  return nullptr;
}

std::vector<std::string> ChildrenOf(std::string_view path) {
  std::vector<std::string> out;
  for (const KeySpec& key : kSchema) {
    std::string_view rest = key.path;
    if (!path.empty()) {
      if (!rest.starts_with(path) || rest.size() <= path.size() || rest[path.size()] != '.') {
        continue;
      }
      rest.remove_prefix(path.size() + 1);
    }
    if (rest.find('.') == std::string_view::npos) out.emplace_back(rest);
  }
  return out;
}

const std::vector<std::string>& KnownKeys() {
  static const std::vector<std::string>* const kKeys = [] {
    auto* keys = new std::vector<std::string>;
    for (const KeySpec& key : kSchema) keys->emplace_back(key.path);
    return keys;
  }();
  return *kKeys;
}

FieldRef FieldOf(const KeySpec& key, Config& config) { return key.field(config); }

bool SameValue(const KeySpec& key, const Config& a, const Config& b) {
  const FieldRef fb = ConstFieldOf(key, b);
  return std::visit(
      [&fb](auto* va) {
        using Ptr = decltype(va);
        return *va == *std::get<Ptr>(fb);
      },
      ConstFieldOf(key, a));
}

void CopyValue(const KeySpec& key, const Config& from, Config* to) {
  const FieldRef source = ConstFieldOf(key, from);
  std::visit(
      [&source](auto* target) {
        using Ptr = decltype(target);
        *target = *std::get<Ptr>(source);
      },
      FieldOf(key, *to));
}

}  // namespace migd::daemon
