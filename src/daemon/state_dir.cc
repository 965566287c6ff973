#include "daemon/state_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/file_util.h"
#include "daemon/daemon.h"

namespace migd::daemon {
namespace {

Failure StateDirError(const std::string& dir, const std::string& what) {
  return Failure{kExitStateDir, "stateDir " + dir + ": " + what};
}

// The directory's status, creating it (0700) if it is missing.
MaybeFailure StatOrCreate(const std::string& dir, struct stat* st) {
  if (::lstat(dir.c_str(), st) == 0) return std::nullopt;
  if (errno != ENOENT) return StateDirError(dir, std::strerror(errno));
  if (Status s = MakeDirectories(dir, 0700); !s.ok()) {
    return Failure{kExitStateDir, "cannot create stateDir " + dir + ": " + s.ToString() +
                                      " (create it, mode 0700, or set stateDir / --state-dir)"};
  }
  if (::lstat(dir.c_str(), st) != 0) return StateDirError(dir, std::strerror(errno));
  return std::nullopt;
}

}  // namespace

MaybeFailure StateDirLock::Acquire(const std::string& dir) {
  struct stat st {};
  if (MaybeFailure f = StatOrCreate(dir, &st)) return f;
  if (!S_ISDIR(st.st_mode)) {
    return Failure{kExitStateDir, "stateDir " + dir + " is not a directory"};
  }
  if ((st.st_mode & 022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
    return Failure{kExitStateDir,
                   "stateDir " + dir + " is writable by group or others (mode " + mode +
                       "); anyone who can write there can forge ownership records. Fix: chmod "
                       "0700 " +
                       dir};
  }
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    return Failure{kExitStateDir, "cannot open stateDir " + dir + ": " + std::strerror(errno)};
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Failure{kExitStateDir, "another migd is using stateDir " + dir +
                                        " (it holds the directory's lock); stop it first or "
                                        "give this one another stateDir"};
    }
    return Failure{kExitStateDir, "cannot lock stateDir " + dir + ": " + std::strerror(errno)};
  }
  return std::nullopt;
}

void StateDirLock::Release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace migd::daemon
