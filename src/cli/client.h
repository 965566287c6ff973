// File: cli/client.h
//
// migctl's client subcommands: `status`, `list`, `allocate`, `release`,
// `plan` (online, without --layout) and `reclaim`, each one unary call (two
// for status) to migd.v1.MigManager over migd's unix socket. This file turns
// parsed options into requests, calls the generated stub with a deadline,
// prints the reply as table, JSON or YAML, and maps the outcome to migctl's
// exit code with a message that says what to do.
//
// Data flow: app.cc (flags) -> ClientOptions + per-command options ->
// Run<Command>() -> MigManager stub -> Format -> out / err, exit code.
//
// Exit codes (cli/exit_codes.h, docs/migctl.md):
//   0 ok
//   1 usage: bad flags or request text, or migd answered INVALID_ARGUMENT /
//     OUT_OF_RANGE (the request itself is wrong)
//   2 migd unreachable (no socket, nobody listening, permission denied),
//     UNAVAILABLE from migd (NVML unusable, shutting down) or no answer
//     within --timeout (DEADLINE_EXCEEDED)
//   3 catalogue mismatch (probe --compare-catalog)
//   4 no placement: RESOURCE_EXHAUSTED
//   5 NOT_FOUND (unknown request id or MIG UUID)
//   6 any other server error (FAILED_PRECONDITION, ALREADY_EXISTS, ABORTED,
//     INTERNAL, ...), and `reclaim` when some destroys failed
//
// Example:
//   ClientOptions client{.socket = "/run/migd/api.socket"};
//   AllocateOptions alloc{.request_id = "job-7", .owner = "job-7",
//                         .items = {"3g.40gb", "1g.10gb"}};
//   int rc = RunAllocate(client, alloc, std::cout, std::cerr);
//
// Thread-safety: free functions without shared state; each call opens its
// own channel.
#ifndef MIGD_CLI_CLIENT_H_
#define MIGD_CLI_CLIENT_H_

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/status.h>

#include "base/status.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "migd/v1/migd.pb.h"

namespace migd::cli {

inline constexpr std::string_view kDefaultSocket = "/run/migd/api.socket";

enum class ColorMode { kAuto, kAlways, kNever };

struct ClientOptions {
  std::string socket = std::string(kDefaultSocket);
  OutputFormat output = OutputFormat::kTable;
  std::chrono::milliseconds timeout{30000};
  ColorMode color = ColorMode::kAuto;
  // Facts about the terminal, filled by main() (tests set them directly).
  bool stdout_is_tty = false;
  bool no_color_env = false;  // $NO_COLOR set and non-empty
  int width = 100;            // terminal columns
};

// The exit code for a gRPC status code (table above); 0 for OK.
int ExitCodeFor(grpc::StatusCode code);

// True when `status` should be coloured: kAlways; or kAuto on a TTY without
// NO_COLOR.
bool UseColor(const ClientOptions& options);

// Parses "--timeout": a positive number with unit ms, s or m ("500ms",
// "30s", "2m"); a bare number is seconds. kInvalidArgument otherwise.
StatusOr<std::chrono::milliseconds> ParseTimeout(std::string_view text);

// Parses "--pod ns/name/uid[/container]"; kInvalidArgument names the part
// that is missing or empty.
StatusOr<migd::v1::PodOwner> ParsePodOwner(std::string_view text);

// Parses instance items in the planner's request syntax
// (`[gpuN/]PROFILE[@START:SIZE]`, planner/plan_json.h); each item may itself
// hold comma-separated items. kInvalidArgument names the bad item, a
// placement without a GPU, or an empty list.
StatusOr<std::vector<migd::v1::InstanceSpec>> ParseInstanceSpecs(
    const std::vector<std::string>& items);

// "active", "idle", "creating", "reclaiming", "deleting", "error" (any case,
// comma-separated items allowed); kInvalidArgument otherwise.
StatusOr<std::vector<migd::v1::InstanceState>> ParseStates(const std::vector<std::string>& items);

// The message printed when the socket cannot be reached, from the errno of a
// connect(2) to it: says whether the socket is missing, stale (nobody
// listening) or not permitted, and what to do.
std::string UnreachableMessage(const std::string& socket, int connect_errno);

// connect(2) to the unix socket `socket`; 0 on success, else the errno
// (ENAMETOOLONG for a path that does not fit sockaddr_un, ENOTSOCK for a path
// that exists and is not a socket).
int ProbeSocket(const std::string& socket);

struct StatusOptions {
  std::optional<uint32_t> gpu;
};
struct ListOptions {
  std::optional<uint32_t> gpu;
  std::vector<std::string> states;
};
struct AllocateOptions {
  std::string request_id;
  std::string owner;  // opaque owner id; exclusive with pod
  std::string pod;    // ns/name/uid[/container]
  std::vector<std::string> items;
};
struct ReleaseOptions {
  std::string request_id;  // exactly one of request_id, mig_uuid
  std::string mig_uuid;
};
struct RemotePlanOptions {
  std::vector<std::string> items;
};
struct ReclaimOptions {
  std::optional<uint32_t> gpu;
  std::string profile;
};

// Builds an AllocateRequest; kInvalidArgument names the flag at fault
// (--id missing, neither or both of --owner/--pod, bad items).
StatusOr<migd::v1::AllocateRequest> BuildAllocateRequest(const AllocateOptions& options);
// Builds a ReleaseRequest; kInvalidArgument unless exactly one target is set.
StatusOr<migd::v1::ReleaseRequest> BuildReleaseRequest(const ReleaseOptions& options);

// The subcommands. Each writes the result to `out` and errors to `err`, and
// returns the exit code above.
int RunStatus(const ClientOptions& client, const StatusOptions& options, std::ostream& out,
              std::ostream& err);
int RunList(const ClientOptions& client, const ListOptions& options, std::ostream& out,
            std::ostream& err);
int RunAllocate(const ClientOptions& client, const AllocateOptions& options, std::ostream& out,
                std::ostream& err);
int RunRelease(const ClientOptions& client, const ReleaseOptions& options, std::ostream& out,
               std::ostream& err);
int RunRemotePlan(const ClientOptions& client, const RemotePlanOptions& options,
                  std::ostream& out, std::ostream& err);
int RunReclaim(const ClientOptions& client, const ReclaimOptions& options, std::ostream& out,
               std::ostream& err);

// Human tables of the replies (exposed for tests).
std::string ListTable(const migd::v1::ListResponse& response);
std::string AllocateTable(const migd::v1::AllocateResponse& response);
std::string ReleaseTable(const migd::v1::ReleaseResponse& response);
std::string PlanTable(const migd::v1::PlanResponse& response);
std::string ReclaimTable(const migd::v1::ReclaimResponse& response);

}  // namespace migd::cli

#endif  // MIGD_CLI_CLIENT_H_
