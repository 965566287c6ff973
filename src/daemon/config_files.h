// File: daemon/config_files.h
//
// Reading migd.yaml from disk. Whoever can change migd's config controls it
// (where records and CDI specs are written, which group may use the socket,
// which profiles are handed out), so the file and the directory holding it
// must be changeable only by migd's own user or root (docs/security.md).
//
// Thread-safety: reentrant.
#ifndef MIGD_DAEMON_CONFIG_FILES_H_
#define MIGD_DAEMON_CONFIG_FILES_H_

#include <string>

#include "base/status.h"
#include "daemon/config.h"

namespace migd::daemon {

// Reads and parses `path`. kNotFound / kPermissionDenied (with the path) if
// it cannot be read; kFailedPrecondition (naming the path and the fix) if the
// file or its directory is a symlink, is owned by someone other than root or
// migd's euid, or is writable by group or others (a sticky directory such as
// /tmp is accepted); kOutOfRange above 1 MiB; ParseConfig's errors otherwise.
StatusOr<Config> LoadConfigFile(const std::string& path);

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_CONFIG_FILES_H_
