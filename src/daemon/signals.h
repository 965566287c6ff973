// File: daemon/signals.h
//
// SignalWaiter: SIGTERM, SIGINT and SIGHUP read from a signalfd, so no work
// happens in a signal handler. Block() must run before any other thread
// exists: the mask is inherited by every thread started later (gRPC,
// httplib, the reconciler), so the signals reach only the signalfd. SIGPIPE
// is ignored (a client closing its socket is an error return, not a kill).
//
// Thread-safety: one thread calls Wait.
#ifndef MIGD_DAEMON_SIGNALS_H_
#define MIGD_DAEMON_SIGNALS_H_

#include <string>

#include "daemon/startup_failure.h"

namespace migd::daemon {

class SignalWaiter {
 public:
  enum class Event { kReload, kStop };

  SignalWaiter() = default;
  ~SignalWaiter();
  SignalWaiter(const SignalWaiter&) = delete;
  SignalWaiter& operator=(const SignalWaiter&) = delete;

  // Blocks the three signals for this thread and opens the signalfd.
  // kExitStartup if either fails.
  MaybeFailure Block();
  // Waits for the next signal: SIGHUP is kReload, SIGTERM and SIGINT are
  // kStop (so is a failure to read, after logging it). `*name` is the
  // signal's description, e.g. "Terminated".
  Event Wait(std::string* name);

 private:
  int fd_ = -1;
};

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_SIGNALS_H_
