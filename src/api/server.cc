#include "api/server.h"

#include <errno.h>
#include <grp.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "api/peer.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace migd::api {
namespace {

std::string Errno(int err) { return std::strerror(err); }

std::string Octal(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode));
  return buf;
}

// Restores the process umask when it goes out of scope.
class UmaskGuard {
 public:
  explicit UmaskGuard(mode_t mask) : old_(::umask(mask)) {}
  ~UmaskGuard() { ::umask(old_); }
  UmaskGuard(const UmaskGuard&) = delete;
  UmaskGuard& operator=(const UmaskGuard&) = delete;

 private:
  mode_t old_;
};

// A group name, or a numeric gid (used as is: the group need not have a name
// on this host, as with a gid shared by containers).
StatusOr<gid_t> LookupGroup(const std::string& name) {
  if (name.empty()) return InvalidArgumentError("api.socketGroup: empty group name");
  if (name.find_first_not_of("0123456789") == std::string::npos) {
    if (name.size() > 9) {
      return InvalidArgumentError("api.socketGroup: gid " + name + " is out of range");
    }
    return static_cast<gid_t>(std::stoul(name));
  }
  std::vector<char> buf(16384);
  struct group gr;
  struct group* result = nullptr;
  const int rc = ::getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &result);
  if (rc != 0) {
    return FailedPreconditionError("api.socketGroup: cannot look up group '" + name +
                                   "': " + Errno(rc));
  }
  if (result == nullptr) {
    return FailedPreconditionError("api.socketGroup: group '" + name +
                                   "' does not exist; create it (groupadd " + name +
                                   ") or unset api.socketGroup");
  }
  return gr.gr_gid;
}

}  // namespace

Status ProbeUnixSocket(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return InvalidArgumentError("socket path " + path + " is too long");
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return InternalError("socket(AF_UNIX): " + Errno(errno));
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (rc == 0) return OkStatus();
  return Status(err == ECONNREFUSED || err == ENOENT ? StatusCode::kUnavailable
                                                     : StatusCode::kFailedPrecondition,
                "connect(" + path + "): " + Errno(err));
}

namespace {

Status ValidateOptions(const ApiServerOptions& options) {
  const std::string& path = options.socket_path;
  if (path.empty()) return InvalidArgumentError("api.socket: required");
  if (path.front() != '/') {
    return InvalidArgumentError("api.socket: '" + path + "' is not an absolute path");
  }
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return InvalidArgumentError("api.socket: '" + path + "' is " + std::to_string(path.size()) +
                                " bytes, at most " +
                                std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) +
                                " (unix socket limit); choose a shorter path");
  }
  if ((options.mode & ~static_cast<mode_t>(0777)) != 0) {
    return InvalidArgumentError("api.socketMode: " + Octal(options.mode) +
                                " has bits outside 0777");
  }
  if (options.max_receive_bytes <= 0) {
    return InvalidArgumentError("max_receive_bytes must be positive");
  }
  return OkStatus();
}

// Creates the socket's parent directory (0755) if missing.
Status PrepareSocketDirectory(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!std::filesystem::exists(parent, ec)) {
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      return FailedPreconditionError("cannot create the socket directory " + parent.string() +
                                     ": " + ec.message());
    }
    std::filesystem::permissions(parent, std::filesystem::perms(0755),
                                 std::filesystem::perm_options::replace, ec);
  } else if (!std::filesystem::is_directory(parent, ec)) {
    return FailedPreconditionError("the socket's parent " + parent.string() +
                                   " is not a directory; fix api.socket");
  }
  return OkStatus();
}

// An existing file at `path`: a live migd (refused), a stale socket
// (removed), or something else (refused).
Status RemoveStaleSocket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return OkStatus();
    return FailedPreconditionError("cannot stat " + path + ": " + Errno(errno));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return FailedPreconditionError(path +
                                   " exists and is not a socket; remove it or set "
                                   "api.socket to another path");
  }
  Status probe = ProbeUnixSocket(path);
  if (probe.ok()) {
    return FailedPreconditionError("another migd is serving on " + path + "; stop it first");
  }
  if (probe.code() != StatusCode::kUnavailable) {
    return FailedPreconditionError("cannot tell whether " + path + " is in use: " +
                                   std::string(probe.message()) + "; remove it if no migd runs");
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return FailedPreconditionError("cannot remove the stale socket " + path + ": " + Errno(errno));
  }
  spdlog::info("removed stale API socket{}", Fields().Add("path", path));
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<ApiServer>> ApiServer::Start(const ApiServerOptions& options,
                                                      MigManagerService* service) {
  const std::string& path = options.socket_path;
  MIGD_RETURN_IF_ERROR(ValidateOptions(options));
  std::optional<gid_t> gid;
  if (options.group) {
    MIGD_ASSIGN_OR_RETURN(gid_t g, LookupGroup(*options.group));
    gid = g;
  }
  MIGD_RETURN_IF_ERROR(PrepareSocketDirectory(path));
  MIGD_RETURN_IF_ERROR(RemoveStaleSocket(path));

  std::unique_ptr<ApiServer> server(new ApiServer(options, service));
  {
    // No listening port: connections are accepted below and handed over
    // with AddInsecureChannelFromFd, after their credentials are read.
    grpc::ServerBuilder builder;
    builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
    builder.RegisterService(service);
    server->server_ = builder.BuildAndStart();
  }
  if (server->server_ == nullptr) {
    return UnavailableError("cannot start the gRPC server for " + path + " (see the log above)");
  }
  MIGD_RETURN_IF_ERROR(server->Listen(gid));
  spdlog::info("API listening{}", Fields()
                                      .Add("socket", path)
                                      .Add("mode", Octal(options.mode))
                                      .Add("group", options.group.value_or("")));
  return server;
}

Status ApiServer::Listen(std::optional<gid_t> gid) {
  const std::string& path = options_.socket_path;
  auto fail = [this](Status status) {
    Stop(std::chrono::milliseconds(0), /*end_watches=*/false);
    return status;
  };
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) return fail(InternalError("socket(AF_UNIX): " + Errno(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  {
    // bind() creates the socket file: 0600 at most, even briefly.
    UmaskGuard umask_guard(0177);
    if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      const int err = errno;
      return fail(UnavailableError("cannot listen on unix:" + path + ": bind: " + Errno(err)));
    }
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    const int err = errno;
    return fail(InternalError("the socket " + path + " is missing after bind: " + Errno(err)));
  }
  socket_dev_ = st.st_dev;
  socket_ino_ = st.st_ino;
  bound_ = true;
  // Group and mode before listen(): until then a connect is refused, so no
  // one connects through wider-than-intended permissions.
  if (gid && ::chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
    const int err = errno;
    return fail(FailedPreconditionError("cannot give " + path + " to group " + *options_.group +
                                        ": " + Errno(err)));
  }
  if (::chmod(path.c_str(), options_.mode) != 0) {
    const int err = errno;
    return fail(InternalError("chmod " + Octal(options_.mode) + " " + path + ": " + Errno(err)));
  }
  if (::listen(listen_fd_, kListenBacklog) != 0) {
    const int err = errno;
    return fail(UnavailableError("cannot listen on unix:" + path + ": listen: " + Errno(err)));
  }
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return fail(InternalError("eventfd: " + Errno(errno)));
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return OkStatus();
}

void ApiServer::AcceptLoop() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  bool warned_fd_limit = false;
  for (;;) {
    fds[0].revents = fds[1].revents = 0;
    const int rc = ::poll(fds, 2, -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      spdlog::error("API accept loop stopped: no new connections{}",
                    Fields().Add("socket", options_.socket_path).Add("error", Errno(errno)));
      return;
    }
    if (fds[1].revents != 0) return;  // Stop()
    if (fds[0].revents == 0) continue;
    for (;;) {
      const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (conn >= 0) {
        warned_fd_limit = false;
        ServeConnection(conn);
        continue;
      }
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) break;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        // The pending connection stays queued; wait for descriptors to be
        // freed (or for Stop) instead of spinning on poll().
        if (!warned_fd_limit) {
          spdlog::warn(
              "API cannot accept connections: out of file descriptors or memory; "
              "raise LimitNOFILE or find the client that holds connections{}",
              Fields().Add("socket", options_.socket_path).Add("error", Errno(err)));
          warned_fd_limit = true;
        }
        pollfd wake = {wake_fd_, POLLIN, 0};
        if (::poll(&wake, 1, 100) > 0) return;
        break;
      }
      spdlog::error("API accept failed{}",
                    Fields().Add("socket", options_.socket_path).Add("error", Errno(err)));
      break;
    }
  }
}

void ApiServer::ServeConnection(int fd) {
  StatusOr<PeerCredentials> peer = ReadPeerCredentials(fd);
  if (!peer.ok()) {
    // Every unix stream socket has peer credentials; one without cannot be
    // attributed, so it is not served.
    spdlog::warn("API connection refused: no peer credentials{}",
                 Fields().Add("error", peer.status().message()));
    ::close(fd);
    return;
  }
  if (spdlog::should_log(spdlog::level::debug)) {
    Fields f;
    f.Add("conn", fd);
    AddPeerFields(*peer, f);
    spdlog::debug("API connection{}", f);
  }
  service_->peers().Set(fd, *std::move(peer));
  // gRPC owns the descriptor from here and closes it with the connection.
  grpc::AddInsecureChannelFromFd(server_.get(), fd);
}

ApiServer::~ApiServer() { Shutdown(std::chrono::milliseconds(0)); }

void ApiServer::Shutdown(std::chrono::milliseconds deadline) {
  Stop(deadline, /*end_watches=*/true);
}

void ApiServer::Stop(std::chrono::milliseconds deadline, bool end_watches) {
  MutexLock lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  // No new connection may reach the gRPC server once it shuts down.
  if (accept_thread_.joinable()) {
    const uint64_t one = 1;
    if (::write(wake_fd_, &one, sizeof(one)) != static_cast<ssize_t>(sizeof(one))) {
      spdlog::error("cannot wake the API accept loop{}", Fields().Add("error", Errno(errno)));
    }
    accept_thread_.join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
  if (server_ != nullptr) {
    // Watch streams never finish on their own: end them first so that the
    // server's drain below only waits for unary calls.
    if (end_watches) service_->hub().Close();
    server_->Shutdown(std::chrono::system_clock::now() + deadline);
    server_->Wait();
  }
  // Remove the socket only if it is still ours (not a successor's).
  struct stat st {};
  if (bound_ && ::lstat(options_.socket_path.c_str(), &st) == 0 && st.st_dev == socket_dev_ &&
      st.st_ino == socket_ino_) {
    if (::unlink(options_.socket_path.c_str()) != 0) {
      spdlog::warn("cannot remove the API socket{}",
                   Fields().Add("path", options_.socket_path).Add("error", Errno(errno)));
    }
  }
  if (server_ != nullptr)
    spdlog::info("API stopped{}", Fields().Add("socket", options_.socket_path));
}

}  // namespace migd::api
