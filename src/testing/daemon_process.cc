#include "testing/daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/file_util.h"

#ifndef MIGD_DAEMON_BINARY
#error "MIGD_DAEMON_BINARY must name the migd binary (set by src/testing/CMakeLists.txt)"
#endif
#ifndef MIGD_SIM_LIBRARY_PATH
#error "MIGD_SIM_LIBRARY_PATH must name libnvidia-ml-sim.so.1 (set by src/testing/CMakeLists.txt)"
#endif

namespace migd::testing {
namespace {

// Poll period for readiness and exit. Only a wait granularity: every wait is
// bounded by its deadline, never by a count of periods.
constexpr auto kPollPeriod = std::chrono::milliseconds(20);

std::atomic<int> g_start_counter{0};

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

const std::string& MigdBinaryPath() {
  static const std::string* const kPath = new std::string(MIGD_DAEMON_BINARY);
  return *kPath;
}

const std::string& SimLibraryPath() {
  static const std::string* const kPath = new std::string(MIGD_SIM_LIBRARY_PATH);
  return *kPath;
}

std::map<std::string, std::string> SimulatedMachineEnv(const std::string& sim_dir) {
  return {{"MIGD_SIM_STATE", sim_dir + "/state.json"},
          {"MIGD_SIM_PROC_ROOT", sim_dir + "/proc"},
          {"MIGD_SIM_FSYNC", "0"},
          {"MIGD_SIM_GPUS", ""},
          {"MIGD_SIM_FAULTS", ""},
          {"MIGD_SIM_LATENCY_MS", ""},
          {"MIGD_SIM_GI_IDS", ""},
          {"NOTIFY_SOCKET", ""}};
}

bool SocketAccepts(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

DaemonProcess::DaemonProcess(pid_t pid, std::string out_path, std::string err_path)
    : pid_(pid), out_path_(std::move(out_path)), err_path_(std::move(err_path)) {}

StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(const DaemonOptions& options,
                                                              const std::string& scratch_dir) {
  const int n = g_start_counter.fetch_add(1);
  const std::string out_path = scratch_dir + "/migd." + std::to_string(n) + ".out";
  const std::string err_path = scratch_dir + "/migd." + std::to_string(n) + ".err";
  std::vector<std::string> argv;
  argv.push_back(options.binary.empty() ? MigdBinaryPath() : options.binary);
  argv.insert(argv.end(), options.args.begin(), options.args.end());

  // Everything the child needs is prepared before fork: the child only calls
  // async-signal-safe functions (plus setenv, safe here because tests fork
  // from a single thread of their own).
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) return InternalError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(126);
    if (::chdir(scratch_dir.c_str()) != 0) ::_exit(126);
    // The test binary may block signals (gtest does not, but a runner could);
    // the daemon must start with a clean mask so SIGTERM/SIGHUP reach it.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (const auto& [key, value] : options.env) {
      if (value.empty()) {
        ::unsetenv(key.c_str());
      } else {
        ::setenv(key.c_str(), value.c_str(), 1);
      }
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }

  std::unique_ptr<DaemonProcess> daemon(new DaemonProcess(pid, out_path, err_path));
  if (options.socket_path.empty()) return daemon;

  const auto deadline = std::chrono::steady_clock::now() + options.ready_timeout;
  while (true) {
    if (!daemon->Running()) {
      return FailedPreconditionError(
          "migd exited with code " + std::to_string(daemon->exit_code_.value_or(-1)) + " before " +
          options.socket_path + " accepted; stderr:\n" + daemon->Stderr());
    }
    if (SocketAccepts(options.socket_path) &&
        (options.ready_log.empty() ||
         daemon->Stderr().find(options.ready_log) != std::string::npos)) {
      return daemon;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(kPollPeriod);
  }
  const std::string err = daemon->Stderr();
  daemon->Signal(SIGKILL);
  daemon->WaitForExit();
  return DeadlineExceededError(options.socket_path + " did not accept a connection (or stderr " +
                               "did not show \"" + options.ready_log + "\") within " +
                               std::to_string(options.ready_timeout.count()) +
                               " ms; migd stderr:\n" + err);
}

DaemonProcess::~DaemonProcess() {
  if (!exit_code_.has_value()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

bool DaemonProcess::TryReap() {
  if (exit_code_.has_value()) return true;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = DecodeWaitStatus(status);
    return true;
  }
  if (r < 0 && errno == ECHILD) {
    exit_code_ = -1;
    return true;
  }
  return false;
}

bool DaemonProcess::Running() { return !TryReap(); }

void DaemonProcess::Signal(int signo) {
  if (TryReap()) return;
  ::kill(pid_, signo);
}

DaemonExit DaemonProcess::WaitForExit(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!TryReap() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(kPollPeriod);
  }
  DaemonExit result;
  result.exit_code = exit_code_.value_or(-1);
  result.out = Stdout();
  result.err = Stderr();
  return result;
}

DaemonExit DaemonProcess::Stop(std::chrono::milliseconds timeout) {
  Signal(SIGTERM);
  return WaitForExit(timeout);
}

std::string DaemonProcess::Stderr() const { return ReadFileToString(err_path_).value_or(""); }

std::string DaemonProcess::Stdout() const { return ReadFileToString(out_path_).value_or(""); }

}  // namespace migd::testing
