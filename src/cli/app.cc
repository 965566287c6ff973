#include "cli/app.h"

#include <functional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

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

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += ',';
    out += item;
  }
  return out;
}

}  // namespace

int RunMigctl(const std::vector<std::string>& args, const Environment& env, std::ostream& out,
              std::ostream& err) {
  CLI::App app{"migctl: the command-line tool of migd, the NVIDIA MIG node agent"};
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 ok, 1 usage, 2 migd unreachable/unavailable (or NVML for probe), "
      "3 catalogue mismatch, 4 no placement, 5 not found, 6 other server error. "
      "Global flags (--socket, -o, --timeout, --color, --log-level; see `migctl --help`) may "
      "also follow the subcommand. See docs/migctl.md.");

  std::string socket = env.migd_socket.empty() ? std::string(kDefaultSocket) : env.migd_socket;
  std::string output = "table";
  std::string timeout = "30s";
  std::string color = "auto";
  std::string log_level = "warn";
  app.add_option("--socket", socket,
                 "migd's API socket (default $MIGD_SOCKET, else /run/migd/api.socket)")
      ->capture_default_str();
  app.add_option("-o,--output", output, "table, json or yaml")
      ->check(CLI::IsMember({"table", "json", "yaml"}))
      ->capture_default_str();
  app.add_option("--timeout", timeout, "Deadline of each call to migd, e.g. 500ms, 30s, 2m")
      ->capture_default_str();
  app.add_option("--color", color, "Colour the status picture: auto (on a TTY without "
                                   "NO_COLOR), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  app.add_option("--log-level", log_level,
                 "trace, debug, info, warn, error, critical or off (stderr)")
      ->capture_default_str();

  auto sub = [&app](const std::string& name, const std::string& help) {
    CLI::App* cmd = app.add_subcommand(name, help);
    cmd->fallthrough();  // global flags may follow the subcommand
    return cmd;
  };

  // Subcommands that talk to migd.
  StatusOptions status;
  uint32_t status_gpu = 0;
  int status_width = env.columns;
  CLI::App* status_cmd = sub(
      "status",
      "Draw every GPU as a row of memory slices: instances as labelled blocks coloured by "
      "state, free space, totals and fragmentation");
  CLI::Option* status_gpu_opt = status_cmd->add_option("--gpu", status_gpu, "Only this GPU index");
  status_cmd->add_option("--width", status_width, "Columns to draw in (default: the terminal's)")
      ->check(CLI::Range(20, 1000));

  ListOptions list;
  uint32_t list_gpu = 0;
  CLI::App* list_cmd = sub("list", "List the instances migd tracks and the foreign ones");
  CLI::Option* list_gpu_opt = list_cmd->add_option("--gpu", list_gpu, "Only this GPU index");
  list_cmd->add_option("--state", list.states,
                       "Only these states: active, idle, creating, reclaiming, deleting, error "
                       "(repeatable or comma-separated)");

  AllocateOptions allocate;
  CLI::App* allocate_cmd = sub(
      "allocate",
      "Allocate instances, all or none (reuses Idle ones, creates, reclaims Idle ones when "
      "needed). Repeating a request id replays its result.");
  allocate_cmd->add_option("--id", allocate.request_id, "Request id (unique per allocation)")
      ->required();
  allocate_cmd->add_option("--owner", allocate.owner, "Owner id of a non-Kubernetes client");
  allocate_cmd->add_option("--pod", allocate.pod, "Pod owner: NAMESPACE/NAME/UID[/CONTAINER]");
  allocate_cmd
      ->add_option("instances", allocate.items,
                   "Instances: [gpuN/]PROFILE[@START:SIZE], e.g. 3g.40gb gpu1/1g.10gb@6:1")
      ->required();

  ReleaseOptions release;
  CLI::App* release_cmd =
      sub("release", "Release instances: they become Idle and stay for reuse");
  CLI::Option* release_id =
      release_cmd->add_option("--id", release.request_id, "Every instance of this request");
  CLI::Option* release_mig =
      release_cmd->add_option("--mig", release.mig_uuid, "One instance, by MIG UUID");
  release_id->excludes(release_mig);

  PlanOptions offline_plan;
  std::vector<std::string> plan_items;
  CLI::App* plan_cmd = sub(
      "plan",
      "Dry run of allocate: what migd would reuse, create and reclaim now. With --layout FILE, "
      "plan offline on a layout file instead (no migd, no GPU; docs/planner.md)");
  plan_cmd->add_option("--layout", offline_plan.layout_file,
                       "Offline: planner input document (GPUs, models, occupied placements)");
  plan_cmd->add_option("--request", offline_plan.request,
                       "Instances, e.g. '3g.40gb,1g.10gb' or 'gpu1/3g.40gb@4:4'");
  plan_cmd->add_option("instances", plan_items, "Instances, as for allocate");

  ReclaimOptions reclaim;
  uint32_t reclaim_gpu = 0;
  CLI::App* reclaim_cmd =
      sub("reclaim", "Destroy Idle instances (never Active ones) to return their space");
  CLI::Option* reclaim_gpu_opt = reclaim_cmd->add_option("--gpu", reclaim_gpu, "Only this GPU");
  reclaim_cmd->add_option("--profile", reclaim.profile, "Only this profile, e.g. 1g.10gb");

  // Local subcommands.
  ProbeOptions probe;
  CLI::App* probe_cmd = sub(
      "probe",
      "Read-only NVML inventory: versions, bound symbols, GPUs, GI profiles and placements, "
      "live GI/CI pairs. Never creates, destroys or changes MIG mode.");
  probe_cmd->add_option("--nvml-library", probe.nvml_library,
                        "Path of the NVML library (default libnvidia-ml.so.1)");
  probe_cmd->add_flag("--compare-catalog", probe.compare_catalog,
                      "Compare NVML's profiles with the built-in catalogue; exit 3 on "
                      "differences");
  probe_cmd->add_flag("--hardware-check", probe.hardware_check,
                      "Also record the raw MIG-device answers (index walk, instance info "
                      "devices, UUID lookups) for scripts/hardware-check.sh; still read-only");

  SimStatsOptions stats;
  CLI::App* stats_cmd = sub(
      "sim-stats", "Per-function NVML call counters stored in a simulator state file");
  stats_cmd->add_option("--state", stats.state_file,
                        "Simulator state file (default $MIGD_SIM_STATE)");

  std::vector<const char*> argv = {"migctl"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e, out, err);  // prints help or the error
    return rc == 0 ? kExitOk : kExitUsage;
  }

  Status logging = InitLogging({.level = log_level, .to_stderr = true});
  if (!logging.ok()) {
    err << "migctl: " << logging.message() << "\n";
    return kExitUsage;
  }
  ClientOptions client;
  client.socket = socket;
  client.output = *ParseOutputFormat(output);  // validated by IsMember above
  StatusOr<std::chrono::milliseconds> deadline = ParseTimeout(timeout);
  if (!deadline.ok()) {
    err << "migctl: " << deadline.status().message() << "\n";
    return kExitUsage;
  }
  client.timeout = *deadline;
  client.color = color == "always" ? ColorMode::kAlways
                 : color == "never" ? ColorMode::kNever
                                    : ColorMode::kAuto;
  client.stdout_is_tty = env.stdout_is_tty;
  client.no_color_env = env.no_color;
  client.width = status_width;

  if (status_cmd->parsed()) {
    if (status_gpu_opt->count() > 0) status.gpu = status_gpu;
    return RunStatus(client, status, out, err);
  }
  if (list_cmd->parsed()) {
    if (list_gpu_opt->count() > 0) list.gpu = list_gpu;
    return RunList(client, list, out, err);
  }
  if (allocate_cmd->parsed()) return RunAllocate(client, allocate, out, err);
  if (release_cmd->parsed()) return RunRelease(client, release, out, err);
  if (reclaim_cmd->parsed()) {
    if (reclaim_gpu_opt->count() > 0) reclaim.gpu = reclaim_gpu;
    return RunReclaim(client, reclaim, out, err);
  }
  if (plan_cmd->parsed()) {
    if (offline_plan.layout_file.empty()) {
      RemotePlanOptions remote;
      if (!offline_plan.request.empty()) remote.items.push_back(offline_plan.request);
      remote.items.insert(remote.items.end(), plan_items.begin(), plan_items.end());
      return RunRemotePlan(client, remote, out, err);
    }
    if (!plan_items.empty()) {
      offline_plan.request = Join(
          offline_plan.request.empty()
              ? plan_items
              : std::vector<std::string>{offline_plan.request, Join(plan_items)});
    }
    return RunLocal(
        client.output,
        [&](const std::string& format, std::ostream& o) {
          PlanOptions p = offline_plan;
          p.output = format;
          return RunPlan(p, o, err);
        },
        out);
  }
  if (probe_cmd->parsed()) {
    return RunLocal(
        client.output,
        [&](const std::string& format, std::ostream& o) {
          ProbeOptions p = probe;
          p.output = format;
          return RunProbe(p, o, err);
        },
        out);
  }
  if (stats_cmd->parsed()) {
    return RunLocal(
        client.output,
        [&](const std::string& format, std::ostream& o) {
          SimStatsOptions s = stats;
          s.output = format;
          return RunSimStats(s, o, err);
        },
        out);
  }
  err << app.help();
  return kExitUsage;
}

}  // namespace migd::cli
