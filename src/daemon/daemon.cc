#include "daemon/daemon.h"

#include <absl/strings/str_join.h>
#include <grp.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "api/event_hub.h"
#include "api/server.h"
#include "api/service.h"
#include "base/boot_id.h"
#include "base/clock.h"
#include "base/file_util.h"
#include "base/logging.h"
#include "base/status.h"
#include "cdi/common_edits.h"
#include "cdi/host_reader.h"
#include "cdi/publisher.h"
#include "cdi/spec_writer.h"
#include "daemon/config.h"
#include "daemon/config_reload.h"
#include "daemon/effective_config.h"
#include "daemon/kubernetes_frontends.h"
#include "daemon/planner_wiring.h"
#include "daemon/signals.h"
#include "daemon/sim_host_reader.h"
#include "daemon/simulation.h"
#include "daemon/startup_failure.h"
#include "daemon/state_dir.h"
#include "driver/nvml/nvml_driver.h"
#include "engine/cdi_observer.h"
#include "engine/events.h"
#include "engine/health_monitor.h"
#include "engine/manager.h"
#include "metrics/http_server.h"
#include "metrics/migd_collector.h"
#include "metrics/registry.h"
#include "store/record_store.h"

#ifndef MIGD_VERSION_STRING
#define MIGD_VERSION_STRING "unknown"
#endif

namespace migd::daemon {
namespace {

// How long SIGTERM lets in-flight API calls finish before they are cancelled.
constexpr auto kDrainDeadline = std::chrono::seconds(10);

std::string JoinKeys(const std::vector<std::string>& keys) {
  return keys.empty() ? "-" : absl::StrJoin(keys, ",");
}

// The process: startup in the order daemon.h documents, the signal loop,
// shutdown in the reverse order. Each SetUp* step returns why migd stops, if
// it does; what was set up is torn down by Teardown.
class Daemon {
 public:
  explicit Daemon(Flags flags) : flags_(std::move(flags)) {}
  ~Daemon() { Teardown(); }

  MaybeFailure Setup();
  // Serves until SIGTERM/SIGINT; handles SIGHUP.
  void Run();
  // Shutdown in the documented order. Idempotent.
  void Teardown();

 private:
  Failure ConfigFailure(std::string_view what) const {
    return Failure{kExitConfig, "config " + ConfigSource(flags_) + ": " + std::string(what)};
  }
  MaybeFailure SetUpConfig();
  MaybeFailure SetUpStore();
  MaybeFailure SetUpNvml();
  MaybeFailure SetUpCdi();
  // Where the driver's common edits come from (cdi/common_edits.h); fills
  // `opts` and common_edits_, logs the source and every warning.
  MaybeFailure SetUpCommonEdits(cdi::Options* opts);
  // planner.policy: value: the ValueService (not started), which metrics
  // read and the engine is handed.
  MaybeFailure SetUpPlanner();
  MaybeFailure SetUpMetrics();
  MaybeFailure SetUpEngine();
  MaybeFailure SetUpServers(int* metrics_port);
  // The one GpuEventWatch owner of the process (engine/health_monitor.h),
  // started inside the NVML session; a driver without an event API, or a
  // failure to open the watch, is one warning and migd runs without it.
  void StartHealthMonitor();
  void Reload();
  void LogReady(int metrics_port);

  Flags flags_;
  Simulation sim_;
  cdi::CommonEdits common_edits_;
  Config config_;
  std::string boot_id_;
  SignalWaiter signals_;
  StateDirLock state_dir_;
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
  KubernetesFrontends kubernetes_;  // its owner source outlives the Manager
  // planner.policy: value (null for cost): started after the Manager is
  // created, stopped before it is stopped.
  std::shared_ptr<planner::ValueService> values_;
  std::unique_ptr<engine::Manager> manager_;
  // Stopped in Teardown before the Manager and the driver (its session) go.
  std::unique_ptr<engine::HealthMonitor> health_;
  std::unique_ptr<api::MigManagerService> service_;
  std::unique_ptr<api::ApiServer> api_server_;
  std::unique_ptr<metrics::MetricsHttpServer> metrics_server_;
  bool torn_down_ = false;
};

MaybeFailure Daemon::Setup() {
  if (MaybeFailure f = SetUpSimulation(&flags_, &sim_)) return f;
  if (MaybeFailure f = SetUpConfig()) return f;
  if (MaybeFailure f = signals_.Block()) return f;
  // A live migd on our socket: refuse before touching NVML or the records.
  if (api::ProbeUnixSocket(config_.api.socket).ok()) {
    return Failure{kExitInUse, "another migd is serving on " + config_.api.socket +
                                   "; stop it first (or use another --socket)"};
  }
  if (MaybeFailure f = SetUpStore()) return f;
  if (MaybeFailure f = SetUpNvml()) return f;
  if (MaybeFailure f = SetUpCdi()) return f;
  if (MaybeFailure f = SetUpPlanner()) return f;
  if (MaybeFailure f = SetUpMetrics()) return f;
  if (MaybeFailure f = kubernetes_.StartBeforeRecovery(config_, ConfigSource(flags_), &fanout_)) {
    return f;
  }
  if (MaybeFailure f = SetUpEngine()) return f;
  if (MaybeFailure f =
          kubernetes_.StartAfterRecovery(config_, manager_.get(), cdi_observer_.get(), clock_)) {
    return f;
  }
  int metrics_port = 0;
  if (MaybeFailure f = SetUpServers(&metrics_port)) return f;
  manager_->StartReconciler();
  StartHealthMonitor();
  sd_notify(0, "READY=1\nSTATUS=serving");
  LogReady(metrics_port);
  return std::nullopt;
}

// Read once without the sim proc root (unknown until NVML created the
// machine) to validate early; SetUpNvml re-reads it when it is known.
MaybeFailure Daemon::SetUpConfig() {
  StatusOr<Config> config = ReadEffectiveConfig(flags_, sim_);
  if (!config.ok()) return Failure{kExitConfig, std::string(config.status().message())};
  config_ = *config;
  if (Status s = InitLogging({.level = config_.log.level}); !s.ok()) {
    return Failure{kExitConfig, s.ToString()};
  }
  const std::string& g = config_.api.socket_group;
  const bool numeric = g.find_first_not_of("0123456789") == std::string::npos;
  if (!g.empty() && !numeric && ::getgrnam(g.c_str()) == nullptr) {
    return ConfigFailure("api.socketGroup: no group named \"" + g +
                         "\" on this host (create it or use a numeric gid)");
  }
  return std::nullopt;
}

MaybeFailure Daemon::SetUpStore() {
  if (MaybeFailure f = state_dir_.Acquire(config_.state_dir)) return f;
  StatusOr<std::string> boot = ReadBootId();
  if (!boot.ok()) return Failure{kExitStartup, "reading the boot id: " + boot.status().ToString()};
  boot_id_ = *boot;
  StatusOr<std::unique_ptr<store::RecordStore>> store =
      store::RecordStore::Open(config_.state_dir, clock_, {.boot_id = boot_id_});
  if (!store.ok()) return Failure{kExitStateDir, store.status().ToString()};
  store_ = std::move(*store);
  return std::nullopt;
}

MaybeFailure Daemon::SetUpNvml() {
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
  if (!sim_.enabled) return std::nullopt;
  if (MaybeFailure f = ReadSimProcRoot(&sim_)) return f;
  spdlog::info("simulated GPUs{}", Fields()
                                       .Add("spec", *flags_.simulate)
                                       .Add("state", std::getenv("MIGD_SIM_STATE"))
                                       .Add("proc_root", sim_.proc_root)
                                       .Add("temporary", sim_.temp_dir.empty() ? "false" : "true"));
  StatusOr<Config> config = ReadEffectiveConfig(flags_, sim_);
  if (!config.ok()) return Failure{kExitConfig, std::string(config.status().message())};
  config_ = *config;
  return std::nullopt;
}

MaybeFailure Daemon::SetUpCdi() {
  cdi::Options opts;
  opts.enabled = config_.cdi.enabled;
  opts.kind.vendor = config_.cdi.vendor;
  opts.kind.device_class = config_.cdi.device_class;
  opts.spec_dir = config_.cdi.spec_dir;
  opts.common_edits_from = config_.cdi.common_edits_from;
  opts.proc_root = config_.cdi.proc_root;
  opts.dev_root = config_.cdi.dev_root;
  if (Status s = cdi::Publisher::ValidateOptions(opts); !s.ok()) {
    return ConfigFailure("cdi: " + std::string(s.message()));
  }
  if (opts.enabled) {
    if (Status s = MakeDirectories(opts.spec_dir, 0755); !s.ok()) {
      return Failure{kExitStartup,
                     "cannot create cdi.specDir " + opts.spec_dir + ": " + s.ToString()};
    }
    // Like stateDir: a spec dir others can write is refused before migd
    // writes (or sweeps) anything there (docs/security.md).
    std::string warning;
    if (Status s = cdi::CheckSpecDir(opts.spec_dir, &warning); !s.ok()) {
      return Failure{kExitStartup, std::string(s.message())};
    }
    if (!warning.empty()) spdlog::warn("{}", warning);
  }
  if (sim_.enabled) {
    host_reader_ = std::make_unique<SimHostReader>(opts.proc_root, opts.dev_root);
  } else {
    host_reader_ = std::make_unique<cdi::OsHostReader>();
  }
  if (MaybeFailure f = SetUpCommonEdits(&opts)) return f;
  publisher_ = std::make_unique<cdi::Publisher>(opts, host_reader_.get());
  cdi_observer_ = std::make_unique<engine::CdiObserver>(publisher_.get());
  return std::nullopt;
}

MaybeFailure Daemon::SetUpCommonEdits(cdi::Options* opts) {
  if (!opts->enabled) return std::nullopt;  // no specs, nothing to add to them
  cdi::CommonEditsOptions c;
  c.explicit_path = config_.cdi.common_edits_from;
  if (sim_.enabled) {
    // A simulated node's driver files: under <simulation dir>/host/, never
    // the host's (docs/simulator.md).
    const std::string host = sim_.dir + "/host";
    c.spec_dirs = {host + "/etc/cdi", host + "/var/run/cdi"};
    c.nvidia_ctk = {host + "/usr/bin/nvidia-ctk"};
  }
  // Not *.json or *.yaml: the runtime does not load it as a spec.
  c.cache_file = opts->spec_dir + "/.migd-common-edits";
  if (StatusOr<driver::DriverVersions> v = driver_->GetVersions(); v.ok()) {
    c.driver_version = v->driver;
  }
  c.max_version = opts->max_version;
  StatusOr<cdi::CommonEdits> found =
      cdi::CommonEditsResolver(std::move(c), host_reader_.get()).Resolve();
  if (!found.ok()) return ConfigFailure(found.status().message());
  common_edits_ = std::move(*found);
  for (const std::string& w : common_edits_.warnings) {
    spdlog::warn("CDI common edits: {}", w);
  }
  spdlog::info("CDI common edits{}",
               Fields()
                   .Add("source", cdi::CommonEditsSourceName(common_edits_.source))
                   .Add("detail", common_edits_.summary));
  opts->common_edits_from = common_edits_.path;
  if (common_edits_.source == cdi::CommonEditsSource::kGenerated) {
    opts->common_edits = common_edits_.edits;
  }
  return std::nullopt;
}

MaybeFailure Daemon::SetUpPlanner() {
  StatusOr<std::shared_ptr<planner::ValueService>> values = MakeValueService(
      config_.planner, std::make_unique<planner::BackgroundExecutor>(/*start=*/false));
  if (!values.ok()) return ConfigFailure(values.status().message());
  values_ = *std::move(values);
  return std::nullopt;
}

MaybeFailure Daemon::SetUpMetrics() {
  metrics::MigdMetricsOptions opts;
  opts.version = Version();
  opts.driver = sim_.enabled ? "simulated" : "nvml";
  driver::NvmlDriver* drv = driver_.get();
  opts.nvml_call_counts = [drv] { return drv->CallCounts(); };
  opts.nvml_sessions_opened = [drv] { return drv->session().generation(); };
  opts.publisher = publisher_.get();
  opts.values = values_;
  StatusOr<std::unique_ptr<metrics::MigdMetrics>> m =
      metrics::MigdMetrics::Create(&registry_, opts);
  if (!m.ok()) return Failure{kExitStartup, "metrics: " + m.status().ToString()};
  metrics_ = std::move(*m);
  fanout_.Add(&hub_);
  fanout_.Add(metrics_.get());
  return std::nullopt;
}

// Recovery: Manager::Create checks every record against the GPUs.
MaybeFailure Daemon::SetUpEngine() {
  engine::ManagerOptions opts;
  opts.boot_id = boot_id_;
  opts.adopt_existing_mig_instances = config_.adopt_existing_mig_instances;
  opts.demand_half_life_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(config_.lifecycle.demand_half_life).count();
  opts.reconcile_interval =
      std::chrono::duration_cast<Clock::Duration>(config_.lifecycle.reconcile_interval);
  opts.listener = &fanout_;
  opts.values = values_;
  StatusOr<planner::ReuseMargins> margin = ReuseMarginOf(config_.planner);
  if (!margin.ok()) return ConfigFailure(margin.status().message());
  opts.reuse_margin = margin->one_gpu;
  opts.reuse_margin_several_gpus = margin->several_gpus;
  // The reloadable policy is applied by SetPolicy below, so that a profile
  // this node does not offer is reported as the config mistake it is.
  StatusOr<std::unique_ptr<engine::Manager>> mgr = engine::Manager::Create(
      opts, *driver_, *store_, clock_, kubernetes_.owner_source(), cdi_observer_.get());
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
  if (Status s = manager_->SetPolicy(PolicyOf(config_)); !s.ok()) return ConfigFailure(s.message());
  if (values_) values_->Start();
  spdlog::info("planner{}", Fields()
                                .Add("policy", config_.planner.policy)
                                .Add("objective", config_.planner.objective)
                                .Add("drift_threshold", config_.planner.drift_threshold)
                                .Add("multi_gpu", config_.planner.multi_gpu)
                                .Add("half_life_arrivals", config_.planner.half_life_arrivals)
                                .Add("min_arrivals", config_.planner.min_arrivals)
                                .Add("reuse_margin", config_.planner.reuse_margin));
  metrics_->AttachManager(manager_.get());
  return std::nullopt;
}

MaybeFailure Daemon::SetUpServers(int* metrics_port) {
  api::ServerInfo info;
  info.version = Version();
  if (StatusOr<driver::DriverVersions> v = driver_->GetVersions(); v.ok()) {
    info.driver_version = v->driver;
  }
  info.nvml_library = config_.nvml.library;
  info.simulated = sim_.enabled;
  info.started = clock_.Now();
  info.boot_id = boot_id_;
  info.cdi_common_edits = config_.cdi.enabled ? common_edits_.summary : "cdi disabled";
  info.warnings = common_edits_.warnings;
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
  if (config_.metrics.listen.empty()) return std::nullopt;
  metrics_server_ = std::make_unique<metrics::MetricsHttpServer>(&registry_);
  StatusOr<int> port = metrics_server_->Start(config_.metrics.listen);
  if (!port.ok()) {
    return Failure{kExitInUse, "cannot serve metrics on " + config_.metrics.listen + ": " +
                                   port.status().ToString() +
                                   " (set metrics.listen / --metrics-listen to a free "
                                   "address, or \"\" to disable metrics)"};
  }
  *metrics_port = *port;
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
                                   .Add("state_fsync", store_->syncs() ? "on" : "off")
                                   .Add("pid", ::getpid()));
}

void Daemon::Reload() {
  if (flags_.config_file.empty()) {
    spdlog::info("SIGHUP: no --config file; nothing to reload");
    return;
  }
  StatusOr<Config> next = ReadEffectiveConfig(flags_, sim_);
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
  std::string signal;
  while (signals_.Wait(&signal) == SignalWaiter::Event::kReload) Reload();
  spdlog::info("shutting down{}", Fields().Add("signal", signal));
}

void Daemon::StartHealthMonitor() {
  if (!config_.health.enabled) {
    spdlog::info("health: GPU event monitoring disabled (health.enabled: false)");
    return;
  }
  std::vector<GpuIndex> gpus;
  for (const engine::GpuView& g : manager_->Gpus()) {
    if (g.model != nullptr) gpus.push_back(g.info.index);
  }
  engine::HealthOptions options;
  options.ignored_xids.clear();
  options.ignored_xids.insert(config_.health.ignored_xids.begin(),
                              config_.health.ignored_xids.end());
  options.clear_recovered_gpus = config_.health.clear_recovered_gpus;
  options.recovery_probe =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.health.recovery_probe_interval);
  StatusOr<std::unique_ptr<engine::HealthMonitor>> m =
      engine::HealthMonitor::Start(*driver_, gpus, std::move(options), manager_->health_sink());
  if (!m.ok()) {
    spdlog::warn("health: no GPU event monitoring (Xid errors and lost GPUs will not mark "
                 "instances Unhealthy): {}",
                 m.status().ToString());
    return;
  }
  health_ = std::move(m).value();
}

void Daemon::Teardown() {
  if (torn_down_) return;
  torn_down_ = true;
  if (manager_) sd_notify(0, "STOPPING=1");
  // Stop accepting, let in-flight calls finish (they use the Manager).
  if (api_server_) api_server_->Shutdown(kDrainDeadline);
  // kubelet's calls and the pod watcher use the Manager: stop them first.
  kubernetes_.Stop();
  if (metrics_server_) metrics_server_->Stop();
  // No solve runs from here on; the Manager keeps the last values.
  if (values_) values_->Stop();
  if (health_) health_->Stop();  // before the Manager (its sink) and nvmlShutdown
  health_.reset();
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
  state_dir_.Release();  // releases the flock
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
  if (MaybeFailure f = daemon.Setup()) {
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
