#include "cli/client.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "cli/status_view.h"
#include "migd/v1/migd.grpc.pb.h"
#include "planner/plan_json.h"

namespace migd::cli {
namespace {

using migd::v1::MigManager;

constexpr std::string_view kStartHint =
    "is migd running? (start it with `migd --config /etc/migd/migd.yaml` or `make run`; use "
    "--socket or MIGD_SOCKET for another path)";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> SplitCommas(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    size_t pos = 0;
    while (true) {
      const size_t comma = item.find(',', pos);
      out.push_back(Trim(std::string_view(item).substr(
          pos, comma == std::string::npos ? std::string::npos : comma - pos)));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  return out;
}

std::string TimeoutText(std::chrono::milliseconds t) {
  if (t.count() % 1000 == 0) return std::to_string(t.count() / 1000) + "s";
  return std::to_string(t.count()) + "ms";
}

// Extra advice per code, appended to the server's message.
std::string_view Hint(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "`migctl status` shows what is free; `migctl plan PROFILE...` shows what would "
             "fit; `migctl reclaim` destroys Idle instances";
    case grpc::StatusCode::NOT_FOUND:
      return "`migctl list` shows request ids and MIG UUIDs";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "the request id belongs to a different allocation; use a new --id";
    case grpc::StatusCode::ABORTED:
      return "the same request id is being allocated right now; retry with the same --id";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "this migd does not implement the call; is it older than migctl?";
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return "run migctl as root or as a member of migd's api.socketGroup";
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::DATA_LOSS:
    case grpc::StatusCode::UNKNOWN:
      return "this is a migd bug or damaged state; see migd's log (journalctl -u migd)";
    default:
      return "";
  }
}

std::string_view CodeName(grpc::StatusCode code) {
  return StatusCodeName(static_cast<StatusCode>(static_cast<int>(code)));
}

// Prints the failure of an RPC and returns the exit code.
int ReportRpcError(const ClientOptions& client, std::string_view command, const grpc::Status& s,
                   std::ostream& err) {
  const std::string prefix = "migctl " + std::string(command) + ": ";
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE: {
      // gRPC says UNAVAILABLE both when it cannot connect and when migd itself
      // answers UNAVAILABLE; a plain connect(2) tells the two apart.
      const int connect_errno = ProbeSocket(client.socket);
      if (connect_errno != 0) {
        err << prefix << UnreachableMessage(client.socket, connect_errno) << "\n";
      } else {
        err << prefix << "migd at " << client.socket << " is unavailable: " << s.error_message()
            << "\n  (migd answered but cannot serve now: NVML unusable or migd shutting down; "
               "see migd's log and retry)\n";
      }
      return kExitUnreachable;
    }
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      err << prefix << "migd at " << client.socket << " did not answer within "
          << TimeoutText(client.timeout)
          << "; raise --timeout or check migd's log (a GPU change can take seconds)\n";
      return kExitUnreachable;
    default:
      break;
  }
  err << prefix << CodeName(s.error_code()) << ": " << s.error_message() << "\n";
  const std::string_view hint = Hint(s.error_code());
  if (!hint.empty()) err << "  (" << hint << ")\n";
  return ExitCodeFor(s.error_code());
}

// One channel per command. Calls fail fast (no wait-for-ready) so a missing
// socket is reported at once instead of after the deadline.
class Connection {
 public:
  explicit Connection(const ClientOptions& client)
      : client_(client),
        stub_(MigManager::NewStub(
            grpc::CreateChannel("unix:" + client.socket, grpc::InsecureChannelCredentials()))) {}

  template <typename Req, typename Resp>
  grpc::Status Call(grpc::Status (MigManager::Stub::*method)(grpc::ClientContext*, const Req&,
                                                             Resp*),
                    const Req& request, Resp* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + client_.timeout);
    return ((*stub_).*method)(&context, request, response);
  }

 private:
  const ClientOptions& client_;
  std::unique_ptr<MigManager::Stub> stub_;
};

// Prints `message` in the chosen machine format, or `table` for kTable.
int Print(const ClientOptions& client, std::string_view command,
          const google::protobuf::Message& message, const std::string& table, std::ostream& out,
          std::ostream& err) {
  if (client.output == OutputFormat::kTable) {
    out << table;
    return kExitOk;
  }
  StatusOr<nlohmann::ordered_json> doc = ProtoToJson(message);
  if (!doc.ok()) {
    err << "migctl " << command << ": " << doc.status().message() << "\n";
    return kExitServerError;
  }
  out << FormatDocument(*doc, client.output);
  return kExitOk;
}

std::string PlacementText(const migd::v1::Placement& p) {
  return std::to_string(p.start()) + ":" + std::to_string(p.size());
}

std::string PathName(migd::v1::AllocationPath path) {
  switch (path) {
    case migd::v1::ALLOCATION_PATH_REUSE:
      return "reuse";
    case migd::v1::ALLOCATION_PATH_CREATE:
      return "create";
    case migd::v1::ALLOCATION_PATH_RECLAIM_CREATE:
      return "reclaim+create";
    default:
      return "-";
  }
}

std::string FullOwner(const migd::v1::Owner& owner) {
  std::string label = OwnerLabel(owner);
  if (owner.has_pod() && !owner.pod().container().empty()) {
    label += " (" + owner.pod().container() + ")";
  }
  return label.empty() ? "-" : label;
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

std::vector<std::string> InstanceHeader() {
  return {"GPU", "PLACEMENT", "PROFILE", "STATE", "OWNER", "REQUEST", "MIG"};
}

std::vector<std::string> InstanceRow(const migd::v1::Instance& i) {
  return {std::to_string(i.gpu_index()),
          PlacementText(i.placement()),
          i.profile(),
          std::string(StateLabel(i.state())),
          FullOwner(i.owner()),
          OrDash(i.request_id()),
          OrDash(i.mig_uuid())};
}

std::string InstanceTable(const google::protobuf::RepeatedPtrField<migd::v1::Instance>& list) {
  std::vector<std::vector<std::string>> rows = {InstanceHeader()};
  for (const migd::v1::Instance& i : list) rows.push_back(InstanceRow(i));
  return FormatTable(rows);
}

}  // namespace

int ExitCodeFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return kExitUsage;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return kExitUnreachable;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return kExitNoPlacement;
    case grpc::StatusCode::NOT_FOUND:
      return kExitNotFound;
    default:
      return kExitServerError;
  }
}

bool UseColor(const ClientOptions& options) {
  switch (options.color) {
    case ColorMode::kAlways:
      return true;
    case ColorMode::kNever:
      return false;
    case ColorMode::kAuto:
      return options.stdout_is_tty && !options.no_color_env;
  }
  return false;
}

StatusOr<std::chrono::milliseconds> ParseTimeout(std::string_view text) {
  const std::string bad = "--timeout: want a positive duration such as 500ms, 30s or 2m, got '" +
                          std::string(text) + "'";
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == begin) return InvalidArgumentError(bad);
  const std::string_view unit(ptr, static_cast<size_t>(end - ptr));
  double ms = 0;
  if (unit.empty() || unit == "s") {
    ms = value * 1000;
  } else if (unit == "ms") {
    ms = value;
  } else if (unit == "m") {
    ms = value * 60000;
  } else {
    return InvalidArgumentError(bad);
  }
  // At least 1 ms, at most a day: beyond that the number is surely a mistake.
  if (!(ms >= 1) || ms > 86400000.0) return InvalidArgumentError(bad);
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

StatusOr<migd::v1::PodOwner> ParsePodOwner(std::string_view text) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    const size_t slash = text.find('/', pos);
    parts.emplace_back(
        text.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos));
    if (slash == std::string_view::npos) break;
    pos = slash + 1;
  }
  if (parts.size() < 3 || parts.size() > 4) {
    return InvalidArgumentError("--pod: want NAMESPACE/NAME/UID[/CONTAINER], got '" +
                                std::string(text) + "'");
  }
  static constexpr const char* kNames[] = {"namespace", "name", "uid", "container"};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) {
      return InvalidArgumentError("--pod: the " + std::string(kNames[i]) + " is empty in '" +
                                  std::string(text) + "' (want NAMESPACE/NAME/UID[/CONTAINER])");
    }
  }
  migd::v1::PodOwner pod;
  pod.set_namespace_(parts[0]);
  pod.set_name(parts[1]);
  pod.set_uid(parts[2]);
  if (parts.size() == 4) pod.set_container(parts[3]);
  return pod;
}

StatusOr<std::vector<migd::v1::InstanceSpec>> ParseInstanceSpecs(
    const std::vector<std::string>& items) {
  if (items.empty()) {
    return InvalidArgumentError(
        "no instances: give at least one [gpuN/]PROFILE[@START:SIZE], e.g. 3g.40gb");
  }
  std::string text;
  for (const std::string& item : items) {
    if (!text.empty()) text += ',';
    text += item;
  }
  StatusOr<std::vector<planner::InstanceRequest>> parsed = planner::ParseRequest(text);
  if (!parsed.ok()) return parsed.status();
  std::vector<migd::v1::InstanceSpec> specs;
  for (size_t i = 0; i < parsed->size(); ++i) {
    const planner::InstanceRequest& r = (*parsed)[i];
    migd::v1::InstanceSpec spec;
    spec.set_profile(r.profile);
    if (r.gpu.has_value()) spec.set_gpu(r.gpu->value());
    if (r.placement.has_value()) {
      if (!r.gpu.has_value()) {
        return InvalidArgumentError("request item " + std::to_string(i) + " '" + r.profile +
                                    "@" + r.placement->ToString() +
                                    "': a placement needs a GPU, e.g. gpu0/" + r.profile + "@" +
                                    r.placement->ToString());
      }
      spec.mutable_placement()->set_start(r.placement->start);
      spec.mutable_placement()->set_size(r.placement->size);
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

StatusOr<std::vector<migd::v1::InstanceState>> ParseStates(const std::vector<std::string>& items) {
  std::vector<migd::v1::InstanceState> out;
  for (const std::string& item : SplitCommas(items)) {
    const std::string s = Lower(item);
    migd::v1::InstanceState state;
    if (s == "creating") {
      state = migd::v1::INSTANCE_STATE_CREATING;
    } else if (s == "active") {
      state = migd::v1::INSTANCE_STATE_ACTIVE;
    } else if (s == "idle") {
      state = migd::v1::INSTANCE_STATE_IDLE;
    } else if (s == "reclaiming") {
      state = migd::v1::INSTANCE_STATE_RECLAIMING;
    } else if (s == "deleting") {
      state = migd::v1::INSTANCE_STATE_DELETING;
    } else if (s == "error") {
      state = migd::v1::INSTANCE_STATE_ERROR;
    } else {
      return InvalidArgumentError("--state: unknown state '" + item +
                                  "' (want active, idle, creating, reclaiming, deleting or "
                                  "error)");
    }
    out.push_back(state);
  }
  return out;
}

int ProbeSocket(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) return ENAMETOOLONG;
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  // connect(2) to a regular file says ECONNREFUSED, like a stale socket;
  // stat tells the two apart.
  struct stat st {};
  if (::stat(socket_path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) return ENOTSOCK;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int result = 0;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) result = errno;
  ::close(fd);
  return result;
}

std::string UnreachableMessage(const std::string& socket, int connect_errno) {
  const std::string head = "cannot reach migd at " + socket + ": ";
  switch (connect_errno) {
    case ENOENT:
      return head + "no such socket; " + std::string(kStartHint);
    case ECONNREFUSED:
      return head + "connection refused (a stale socket: nobody is listening); " +
             std::string(kStartHint);
    case EACCES:
    case EPERM:
      return head +
             "permission denied; run migctl as root (sudo) or as a member of the group set in "
             "migd's api.socketGroup";
    case ENAMETOOLONG:
      return head + "not a usable unix socket path (empty or longer than " +
             std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
             " bytes); use a shorter --socket";
    case ENOTSOCK:
    case ENOTDIR:
      return head + "the path exists but is not a socket; check --socket / MIGD_SOCKET and "
             "migd's api.socket setting";
    default:
      return head + std::strerror(connect_errno) + "; " + std::string(kStartHint);
  }
}

StatusOr<migd::v1::AllocateRequest> BuildAllocateRequest(const AllocateOptions& options) {
  if (options.request_id.empty()) {
    return InvalidArgumentError("--id: required (a unique id for this allocation, e.g. job-7)");
  }
  if (options.owner.empty() == options.pod.empty()) {
    return InvalidArgumentError(
        "give exactly one owner: --owner ID or --pod NAMESPACE/NAME/UID[/CONTAINER]");
  }
  migd::v1::AllocateRequest request;
  request.set_request_id(options.request_id);
  if (!options.owner.empty()) {
    request.mutable_owner()->set_opaque_id(options.owner);
  } else {
    StatusOr<migd::v1::PodOwner> pod = ParsePodOwner(options.pod);
    if (!pod.ok()) return pod.status();
    *request.mutable_owner()->mutable_pod() = *std::move(pod);
  }
  StatusOr<std::vector<migd::v1::InstanceSpec>> specs = ParseInstanceSpecs(options.items);
  if (!specs.ok()) return specs.status();
  for (migd::v1::InstanceSpec& s : *specs) *request.add_instances() = std::move(s);
  return request;
}

StatusOr<migd::v1::ReleaseRequest> BuildReleaseRequest(const ReleaseOptions& options) {
  if (options.request_id.empty() == options.mig_uuid.empty()) {
    return InvalidArgumentError("give exactly one of --id REQUEST or --mig MIG-UUID");
  }
  migd::v1::ReleaseRequest request;
  if (!options.request_id.empty()) {
    request.set_request_id(options.request_id);
  } else {
    request.set_mig_uuid(options.mig_uuid);
  }
  return request;
}

std::string ListTable(const migd::v1::ListResponse& response) {
  std::string out;
  if (response.instances_size() == 0) {
    out += "no instances\n";
  } else {
    out += InstanceTable(response.instances());
  }
  if (response.foreign_size() > 0) {
    out += "\nforeign (not created by migd, preserved):\n";
    std::vector<std::vector<std::string>> rows = {{"GPU", "PLACEMENT", "PROFILE", "GI", "CI"}};
    for (const migd::v1::ForeignInstance& f : response.foreign()) {
      std::string cis;
      for (uint32_t ci : f.ci_ids()) cis += (cis.empty() ? "" : ",") + std::to_string(ci);
      rows.push_back({std::to_string(f.gpu_index()), PlacementText(f.placement()), f.profile(),
                      std::to_string(f.gi_id()), OrDash(cis)});
    }
    out += FormatTable(rows);
  }
  return out;
}

std::string AllocateTable(const migd::v1::AllocateResponse& response) {
  std::string out = "allocated " + response.request_id() + ": " +
                    std::to_string(response.instances_size()) + " instance(s)" +
                    (response.replayed() ? " (replayed: the result of the earlier identical "
                                           "request)"
                                         : "") +
                    "\n";
  std::vector<std::vector<std::string>> rows = {{"GPU", "PLACEMENT", "PROFILE", "PATH", "MIG"}};
  for (const migd::v1::AllocatedInstance& a : response.instances()) {
    const migd::v1::Instance& i = a.instance();
    rows.push_back({std::to_string(i.gpu_index()), PlacementText(i.placement()), i.profile(),
                    PathName(a.path()), OrDash(i.mig_uuid())});
  }
  out += FormatTable(rows);
  // What a container runtime needs, one line each: CDI names, or the legacy
  // environment and device nodes.
  if (response.cdi_devices_size() > 0) {
    out += "cdi";
    for (const std::string& d : response.cdi_devices()) out += " " + d;
    out += "\n";
  }
  for (const migd::v1::EnvVar& e : response.envs()) {
    out += "env " + e.name() + "=" + e.value() + "\n";
  }
  if (response.device_nodes_size() > 0) {
    out += "devices";
    for (const migd::v1::DeviceNode& d : response.device_nodes()) {
      out += " " + d.host_path();
      if (d.container_path() != d.host_path()) out += "->" + d.container_path();
      if (d.permissions() != "rw") out += ":" + d.permissions();
    }
    out += "\n";
  }
  return out;
}

std::string ReleaseTable(const migd::v1::ReleaseResponse& response) {
  std::string out = "released " + std::to_string(response.instances_size()) +
                    " instance(s); now Idle, kept for reuse\n";
  if (response.instances_size() > 0) out += InstanceTable(response.instances());
  return out;
}

std::string PlanTable(const migd::v1::PlanResponse& response) {
  std::string out = "plan (" + OrDash(response.search()) +
                    " search; dry run, nothing changed):\n";
  std::vector<std::vector<std::string>> rows = {
      {"#", "GPU", "PLACEMENT", "PROFILE", "PATH", "DETAIL"}};
  for (int n = 0; n < response.instances_size(); ++n) {
    const migd::v1::PlannedInstance& p = response.instances(n);
    std::string detail;
    if (p.path() == migd::v1::ALLOCATION_PATH_REUSE) {
      detail = "reuses Idle " + OrDash(p.reuse_mig_uuid());
    } else if (p.path() == migd::v1::ALLOCATION_PATH_RECLAIM_CREATE) {
      detail = "after destroying";
      for (const migd::v1::ReclaimedInstance& r : p.reclaims()) {
        detail += " " + r.profile() + "@gpu" + std::to_string(r.gpu_index()) + ":" +
                  PlacementText(r.placement()) + " (" + OrDash(r.mig_uuid()) + ")";
      }
    } else if (p.path() == migd::v1::ALLOCATION_PATH_CREATE) {
      detail = "in free space";
    }
    rows.push_back({std::to_string(n), std::to_string(p.gpu_index()),
                    PlacementText(p.placement()), p.profile(), PathName(p.path()), detail});
  }
  return out + FormatTable(rows);
}

std::string ReclaimTable(const migd::v1::ReclaimResponse& response) {
  std::string out;
  if (response.destroyed_size() == 0 && response.failed_size() == 0) {
    return "nothing to reclaim: no Idle instance matches\n";
  }
  out += "destroyed " + std::to_string(response.destroyed_size()) + " Idle instance(s)\n";
  if (response.destroyed_size() > 0) out += InstanceTable(response.destroyed());
  if (response.failed_size() > 0) {
    out += "\nfailed to destroy " + std::to_string(response.failed_size()) +
           " instance(s); now Error, migd's reconciler retries (see migd's log):\n";
    out += InstanceTable(response.failed());
  }
  return out;
}

int RunStatus(const ClientOptions& client, const StatusOptions& options, std::ostream& out,
              std::ostream& err) {
  Connection conn(client);
  migd::v1::ListRequest list_request;
  if (options.gpu.has_value()) list_request.set_gpu(*options.gpu);
  migd::v1::ListResponse list;
  grpc::Status s = conn.Call(&MigManager::Stub::List, list_request, &list);
  if (!s.ok()) return ReportRpcError(client, "status", s, err);
  migd::v1::GetStatusResponse status;
  s = conn.Call(&MigManager::Stub::GetStatus, migd::v1::GetStatusRequest(), &status);
  if (!s.ok()) return ReportRpcError(client, "status", s, err);
  if (options.gpu.has_value()) {
    // GetStatus has no GPU filter; keep the picture's totals to the chosen GPU.
    auto* gpus = status.mutable_gpus();
    gpus->erase(std::remove_if(gpus->begin(), gpus->end(),
                               [&](const migd::v1::GpuStatus& g) {
                                 return g.gpu().index() != *options.gpu;
                               }),
                gpus->end());
  }
  if (client.output == OutputFormat::kTable) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    out << RenderStatus(
        list, status,
        RenderOptions{.color = UseColor(client), .width = client.width, .now_unix_ms = now_ms});
    return kExitOk;
  }
  StatusOr<nlohmann::ordered_json> status_doc = ProtoToJson(status);
  StatusOr<nlohmann::ordered_json> list_doc = ProtoToJson(list);
  if (!status_doc.ok() || !list_doc.ok()) {
    err << "migctl status: "
        << (status_doc.ok() ? list_doc.status() : status_doc.status()).message() << "\n";
    return kExitServerError;
  }
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  doc["status"] = *std::move(status_doc);
  doc["list"] = *std::move(list_doc);
  out << FormatDocument(doc, client.output);
  return kExitOk;
}

int RunList(const ClientOptions& client, const ListOptions& options, std::ostream& out,
            std::ostream& err) {
  migd::v1::ListRequest request;
  if (options.gpu.has_value()) request.set_gpu(*options.gpu);
  StatusOr<std::vector<migd::v1::InstanceState>> states = ParseStates(options.states);
  if (!states.ok()) {
    err << "migctl list: " << states.status().message() << "\n";
    return kExitUsage;
  }
  for (migd::v1::InstanceState st : *states) request.add_states(st);
  Connection conn(client);
  migd::v1::ListResponse response;
  const grpc::Status s = conn.Call(&MigManager::Stub::List, request, &response);
  if (!s.ok()) return ReportRpcError(client, "list", s, err);
  return Print(client, "list", response, ListTable(response), out, err);
}

int RunAllocate(const ClientOptions& client, const AllocateOptions& options, std::ostream& out,
                std::ostream& err) {
  StatusOr<migd::v1::AllocateRequest> request = BuildAllocateRequest(options);
  if (!request.ok()) {
    err << "migctl allocate: " << request.status().message() << "\n";
    return kExitUsage;
  }
  Connection conn(client);
  migd::v1::AllocateResponse response;
  const grpc::Status s = conn.Call(&MigManager::Stub::Allocate, *request, &response);
  if (!s.ok()) return ReportRpcError(client, "allocate", s, err);
  return Print(client, "allocate", response, AllocateTable(response), out, err);
}

int RunRelease(const ClientOptions& client, const ReleaseOptions& options, std::ostream& out,
               std::ostream& err) {
  StatusOr<migd::v1::ReleaseRequest> request = BuildReleaseRequest(options);
  if (!request.ok()) {
    err << "migctl release: " << request.status().message() << "\n";
    return kExitUsage;
  }
  Connection conn(client);
  migd::v1::ReleaseResponse response;
  const grpc::Status s = conn.Call(&MigManager::Stub::Release, *request, &response);
  if (!s.ok()) return ReportRpcError(client, "release", s, err);
  return Print(client, "release", response, ReleaseTable(response), out, err);
}

int RunRemotePlan(const ClientOptions& client, const RemotePlanOptions& options,
                  std::ostream& out, std::ostream& err) {
  StatusOr<std::vector<migd::v1::InstanceSpec>> specs = ParseInstanceSpecs(options.items);
  if (!specs.ok()) {
    err << "migctl plan: " << specs.status().message()
        << " (or plan offline with --layout FILE, see docs/planner.md)\n";
    return kExitUsage;
  }
  migd::v1::PlanRequest request;
  for (migd::v1::InstanceSpec& s : *specs) *request.add_instances() = std::move(s);
  Connection conn(client);
  migd::v1::PlanResponse response;
  const grpc::Status s = conn.Call(&MigManager::Stub::Plan, request, &response);
  if (!s.ok()) return ReportRpcError(client, "plan", s, err);
  return Print(client, "plan", response, PlanTable(response), out, err);
}

int RunReclaim(const ClientOptions& client, const ReclaimOptions& options, std::ostream& out,
               std::ostream& err) {
  migd::v1::ReclaimRequest request;
  if (options.gpu.has_value()) request.set_gpu(*options.gpu);
  request.set_profile(options.profile);
  Connection conn(client);
  migd::v1::ReclaimResponse response;
  const grpc::Status s = conn.Call(&MigManager::Stub::Reclaim, request, &response);
  if (!s.ok()) return ReportRpcError(client, "reclaim", s, err);
  const int rc = Print(client, "reclaim", response, ReclaimTable(response), out, err);
  if (rc != kExitOk) return rc;
  if (response.failed_size() > 0) {
    err << "migctl reclaim: " << response.failed_size()
        << " instance(s) could not be destroyed and are now Error; migd retries them (see its "
           "log)\n";
    return kExitServerError;
  }
  return kExitOk;
}

}  // namespace migd::cli
