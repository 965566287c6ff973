#include "cdi/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>

#include <cerrno>
#include <cstring>

#include "base/file_util.h"

extern char** environ;

namespace migd::cdi {
namespace {

// Both ends close-on-exec; the child's end is dup2'ed by posix_spawn.
bool MakePipe(int fds[2]) { return ::pipe2(fds, O_CLOEXEC) == 0; }

std::string LastLine(const std::string& text) {
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::StripTrailingAsciiWhitespace(text), '\n');
  return lines.empty() ? std::string() : std::string(absl::StripAsciiWhitespace(lines.back()));
}

// Reads both pipes until they close or the deadline passes. False on timeout.
bool Drain(int out_fd, int err_fd, std::chrono::steady_clock::time_point deadline,
           std::string* out, std::string* err) {
  struct pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  int open = 2;
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    const int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      const ssize_t r = ::read(fds[i].fd, buf, sizeof(buf));
      if (r > 0) {
        sinks[i]->append(buf, static_cast<size_t>(r));
      } else if (r == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open;
      }
    }
  }
  return true;
}

}  // namespace

StatusOr<std::string> RunForOutput(const std::vector<std::string>& argv,
                                   std::chrono::milliseconds timeout, size_t max_bytes) {
  if (argv.empty()) return InvalidArgumentError("no command");
  const std::string what = absl::StrJoin(argv, " ");
  if (::access(argv[0].c_str(), X_OK) != 0) return ErrnoToStatus(errno, "running " + argv[0]);
  int out[2], err[2];
  if (!MakePipe(out)) return ErrnoToStatus(errno, "pipe for " + what);
  if (!MakePipe(err)) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    return ErrnoToStatus(e, "pipe for " + what);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  std::string stdout_text, stderr_text;
  const bool finished =
      rc == 0 && Drain(out[0], err[0], std::chrono::steady_clock::now() + timeout, &stdout_text,
                       &stderr_text);
  ::close(out[0]);
  ::close(err[0]);
  if (rc != 0) return ErrnoToStatus(rc, "running " + what);
  if (!finished) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!finished) {
    return DeadlineExceededError(what + " did not finish within " +
                                 std::to_string(timeout.count()) + " ms; killed");
  }
  if (WIFSIGNALED(status)) {
    return FailedPreconditionError(what + " was killed by signal " +
                                   std::to_string(WTERMSIG(status)) + ": " +
                                   LastLine(stderr_text));
  }
  if (WEXITSTATUS(status) != 0) {
    return FailedPreconditionError(what + " exited with status " +
                                   std::to_string(WEXITSTATUS(status)) + ": " +
                                   LastLine(stderr_text));
  }
  if (stdout_text.size() > max_bytes) {
    return ResourceExhaustedError(what + " wrote more than " + std::to_string(max_bytes) +
                                  " bytes");
  }
  return stdout_text;
}

}  // namespace migd::cdi
