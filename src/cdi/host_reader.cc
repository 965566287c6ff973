#include "cdi/host_reader.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>

#include "base/file_util.h"

namespace migd::cdi {

StatusOr<std::string> OsHostReader::ReadFile(const std::string& path) const {
  return ReadFileToString(path, 1 << 20);
}

StatusOr<DeviceNodeInfo> OsHostReader::StatDeviceNode(const std::string& path) const {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoToStatus(errno, "stat " + path);
  DeviceNodeInfo info;
  if (S_ISCHR(st.st_mode)) {
    info.type = 'c';
  } else if (S_ISBLK(st.st_mode)) {
    info.type = 'b';
  } else {
    return FailedPreconditionError(path + " is not a device node");
  }
  info.major = ::major(st.st_rdev);
  info.minor = ::minor(st.st_rdev);
  info.mode = static_cast<uint32_t>(st.st_mode & 07777);
  return info;
}

}  // namespace migd::cdi
