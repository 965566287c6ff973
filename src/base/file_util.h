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
#include <vector>

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

// Whether `name` (a directory entry) is a temporary file AtomicWriteFile
// makes for a final file whose name ends in `base_suffix` (e.g. ".json"):
// ".<base>.<pid>.<n><temp_suffix>" with a non-empty base before the suffix.
bool IsAtomicWriteTempName(std::string_view name, std::string_view base_suffix,
                           std::string_view temp_suffix = ".tmp");

// The entries of `dir` except "." and "..", sorted by name. Errors
// (ErrnoToStatus) name "<what> <dir>": "opening ..." (kNotFound for a
// missing directory) or "listing ...".
StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir,
                                                 std::string_view what = "directory");

// Reads a whole regular file without following a symlink at its last
// component. Never blocks on, nor opens, a FIFO, socket or device node: the
// entry is lstat-ed before the open (O_NOFOLLOW | O_NONBLOCK | O_NOCTTY) and
// fstat-ed after it. A file whose size exceeds `max_bytes` is refused before
// anything is read; one that grows past it while read (or a /proc file, which
// reports no size) is refused after at most `max_bytes` bytes. The content
// is returned as is (NUL bytes and invalid UTF-8 included): parsing is the
// caller's job. Errors (messages name the path): kNotFound if absent;
// kFailedPrecondition for a symlink or non-regular file (saying which type);
// kOutOfRange if larger than `max_bytes`; kPermissionDenied and other OS
// errors per ErrnoToStatus.
StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes = 16 << 20);

// ReadFileToString for files that are links by design and live in
// directories only root can change: Kubernetes mounts a service account's
// token, ca.crt and namespace as symlinks into "..data/" (the kubelet's atomic
// writer). The link is followed; everything else holds (regular files only,
// checked before and after the open, never blocking, the size cap).
// Errors as ReadFileToString's, except that a symlink is not one.
StatusOr<std::string> ReadFileFollowingSymlinks(const std::string& path,
                                                size_t max_bytes = 16 << 20);

// Removes a file; kNotFound if it does not exist. Refuses directories.
Status RemoveFile(const std::string& path);

// fsyncs a directory so that renames and unlinks in it are durable.
Status SyncDirectory(const std::string& dir);

// Whether `path` lies on a filesystem kept only in memory (tmpfs, ramfs:
// statfs(2) f_type TMPFS_MAGIC or RAMFS_MAGIC of <linux/magic.h>). Its
// contents do not survive a reboot or power loss, and fsync(2) there writes
// nothing (Linux mm/shmem.c: noop_fsync). Errors: statfs's, per ErrnoToStatus.
StatusOr<bool> IsOnMemoryFilesystem(const std::string& path);

// Creates `dir` and missing parents with `mode` (existing directories keep
// their mode).
Status MakeDirectories(const std::string& dir, mode_t mode = 0755);

// "<path>: <strerror(err)>" with a code chosen from errno (ENOENT → kNotFound,
// EACCES/EPERM → kPermissionDenied, ELOOP → kFailedPrecondition, …).
Status ErrnoToStatus(int err, std::string_view what);

}  // namespace migd

#endif  // MIGD_BASE_FILE_UTIL_H_
