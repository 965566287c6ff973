// File: daemon/startup_failure.h
//
// Failure: why migd could not start, as the process exit code
// (daemon.h ExitCode) and the one "migd: ..." line for stderr, which names
// the problem and the fix. Every startup step returns std::nullopt or one.
//
// Thread-safety: a value type.
#ifndef MIGD_DAEMON_STARTUP_FAILURE_H_
#define MIGD_DAEMON_STARTUP_FAILURE_H_

#include <optional>
#include <string>

namespace migd::daemon {

struct Failure {
  int code;
  std::string message;
};

// What a startup step returns: nothing, or why migd stops.
using MaybeFailure = std::optional<Failure>;

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_STARTUP_FAILURE_H_
