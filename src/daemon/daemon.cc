#include "daemon/daemon.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/event_hub.h"
#include "api/server.h"
#include "api/service.h"
#include "base/boot_id.h"
#include "base/clock.h"
#include "base/file_util.h"
#include "base/logging.h"
#include "base/status.h"
#include "base/status_macros.h"
#include "cdi/host_reader.h"
#include "cdi/publisher.h"
#include "cdi/spec_writer.h"
#include "daemon/config.h"
#include "daemon/config_files.h"
#include "daemon/config_reload.h"
#include "daemon/config_validate.h"
#include "daemon/k8s_wiring.h"
#include "daemon/sim_host_reader.h"
#include "driver/nvml/nvml_driver.h"
#include "engine/cdi_observer.h"
#include "engine/events.h"
#include "engine/manager.h"
#include "engine/owner_source.h"
#include "k8s/allocation_backend.h"
#include "k8s/podresources/client.h"
#include "k8s/podresources/owner_sources.h"
#include "metrics/http_server.h"
#include "metrics/migd_collector.h"
#include "metrics/registry.h"
#include "store/record_store.h"

// The Kubernetes frontends are built when their directories exist
// (src/daemon/CMakeLists.txt); without them kubernetes.enabled and
// recovery.ownerSource: hami are refused at startup.
#if MIGD_HAVE_K8S
#include "k8s/apiserver/hami_backend.h"
#include "k8s/apiserver/kube_client.h"
#include "k8s/apiserver/pod_watcher.h"
#include "k8s/deviceplugin/device_plugin_server.h"
#include "k8s/podresources/kube_pod_lister.h"
#endif

#ifndef MIGD_VERSION_STRING
#define MIGD_VERSION_STRING "unknown"
#endif

namespace migd::daemon {
namespace {

constexpr char kCommandLine[] = "command line";
// How long SIGTERM lets in-flight API calls finish before they are cancelled.
constexpr auto kDrainDeadline = std::chrono::seconds(10);

// A startup failure: the exit code and the one line for stderr.
struct Failure {
  int code;
  std::string message;
};

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Applies the command-line overrides; they win over the file at start and at
// every reload.
void ApplyFlags(const Flags& flags, Config* c) {
  if (flags.socket) c->api.socket = *flags.socket;
  if (flags.state_dir) c->state_dir = *flags.state_dir;
  if (flags.metrics_listen) c->metrics.listen = *flags.metrics_listen;
  if (flags.cdi_spec_dir) c->cdi.spec_dir = *flags.cdi_spec_dir;
  if (flags.nvml_library) c->nvml.library = *flags.nvml_library;
  if (flags.log_level) c->log.level = *flags.log_level;
}

// What --simulate decided; applied to every config read (start and reload).
struct Simulation {
  bool enabled = false;
  std::string dir;        // the directory beside MIGD_SIM_STATE
  std::string temp_dir;   // created by us (removed at exit); "" if none
  std::string proc_root;  // the sim's fake /proc (from its state file)
};

// Defaults that only make sense for root on a real node (/var/lib/migd,
// /run/migd, /var/run/cdi) are moved under the simulation directory unless
// the file or a flag set them, so `migd --simulate X` runs unprivileged.
void ApplySimulation(const Simulation& sim, Config* c) {
  if (!sim.enabled) return;
  const Config defaults;
  if (c->state_dir == defaults.state_dir) c->state_dir = sim.dir + "/state";
  if (c->api.socket == defaults.api.socket) c->api.socket = sim.dir + "/api.socket";
  if (c->cdi.spec_dir == defaults.cdi.spec_dir) c->cdi.spec_dir = sim.dir + "/cdi";
  if (!sim.proc_root.empty()) c->cdi.proc_root = sim.proc_root;
}

// How messages name where a setting came from: the file, or the flags alone.
std::string ConfigSource(const Flags& flags) {
  return flags.config_file.empty() ? std::string(kCommandLine) : flags.config_file;
}

StatusOr<Config> ReadConfig(const Flags& flags, const Simulation& sim) {
  Config config;
  if (!flags.config_file.empty()) {
    MIGD_ASSIGN_OR_RETURN(config, LoadConfigFile(flags.config_file));
  }
  ApplyFlags(flags, &config);
  ApplySimulation(sim, &config);
  const std::string source = flags.config_file.empty()
                                 ? std::string(kCommandLine)
                                 : flags.config_file + " (with command-line overrides)";
  MIGD_RETURN_IF_ERROR(ValidateConfig(config, source));
  return config;
}

engine::ManagerPolicy PolicyOf(const Config& c) {
  engine::ManagerPolicy p;
  if (c.lifecycle.idle_ttl) {
    p.idle_ttl = std::chrono::duration_cast<Clock::Duration>(*c.lifecycle.idle_ttl);
  }
  p.max_idle_per_gpu = c.lifecycle.max_idle_per_gpu;
  p.warm_pool = c.lifecycle.warm_pool;
  p.profile_allowlist = {c.mig_profile_allowlist.begin(), c.mig_profile_allowlist.end()};
  return p;
}

std::string JoinKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ",") + k;
  return out.empty() ? "-" : out;
}

class Daemon {
 public:
  explicit Daemon(Flags flags) : flags_(std::move(flags)) {}
  ~Daemon() { Teardown(); }

  // Everything up to READY. On failure, what is set up is torn down by the
  // destructor.
  std::optional<Failure> Setup();
  // Serves until SIGTERM/SIGINT; handles SIGHUP.
  void Run();
  // Shutdown in the documented order. Idempotent.
  void Teardown();

 private:
  std::optional<Failure> SetUpSignals();
  std::optional<Failure> SetUpSimulation();
  std::optional<Failure> SetUpStateDir();
  std::optional<Failure> ReadSimProcRoot();
  // Before recovery: the API-server client, the device plugin (serving and
  // registering), the owner source.
  std::optional<Failure> SetUpKubernetesEarly();
  // After recovery: the HAMi backend behind the plugin, the pod watcher.
  std::optional<Failure> SetUpKubernetesLate();
  void Reload();
  void LogReady(int metrics_port);

  Flags flags_;
  Simulation sim_;
  Config config_;
  int signal_fd_ = -1;
  int state_dir_fd_ = -1;  // holds the flock
  Clock& clock_ = Clock::Real();

  std::unique_ptr<store::RecordStore> store_;
  std::unique_ptr<driver::NvmlDriver> driver_;
  std::unique_ptr<cdi::HostReader> host_reader_;
  std::unique_ptr<cdi::Publisher> publisher_;
  std::unique_ptr<engine::CdiObserver> cdi_observer_;
  api::EventHub hub_;
  metrics::Registry registry_;
  std::unique_ptr<metrics::MigdMetrics> metrics_;
  engine::ListenerFanout fanout_;
  std::unique_ptr<engine::OwnerSource> owners_;
  std::unique_ptr<k8s::PodResourcesClient> pod_resources_;
  DeferredBackend deferred_backend_;
#if MIGD_HAVE_K8S
  std::unique_ptr<k8s::KubeClient> kube_;
  std::unique_ptr<k8s::KubeHamiPodLister> hami_pods_;
  std::unique_ptr<k8s::DevicePluginServer> device_plugin_;
  std::unique_ptr<k8s::HamiBackend> hami_backend_;
  std::unique_ptr<k8s::PodWatcher> pod_watcher_;
#endif
  std::unique_ptr<engine::Manager> manager_;
  std::unique_ptr<api::MigManagerService> service_;
  std::unique_ptr<api::ApiServer> api_server_;
  std::unique_ptr<metrics::MetricsHttpServer> metrics_server_;
  bool torn_down_ = false;
};

std::optional<Failure> Daemon::SetUpSignals() {
  // Blocked before any thread exists, so every thread (gRPC, httplib, the
  // reconciler) inherits the mask and the signals are only read here.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) {
    return Failure{kExitStartup, "cannot block signals"};
  }
  ::signal(SIGPIPE, SIG_IGN);
  signal_fd_ = ::signalfd(-1, &set, SFD_CLOEXEC);
  if (signal_fd_ < 0) {
    return Failure{kExitStartup, std::string("signalfd: ") + std::strerror(errno)};
  }
  return std::nullopt;
}

std::optional<Failure> Daemon::SetUpSimulation() {
  if (!flags_.simulate) return std::nullopt;
  if (flags_.simulate->empty()) {
    return Failure{kExitConfig,
                   "--simulate needs a GPU list, e.g. --simulate a100-40gb:2,h100-80gb:1"};
  }
  sim_.enabled = true;
  ::setenv("MIGD_SIM_GPUS", flags_.simulate->c_str(), 1);
  const char* state = std::getenv("MIGD_SIM_STATE");
  if (state == nullptr || *state == '\0') {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/migd-sim-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Failure{kExitStartup, "cannot create a temporary simulation directory " + pattern +
                                       ": " + std::strerror(errno)};
    }
    sim_.temp_dir = pattern;
    sim_.dir = pattern;
    ::setenv("MIGD_SIM_STATE", (pattern + "/state.json").c_str(), 1);
  } else {
    if (state[0] != '/') {
      return Failure{kExitConfig,
                     std::string("MIGD_SIM_STATE must be an absolute path, got ") + state};
    }
    sim_.dir = DirName(state);
  }
  const char* proc = std::getenv("MIGD_SIM_PROC_ROOT");
  if (proc == nullptr || *proc == '\0') {
    // Only used when the state file is created now (a creation knob).
    ::setenv("MIGD_SIM_PROC_ROOT", (sim_.dir + "/proc").c_str(), 1);
  }
  if (!flags_.nvml_library) {
    const std::string exe_dir = DirName(flags_.exe_path);
    std::error_code ec;
    const std::filesystem::path lib = std::filesystem::weakly_canonical(
        std::filesystem::path(exe_dir) / ".." / "lib" / "libnvidia-ml-sim.so.1", ec);
    flags_.nvml_library = ec ? exe_dir + "/../lib/libnvidia-ml-sim.so.1" : lib.string();
  }
  return std::nullopt;
}

std::optional<Failure> Daemon::ReadSimProcRoot() {
  // The proc root is recorded in the state file when the simulated machine is
  // created; an existing file keeps its own, whatever the environment says.
  const std::string state = std::getenv("MIGD_SIM_STATE");
  StatusOr<std::string> text = ReadFileToString(state);
  if (!text.ok()) {
    return Failure{kExitNvml,
                   "cannot read the simulator state " + state + ": " + text.status().ToString()};
  }
  try {
    const nlohmann::json doc = nlohmann::json::parse(*text);
    sim_.proc_root = doc.value("procRoot", std::string());
  } catch (const std::exception& e) {
    return Failure{kExitNvml, "cannot parse the simulator state " + state + ": " + e.what()};
  }
  if (sim_.proc_root.empty()) {
    spdlog::warn("simulated machine has no fake /proc tree; CDI specs cannot be built{}",
                 Fields().Add("state", state));
  }
  return std::nullopt;
}

std::optional<Failure> Daemon::SetUpStateDir() {
  const std::string& dir = config_.state_dir;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return Failure{kExitStateDir, "stateDir " + dir + ": " + std::strerror(errno)};
    }
    if (Status s = MakeDirectories(dir, 0700); !s.ok()) {
      return Failure{kExitStateDir, "cannot create stateDir " + dir + ": " + s.ToString() +
                                        " (create it, mode 0700, or set stateDir / --state-dir)"};
    }
    if (::lstat(dir.c_str(), &st) != 0) {
      return Failure{kExitStateDir, "stateDir " + dir + ": " + std::strerror(errno)};
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    return Failure{kExitStateDir, "stateDir " + dir + " is not a directory"};
  }
  if ((st.st_mode & 022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
    return Failure{kExitStateDir,
                   "stateDir " + dir + " is writable by group or others (mode " + mode +
                       "); anyone who can write there can forge ownership records. Fix: chmod "
                       "0700 " +
                       dir};
  }
  state_dir_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (state_dir_fd_ < 0) {
    return Failure{kExitStateDir, "cannot open stateDir " + dir + ": " + std::strerror(errno)};
  }
  // One migd per stateDir: the records have a single writer (store/record_store.h).
  if (::flock(state_dir_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Failure{kExitStateDir, "another migd is using stateDir " + dir +
                                        " (it holds the directory's lock); stop it first or "
                                        "give this one another stateDir"};
    }
    return Failure{kExitStateDir, "cannot lock stateDir " + dir + ": " + std::strerror(errno)};
  }
  return std::nullopt;
}

std::optional<Failure> Daemon::Setup() {
  if (auto f = SetUpSimulation()) return f;
  // Read once without the sim proc root (unknown until NVML created the
  // machine) to validate early; re-read below when it is known.
  StatusOr<Config> config = ReadConfig(flags_, sim_);
  if (!config.ok()) return Failure{kExitConfig, std::string(config.status().message())};
  config_ = *config;
  if (Status s = InitLogging({.level = config_.log.level}); !s.ok()) {
    return Failure{kExitConfig, s.ToString()};
  }
  if (!config_.api.socket_group.empty()) {
    const std::string& g = config_.api.socket_group;
    const bool numeric = g.find_first_not_of("0123456789") == std::string::npos;
    if (!numeric && ::getgrnam(g.c_str()) == nullptr) {
      return Failure{kExitConfig, "config " + ConfigSource(flags_) +
                                      ": api.socketGroup: no group named \"" + g +
                                      "\" on this host (create it or use a numeric gid)"};
    }
  }
  if (auto f = SetUpSignals()) return f;

  // A live migd on our socket: refuse before touching NVML or the records.
  if (api::ProbeUnixSocket(config_.api.socket).ok()) {
    return Failure{kExitInUse, "another migd is serving on " + config_.api.socket +
                                   "; stop it first (or use another --socket)"};
  }
  if (auto f = SetUpStateDir()) return f;

  StatusOr<std::string> boot = ReadBootId();
  if (!boot.ok()) return Failure{kExitStartup, "reading the boot id: " + boot.status().ToString()};
  StatusOr<std::unique_ptr<store::RecordStore>> store =
      store::RecordStore::Open(config_.state_dir, clock_, {.boot_id = *boot});
  if (!store.ok()) return Failure{kExitStateDir, store.status().ToString()};
  store_ = std::move(*store);

  StatusOr<std::unique_ptr<driver::NvmlDriver>> drv =
      driver::NvmlDriver::Open(config_.nvml.library);
  if (!drv.ok()) {
    std::string msg = "NVML unavailable: " + std::string(drv.status().message());
    if (sim_.enabled) {
      msg +=
          " (the simulated library is built by `cmake --build <build> --target nvidia_ml_sim`;"
          " or pass --nvml-library PATH)";
    } else {
      msg += ". migd needs the NVIDIA driver's " + config_.nvml.library +
             ": install the NVIDIA driver (or set nvml.library / --nvml-library to its path), "
             "or run `migd --simulate a100-40gb:2` to try migd without GPUs";
    }
    return Failure{kExitNvml, msg};
  }
  driver_ = std::move(*drv);
  if (sim_.enabled) {
    if (auto f = ReadSimProcRoot()) return f;
    spdlog::info("simulated GPUs{}",
                 Fields()
                     .Add("spec", *flags_.simulate)
                     .Add("state", std::getenv("MIGD_SIM_STATE"))
                     .Add("proc_root", sim_.proc_root)
                     .Add("temporary", sim_.temp_dir.empty() ? "false" : "true"));
    config = ReadConfig(flags_, sim_);
    if (!config.ok()) return Failure{kExitConfig, std::string(config.status().message())};
    config_ = *config;
  }

  cdi::Options cdi_opts;
  cdi_opts.enabled = config_.cdi.enabled;
  cdi_opts.kind.vendor = config_.cdi.vendor;
  cdi_opts.kind.device_class = config_.cdi.device_class;
  cdi_opts.spec_dir = config_.cdi.spec_dir;
  cdi_opts.common_edits_from = config_.cdi.common_edits_from;
  cdi_opts.proc_root = config_.cdi.proc_root;
  cdi_opts.dev_root = config_.cdi.dev_root;
  if (Status s = cdi::Publisher::ValidateOptions(cdi_opts); !s.ok()) {
    return Failure{kExitConfig,
                   "config " + ConfigSource(flags_) + ": cdi: " + std::string(s.message())};
  }
  if (cdi_opts.enabled) {
    if (Status s = MakeDirectories(cdi_opts.spec_dir, 0755); !s.ok()) {
      return Failure{kExitStartup,
                     "cannot create cdi.specDir " + cdi_opts.spec_dir + ": " + s.ToString()};
    }
    // Like stateDir: a spec dir others can write is refused before migd
    // writes (or sweeps) anything there (docs/security.md §4).
    std::string warning;
    if (Status s = cdi::CheckSpecDir(cdi_opts.spec_dir, &warning); !s.ok()) {
      return Failure{kExitStartup, std::string(s.message())};
    }
    if (!warning.empty()) spdlog::warn("{}", warning);
  }
  if (sim_.enabled) {
    host_reader_ = std::make_unique<SimHostReader>(cdi_opts.proc_root, cdi_opts.dev_root);
  } else {
    host_reader_ = std::make_unique<cdi::OsHostReader>();
  }
  publisher_ = std::make_unique<cdi::Publisher>(cdi_opts, host_reader_.get());
  cdi_observer_ = std::make_unique<engine::CdiObserver>(publisher_.get());

  metrics::MigdMetricsOptions mopts;
  mopts.version = Version();
  mopts.driver = sim_.enabled ? "simulated" : "nvml";
  driver::NvmlDriver* drv_ptr = driver_.get();
  mopts.nvml_call_counts = [drv_ptr] { return drv_ptr->CallCounts(); };
  mopts.nvml_sessions_opened = [drv_ptr] { return drv_ptr->session().generation(); };
  mopts.publisher = publisher_.get();
  StatusOr<std::unique_ptr<metrics::MigdMetrics>> m =
      metrics::MigdMetrics::Create(&registry_, mopts);
  if (!m.ok()) return Failure{kExitStartup, "metrics: " + m.status().ToString()};
  metrics_ = std::move(*m);
  fanout_.Add(&hub_);
  fanout_.Add(metrics_.get());

  if (auto f = SetUpKubernetesEarly()) return f;

  engine::ManagerOptions opts;
  opts.boot_id = *boot;
  opts.adopt_existing_mig_instances = config_.adopt_existing_mig_instances;
  opts.demand_half_life_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(config_.lifecycle.demand_half_life).count();
  opts.reconcile_interval =
      std::chrono::duration_cast<Clock::Duration>(config_.lifecycle.reconcile_interval);
  opts.listener = &fanout_;
  // The reloadable policy is applied by SetPolicy below, so that a profile
  // this node does not offer is reported as the config mistake it is.
  StatusOr<std::unique_ptr<engine::Manager>> mgr =
      engine::Manager::Create(opts, *driver_, *store_, clock_, *owners_, cdi_observer_.get());
  if (!mgr.ok()) {
    const Status& s = mgr.status();
    if (s.code() == StatusCode::kUnavailable) {
      return Failure{kExitNvml, "NVML unavailable during recovery: " + s.ToString()};
    }
    if (s.code() == StatusCode::kFailedPrecondition || s.code() == StatusCode::kDataLoss) {
      return Failure{kExitRecovery,
                     "recovery failed closed (nothing on the GPUs was changed): " + s.ToString() +
                         ". See docs/operations.md (recovery) for how to resolve it"};
    }
    return Failure{kExitStartup, "starting the engine: " + s.ToString()};
  }
  manager_ = std::move(*mgr);
  if (Status s = manager_->SetPolicy(PolicyOf(config_)); !s.ok()) {
    return Failure{kExitConfig, "config " + ConfigSource(flags_) + ": " + std::string(s.message())};
  }
  metrics_->AttachManager(manager_.get());
  if (auto f = SetUpKubernetesLate()) return f;

  api::ServerInfo info;
  info.version = Version();
  if (StatusOr<driver::DriverVersions> v = driver_->GetVersions(); v.ok()) {
    info.driver_version = v->driver;
  }
  info.nvml_library = config_.nvml.library;
  info.simulated = sim_.enabled;
  info.started = clock_.Now();
  info.boot_id = *boot;
  api::ServiceOptions sopts;
  sopts.cdi = cdi_observer_.get();
  sopts.cdi_enabled = config_.cdi.enabled;
  service_ = std::make_unique<api::MigManagerService>(*manager_, hub_, info, sopts);

  api::ApiServerOptions aopts;
  aopts.socket_path = config_.api.socket;
  aopts.mode = static_cast<mode_t>(config_.api.socket_mode);
  if (!config_.api.socket_group.empty()) aopts.group = config_.api.socket_group;
  StatusOr<std::unique_ptr<api::ApiServer>> server = api::ApiServer::Start(aopts, service_.get());
  if (!server.ok()) {
    return Failure{kExitInUse, "cannot serve the API on " + config_.api.socket + ": " +
                                   server.status().ToString()};
  }
  api_server_ = std::move(*server);

  int metrics_port = 0;
  if (!config_.metrics.listen.empty()) {
    metrics_server_ = std::make_unique<metrics::MetricsHttpServer>(&registry_);
    StatusOr<int> port = metrics_server_->Start(config_.metrics.listen);
    if (!port.ok()) {
      return Failure{kExitInUse, "cannot serve metrics on " + config_.metrics.listen + ": " +
                                     port.status().ToString() +
                                     " (set metrics.listen / --metrics-listen to a free "
                                     "address, or \"\" to disable metrics)"};
    }
    metrics_port = *port;
  }

  manager_->StartReconciler();
  sd_notify(0, "READY=1\nSTATUS=serving");
  LogReady(metrics_port);
  return std::nullopt;
}

std::optional<Failure> Daemon::SetUpKubernetesEarly() {
  const KubernetesConfig& k = config_.kubernetes;
  const std::string& source = config_.recovery.owner_source;
#if !MIGD_HAVE_K8S
  if (k.enabled || source == "hami") {
    return Failure{kExitConfig,
                   "config " + ConfigSource(flags_) + ": " +
                       (k.enabled ? "kubernetes.enabled: true" : "recovery.ownerSource: hami") +
                       ": this migd was built without the Kubernetes frontends (src/k8s/"
                       "deviceplugin and src/k8s/apiserver); rebuild with them or turn it off"};
  }
#else
  if (k.enabled || source == "hami") {
    StatusOr<k8s::KubeConfig> kc = k.api_server.in_cluster
                                       ? k8s::InClusterConfig()
                                       : k8s::LoadKubeconfig(k.api_server.kubeconfig);
    if (!kc.ok()) {
      return Failure{kExitConfig,
                     "config " + ConfigSource(flags_) +
                         ": kubernetes.apiServer: " + kc.status().ToString() +
                         (k.api_server.in_cluster
                              ? " (inCluster: true needs migd to run in a pod with a service "
                                "account; else set inCluster: false and a kubeconfig)"
                              : "")};
    }
    StatusOr<std::unique_ptr<k8s::KubeClient>> client = k8s::KubeClient::Create(*kc);
    if (!client.ok()) {
      return Failure{kExitConfig, "config " + ConfigSource(flags_) +
                                      ": kubernetes.apiServer: " + client.status().ToString()};
    }
    kube_ = std::move(*client);
  }
  if (k.enabled) {
    // Serve and register before recovery: kubelet must see the plugin again
    // before any slow work (kubelet-apis.md §1.8).
    k8s::DevicePluginOptions dp;
    dp.plugin_dir = k.kubelet_dir + "/device-plugins";
    dp.resource_name = k.resource_name;
    StatusOr<std::unique_ptr<k8s::DevicePluginServer>> plugin =
        k8s::DevicePluginServer::Start(dp, &deferred_backend_);
    if (!plugin.ok()) {
      return Failure{kExitInUse, "cannot serve the kubelet device plugin in " + dp.plugin_dir +
                                     ": " + plugin.status().ToString() +
                                     " (is kubernetes.kubeletDir right, and its device-plugins "
                                     "directory mounted into migd?)"};
    }
    device_plugin_ = std::move(*plugin);
    spdlog::info("kubelet device plugin serving{}",
                 Fields()
                     .Add("socket", device_plugin_->socket_path())
                     .Add("resource", k.resource_name)
                     .Add("node", k.node_name));
  }
  if (source == "hami") {
    hami_pods_ = std::make_unique<k8s::KubeHamiPodLister>(*kube_, k.node_name);
    owners_ = std::make_unique<FailClosedOwnerSource>(
        std::make_unique<k8s::HamiOwnerSource>(*hami_pods_));
  }
#endif
  if (source == "podresources") {
    pod_resources_ = std::make_unique<k8s::PodResourcesClient>(
        k8s::PodResourcesClientOptions{.socket_path = k8s::PodResourcesSocketPath(k.kubelet_dir)});
    owners_ =
        std::make_unique<FailClosedOwnerSource>(std::make_unique<k8s::PodResourcesOwnerSource>(
            *pod_resources_,
            k8s::PodResourcesOwnerSourceOptions{.resource_name = k.resource_name}));
  }
  if (!owners_) owners_ = std::make_unique<engine::RecordsOwnerSource>();
  spdlog::info("recovery owner source{}", Fields().Add("source", owners_->name()));
  return std::nullopt;
}

std::optional<Failure> Daemon::SetUpKubernetesLate() {
#if MIGD_HAVE_K8S
  const KubernetesConfig& k = config_.kubernetes;
  if (!k.enabled) return std::nullopt;
  k8s::HamiBackendOptions hopts;
  hopts.node_name = k.node_name;
  hopts.cdi = cdi_observer_.get();
  hopts.cdi_enabled = config_.cdi.enabled;
  hopts.profile_allowlist = {config_.mig_profile_allowlist.begin(),
                             config_.mig_profile_allowlist.end()};
  hami_backend_ = std::make_unique<k8s::HamiBackend>(kube_.get(), manager_.get(), hopts);
  deferred_backend_.Set(hami_backend_.get());
  // Publishes hami.io/node-nvidia-register once, then releases the
  // instances of ended pods and re-publishes periodically.
  pod_watcher_ = std::make_unique<k8s::PodWatcher>(hami_backend_.get(), k8s::PodWatcherOptions{});
  pod_watcher_->Start();
#endif
  return std::nullopt;
}

void Daemon::LogReady(int metrics_port) {
  const engine::ManagerSnapshot snap = manager_->List();
  uint64_t active = 0, idle = 0, error = 0;
  for (const engine::InstanceView& v : snap.instances) {
    if (v.state == engine::InstanceState::kActive) ++active;
    if (v.state == engine::InstanceState::kIdle) ++idle;
    if (v.state == engine::InstanceState::kError) ++error;
  }
  const std::vector<engine::GpuView> gpus = manager_->Gpus();
  uint64_t mig_gpus = 0;
  for (const engine::GpuView& g : gpus) mig_gpus += g.model != nullptr ? 1 : 0;
  std::string metrics = "off";
  if (metrics_server_) {
    const size_t colon = config_.metrics.listen.rfind(':');
    metrics = config_.metrics.listen.substr(0, colon) + ":" + std::to_string(metrics_port);
  }
  spdlog::info("migd ready{}", Fields()
                                   .Add("version", Version())
                                   .Add("socket", config_.api.socket)
                                   .Add("metrics", metrics)
                                   .Add("gpus", gpus.size())
                                   .Add("mig_gpus", mig_gpus)
                                   .Add("active", active)
                                   .Add("idle", idle)
                                   .Add("error", error)
                                   .Add("foreign", snap.foreign.size())
                                   .Add("nvml", config_.nvml.library)
                                   .Add("simulated", sim_.enabled ? "true" : "false")
                                   .Add("state_dir", config_.state_dir)
                                   .Add("pid", ::getpid()));
}

void Daemon::Reload() {
  if (flags_.config_file.empty()) {
    spdlog::info("SIGHUP: no --config file; nothing to reload");
    return;
  }
  StatusOr<Config> next = ReadConfig(flags_, sim_);
  if (!next.ok()) {
    spdlog::error("config reload failed; keeping the running configuration{}",
                  Fields().Add("error", next.status().message()));
    return;
  }
  const ConfigDiff diff = DiffConfigs(config_, *next);
  if (!diff.applied.empty()) {
    if (Status s = manager_->SetPolicy(PolicyOf(*next)); !s.ok()) {
      spdlog::error("config reload rejected; keeping the running configuration{}",
                    Fields().Add("error", s.message()));
      return;
    }
    if (next->log.level != config_.log.level) {
      spdlog::set_level(spdlog::level::from_str(next->log.level));
    }
    config_ = MergeReloadable(config_, *next);
  }
  spdlog::info("config reloaded{}", Fields()
                                        .Add("file", flags_.config_file)
                                        .Add("applied", JoinKeys(diff.applied))
                                        .Add("needs_restart", JoinKeys(diff.needs_restart)));
  if (!diff.needs_restart.empty()) {
    spdlog::warn("config keys changed but not applied; restart migd to apply them{}",
                 Fields().Add("keys", JoinKeys(diff.needs_restart)));
  }
}

void Daemon::Run() {
  while (true) {
    signalfd_siginfo si{};
    const ssize_t n = ::read(signal_fd_, &si, sizeof(si));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(si))) {
      spdlog::error("reading signals failed; shutting down{}",
                    Fields().Add("error", std::strerror(errno)));
      return;
    }
    if (si.ssi_signo == SIGHUP) {
      Reload();
      continue;
    }
    spdlog::info("shutting down{}", Fields().Add("signal", ::strsignal(si.ssi_signo)));
    return;
  }
}

void Daemon::Teardown() {
  if (torn_down_) return;
  torn_down_ = true;
  if (manager_) sd_notify(0, "STOPPING=1");
  // Stop accepting, let in-flight calls finish (they use the Manager).
  if (api_server_) api_server_->Shutdown(kDrainDeadline);
#if MIGD_HAVE_K8S
  // kubelet's calls and the pod watcher use the Manager: stop them first.
  if (device_plugin_) device_plugin_->Stop();
  if (pod_watcher_) pod_watcher_->Stop();
  device_plugin_.reset();
  pod_watcher_.reset();
  hami_backend_.reset();
#endif
  if (metrics_server_) metrics_server_->Stop();
  if (manager_) manager_->StopReconciler();
  if (metrics_) metrics_->AttachManager(nullptr);
  api_server_.reset();
  service_.reset();
  hub_.Close();
  manager_.reset();
  const bool had_driver = driver_ != nullptr;
  driver_.reset();  // the one nvmlShutdown of the process
  metrics_server_.reset();
  store_.reset();
  if (state_dir_fd_ >= 0) ::close(state_dir_fd_);  // releases the flock
  state_dir_fd_ = -1;
  if (signal_fd_ >= 0) ::close(signal_fd_);
  signal_fd_ = -1;
  if (!sim_.temp_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(sim_.temp_dir, ec);
  }
  if (had_driver) spdlog::info("migd stopped{}", Fields().Add("pid", ::getpid()));
}

}  // namespace

const char* Version() { return MIGD_VERSION_STRING; }

int RunDaemon(const Flags& flags) {
  Daemon daemon(flags);
  if (std::optional<Failure> f = daemon.Setup()) {
    // Tear down first, so that NVML is closed and the lock released before
    // the process reports and exits.
    daemon.Teardown();
    std::fprintf(stderr, "migd: %s\n", f->message.c_str());
    spdlog::shutdown();
    return f->code;
  }
  daemon.Run();
  daemon.Teardown();
  spdlog::shutdown();
  return kExitOk;
}

}  // namespace migd::daemon
