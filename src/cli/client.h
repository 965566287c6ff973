// File: cli/client.h
//
// migctl's client subcommands: `status`, `list`, `allocate`, `release`,
// `plan` (online, without --layout), `reclaim` and `health clear`, each one
// unary call (two
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
//   5 NOT_FOUND (unknown request id, MIG UUID or GPU)
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

#include <ostream>

#include "cli/client_options.h"
#include "cli/requests.h"

namespace migd::cli {

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
int RunRemotePlan(const ClientOptions& client, const RemotePlanOptions& options, std::ostream& out,
                  std::ostream& err);
int RunReclaim(const ClientOptions& client, const ReclaimOptions& options, std::ostream& out,
               std::ostream& err);
// Clears the health marks of one GPU and its instances (ClearHealth).
int RunHealthClear(const ClientOptions& client, const HealthClearOptions& options,
                   std::ostream& out, std::ostream& err);

}  // namespace migd::cli

#endif  // MIGD_CLI_CLIENT_H_
