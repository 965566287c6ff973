#include "daemon/config_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "base/file_util.h"
#include "base/status_macros.h"
#include "daemon/config_parse.h"

namespace migd::daemon {
namespace {

// `what` ("file" or "directory") at `p` may be changed only by `euid` or
// root, and is not a symlink. `path` is the config file, for messages.
Status CheckOwnedAndPrivate(const std::string& what, const std::string& p, bool dir, uid_t euid,
                            const std::string& path) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return ErrnoToStatus(errno, "reading config file " + path);
  if (S_ISLNK(st.st_mode)) {
    return FailedPreconditionError("config " + what + " " + p +
                                   " is a symbolic link; refusing to follow it (point --config "
                                   "at the file itself)");
  }
  if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    return FailedPreconditionError("config " + what + " " + p + " is not a " +
                                   (dir ? "directory" : "regular file"));
  }
  if (st.st_uid != euid && st.st_uid != 0) {
    return FailedPreconditionError("config " + what + " " + p + " is owned by uid " +
                                   std::to_string(st.st_uid) + ", not by root or migd's uid " +
                                   std::to_string(euid) +
                                   "; that user could rewrite migd's configuration. Fix: chown "
                                   "root " +
                                   p);
  }
  // A sticky directory (/tmp) lets others add files but not replace ours.
  const bool writable = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (writable && !(dir && (st.st_mode & S_ISVTX) != 0)) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return FailedPreconditionError(
        "config " + what + " " + p + " is writable by group or others (mode " + mode +
        "); anyone who can write it controls migd. Fix: chmod go-w " + p);
  }
  return OkStatus();
}

// Checking the directory as well closes the window between this check and
// the read: nobody else can swap the file in between.
Status CheckConfigFileSafe(const std::string& path) {
  const uid_t euid = ::geteuid();
  const size_t slash = path.rfind('/');
  const std::string parent =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  MIGD_RETURN_IF_ERROR(CheckOwnedAndPrivate("file", path, /*dir=*/false, euid, path));
  return CheckOwnedAndPrivate("directory", parent, /*dir=*/true, euid, path);
}

}  // namespace

StatusOr<Config> LoadConfigFile(const std::string& path) {
  MIGD_RETURN_IF_ERROR(CheckConfigFileSafe(path));
  StatusOr<std::string> text = ReadFileToString(path, 1 << 20);
  if (!text.ok()) return text.status().WithContext("reading config file " + path);
  return ParseConfig(*text, path);
}

}  // namespace migd::daemon
