#include "store/file_ops.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace migd::store {

FileOps& FileOps::Default() {
  static FileOps* const ops = new FileOps();
  return *ops;
}

Status FileOps::WriteFileAtomically(const std::string& path, std::string_view data,
                                    const AtomicWriteOptions& options) {
  return AtomicWriteFile(path, data, options);
}

StatusOr<std::string> FileOps::ReadFile(const std::string& path, size_t max_bytes) {
  return ReadFileToString(path, max_bytes);
}

Status FileOps::RemoveFile(const std::string& path) { return migd::RemoveFile(path); }

Status FileOps::RenameNoReplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
    return OkStatus();
  }
  const int err = errno;
  if (err != EINVAL && err != ENOSYS) {
    return ErrnoToStatus(err, "renaming " + from + " to " + to);
  }
  // No RENAME_NOREPLACE here: link(2) fails with EEXIST just the same, and
  // both names are in directories we own.
  if (::link(from.c_str(), to.c_str()) != 0) {
    return ErrnoToStatus(errno, "linking " + from + " to " + to);
  }
  if (::unlink(from.c_str()) != 0) return ErrnoToStatus(errno, "unlinking " + from);
  return OkStatus();
}

Status FileOps::MakeDirectory(const std::string& dir, mode_t mode) {
  if (::mkdir(dir.c_str(), mode) != 0) return ErrnoToStatus(errno, "creating directory " + dir);
  // mkdir applies the umask; the contract is the exact mode.
  if (::chmod(dir.c_str(), mode) != 0) return ErrnoToStatus(errno, "chmod " + dir);
  return OkStatus();
}

Status FileOps::SyncDirectory(const std::string& dir) { return migd::SyncDirectory(dir); }

}  // namespace migd::store
