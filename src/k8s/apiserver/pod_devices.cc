#include "k8s/apiserver/pod_devices.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>

#include <charconv>
#include <utility>

#include "k8s/apiserver/hami_annotations.h"

namespace migd::k8s::hami {
namespace {

StatusOr<int64_t> ParseInt(std::string_view s, const std::string& what) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
    return InvalidArgumentError(absl::StrCat(what, ": '", std::string(s), "' is not an integer"));
  }
  return v;
}

StatusOr<ContainerDevice> DecodeDevice(const std::string& d, const std::string& what) {
  const std::vector<std::string> f = absl::StrSplit(d, ',');
  if (f.size() < 4) {
    return InvalidArgumentError(absl::StrCat(
        what, ": device '", d, "' has fewer than 4 fields (UUID,Type,Usedmem,Usedcores)"));
  }
  ContainerDevice dev;
  dev.uuid = f[0];
  dev.type = f[1];
  StatusOr<int64_t> mem = ParseInt(f[2], what + " Usedmem");
  if (!mem.ok()) return mem.status();
  StatusOr<int64_t> cores = ParseInt(f[3], what + " Usedcores");
  if (!cores.ok()) return cores.status();
  dev.used_mem = *mem;
  dev.used_cores = *cores;
  return dev;
}

}  // namespace

StatusOr<PodDevices> DecodePodDevices(std::string_view text) {
  PodDevices out;
  if (text.empty()) return out;
  std::vector<std::string> containers = absl::StrSplit(std::string(text), ';');
  // The encoder terminates every container with ';': the last piece is empty.
  if (!containers.empty() && containers.back().empty()) containers.pop_back();
  for (size_t c = 0; c < containers.size(); ++c) {
    const std::string what = absl::StrCat(kDevicesToAllocate, " container ", c);
    std::vector<ContainerDevice> devs;
    for (const std::string& d :
         std::vector<std::string>(absl::StrSplit(containers[c], ':', absl::SkipEmpty()))) {
      StatusOr<ContainerDevice> dev = DecodeDevice(d, what);
      if (!dev.ok()) return dev.status();
      devs.push_back(std::move(*dev));
    }
    out.push_back(std::move(devs));
  }
  return out;
}

std::string EncodePodDevices(const PodDevices& devices) {
  std::string out;
  for (const auto& ctr : devices) {
    for (const ContainerDevice& d : ctr) {
      absl::StrAppend(&out, d.uuid, ",", d.type, ",", d.used_mem, ",", d.used_cores, ":");
    }
    out += ";";
  }
  return out;
}

std::optional<int> NextContainer(const PodDevices& devices) {
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i].empty()) return static_cast<int>(i);
  }
  return std::nullopt;
}

}  // namespace migd::k8s::hami
