// See store/private_dir.h.
#include "store/private_dir.h"

#include <unistd.h>

#include <cstdio>

namespace migd::store {
namespace {

std::string OctalMode(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

Status CheckPrivateDir(const std::string& dir, const struct stat& st, std::string_view role) {
  const std::string what = std::string(role) + " " + dir;
  if (S_ISLNK(st.st_mode)) {
    return FailedPreconditionError(
        what +
        " is a symbolic link; migd does not follow it: point stateDir at a real "
        "directory (or replace the link by a directory with mode 0700)");
  }
  if (!S_ISDIR(st.st_mode)) {
    return FailedPreconditionError(
        what + " exists but is not a directory: move it away or choose another stateDir");
  }
  const uid_t euid = ::geteuid();
  if (st.st_uid != euid) {
    return FailedPreconditionError(what + " is owned by uid " + std::to_string(st.st_uid) +
                                   ", not by migd's euid " + std::to_string(euid) + ": chown " +
                                   std::to_string(euid) + " " + dir);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return FailedPreconditionError(what + " is writable by group or others (mode " +
                                   OctalMode(st.st_mode) + "): chmod 0700 " + dir);
  }
  return OkStatus();
}

}  // namespace migd::store
