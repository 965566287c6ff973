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

// The global flags (they may also follow the subcommand).
struct GlobalFlags {
  std::string socket;
  std::string output = "table";
  std::string timeout = "30s";
  std::string color = "auto";
  std::string log_level = "warn";
};

// Every subcommand and the options CLI11 parses into. Not movable: CLI11
// keeps pointers to the members.
struct Commands {
  Commands() = default;
  Commands(const Commands&) = delete;
  Commands& operator=(const Commands&) = delete;

  CLI::App* status_cmd = nullptr;
  StatusOptions status;
  uint32_t status_gpu = 0;
  CLI::Option* status_gpu_opt = nullptr;
  int status_width = 100;

  CLI::App* list_cmd = nullptr;
  ListOptions list;
  uint32_t list_gpu = 0;
  CLI::Option* list_gpu_opt = nullptr;

  CLI::App* allocate_cmd = nullptr;
  AllocateOptions allocate;

  CLI::App* release_cmd = nullptr;
  ReleaseOptions release;

  CLI::App* plan_cmd = nullptr;
  PlanOptions offline_plan;
  std::vector<std::string> plan_items;

  CLI::App* reclaim_cmd = nullptr;
  ReclaimOptions reclaim;
  uint32_t reclaim_gpu = 0;
  CLI::Option* reclaim_gpu_opt = nullptr;

  CLI::App* probe_cmd = nullptr;
  ProbeOptions probe;

  CLI::App* stats_cmd = nullptr;
  SimStatsOptions stats;
};

void AddGlobalFlags(CLI::App& app, GlobalFlags& g) {
  app.add_option("--socket", g.socket,
                 "migd's API socket (default $MIGD_SOCKET, else /run/migd/api.socket)")
      ->capture_default_str();
  app.add_option("-o,--output", g.output, "table, json or yaml")
      ->check(CLI::IsMember({"table", "json", "yaml"}))
      ->capture_default_str();
  app.add_option("--timeout", g.timeout, "Deadline of each call to migd, e.g. 500ms, 30s, 2m")
      ->capture_default_str();
  app.add_option("--color", g.color,
                 "Colour the status picture: auto (on a TTY without "
                 "NO_COLOR), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  app.add_option("--log-level", g.log_level,
                 "trace, debug, info, warn, error, critical or off (stderr)")
      ->capture_default_str();
}

CLI::App* Sub(CLI::App& app, const std::string& name, const std::string& help) {
  CLI::App* cmd = app.add_subcommand(name, help);
  cmd->fallthrough();  // global flags may follow the subcommand
  return cmd;
}

// status, list, allocate, release, reclaim: subcommands that talk to migd.
void AddRemoteCommands(CLI::App& app, Commands& c) {
  c.status_cmd = Sub(app, "status",
                     "Draw every GPU as a row of memory slices: instances as labelled blocks "
                     "coloured by state, free space, totals and fragmentation");
  c.status_gpu_opt = c.status_cmd->add_option("--gpu", c.status_gpu, "Only this GPU index");
  c.status_cmd
      ->add_option("--width", c.status_width, "Columns to draw in (default: the terminal's)")
      ->check(CLI::Range(20, 1000));

  c.list_cmd = Sub(app, "list", "List the instances migd tracks and the foreign ones");
  c.list_gpu_opt = c.list_cmd->add_option("--gpu", c.list_gpu, "Only this GPU index");
  c.list_cmd->add_option("--state", c.list.states,
                         "Only these states: active, idle, creating, reclaiming, deleting, error "
                         "(repeatable or comma-separated)");

  c.allocate_cmd = Sub(app, "allocate",
                       "Allocate instances, all or none (reuses Idle ones, creates, reclaims "
                       "Idle ones when needed). Repeating a request id replays its result.");
  c.allocate_cmd->add_option("--id", c.allocate.request_id, "Request id (unique per allocation)")
      ->required();
  c.allocate_cmd->add_option("--owner", c.allocate.owner, "Owner id of a non-Kubernetes client");
  c.allocate_cmd->add_option("--pod", c.allocate.pod, "Pod owner: NAMESPACE/NAME/UID[/CONTAINER]");
  c.allocate_cmd
      ->add_option("instances", c.allocate.items,
                   "Instances: [gpuN/]PROFILE[@START:SIZE], e.g. 3g.40gb gpu1/1g.10gb@6:1")
      ->required();

  c.release_cmd = Sub(app, "release", "Release instances: they become Idle and stay for reuse");
  CLI::Option* release_id =
      c.release_cmd->add_option("--id", c.release.request_id, "Every instance of this request");
  CLI::Option* release_mig =
      c.release_cmd->add_option("--mig", c.release.mig_uuid, "One instance, by MIG UUID");
  release_id->excludes(release_mig);

  c.reclaim_cmd =
      Sub(app, "reclaim", "Destroy Idle instances (never Active ones) to return their space");
  c.reclaim_gpu_opt = c.reclaim_cmd->add_option("--gpu", c.reclaim_gpu, "Only this GPU");
  c.reclaim_cmd->add_option("--profile", c.reclaim.profile, "Only this profile, e.g. 1g.10gb");
}

void AddPlanCommand(CLI::App& app, Commands& c) {
  c.plan_cmd = Sub(app, "plan",
                   "Dry run of allocate: what migd would reuse, create and reclaim now. With "
                   "--layout FILE, plan offline on a layout file instead (no migd, no GPU; "
                   "docs/planner.md)");
  PlanOptions& o = c.offline_plan;
  c.plan_cmd->add_option("--layout", o.layout_file,
                         "Offline: planner input document (GPUs, models, occupied placements)");
  c.plan_cmd->add_option("--request", o.request,
                         "Instances, e.g. '3g.40gb,1g.10gb' or 'gpu1/3g.40gb@4:4'");
  c.plan_cmd->add_option("--policy", o.policy,
                         "Offline: value (default; values solved for the file's demand) or "
                         "cost-order");
  c.plan_cmd->add_option("--objective", o.objective,
                         "Offline, value policy: count or slice (slice-weighted acceptance)");
  c.plan_cmd->add_option("--load", o.load,
                         "Offline, value policy: offered load per GPU the values assume (0.9)");
  c.plan_cmd->add_option("instances", c.plan_items, "Instances, as for allocate");
}

// probe and sim-stats: local subcommands.
void AddLocalCommands(CLI::App& app, Commands& c) {
  c.probe_cmd = Sub(app, "probe",
                    "Read-only NVML inventory: versions, bound symbols, GPUs, GI profiles and "
                    "placements, live GI/CI pairs. Never creates, destroys or changes MIG mode.");
  c.probe_cmd->add_option("--nvml-library", c.probe.nvml_library,
                          "Path of the NVML library (default libnvidia-ml.so.1)");
  c.probe_cmd->add_flag("--compare-catalog", c.probe.compare_catalog,
                        "Compare NVML's profiles with the built-in catalogue; exit 3 on "
                        "differences");

  c.stats_cmd =
      Sub(app, "sim-stats", "Per-function NVML call counters stored in a simulator state file");
  c.stats_cmd->add_option("--state", c.stats.state_file,
                          "Simulator state file (default $MIGD_SIM_STATE)");
}

// The client options from the parsed global flags; an error names the flag.
StatusOr<ClientOptions> MakeClient(const GlobalFlags& g, const Environment& env, int width) {
  Status logging = InitLogging({.level = g.log_level, .to_stderr = true});
  if (!logging.ok()) return logging;
  ClientOptions client;
  client.socket = g.socket;
  client.output = *ParseOutputFormat(g.output);  // validated by IsMember above
  StatusOr<std::chrono::milliseconds> deadline = ParseTimeout(g.timeout);
  if (!deadline.ok()) return deadline.status();
  client.timeout = *deadline;
  client.color = g.color == "always"  ? ColorMode::kAlways
                 : g.color == "never" ? ColorMode::kNever
                                      : ColorMode::kAuto;
  client.stdout_is_tty = env.stdout_is_tty;
  client.no_color_env = env.no_color;
  client.width = width;
  return client;
}

int RunPlanCommand(Commands& c, const ClientOptions& client, std::ostream& out, std::ostream& err) {
  PlanOptions& plan = c.offline_plan;
  if (plan.layout_file.empty()) {
    RemotePlanOptions remote;
    if (!plan.request.empty()) remote.items.push_back(plan.request);
    remote.items.insert(remote.items.end(), c.plan_items.begin(), c.plan_items.end());
    return RunRemotePlan(client, remote, out, err);
  }
  if (!c.plan_items.empty()) {
    plan.request =
        Join(plan.request.empty() ? c.plan_items
                                  : std::vector<std::string>{plan.request, Join(c.plan_items)});
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

// Runs the parsed subcommand; kExitUsage (after the help) when none was.
int Dispatch(CLI::App& app, Commands& c, const ClientOptions& client, std::ostream& out,
             std::ostream& err) {
  if (c.status_cmd->parsed()) {
    if (c.status_gpu_opt->count() > 0) c.status.gpu = c.status_gpu;
    return RunStatus(client, c.status, out, err);
  }
  if (c.list_cmd->parsed()) {
    if (c.list_gpu_opt->count() > 0) c.list.gpu = c.list_gpu;
    return RunList(client, c.list, out, err);
  }
  if (c.allocate_cmd->parsed()) return RunAllocate(client, c.allocate, out, err);
  if (c.release_cmd->parsed()) return RunRelease(client, c.release, out, err);
  if (c.reclaim_cmd->parsed()) {
    if (c.reclaim_gpu_opt->count() > 0) c.reclaim.gpu = c.reclaim_gpu;
    return RunReclaim(client, c.reclaim, out, err);
  }
  if (c.plan_cmd->parsed()) return RunPlanCommand(c, client, out, err);
  if (c.probe_cmd->parsed()) {
    return RunLocal(
        client.output,
        [&](const std::string& format, std::ostream& o) {
          ProbeOptions p = c.probe;
          p.output = format;
          return RunProbe(p, o, err);
        },
        out);
  }
  if (c.stats_cmd->parsed()) {
    return RunLocal(
        client.output,
        [&](const std::string& format, std::ostream& o) {
          SimStatsOptions s = c.stats;
          s.output = format;
          return RunSimStats(s, o, err);
        },
        out);
  }
  err << app.help();
  return kExitUsage;
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
  GlobalFlags flags;
  flags.socket = env.migd_socket.empty() ? std::string(kDefaultSocket) : env.migd_socket;
  AddGlobalFlags(app, flags);
  Commands commands;
  commands.status_width = env.columns;
  AddRemoteCommands(app, commands);
  AddPlanCommand(app, commands);
  AddLocalCommands(app, commands);

  std::vector<const char*> argv = {"migctl"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e, out, err);  // prints help or the error
    return rc == 0 ? kExitOk : kExitUsage;
  }
  StatusOr<ClientOptions> client = MakeClient(flags, env, commands.status_width);
  if (!client.ok()) {
    err << "migctl: " << client.status().message() << "\n";
    return kExitUsage;
  }
  return Dispatch(app, commands, *client, out, err);
}

}  // namespace migd::cli
