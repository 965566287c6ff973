// File: store/file_ops.h
//
// FileOps: the narrow filesystem seam of the record store (leveldb's Env,
// reduced to what the store mutates or reads). The default implementation
// forwards to base/file_util.h; a test derives from FileOps, overrides one
// method and injects failures that root-run tests cannot provoke through
// permissions (EIO on unlink, a failing directory fsync, ENOSPC on write).
// Directory listing and lstat are not part of the seam: tests create real
// entries for those.
//
// Example:
//   class FailingUnlink : public store::FileOps {
//     Status RemoveFile(const std::string& path) override {
//       return UnavailableError("injected: removing " + path);
//     }
//   };
//
// Thread-safety: implementations must be safe for concurrent use; the default
// one is.
#ifndef MIGD_STORE_FILE_OPS_H_
#define MIGD_STORE_FILE_OPS_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "base/file_util.h"
#include "base/status.h"

namespace migd::store {

class FileOps {
 public:
  virtual ~FileOps() = default;

  // The process-wide default (base/file_util.h). Never destroyed.
  static FileOps& Default();

  // AtomicWriteFile (base/file_util.h), same contract.
  virtual Status WriteFileAtomically(const std::string& path, std::string_view data,
                                     const AtomicWriteOptions& options);
  // ReadFileToString (base/file_util.h), same contract: O_NOFOLLOW, regular
  // files only, kOutOfRange above `max_bytes`.
  virtual StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes);
  // unlink(2). kNotFound if absent; other errors per ErrnoToStatus.
  virtual Status RemoveFile(const std::string& path);
  // Renames `from` to `to` without ever replacing an existing `to`
  // (renameat2 RENAME_NOREPLACE; on a filesystem without it, a link(2) +
  // unlink(2) pair, which is just as exclusive). kAlreadyExists if `to` exists.
  virtual Status RenameNoReplace(const std::string& from, const std::string& to);
  // mkdir(2) with exactly `mode` (umask does not apply). kAlreadyExists if
  // anything exists at `dir`.
  virtual Status MakeDirectory(const std::string& dir, mode_t mode);
  // SyncDirectory (base/file_util.h).
  virtual Status SyncDirectory(const std::string& dir);
};

}  // namespace migd::store

#endif  // MIGD_STORE_FILE_OPS_H_
