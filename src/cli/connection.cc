#include "cli/connection.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/status.h"
#include "cli/exit_codes.h"

namespace migd::cli {
namespace {

constexpr std::string_view kStartHint =
    "is migd running? (start it with `migd --config /etc/migd/migd.yaml` or `make run`; use "
    "--socket or MIGD_SOCKET for another path)";

std::string TimeoutText(std::chrono::milliseconds t) {
  if (t.count() % 1000 == 0) return std::to_string(t.count() / 1000) + "s";
  return std::to_string(t.count()) + "ms";
}

// Extra advice per code (and command), appended to the server's message.
std::string_view Hint(grpc::StatusCode code, std::string_view command) {
  switch (code) {
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "`migctl status` shows what is free; `migctl plan PROFILE...` shows what would "
             "fit; `migctl reclaim` destroys Idle instances";
    case grpc::StatusCode::NOT_FOUND:
      if (command == "health clear") return "`migctl status` lists the GPUs by index";
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
             std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes); use a shorter --socket";
    case ENOTSOCK:
    case ENOTDIR:
      return head +
             "the path exists but is not a socket; check --socket / MIGD_SOCKET and "
             "migd's api.socket setting";
    default:
      return head + std::strerror(connect_errno) + "; " + std::string(kStartHint);
  }
}

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
  const std::string_view hint = Hint(s.error_code(), command);
  if (!hint.empty()) err << "  (" << hint << ")\n";
  return ExitCodeFor(s.error_code());
}

}  // namespace migd::cli
