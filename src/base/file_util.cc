#include "base/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/crash_point.h"
#include "base/defer.h"
#include "base/status_macros.h"

namespace migd {
namespace {

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Status WriteAll(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "writing " + what);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "of an unknown file type";
}

Status TooLarge(const std::string& path, size_t max_bytes) {
  return OutOfRangeError(path + " is larger than " + std::to_string(max_bytes) +
                         " bytes; refusing to read it (is it the right file?)");
}

// What ReadFileToString accepts: a regular file no larger than `max_bytes`
// (by its size as reported; the read loop checks again).
Status CheckReadableFile(const std::string& path, const struct stat& st, size_t max_bytes) {
  if (S_ISLNK(st.st_mode)) {
    return FailedPreconditionError(path + " is a symbolic link; refusing to follow it");
  }
  if (!S_ISREG(st.st_mode)) {
    return FailedPreconditionError(path + " is " + FileTypeName(st.st_mode) +
                                   ", not a regular file; refusing to read it (replace it with "
                                   "a regular file or point migd elsewhere)");
  }
  if (st.st_size > 0 && static_cast<uint64_t>(st.st_size) > max_bytes) {
    return TooLarge(path, max_bytes);
  }
  return OkStatus();
}

}  // namespace

Status ErrnoToStatus(int err, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  switch (err) {
    case ENOENT:
      return NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDeniedError(msg);
    case ELOOP:
    case ENOTDIR:
    case EISDIR:
      return FailedPreconditionError(msg);
    case EEXIST:
      return AlreadyExistsError(msg);
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
      return ResourceExhaustedError(msg);
    case EINTR:
    case EAGAIN:
    case EIO:
      return UnavailableError(msg);
    default:
      return InternalError(msg);
  }
}

bool IsAtomicWriteTempName(std::string_view name, std::string_view base_suffix,
                           std::string_view temp_suffix) {
  if (!name.starts_with(".") || !name.ends_with(temp_suffix)) return false;
  std::string_view inner = name.substr(1, name.size() - 1 - temp_suffix.size());
  const auto all_digits = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  for (int i = 0; i < 2; ++i) {  // ".<n>", then ".<pid>" (AtomicWriteFile's name)
    const size_t dot = inner.rfind('.');
    if (dot == std::string_view::npos || !all_digits(inner.substr(dot + 1))) return false;
    inner = inner.substr(0, dot);
  }
  return inner.size() > base_suffix.size() && inner.ends_with(base_suffix);
}

StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir, std::string_view what) {
  const std::string subject = std::string(what) + " " + dir;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoToStatus(errno, "opening " + subject);
  Defer close_dir([d] { ::closedir(d); });
  std::vector<std::string> names;
  while (true) {
    errno = 0;
    const dirent* e = ::readdir(d);
    if (e == nullptr) {
      if (errno != 0) return ErrnoToStatus(errno, "listing " + subject);
      break;
    }
    std::string name(e->d_name);
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status SyncDirectory(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoToStatus(errno, "opening directory " + dir);
  if (::fsync(fd.get()) != 0) return ErrnoToStatus(errno, "fsync of directory " + dir);
  return OkStatus();
}

StatusOr<bool> IsOnMemoryFilesystem(const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return ErrnoToStatus(errno, "statfs " + path);
  // f_type's type differs between architectures; the magics fit in 32 bits.
  const auto type = static_cast<uint32_t>(fs.f_type);
  return type == static_cast<uint32_t>(TMPFS_MAGIC) || type == static_cast<uint32_t>(RAMFS_MAGIC);
}

Status AtomicWriteFile(const std::string& path, std::string_view data,
                       const AtomicWriteOptions& options) {
  if (path.empty() || path.back() == '/') {
    return InvalidArgumentError("atomic write: bad file path '" + path + "'");
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      return FailedPreconditionError(path + " is a symbolic link; refusing to write through it");
    }
    if (!S_ISREG(st.st_mode)) {
      return FailedPreconditionError(path + " exists and is not a regular file");
    }
  } else if (errno != ENOENT) {
    return ErrnoToStatus(errno, "lstat " + path);
  }

  static std::atomic<uint64_t> counter{0};
  const std::string dir = DirName(path);
  const std::string tmp = dir + "/." + BaseName(path) + "." + std::to_string(::getpid()) + "." +
                          std::to_string(counter.fetch_add(1)) + options.temp_suffix;
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) return ErrnoToStatus(errno, "creating " + tmp);

  Status s = WriteAll(fd.get(), data, tmp);
  if (s.ok() && ::fchmod(fd.get(), options.mode) != 0) s = ErrnoToStatus(errno, "chmod " + tmp);
  if (s.ok() && options.sync && ::fsync(fd.get()) != 0) s = ErrnoToStatus(errno, "fsync " + tmp);
  if (s.ok() && ::close(fd.Release()) != 0) s = ErrnoToStatus(errno, "close " + tmp);
  if (s.ok() && !options.crash_points.empty()) CrashPoint(options.crash_points + ".before_rename");
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = ErrnoToStatus(errno, "rename " + tmp + " to " + path);
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  if (!options.crash_points.empty()) CrashPoint(options.crash_points + ".after_rename");
  if (options.sync) return SyncDirectory(dir);
  return OkStatus();
}

namespace {

StatusOr<std::string> ReadRegularFile(const std::string& path, size_t max_bytes,
                                      bool follow_symlinks) {
  // The type is checked before open(2) as well as after: opening a FIFO
  // blocks until a writer appears (without O_NONBLOCK), and opening a device
  // node can have effects of its own (a tty may become the controlling
  // terminal, a watchdog starts counting, a tape rewinds). The fstat after
  // the open closes the window in which the entry could be swapped.
  struct stat st {};
  const int rc = follow_symlinks ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st);
  if (rc != 0) return ErrnoToStatus(errno, "opening " + path);
  MIGD_RETURN_IF_ERROR(CheckReadableFile(path, st, max_bytes));
  Fd fd(::open(path.c_str(),
               O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (follow_symlinks ? 0 : O_NOFOLLOW)));
  if (fd.get() < 0) {
    if (errno == ELOOP) {
      return FailedPreconditionError(path + " is a symbolic link; refusing to follow it");
    }
    return ErrnoToStatus(errno, "opening " + path);
  }
  if (::fstat(fd.get(), &st) != 0) return ErrnoToStatus(errno, "stat " + path);
  MIGD_RETURN_IF_ERROR(CheckReadableFile(path, st, max_bytes));
  std::string out;
  char buf[16384];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "reading " + path);
    }
    if (n == 0) break;
    // Also here, not only from st_size: /proc and sysfs files report a size
    // of 0 or 4096, and a regular file can grow while it is read.
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return TooLarge(path, max_bytes);
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  return ReadRegularFile(path, max_bytes, /*follow_symlinks=*/false);
}

StatusOr<std::string> ReadFileFollowingSymlinks(const std::string& path, size_t max_bytes) {
  return ReadRegularFile(path, max_bytes, /*follow_symlinks=*/true);
}

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return ErrnoToStatus(errno, "removing " + path);
  return OkStatus();
}

Status MakeDirectories(const std::string& dir, mode_t mode) {
  if (dir.empty()) return InvalidArgumentError("empty directory path");
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, "creating directory " + partial);
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return ErrnoToStatus(errno, "stat " + dir);
  if (!S_ISDIR(st.st_mode)) return FailedPreconditionError(dir + " is not a directory");
  return OkStatus();
}

}  // namespace migd
