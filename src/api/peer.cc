#include "api/peer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

namespace migd::api {
namespace {

// /proc/<pid>/comm is at most 16 bytes (TASK_COMM_LEN) plus a newline.
std::string ReadCommand(pid_t pid) {
  if (pid <= 0) return "";
  const std::string path = "/proc/" + std::to_string(pid) + "/comm";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";
  char buf[64];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return "";
  std::string comm(buf, static_cast<size_t>(n));
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\0')) comm.pop_back();
  // A process chooses its own name: keep it printable so that it cannot
  // forge log lines.
  for (char& c : comm) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return comm;
}

}  // namespace

StatusOr<PeerCredentials> ReadPeerCredentials(int fd) {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return FailedPreconditionError(std::string("getsockopt(SO_PEERCRED): ") + std::strerror(errno));
  }
  if (len != sizeof(cred)) {
    return FailedPreconditionError("getsockopt(SO_PEERCRED): short answer");
  }
  PeerCredentials peer;
  peer.pid = cred.pid;
  peer.uid = cred.uid;
  peer.gid = cred.gid;
  peer.command = ReadCommand(cred.pid);
  return peer;
}

void AddPeerFields(const PeerCredentials& peer, Fields& f) {
  f.Add("peer_pid", peer.pid).Add("peer_uid", peer.uid).Add("peer_gid", peer.gid);
  if (!peer.command.empty()) f.Add("peer_comm", peer.command);
}

void PeerDirectory::Set(int fd, PeerCredentials peer) {
  MutexLock lock(&mu_);
  by_fd_[fd] = std::move(peer);
}

std::optional<PeerCredentials> PeerDirectory::Lookup(std::string_view grpc_peer) const {
  constexpr std::string_view kPrefix = "fd:";
  if (grpc_peer.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view digits = grpc_peer.substr(kPrefix.size());
  int fd = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), fd);
  if (ec != std::errc() || end != digits.data() + digits.size() || fd < 0) return std::nullopt;
  MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

size_t PeerDirectory::size() const {
  MutexLock lock(&mu_);
  return by_fd_.size();
}

}  // namespace migd::api
