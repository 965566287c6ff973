// File: daemon/state_dir.h
//
// StateDirLock: migd's stateDir, made safe and held. Acquire creates the
// directory (mode 0700) if it is missing, refuses one that is not a
// directory or is writable by group or others (anyone who can write there
// can forge ownership records), and takes an exclusive flock on it, so one
// migd at a time writes the records (store/record_store.h has a single
// writer). The lock is released when the object dies (or the process exits).
//
// Thread-safety: not thread-safe; the daemon's startup thread owns it.
#ifndef MIGD_DAEMON_STATE_DIR_H_
#define MIGD_DAEMON_STATE_DIR_H_

#include <string>

#include "daemon/startup_failure.h"

namespace migd::daemon {

class StateDirLock {
 public:
  StateDirLock() = default;
  ~StateDirLock() { Release(); }
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

  // kExitStateDir naming `dir` and the fix for each refusal above, and for
  // another process holding the lock. Call once.
  MaybeFailure Acquire(const std::string& dir);
  // Closes the directory, releasing the lock. Idempotent.
  void Release();

 private:
  int fd_ = -1;
};

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_STATE_DIR_H_
