#include "testing/privileges.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

namespace migd::testing {
namespace {

// The child's report: the status code as one byte, then the message.
[[noreturn]] void Report(int fd, StatusCode code, std::string_view message) {
  std::string out(1, static_cast<char>(code));
  out += message;
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::write(fd, out.data() + done, out.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::_exit(0);
}

Status DropRoot() {
  if (::geteuid() != 0) return OkStatus();
  if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobodyGid, kNobodyGid, kNobodyGid) != 0 ||
      ::setresuid(kNobodyUid, kNobodyUid, kNobodyUid) != 0) {
    return InternalError(std::string("cannot drop root privileges: ") + std::strerror(errno));
  }
  return OkStatus();
}

}  // namespace

Status RunUnprivileged(const std::function<Status()>& fn) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return InternalError("pipe2 failed");
  const pid_t pid = ::fork();
  if (pid < 0) return InternalError("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    Status s = DropRoot();
    if (s.ok()) s = fn();
    Report(fds[1], s.code(), s.message());
  }
  ::close(fds[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    report.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (report.empty() || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return InternalError("the unprivileged child died (wait status " + std::to_string(wstatus) +
                         ")");
  }
  const auto code = static_cast<StatusCode>(static_cast<unsigned char>(report[0]));
  return code == StatusCode::kOk ? OkStatus() : Status(code, report.substr(1));
}

bool HasCapability(int cap) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const uint64_t mask = std::stoull(line.substr(7), nullptr, 16);
    return ((mask >> cap) & 1u) != 0;
  }
  return false;
}

}  // namespace migd::testing
