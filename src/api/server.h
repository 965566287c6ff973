// File: api/server.h
//
// ApiServer: serves a MigManagerService on a unix socket (docs/architecture.md).
//
// Start:
//   - the parent directory must exist or is created (0755);
//   - a path that exists and is not a socket is refused (kFailedPrecondition
//     naming the path and the fix);
//   - an existing socket is probed with connect(): if something accepts,
//     another migd serves there (kFailedPrecondition "another migd is serving
//     on PATH; stop it first"); if the connection is refused the socket is
//     stale and is removed (logged);
//   - the socket is bound under umask 0177, so it is never wider than 0600
//     even briefly; then it is chowned to `group` (if set) and chmod-ed to
//     `mode`, and only then listen()s;
//   - connections are accepted by ApiServer's own thread, which reads each
//     one's SO_PEERCRED into the service's PeerDirectory (api/peer.h) and
//     hands the descriptor to gRPC (AddInsecureChannelFromFd), so every RPC
//     can name its caller in the log. Out of descriptors, the loop logs once
//     and retries every 100 ms (pending connections stay queued);
//   - requests larger than max_receive_bytes fail with RESOURCE_EXHAUSTED.
// Shutdown(deadline): closes the EventHub (Watch streams end UNAVAILABLE),
// stops accepting calls, lets in-flight unary calls finish until the deadline
// (then cancels them; a handler stuck inside the engine still delays the
// return until it comes back), and removes the socket file if it is still the
// one we bound. The hub stays closed: a service is served once. Idempotent;
// the destructor calls it with a zero deadline.
//
// Example (daemon wiring; the hub must outlive the Manager, whose listener
// it is, and the service must outlive the server):
//   api::EventHub hub;
//   engine::ListenerFanout fanout;  fanout.Add(&hub);  fanout.Add(&metrics);
//   manager_options.listener = &fanout;
//   ... create the Manager ...
//   api::MigManagerService service(*manager, hub, info, {.cdi = &cdi_observer,
//                                                        .cdi_enabled = cfg.cdi.enabled});
//   MIGD_ASSIGN_OR_RETURN(auto server, api::ApiServer::Start(
//       {.socket_path = cfg.api.socket, .mode = 0600, .group = cfg.api.group}, &service));
//   ... on SIGTERM: server->Shutdown(std::chrono::seconds(10)); then stop the
//   reconciler and destroy the Manager.
//
// Note: Start changes the process umask for the duration of the bind; call it
// before other threads create files (daemon startup).
//
// Thread-safety: Start/Shutdown may be called from any thread; Shutdown is
// safe to call concurrently with itself.
#ifndef MIGD_API_SERVER_H_
#define MIGD_API_SERVER_H_

#include <absl/base/thread_annotations.h>
#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "api/service.h"
#include "base/mutex.h"
#include "base/status.h"

namespace migd::api {

struct ApiServerOptions {
  std::string socket_path;  // required, absolute, < 108 bytes
  mode_t mode = 0600;       // api.socketMode
  // api.socketGroup: chown the socket to this group name or numeric gid.
  std::optional<std::string> group;
  int max_receive_bytes = 64 * 1024;  // request size limit
};

class ApiServer {
 public:
  // Binds and starts serving `service` (not owned; must outlive the server).
  // Errors: kInvalidArgument (empty/relative/too long path, bad mode),
  // kFailedPrecondition (unknown group, path not a socket, live socket,
  // parent not creatable), kUnavailable (bind failed), kInternal.
  static StatusOr<std::unique_ptr<ApiServer>> Start(const ApiServerOptions& options,
                                                    MigManagerService* service);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  void Shutdown(std::chrono::milliseconds deadline);

  const std::string& socket_path() const { return options_.socket_path; }
  // The gRPC server (for tests, e.g. InProcessChannel); valid until the
  // ApiServer is destroyed, not serving after Shutdown.
  grpc::Server* grpc_server() const { return server_.get(); }

 private:
  ApiServer(ApiServerOptions options, MigManagerService* service)
      : options_(std::move(options)), service_(service) {}
  // Shutdown; `end_watches` false leaves the hub open (a failed Start must
  // not close the caller's hub).
  void Stop(std::chrono::milliseconds deadline, bool end_watches);
  // Binds, sets group and mode, listens and starts the accept thread.
  // Stops the server on error.
  Status Listen(std::optional<gid_t> gid);
  void AcceptLoop();
  // Reads the credentials of `fd`, records them and gives `fd` to gRPC.
  void ServeConnection(int fd);

  static constexpr int kListenBacklog = 128;

  const ApiServerOptions options_;
  MigManagerService* const service_;
  std::unique_ptr<grpc::Server> server_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Stop() wakes the accept loop
  std::thread accept_thread_;
  bool bound_ = false;  // the socket file at options_.socket_path is ours
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  Mutex shutdown_mu_;  // held for the whole of Stop
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

// Probes the unix socket at `path`: OK if something accepts a connection,
// kUnavailable (with errno text) otherwise. For tests and for migctl hints.
Status ProbeUnixSocket(const std::string& path);

}  // namespace migd::api

#endif  // MIGD_API_SERVER_H_
