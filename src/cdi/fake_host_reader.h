// File: cdi/fake_host_reader.h
//
// Test-only: a HostReader that reads real files (e.g. a fake /proc tree) and
// answers StatDeviceNode from a table, since tests cannot rely on
// /dev/nvidia* existing. Used by cdi's tests and the engine's CDI lifecycle
// tests.
//
// Thread-safety: all methods are thread-safe.
#ifndef MIGD_CDI_FAKE_HOST_READER_H_
#define MIGD_CDI_FAKE_HOST_READER_H_

#include <map>
#include <string>

#include <absl/base/thread_annotations.h>

#include "base/mutex.h"
#include "cdi/host_reader.h"

namespace migd::cdi::testing {

// Real files, fake device nodes: paths registered with AddNode answer
// StatDeviceNode; any other path is NotFound.
class FakeHostReader final : public HostReader {
 public:
  void AddNode(const std::string& path, DeviceNodeInfo info) {
    MutexLock lock(&mu_);
    nodes_[path] = info;
  }
  void RemoveNode(const std::string& path) {
    MutexLock lock(&mu_);
    nodes_.erase(path);
  }
  StatusOr<std::string> ReadFile(const std::string& path) const override {
    return os_.ReadFile(path);
  }
  StatusOr<DeviceNodeInfo> StatDeviceNode(const std::string& path) const override {
    MutexLock lock(&mu_);
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return NotFoundError("stat " + path + ": No such file or directory");
    return it->second;
  }

 private:
  OsHostReader os_;
  mutable Mutex mu_;
  std::map<std::string, DeviceNodeInfo> nodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace migd::cdi::testing

#endif  // MIGD_CDI_FAKE_HOST_READER_H_
