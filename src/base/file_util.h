// File: base/file_util.h
//
// Crash-safe file primitives. AtomicWriteFile is the only way migd writes a
// file that must survive a crash: temp file in the same directory, fsync,
// rename over the target, fsync of the directory. Symbolic links and
// non-regular files at the target are refused, never followed.
//
// Thread-safety: the functions are safe to call concurrently on different
// paths; concurrent writers of one path must be serialised by the caller (the
// last rename wins, and neither leaves a torn file).
#ifndef MIGD_BASE_FILE_UTIL_H_
#define MIGD_BASE_FILE_UTIL_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace migd {

struct AtomicWriteOptions {
  // Permission bits of the final file (applied with fchmod, so umask does not
  // interfere).
  mode_t mode = 0644;
  // When false, skips both fsyncs: the write is still atomic against a crash
  // of the process (kill -9), but not against power loss. For counters and
  // other data that may be lost on a machine crash.
  bool sync = true;
  // Suffix of the temporary file. Its name is ".<base>.<pid>.<n><suffix>", so
  // readers that pick files by extension (CDI runtimes: *.json, *.yaml) skip it.
  std::string temp_suffix = ".tmp";
  // Test hook (base/crash_point.h): with "record.write", the crash points
  // "record.write.before_rename" and "record.write.after_rename" are reached
  // around the rename. Empty: none.
  std::string crash_points{};
};

// Writes `data` to `path` atomically. On success the file holds exactly `data`
// with `options.mode`. On failure the previous content (or absence) of `path`
// is unchanged and no temporary file is left behind.
// Errors: kFailedPrecondition if `path` is a symlink or not a regular file;
// kInvalidArgument for an empty path or one that ends in '/';
// kUnavailable / kPermissionDenied / kInternal for OS errors (message has
// the path and errno text).
Status AtomicWriteFile(const std::string& path, std::string_view data,
                       const AtomicWriteOptions& options = {});

// Reads a whole regular file without following a symlink at its last
// component. Errors: kNotFound if absent; kFailedPrecondition for a symlink or
// non-regular file; kOutOfRange if larger than `max_bytes`.
StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes = 16 << 20);

// Removes a file; kNotFound if it does not exist. Refuses directories.
Status RemoveFile(const std::string& path);

// fsyncs a directory so that renames and unlinks in it are durable.
Status SyncDirectory(const std::string& dir);

// Creates `dir` and missing parents with `mode` (existing directories keep
// their mode).
Status MakeDirectories(const std::string& dir, mode_t mode = 0755);

// "<path>: <strerror(err)>" with a code chosen from errno (ENOENT → kNotFound,
// EACCES/EPERM → kPermissionDenied, ELOOP → kFailedPrecondition, …).
Status ErrnoToStatus(int err, std::string_view what);

}  // namespace migd

#endif  // MIGD_BASE_FILE_UTIL_H_
