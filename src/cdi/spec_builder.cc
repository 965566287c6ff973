#include "cdi/spec_builder.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

#include "base/status_macros.h"

namespace migd::cdi {
namespace {

constexpr std::string_view kVisibleDevicesVoid = "NVIDIA_VISIBLE_DEVICES=void";
constexpr std::string_view kVisibleDevicesKey = "NVIDIA_VISIBLE_DEVICES=";

std::string Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

std::optional<uint32_t> ParseUint(std::string_view s) {
  uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

Status ValidateBuilderOptions(const BuilderOptions& options) {
  Status s = ValidateKind(options.kind, options.max_version >= kVersion060);
  if (!s.ok()) return std::move(s).WithContext("cdi.vendor/cdi.class");
  if (options.min_version > options.max_version) {
    return InvalidArgumentError("CDI minimum version " + options.min_version.ToString() +
                                " is above the maximum " + options.max_version.ToString());
  }
  return OkStatus();
}

SpecBuilder::SpecBuilder(BuilderOptions options, const HostReader* reader)
    : options_(std::move(options)), reader_(reader) {}

StatusOr<uint32_t> SpecBuilder::ReadCapsMajor() const {
  const std::string path = options_.proc_root + "/devices";
  StatusOr<std::string> text = reader_->ReadFile(path);
  if (!text.ok()) {
    return Status(text.status().code(),
                  "reading the nvidia-caps major: " + std::string(text.status().message()));
  }
  bool in_char = false;
  for (const std::string& raw : Lines(*text)) {
    const std::string line = Trim(raw);
    if (line == "Character devices:") {
      in_char = true;
      continue;
    }
    if (line == "Block devices:") in_char = false;
    if (!in_char || line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    if (Trim(line.substr(sp + 1)) != "nvidia-caps") continue;
    std::optional<uint32_t> major = ParseUint(line.substr(0, sp));
    if (!major || *major == 0) {
      return InvalidArgumentError(path + ": malformed nvidia-caps line \"" + line + "\"");
    }
    return *major;
  }
  return FailedPreconditionError(
      path +
      ": no \"nvidia-caps\" entry in the \"Character devices:\" section (expected "
      "\"<major> nvidia-caps\"; is the NVIDIA driver loaded with MIG capabilities?)");
}

StatusOr<SpecBuilder::Capability> SpecBuilder::ReadCapability(const std::string& cap) const {
  // cap = "gpu<m>/gi<G>[/ci<C>]/access"; its per-instance file lives under
  // driver/nvidia/capabilities/gpu<m>/mig/gi<G>[/ci<C>]/access.
  const size_t slash = cap.find('/');
  const std::string instance_file = options_.proc_root + "/driver/nvidia/capabilities/" +
                                    cap.substr(0, slash) + "/mig" + cap.substr(slash);
  StatusOr<std::string> text = reader_->ReadFile(instance_file);
  if (text.ok()) {
    Capability out;
    bool have_minor = false;
    for (const std::string& line : Lines(*text)) {
      if (Trim(line).empty()) continue;
      const size_t colon = line.find(':');
      const std::string key = colon == std::string::npos ? "" : Trim(line.substr(0, colon));
      const std::string value = colon == std::string::npos ? "" : Trim(line.substr(colon + 1));
      std::optional<uint32_t> num = ParseUint(value);
      if (key.empty() || !num) {
        return InvalidArgumentError(instance_file + ": malformed line \"" + line +
                                    "\" (expected \"DeviceFileMinor: <n>\", \"DeviceFileMode: "
                                    "<n>\", \"DeviceFileModify: <0|1>\")");
      }
      if (key == "DeviceFileMinor") {
        out.minor = *num;
        have_minor = true;
      } else if (key == "DeviceFileMode") {
        out.mode = *num & 07777;
      }
    }
    if (!have_minor) {
      return InvalidArgumentError(instance_file + ": no \"DeviceFileMinor: <n>\" line");
    }
    return out;
  }
  if (!IsNotFound(text.status())) return text.status();

  // Fallback: the static table of every possible capability.
  const std::string minors_file = options_.proc_root + "/driver/nvidia-caps/mig-minors";
  StatusOr<std::string> table = reader_->ReadFile(minors_file);
  if (!table.ok()) {
    if (IsNotFound(table.status())) {
      return NotFoundError("no minor for MIG capability " + cap + ": neither " + instance_file +
                           " nor " + minors_file + " exists");
    }
    return table.status();
  }
  for (const std::string& raw : Lines(*table)) {
    const std::string line = Trim(raw);
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos || Trim(line.substr(0, sp)) != cap) continue;
    std::optional<uint32_t> minor = ParseUint(line.substr(sp + 1));
    if (!minor) return InvalidArgumentError(minors_file + ": malformed line \"" + line + "\"");
    return Capability{*minor, std::nullopt};
  }
  return NotFoundError("no minor for MIG capability " + cap + ": " + instance_file +
                       " does not exist and " + minors_file + " has no \"" + cap +
                       " <minor>\" line");
}

StatusOr<DeviceNode> SpecBuilder::StatNode(const std::string& name, bool* present) const {
  const std::string host = options_.dev_root + "/" + name;
  StatusOr<DeviceNodeInfo> info = reader_->StatDeviceNode(host);
  if (!info.ok()) {
    if (present != nullptr && IsNotFound(info.status())) {
      *present = false;
      return DeviceNode{};
    }
    return Status(info.status().code(), "device node " + host +
                                            " (expected a character "
                                            "device): " +
                                            std::string(info.status().message()));
  }
  if (present != nullptr) *present = true;
  DeviceNode node;
  node.path = "/dev/" + name;
  node.type = std::string(1, info->type);
  node.major = info->major;
  node.minor = info->minor;
  return node;
}

StatusOr<ContainerEdits> SpecBuilder::ReadCommonEdits() const {
  if (options_.common_edits_from.empty()) return ContainerEdits{};
  const std::string& path = options_.common_edits_from;
  StatusOr<std::string> text = reader_->ReadFile(path);
  if (!text.ok()) {
    return Status(text.status().code(),
                  "cdi.commonEditsFrom: " + std::string(text.status().message()) +
                      " (expected a CDI spec, e.g. written by `nvidia-ctk cdi generate`)");
  }
  MIGD_ASSIGN_OR_RETURN(Spec common, ParseSpecDocument(*text, path));
  return std::move(common.edits);
}

StatusOr<BuiltSpec> SpecBuilder::Build(const MigInstance& instance) const {
  MIGD_RETURN_IF_ERROR(ValidateBuilderOptions(options_));
  BuiltSpec out;
  MIGD_ASSIGN_OR_RETURN(out.device_name, DeviceNameForMigUuid(instance.mig_uuid.value()));
  out.qualified_name = options_.kind.QualifiedName(out.device_name);

  const std::string gpu = "gpu" + std::to_string(instance.gpu_minor);
  const std::string gi_cap = gpu + "/gi" + std::to_string(instance.gi_id.value()) + "/access";
  const std::string ci_cap = gpu + "/gi" + std::to_string(instance.gi_id.value()) + "/ci" +
                             std::to_string(instance.ci_id.value()) + "/access";
  MIGD_ASSIGN_OR_RETURN(uint32_t caps_major, ReadCapsMajor());
  MIGD_ASSIGN_OR_RETURN(Capability gi, ReadCapability(gi_cap));
  MIGD_ASSIGN_OR_RETURN(Capability ci, ReadCapability(ci_cap));

  Device device;
  device.name = out.device_name;
  MIGD_ASSIGN_OR_RETURN(DeviceNode parent,
                        StatNode("nvidia" + std::to_string(instance.gpu_minor), nullptr));
  device.edits.device_nodes.push_back(std::move(parent));
  for (const Capability* cap : {&gi, &ci}) {
    DeviceNode node;
    node.path = "/dev/nvidia-caps/nvidia-cap" + std::to_string(cap->minor);
    node.type = "c";
    node.major = caps_major;
    node.minor = cap->minor;
    node.file_mode = cap->mode;
    device.edits.device_nodes.push_back(std::move(node));
  }

  Spec& spec = out.spec;
  spec.kind = options_.kind.ToString();
  spec.edits.env.emplace_back(kVisibleDevicesVoid);
  for (const char* name : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
    MIGD_ASSIGN_OR_RETURN(DeviceNode node, StatNode(name, nullptr));
    spec.edits.device_nodes.push_back(std::move(node));
  }
  bool modeset_present = false;
  MIGD_ASSIGN_OR_RETURN(DeviceNode modeset, StatNode("nvidia-modeset", &modeset_present));
  if (modeset_present) spec.edits.device_nodes.push_back(std::move(modeset));

  // Merge the common edits; fresh nodes from /dev win over a possibly stale
  // base spec (NVIDIA/NemoClaw#4733), one NVIDIA_VISIBLE_DEVICES value only
  // (cncf-tags/container-device-interface#41).
  MIGD_ASSIGN_OR_RETURN(ContainerEdits common, ReadCommonEdits());
  std::set<std::string> node_paths;
  for (const DeviceNode& n : device.edits.device_nodes) node_paths.insert(n.path);
  for (const DeviceNode& n : spec.edits.device_nodes) node_paths.insert(n.path);
  std::set<std::string> env(spec.edits.env.begin(), spec.edits.env.end());
  for (std::string& e : common.env) {
    if (e.starts_with(kVisibleDevicesKey) || !env.insert(e).second) continue;
    spec.edits.env.push_back(std::move(e));
  }
  for (DeviceNode& n : common.device_nodes) {
    if (node_paths.insert(n.path).second) spec.edits.device_nodes.push_back(std::move(n));
  }
  std::set<std::string> mount_paths;
  for (Mount& m : common.mounts) {
    if (mount_paths.insert(m.container_path).second) spec.edits.mounts.push_back(std::move(m));
  }
  for (Hook& h : common.hooks) spec.edits.hooks.push_back(std::move(h));
  for (uint32_t gid : common.additional_gids) {
    if (std::find(spec.edits.additional_gids.begin(), spec.edits.additional_gids.end(), gid) ==
        spec.edits.additional_gids.end()) {
      spec.edits.additional_gids.push_back(gid);
    }
  }

  spec.devices.push_back(std::move(device));
  spec.version = std::max(options_.min_version, MinimumVersion(spec)).ToString();
  Status valid = ValidateSpec(spec, options_.max_version);
  if (!valid.ok()) {
    return std::move(valid).WithContext("CDI spec for " + out.device_name +
                                        (options_.common_edits_from.empty()
                                             ? std::string()
                                             : " (with " + options_.common_edits_from + ")"));
  }
  out.content = SerializeSpec(spec);
  return out;
}

}  // namespace migd::cdi
