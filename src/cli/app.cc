#include "cli/app.h"

#include <absl/strings/str_join.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/logging.h"
#include "cli/client.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/plan.h"
#include "cli/probe.h"
#include "cli/sim_stats.h"

namespace migd::cli {
namespace {

// probe, sim-stats and offline plan print table or JSON themselves; for YAML
// they run in JSON mode into a buffer that is then converted, so the YAML
// carries exactly the JSON's fields.
int RunLocal(OutputFormat format, const std::function<int(const std::string&, std::ostream&)>& run,
             std::ostream& out) {
  if (format != OutputFormat::kYaml) {
    return run(format == OutputFormat::kJson ? "json" : "table", out);
  }
  std::ostringstream buffer;
  const int rc = run("json", buffer);
  try {
    out << JsonToYaml(nlohmann::ordered_json::parse(buffer.str()));
  } catch (const nlohmann::json::exception&) {
    out << buffer.str();  // not a document (an error path printed nothing useful)
  }
  return rc;
}

// Every flag of migctl, bound to where its value goes; one Add* per
// subcommand. Run() dispatches to the subcommand that was parsed.
class CommandLine {
 public:
  explicit CommandLine(const Environment& env)
      : env_(env),
        socket_(env.migd_socket.empty() ? std::string(kDefaultSocket) : env.migd_socket),
        status_width_(env.columns) {
    app_.require_subcommand(1);
    app_.footer(
        "Exit codes: 0 ok, 1 usage, 2 migd unreachable/unavailable (or NVML for probe), "
        "3 catalogue mismatch, 4 no placement, 5 not found, 6 other server error. "
        "Global flags (--socket, -o, --timeout, --color, --log-level; see `migctl --help`) may "
        "also follow the subcommand. See docs/migctl.md.");
    AddGlobalFlags();
    AddStatus();
    AddList();
    AddAllocate();
    AddRelease();
    AddPlan();
    AddReclaim();
    AddHealth();
    AddProbe();
    AddSimStats();
  }

  // Parses `args`; on a parse error (or --help) prints and returns the exit code.
  std::optional<int> Parse(const std::vector<std::string>& args, std::ostream& out,
                           std::ostream& err) {
    std::vector<const char*> argv = {"migctl"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    try {
      app_.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      const int rc = app_.exit(e, out, err);  // prints help or the error
      return rc == 0 ? kExitOk : kExitUsage;
    }
    return std::nullopt;
  }

  int Run(std::ostream& out, std::ostream& err);

 private:
  CLI::App* Sub(const std::string& name, const std::string& help) {
    CLI::App* cmd = app_.add_subcommand(name, help);
    cmd->fallthrough();  // global flags may follow the subcommand
    return cmd;
  }
  void AddGlobalFlags();
  void AddStatus();
  void AddList();
  void AddAllocate();
  void AddRelease();
  void AddPlan();
  void AddReclaim();
  void AddHealth();
  void AddProbe();
  void AddSimStats();
  // The global flags as ClientOptions; exit code and message on a bad one.
  std::optional<int> MakeClientOptions(ClientOptions* client, std::ostream& err);
  int RunPlanCommand(const ClientOptions& client, std::ostream& out, std::ostream& err);

  const Environment& env_;
  CLI::App app_{"migctl: the command-line tool of migd, the NVIDIA MIG node agent"};
  std::string socket_;
  std::string output_ = "table";
  std::string timeout_ = "30s";
  std::string color_ = "auto";
  std::string log_level_ = "warn";

  CLI::App* status_cmd_ = nullptr;
  CLI::Option* status_gpu_opt_ = nullptr;
  uint32_t status_gpu_ = 0;
  int status_width_;
  CLI::App* list_cmd_ = nullptr;
  CLI::Option* list_gpu_opt_ = nullptr;
  uint32_t list_gpu_ = 0;
  ListOptions list_;
  CLI::App* allocate_cmd_ = nullptr;
  AllocateOptions allocate_;
  CLI::App* release_cmd_ = nullptr;
  ReleaseOptions release_;
  CLI::App* plan_cmd_ = nullptr;
  PlanOptions offline_plan_;
  std::vector<std::string> plan_items_;
  CLI::App* reclaim_cmd_ = nullptr;
  CLI::Option* reclaim_gpu_opt_ = nullptr;
  uint32_t reclaim_gpu_ = 0;
  ReclaimOptions reclaim_;
  CLI::App* health_clear_cmd_ = nullptr;
  HealthClearOptions health_clear_;
  CLI::App* probe_cmd_ = nullptr;
  ProbeOptions probe_;
  CLI::App* stats_cmd_ = nullptr;
  SimStatsOptions stats_;
};

void CommandLine::AddGlobalFlags() {
  app_.add_option("--socket", socket_,
                  "migd's API socket (default $MIGD_SOCKET, else /run/migd/api.socket)")
      ->capture_default_str();
  app_.add_option("-o,--output", output_, "table, json or yaml")
      ->check(CLI::IsMember({"table", "json", "yaml"}))
      ->capture_default_str();
  app_.add_option("--timeout", timeout_, "Deadline of each call to migd, e.g. 500ms, 30s, 2m")
      ->capture_default_str();
  app_.add_option("--color", color_,
                  "Colour the status picture: auto (on a TTY without NO_COLOR), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  app_.add_option("--log-level", log_level_,
                  "trace, debug, info, warn, error, critical or off (stderr)")
      ->capture_default_str();
}

void CommandLine::AddStatus() {
  status_cmd_ = Sub("status",
                    "Draw every GPU as a row of memory slices: instances as labelled blocks "
                    "coloured by state, free space, totals and fragmentation");
  status_gpu_opt_ = status_cmd_->add_option("--gpu", status_gpu_, "Only this GPU index");
  status_cmd_->add_option("--width", status_width_, "Columns to draw in (default: the terminal's)")
      ->check(CLI::Range(20, 1000));
}

void CommandLine::AddList() {
  list_cmd_ = Sub("list", "List the instances migd tracks and the foreign ones");
  list_gpu_opt_ = list_cmd_->add_option("--gpu", list_gpu_, "Only this GPU index");
  list_cmd_->add_option("--state", list_.states,
                        "Only these states: active, idle, creating, reclaiming, deleting, error "
                        "(repeatable or comma-separated)");
}

void CommandLine::AddAllocate() {
  allocate_cmd_ = Sub("allocate",
                      "Allocate instances, all or none (reuses Idle ones, creates, reclaims Idle "
                      "ones when needed). Repeating a request id replays its result.");
  allocate_cmd_->add_option("--id", allocate_.request_id, "Request id (unique per allocation)")
      ->required();
  allocate_cmd_->add_option("--owner", allocate_.owner, "Owner id of a non-Kubernetes client");
  allocate_cmd_->add_option("--pod", allocate_.pod, "Pod owner: NAMESPACE/NAME/UID[/CONTAINER]");
  allocate_cmd_
      ->add_option("instances", allocate_.items,
                   "Instances: [gpuN/]PROFILE[@START:SIZE], e.g. 3g.40gb gpu1/1g.10gb@6:1")
      ->required();
}

void CommandLine::AddRelease() {
  release_cmd_ = Sub("release", "Release instances: they become Idle and stay for reuse");
  CLI::Option* id =
      release_cmd_->add_option("--id", release_.request_id, "Every instance of this request");
  CLI::Option* mig =
      release_cmd_->add_option("--mig", release_.mig_uuid, "One instance, by MIG UUID");
  id->excludes(mig);
}

void CommandLine::AddPlan() {
  plan_cmd_ = Sub("plan",
                  "Dry run of allocate: what migd would reuse, create and reclaim now. With "
                  "--layout FILE, plan offline on a layout file instead (no migd, no GPU; "
                  "docs/planner.md)");
  plan_cmd_->add_option("--layout", offline_plan_.layout_file,
                        "Offline: planner input document (GPUs, models, occupied placements)");
  plan_cmd_->add_option("--request", offline_plan_.request,
                        "Instances, e.g. '3g.40gb,1g.10gb' or 'gpu1/3g.40gb@4:4'");
  plan_cmd_->add_option("--policy", offline_plan_.policy,
                        "Offline: value (default; values solved for the file's demand) or "
                        "cost (the cost order), as planner.policy");
  plan_cmd_->add_option("--objective", offline_plan_.objective,
                        "Offline, value policy: count or slices (slice-weighted acceptance)");
  plan_cmd_->add_option("--load", offline_plan_.load,
                        "Offline, value policy: offered load per GPU the values assume (0.9)");
  plan_cmd_->add_option("--reuse-margin", offline_plan_.reuse_margin,
                        "Offline, value policy: auto, off or the value an Idle instance may give "
                        "up against the best create, as planner.reuseMargin");
  plan_cmd_->add_option("instances", plan_items_, "Instances, as for allocate");
}

void CommandLine::AddReclaim() {
  reclaim_cmd_ = Sub("reclaim", "Destroy Idle instances (never Active ones) to return their space");
  reclaim_gpu_opt_ = reclaim_cmd_->add_option("--gpu", reclaim_gpu_, "Only this GPU");
  reclaim_cmd_->add_option("--profile", reclaim_.profile, "Only this profile, e.g. 1g.10gb");
}

void CommandLine::AddHealth() {
  CLI::App* health = Sub("health", "Health marks of GPUs and instances (docs/health.md)");
  health->require_subcommand(1);
  health_clear_cmd_ = health->add_subcommand(
      "clear",
      "Clear the health marks of a GPU and of every instance on it, durably, once the fault "
      "is fixed: the GPU takes new allocations and kubelet sees its devices Healthy again");
  health_clear_cmd_->fallthrough();
  health_clear_cmd_->add_option("--gpu", health_clear_.gpu, "GPU index (migctl status lists them)")
      ->required();
}

void CommandLine::AddProbe() {
  probe_cmd_ = Sub("probe",
                   "Read-only NVML inventory: versions, bound symbols, GPUs, GI profiles and "
                   "placements, live GI/CI pairs. Never creates, destroys or changes MIG mode.");
  probe_cmd_->add_option("--nvml-library", probe_.nvml_library,
                         "Path of the NVML library (default libnvidia-ml.so.1)");
  probe_cmd_->add_flag("--compare-catalog", probe_.compare_catalog,
                       "Compare NVML's profiles with the built-in catalogue; exit 3 on "
                       "differences");
  probe_cmd_->add_flag("--hardware-check", probe_.hardware_check,
                       "Also record the raw MIG-device answers (index walk, instance info "
                       "devices, UUID lookups) for scripts/hardware-check.sh; still read-only");
}

void CommandLine::AddSimStats() {
  stats_cmd_ = Sub("sim-stats", "Per-function NVML call counters stored in a simulator state file");
  stats_cmd_->add_option("--state", stats_.state_file,
                         "Simulator state file (default $MIGD_SIM_STATE)");
}

std::optional<int> CommandLine::MakeClientOptions(ClientOptions* client, std::ostream& err) {
  Status logging = InitLogging({.level = log_level_, .to_stderr = true});
  if (!logging.ok()) {
    err << "migctl: " << logging.message() << "\n";
    return kExitUsage;
  }
  client->socket = socket_;
  client->output = *ParseOutputFormat(output_);  // validated by IsMember above
  StatusOr<std::chrono::milliseconds> deadline = ParseTimeout(timeout_);
  if (!deadline.ok()) {
    err << "migctl: " << deadline.status().message() << "\n";
    return kExitUsage;
  }
  client->timeout = *deadline;
  client->color = color_ == "always"  ? ColorMode::kAlways
                  : color_ == "never" ? ColorMode::kNever
                                      : ColorMode::kAuto;
  client->stdout_is_tty = env_.stdout_is_tty;
  client->no_color_env = env_.no_color;
  client->width = status_width_;
  return std::nullopt;
}

// Online without --layout (migd plans), offline with it (this process plans).
int CommandLine::RunPlanCommand(const ClientOptions& client, std::ostream& out, std::ostream& err) {
  if (offline_plan_.layout_file.empty()) {
    RemotePlanOptions remote;
    if (!offline_plan_.request.empty()) remote.items.push_back(offline_plan_.request);
    remote.items.insert(remote.items.end(), plan_items_.begin(), plan_items_.end());
    return RunRemotePlan(client, remote, out, err);
  }
  PlanOptions plan = offline_plan_;
  if (!plan_items_.empty()) {
    if (!plan.request.empty()) plan_items_.insert(plan_items_.begin(), plan.request);
    plan.request = absl::StrJoin(plan_items_, ",");
  }
  return RunLocal(
      client.output,
      [&](const std::string& format, std::ostream& o) {
        PlanOptions p = plan;
        p.output = format;
        return RunPlan(p, o, err);
      },
      out);
}

int CommandLine::Run(std::ostream& out, std::ostream& err) {
  ClientOptions client;
  if (std::optional<int> rc = MakeClientOptions(&client, err)) return *rc;
  if (status_cmd_->parsed()) {
    StatusOptions status;
    if (status_gpu_opt_->count() > 0) status.gpu = status_gpu_;
    return RunStatus(client, status, out, err);
  }
  if (list_cmd_->parsed()) {
    if (list_gpu_opt_->count() > 0) list_.gpu = list_gpu_;
    return RunList(client, list_, out, err);
  }
  if (allocate_cmd_->parsed()) return RunAllocate(client, allocate_, out, err);
  if (release_cmd_->parsed()) return RunRelease(client, release_, out, err);
  if (reclaim_cmd_->parsed()) {
    if (reclaim_gpu_opt_->count() > 0) reclaim_.gpu = reclaim_gpu_;
    return RunReclaim(client, reclaim_, out, err);
  }
  if (health_clear_cmd_->parsed()) return RunHealthClear(client, health_clear_, out, err);
  if (plan_cmd_->parsed()) return RunPlanCommand(client, out, err);
  if (probe_cmd_->parsed()) {
    return RunLocal(
        client.output,
        [&](const std::string& format, std::ostream& o) {
          ProbeOptions p = probe_;
          p.output = format;
          return RunProbe(p, o, err);
        },
        out);
  }
  if (stats_cmd_->parsed()) {
    return RunLocal(
        client.output,
        [&](const std::string& format, std::ostream& o) {
          SimStatsOptions s = stats_;
          s.output = format;
          return RunSimStats(s, o, err);
        },
        out);
  }
  err << app_.help();
  return kExitUsage;
}

}  // namespace

int RunMigctl(const std::vector<std::string>& args, const Environment& env, std::ostream& out,
              std::ostream& err) {
  CommandLine command_line(env);
  if (std::optional<int> rc = command_line.Parse(args, out, err)) return *rc;
  return command_line.Run(out, err);
}

}  // namespace migd::cli
