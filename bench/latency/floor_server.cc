#include "bench/latency/floor_server.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "migd/v1/migd.grpc.pb.h"

namespace migd::bench::latency {
namespace {

namespace v1 = migd::v1;

// The empty handlers.
class EmptyService final : public v1::MigManager::Service {
 public:
  grpc::Status Allocate(grpc::ServerContext*, const v1::AllocateRequest*,
                        v1::AllocateResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status Release(grpc::ServerContext*, const v1::ReleaseRequest*,
                       v1::ReleaseResponse*) override {
    return grpc::Status::OK;
  }
};

// migd's accept loop (api/server.cc) minus its logging: non-blocking
// accept4, SO_PEERCRED read, then gRPC owns the descriptor.
void AcceptLoop(int listen_fd, int stop_fd, grpc::Server* server) {
  pollfd fds[2] = {{listen_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
  for (;;) {
    fds[0].revents = fds[1].revents = 0;
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents != 0) return;
    for (;;) {
      const int conn = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (conn < 0) break;
      ucred cred{};
      socklen_t len = sizeof(cred);
      (void)::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len);
      grpc::AddInsecureChannelFromFd(server, conn);
    }
  }
}

// The same empty handlers on gRPC's callback API: each finishes its reactor
// inline, on the thread gRPC delivered the call on (no hand-off to a
// synchronous worker thread).
class EmptyCallbackService final : public v1::MigManager::CallbackService {
 public:
  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* ctx, const v1::AllocateRequest*,
                                     v1::AllocateResponse*) override {
    return Done(ctx);
  }
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* ctx, const v1::ReleaseRequest*,
                                    v1::ReleaseResponse*) override {
    return Done(ctx);
  }

 private:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx) {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
};

}  // namespace

int RunFloorServer(const std::string& socket_path, FloorApi api) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before any thread exists

  EmptyService sync_service;
  EmptyCallbackService callback_service;
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(64 * 1024);  // api::ApiServerOptions::max_receive_bytes
  if (api == FloorApi::kCallback) {
    builder.RegisterService(&callback_service);
  } else {
    builder.RegisterService(&sync_service);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (server == nullptr || fd < 0 || socket_path.size() >= sizeof(addr.sun_path)) return 1;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  ::unlink(socket_path.c_str());
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 128) != 0) {
    std::perror("floor server: bind/listen");
    return 1;
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return 1;
  std::thread accept([&] { AcceptLoop(fd, pipe_fds[0], server.get()); });
  std::fprintf(stderr, "floor ready\n");
  int sig = 0;
  sigwait(&stop, &sig);
  (void)::write(pipe_fds[1], "x", 1);
  accept.join();
  server->Shutdown();
  ::close(fd);
  ::unlink(socket_path.c_str());
  return 0;
}

}  // namespace migd::bench::latency
