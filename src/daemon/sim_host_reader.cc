#include "daemon/sim_host_reader.h"

#include <sstream>

#include "base/status_macros.h"

namespace migd::daemon {
namespace {

bool AllDigits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

StatusOr<uint32_t> SimHostReader::Major(const std::string& name) const {
  MIGD_ASSIGN_OR_RETURN(std::string text, os_.ReadFile(proc_root_ + "/devices"));
  std::istringstream in(text);
  std::string line;
  bool in_char = false;
  while (std::getline(in, line)) {
    if (line.rfind("Character devices:", 0) == 0) {
      in_char = true;
      continue;
    }
    if (line.rfind("Block devices:", 0) == 0) break;
    if (!in_char) continue;
    std::istringstream fields(line);
    uint32_t major = 0;
    std::string dev;
    if (fields >> major >> dev && dev == name) return major;
  }
  return NotFoundError("no \"" + name + "\" major in " + proc_root_ + "/devices");
}

StatusOr<cdi::DeviceNodeInfo> SimHostReader::StatDeviceNode(const std::string& path) const {
  const std::string prefix = dev_root_ + "/";
  auto not_found = [&] {
    return NotFoundError("stat " + path + ": No such file or directory (simulated /dev)");
  };
  if (path.rfind(prefix, 0) != 0) return not_found();
  const std::string name = path.substr(prefix.size());
  cdi::DeviceNodeInfo info;
  info.type = 'c';
  info.mode = 0666;
  const std::string caps_prefix = "nvidia-caps/nvidia-cap";
  if (name.rfind(caps_prefix, 0) == 0 && AllDigits(name.substr(caps_prefix.size()))) {
    MIGD_ASSIGN_OR_RETURN(info.major, Major("nvidia-caps"));
    info.minor = static_cast<uint32_t>(std::stoul(name.substr(caps_prefix.size())));
    info.mode = 0444;
    return info;
  }
  if (name == "nvidia-uvm" || name == "nvidia-uvm-tools") {
    MIGD_ASSIGN_OR_RETURN(info.major, Major("nvidia-uvm"));
    info.minor = name == "nvidia-uvm" ? 0 : 1;
    return info;
  }
  if (name == "nvidiactl" || name == "nvidia-modeset" ||
      (name.rfind("nvidia", 0) == 0 && AllDigits(name.substr(6)) && name.size() <= 9)) {
    MIGD_ASSIGN_OR_RETURN(info.major, Major("nvidia-frontend"));
    if (name == "nvidiactl") {
      info.minor = 255;
    } else if (name == "nvidia-modeset") {
      info.minor = 254;
    } else {
      info.minor = static_cast<uint32_t>(std::stoul(name.substr(6)));
    }
    return info;
  }
  return not_found();
}

}  // namespace migd::daemon
