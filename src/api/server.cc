#include "api/server.h"

#include <errno.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <spdlog/spdlog.h>

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

StatusOr<std::unique_ptr<ApiServer>> ApiServer::Start(const ApiServerOptions& options,
                                                       MigManagerService* service) {
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
  std::optional<gid_t> gid;
  if (options.group) {
    MIGD_ASSIGN_OR_RETURN(gid_t g, LookupGroup(*options.group));
    gid = g;
  }

  // Parent directory.
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

  // An existing file: a live migd, a stale socket, or something else.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return FailedPreconditionError(path + " exists and is not a socket; remove it or set "
                                            "api.socket to another path");
    }
    Status probe = ProbeUnixSocket(path);
    if (probe.ok()) {
      return FailedPreconditionError("another migd is serving on " + path + "; stop it first");
    }
    if (probe.code() != StatusCode::kUnavailable) {
      return FailedPreconditionError("cannot tell whether " + path +
                                     " is in use: " + std::string(probe.message()) +
                                     "; remove it if no migd runs");
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return FailedPreconditionError("cannot remove the stale socket " + path + ": " +
                                     Errno(errno));
    }
    spdlog::info("removed stale API socket{}", Fields().Add("path", path));
  } else if (errno != ENOENT) {
    return FailedPreconditionError("cannot stat " + path + ": " + Errno(errno));
  }

  std::unique_ptr<ApiServer> server(new ApiServer(options, service));
  {
    // The socket is created by bind() inside BuildAndStart: 0600 at most.
    UmaskGuard umask_guard(0177);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
    builder.RegisterService(service);
    server->server_ = builder.BuildAndStart();
  }
  if (server->server_ == nullptr) {
    return UnavailableError("cannot listen on unix:" + path +
                            " (gRPC bind failed; see the log above)");
  }
  if (::lstat(path.c_str(), &st) != 0) {
    const int err = errno;
    server->Stop(std::chrono::milliseconds(0), /*end_watches=*/false);
    return InternalError("the socket " + path + " is missing after bind: " + Errno(err));
  }
  server->socket_dev_ = st.st_dev;
  server->socket_ino_ = st.st_ino;
  if (gid && ::chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
    const int err = errno;
    server->Stop(std::chrono::milliseconds(0), /*end_watches=*/false);
    return FailedPreconditionError("cannot give " + path + " to group " + *options.group + ": " +
                                   Errno(err));
  }
  if (::chmod(path.c_str(), options.mode) != 0) {
    const int err = errno;
    server->Stop(std::chrono::milliseconds(0), /*end_watches=*/false);
    return InternalError("chmod " + Octal(options.mode) + " " + path + ": " + Errno(err));
  }
  spdlog::info("API listening{}", Fields()
                                      .Add("socket", path)
                                      .Add("mode", Octal(options.mode))
                                      .Add("group", options.group.value_or("")));
  return server;
}

ApiServer::~ApiServer() { Shutdown(std::chrono::milliseconds(0)); }

void ApiServer::Shutdown(std::chrono::milliseconds deadline) {
  Stop(deadline, /*end_watches=*/true);
}

void ApiServer::Stop(std::chrono::milliseconds deadline, bool end_watches) {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ == nullptr) return;
  // Watch streams never finish on their own: end them first so that the
  // server's drain below only waits for unary calls.
  if (end_watches) service_->hub().Close();
  server_->Shutdown(std::chrono::system_clock::now() + deadline);
  server_->Wait();
  // Remove the socket only if it is still ours (not a successor's).
  struct stat st {};
  if (::lstat(options_.socket_path.c_str(), &st) == 0 && st.st_dev == socket_dev_ &&
      st.st_ino == socket_ino_) {
    if (::unlink(options_.socket_path.c_str()) != 0) {
      spdlog::warn("cannot remove the API socket{}", Fields()
                                                         .Add("path", options_.socket_path)
                                                         .Add("error", Errno(errno)));
    }
  }
  spdlog::info("API stopped{}", Fields().Add("socket", options_.socket_path));
}

}  // namespace migd::api
