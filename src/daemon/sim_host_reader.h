// File: daemon/sim_host_reader.h
//
// SimHostReader: the cdi::HostReader of `migd --simulate`. Files (the
// simulator's fake /proc tree: capability minors, /proc/devices) are read
// from disk; device nodes under the configured dev root are synthesised,
// because the simulator creates nothing under /dev (docs/simulator.md §6)
// and an unprivileged process cannot mknod. Majors come from the fake
// <procRoot>/devices, so the CDI specs the daemon writes on simulated GPUs
// are consistent with the simulated capability files:
//
//   nvidia<N>                  c <nvidia-frontend>:N   (0666)
//   nvidiactl                  c <nvidia-frontend>:255 (0666)
//   nvidia-modeset             c <nvidia-frontend>:254 (0666)
//   nvidia-uvm, -uvm-tools     c <nvidia-uvm>:0, :1    (0666)
//   nvidia-caps/nvidia-cap<N>  c <nvidia-caps>:N       (0444)
//
// Never used without --simulate: on a real host the nodes must be real.
//
// Thread-safety: all methods are thread-safe (no mutable state).
#ifndef MIGD_DAEMON_SIM_HOST_READER_H_
#define MIGD_DAEMON_SIM_HOST_READER_H_

#include <string>

#include "cdi/host_reader.h"

namespace migd::daemon {

class SimHostReader final : public cdi::HostReader {
 public:
  SimHostReader(std::string proc_root, std::string dev_root)
      : proc_root_(std::move(proc_root)), dev_root_(std::move(dev_root)) {}

  StatusOr<std::string> ReadFile(const std::string& path) const override {
    return os_.ReadFile(path);
  }
  // kNotFound for any path outside the dev root or not in the table above.
  StatusOr<cdi::DeviceNodeInfo> StatDeviceNode(const std::string& path) const override;

 private:
  // The major of `name` in <procRoot>/devices; kNotFound if absent.
  StatusOr<uint32_t> Major(const std::string& name) const;

  const std::string proc_root_;
  const std::string dev_root_;
  cdi::OsHostReader os_;
};

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_SIM_HOST_READER_H_
