// File: testing/daemon_process.h
//
// DaemonProcess: runs the real `migd` binary as a child process for
// end-to-end tests. stdout and stderr go to files in a scratch directory (so
// a test can show the daemon's log when something fails); readiness is "the
// API socket accepts a connection", polled with a generous deadline; the
// child's early exit ends the wait at once with its exit code and stderr.
//
// Example:
//   TempDir dir;
//   DaemonOptions opts;
//   opts.args = {"--simulate", "a100-40gb:1", "--socket", dir.Join("api.socket"),
//                "--state-dir", dir.Join("state")};
//   opts.env = {{"MIGD_SIM_STATE", dir.Join("sim.json")}};
//   opts.socket_path = dir.Join("api.socket");
//   MIGD_ASSERT_OK_AND_ASSIGN(auto daemon, DaemonProcess::Start(opts, dir.path()));
//   ... talk to the socket ...
//   daemon->Signal(SIGTERM);
//   DaemonExit exit = daemon->WaitForExit();
//   EXPECT_EQ(exit.exit_code, 0) << exit.err;
//
// Thread-safety: not thread-safe; one test thread owns a DaemonProcess. The
// destructor SIGKILLs a child that is still running and reaps it, so a failed
// ASSERT never leaks a daemon.
#ifndef MIGD_TESTING_DAEMON_PROCESS_H_
#define MIGD_TESTING_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace migd::testing {

// The migd binary of this build tree (a compile definition of this library).
const std::string& MigdBinaryPath();

// The simulated NVML library of this build tree (libnvidia-ml-sim.so.1).
const std::string& SimLibraryPath();

struct DaemonOptions {
  // The binary to run; empty = MigdBinaryPath().
  std::string binary;
  // Arguments after argv[0].
  std::vector<std::string> args;
  // Set in the child before exec; an empty value unsets the variable. The
  // rest of the environment is inherited.
  std::map<std::string, std::string> env;
  // The unix socket that means "ready" once it accepts a connection. Empty:
  // Start() returns as soon as the process is running (for tests of startup
  // failures, which then call WaitForExit()).
  std::string socket_path;
  // With socket_path: Start() also waits until the daemon's stderr contains
  // this text. migd logs "migd ready" (at info) after the API, the metrics
  // server and the reconciler are all running, whereas the socket accepts a
  // little earlier. Set "" with a --log-level above info.
  std::string ready_log = "migd ready";
  // How long Start() waits for the socket. Generous on purpose: the build
  // hosts are shared and a slow start is not a failure.
  std::chrono::milliseconds ready_timeout{std::chrono::seconds(60)};
};

struct DaemonExit {
  // The exit status; 128 + N when killed by signal N; -1 if it could not be
  // reaped (timeout in WaitForExit).
  int exit_code = -1;
  std::string out;
  std::string err;
};

class DaemonProcess {
 public:
  // Starts the daemon with its working directory set to `scratch_dir`, where
  // its stdout and stderr are written (migd.<n>.out / migd.<n>.err, n
  // counting starts in this process so restarts do not overwrite the log of
  // the previous run). If options.socket_path is set, waits until it accepts
  // a connection and stderr shows options.ready_log.
  // Errors: Internal if fork/exec fails; FailedPrecondition (message holds the
  // exit code and stderr) if the daemon exits before it is ready;
  // DeadlineExceeded (with stderr so far) if the socket does not accept in
  // options.ready_timeout — the child is then killed.
  static StatusOr<std::unique_ptr<DaemonProcess>> Start(const DaemonOptions& options,
                                                        const std::string& scratch_dir);

  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Sends `signo` to the daemon. No-op once it has been reaped.
  void Signal(int signo);

  // True while the child has not exited (reaps it if it has).
  bool Running();

  // Waits for the daemon to exit (at most `timeout`; on timeout exit_code is
  // -1 and the daemon keeps running). Returns the exit code and the captured
  // output. Calling it again after the exit returns the same result.
  DaemonExit WaitForExit(std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Signal(SIGTERM) then WaitForExit(timeout).
  DaemonExit Stop(std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // What the daemon has written to stderr / stdout so far.
  std::string Stderr() const;
  std::string Stdout() const;

 private:
  DaemonProcess(pid_t pid, std::string out_path, std::string err_path);
  // Non-blocking reap; records the exit code when the child has exited.
  bool TryReap();

  pid_t pid_;
  std::string out_path_;
  std::string err_path_;
  std::optional<int> exit_code_;
};

// True if something accepts connections on the unix socket at `path` now.
bool SocketAccepts(const std::string& path);

// The environment of a migd --simulate whose simulated machine lives under
// `sim_dir` (state.json and proc/), shared by every migd a test starts so a
// restart sees the same hardware; fsync off; every other simulator knob and
// NOTIFY_SOCKET cleared so the caller's environment cannot leak in.
std::map<std::string, std::string> SimulatedMachineEnv(const std::string& sim_dir);

}  // namespace migd::testing

#endif  // MIGD_TESTING_DAEMON_PROCESS_H_
