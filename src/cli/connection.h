// File: cli/connection.h
//
// How migctl talks to migd: one gRPC channel per command over the unix
// socket, each call with the --timeout deadline and no wait-for-ready (a
// missing socket is reported at once); and how a failed call becomes a
// message that says what to do and an exit code (cli/exit_codes.h). gRPC's
// UNAVAILABLE means both "cannot connect" and "migd answered UNAVAILABLE"; a
// plain connect(2) to the socket tells the two apart (ProbeSocket).
//
// Thread-safety: Connection is used by one thread; the functions are pure
// (ProbeSocket connects and closes a socket).
#ifndef MIGD_CLI_CONNECTION_H_
#define MIGD_CLI_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "cli/client_options.h"
#include "migd/v1/migd.grpc.pb.h"

namespace migd::cli {

// The exit code for a gRPC status code (cli/exit_codes.h); 0 for OK.
int ExitCodeFor(grpc::StatusCode code);

// The message printed when the socket cannot be reached, from the errno of a
// connect(2) to it: says whether the socket is missing, stale (nobody
// listening) or not permitted, and what to do.
std::string UnreachableMessage(const std::string& socket, int connect_errno);

// connect(2) to the unix socket `socket`; 0 on success, else the errno
// (ENAMETOOLONG for a path that does not fit sockaddr_un, ENOTSOCK for a path
// that exists and is not a socket).
int ProbeSocket(const std::string& socket);

// Prints the failure of `command`'s call (what happened, what to do) to
// `err` and returns its exit code.
int ReportRpcError(const ClientOptions& client, std::string_view command, const grpc::Status& s,
                   std::ostream& err);

// One channel per command. Calls fail fast (no wait-for-ready) so a missing
// socket is reported at once instead of after the deadline.
class Connection {
 public:
  explicit Connection(const ClientOptions& client)
      : client_(client),
        stub_(migd::v1::MigManager::NewStub(
            grpc::CreateChannel("unix:" + client.socket, grpc::InsecureChannelCredentials()))) {}

  template <typename Req, typename Resp>
  grpc::Status Call(grpc::Status (migd::v1::MigManager::Stub::*method)(grpc::ClientContext*,
                                                                       const Req&, Resp*),
                    const Req& request, Resp* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + client_.timeout);
    return ((*stub_).*method)(&context, request, response);
  }

 private:
  const ClientOptions& client_;
  std::unique_ptr<migd::v1::MigManager::Stub> stub_;
};

}  // namespace migd::cli

#endif  // MIGD_CLI_CONNECTION_H_
