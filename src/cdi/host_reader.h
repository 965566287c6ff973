// File: cdi/host_reader.h
//
// HostReader: the narrow seam through which the CDI module reads the host —
// /proc files (capability minors, /proc/devices) and device nodes under /dev.
// OsHostReader is the real one; tests substitute a fake for what they cannot
// create (character devices without CAP_MKNOD) and use the real one for files.
//
// Thread-safety: implementations must be safe for concurrent use.
#ifndef MIGD_CDI_HOST_READER_H_
#define MIGD_CDI_HOST_READER_H_

#include <cstdint>
#include <string>

#include "base/status.h"

namespace migd::cdi {

struct DeviceNodeInfo {
  char type = 'c';  // 'c' or 'b'
  uint32_t major = 0;
  uint32_t minor = 0;
  uint32_t mode = 0;  // permission bits (st_mode & 07777)
  friend bool operator==(const DeviceNodeInfo&, const DeviceNodeInfo&) = default;
};

class HostReader {
 public:
  virtual ~HostReader() = default;
  // The whole content of a regular file. kNotFound if absent; another code
  // (with the path) for other failures.
  virtual StatusOr<std::string> ReadFile(const std::string& path) const = 0;
  // Type, major, minor and mode of the device node at `path` (symlinks are
  // followed, as udev may link nodes). kNotFound if absent;
  // kFailedPrecondition if it is not a character or block device.
  virtual StatusOr<DeviceNodeInfo> StatDeviceNode(const std::string& path) const = 0;
};

// Reads the real file system.
class OsHostReader final : public HostReader {
 public:
  StatusOr<std::string> ReadFile(const std::string& path) const override;
  StatusOr<DeviceNodeInfo> StatDeviceNode(const std::string& path) const override;
};

}  // namespace migd::cdi

#endif  // MIGD_CDI_HOST_READER_H_
