// File: daemon/daemon.h
//
// The migd process: configuration, wiring, signals, shutdown (daemon.cc
// holds the order; each piece is its own file: effective_config.h,
// simulation.h, state_dir.h, signals.h, kubernetes_frontends.h).
//
// Startup, in order (each failure exits with the code below and one
// "migd: ..." line on stderr that says what to do):
//   config file + command-line overrides (validated)            -> 1
//   --simulate: NVML = libnvidia-ml-sim.so.1 beside the binary,
//     MIGD_SIM_GPUS = the spec, a temporary sim state and proc
//     root unless MIGD_SIM_STATE / MIGD_SIM_PROC_ROOT are set
//   early probe of api.socket: another live migd there            -> 4
//   stateDir: created 0700; refused if writable by group/other,
//     locked (flock on the directory) by another migd              -> 5
//   RecordStore, NvmlDriver (one NVML session for the process)    -> 5 / 2
//   cdi::Publisher + engine::CdiObserver
//   planner.policy: value: the planner's ValueService (planner_wiring.h;
//     not started), read by the metrics
//   api::EventHub, metrics::MigdMetrics behind one engine::ListenerFanout
//   kubernetes.enabled / recovery.ownerSource: hami: the API-server
//     client (in-cluster or kubeconfig)                           -> 1
//   kubernetes.enabled: the kubelet device plugin serves and
//     registers (DeferredBackend: no devices until recovery ends) -> 4
//   the owner source of recovery.ownerSource (records,
//     podresources, hami; k8s_wiring.h FailClosedOwnerSource)
//   engine::Manager::Create (recovery)                            -> 3 (fails closed)
//   Manager::SetPolicy(lifecycle.*, migProfileAllowlist) checked
//     against this node's GPUs                                     -> 1
//   the ValueService's solve thread starts
//   kubernetes.enabled: HamiBackend behind the device plugin, the
//     PodWatcher (node registration annotation, release of ended pods)
//   api::ApiServer on api.socket, MetricsHttpServer                -> 4
//   StartReconciler, sd_notify(READY=1), one "migd ready" line.
// SIGTERM/SIGINT (signalfd; no work in a handler): sd_notify(STOPPING=1),
// the API stops accepting and drains in-flight calls (10 s deadline), the
// device plugin and the pod watcher stop, the metrics server stops, the
// value service's solve thread stops, the reconciler stops, the
// Manager is destroyed, NVML is shut down once; exit 0. SIGHUP: the config file is read again; the
// reloadable keys (config_reload.h DiffConfigs) are applied through
// Manager::SetPolicy and the log level; the other changed keys are logged as
// needing a restart. A reload that fails validation changes nothing.
//
// Thread-safety: RunDaemon is called once, from main(), before any other
// thread exists (it blocks the handled signals for every thread it starts).
#ifndef MIGD_DAEMON_DAEMON_H_
#define MIGD_DAEMON_DAEMON_H_

#include <optional>
#include <string>

namespace migd::daemon {

// Process exit codes (docs/config.md, docs/operations.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitConfig = 1,    // bad command line or configuration
  kExitNvml = 2,      // NVML unavailable (no driver, library too old, init failed)
  kExitRecovery = 3,  // recovery could not verify the state on the GPUs; nothing was changed
  kExitInUse = 4,     // api.socket served by another migd, or a socket/port cannot be bound
  kExitStateDir = 5,  // stateDir unsafe, unusable, or locked by another migd
  kExitStartup = 6,   // any other startup failure (e.g. CDI spec directory)
};

// The command line (main.cc parses it with CLI11).
struct Flags {
  std::string config_file;              // "" = built-in defaults
  std::optional<std::string> simulate;  // e.g. "a100-40gb:2,h100-80gb:1"
  std::optional<std::string> socket;
  std::optional<std::string> state_dir;
  std::optional<std::string> metrics_listen;
  std::optional<std::string> cdi_spec_dir;
  std::optional<std::string> nvml_library;
  std::optional<std::string> log_level;
  // This binary's path (argv[0] resolved through /proc/self/exe), to find
  // <exe dir>/../lib/libnvidia-ml-sim.so.1.
  std::string exe_path;
};

// Runs migd until SIGTERM/SIGINT and returns the process exit code.
int RunDaemon(const Flags& flags);

// The version string (CMake project version).
const char* Version();

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_DAEMON_H_
