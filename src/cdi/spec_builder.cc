#include "cdi/spec_builder.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>

#include <algorithm>
#include <set>

#include "base/status_macros.h"

namespace migd::cdi {
namespace {

constexpr std::string_view kVisibleDevicesVoid = "NVIDIA_VISIBLE_DEVICES=void";
constexpr std::string_view kVisibleDevicesKey = "NVIDIA_VISIBLE_DEVICES=";

std::optional<uint32_t> ParseUint(absl::string_view s) {
  uint32_t v = 0;
  if (!absl::SimpleAtoi(s, &v)) return std::nullopt;
  return v;
}

// The lines of `text`, each stripped of surrounding whitespace.
// (Debian's abseil has its own absl::string_view, not std::string_view.)
std::vector<absl::string_view> StrippedLines(const std::string& text) {
  std::vector<absl::string_view> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    out.push_back(absl::StripAsciiWhitespace(line));
  }
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
  // /proc/devices: "Character devices:", then "<major> <name>" lines, then a
  // blank line and "Block devices:" (Linux fs/char_dev.c, chrdev_show).
  bool in_char = false;
  for (absl::string_view line : StrippedLines(*text)) {
    if (line == "Character devices:") {
      in_char = true;
      continue;
    }
    if (line == "Block devices:") in_char = false;
    if (!in_char || line.empty()) continue;
    std::pair<absl::string_view, absl::string_view> fields =
        absl::StrSplit(line, absl::MaxSplits(' ', 1));
    if (absl::StripAsciiWhitespace(fields.second) != "nvidia-caps") continue;
    std::optional<uint32_t> major = ParseUint(fields.first);
    if (!major || *major == 0) {
      return InvalidArgumentError(path + ": malformed nvidia-caps line \"" + std::string(line) +
                                  "\"");
    }
    return *major;
  }
  return FailedPreconditionError(
      path +
      ": no \"nvidia-caps\" entry in the \"Character devices:\" section (expected "
      "\"<major> nvidia-caps\"; is the NVIDIA driver loaded with MIG capabilities?)");
}

// The per-instance file: "DeviceFileMinor: <n>", "DeviceFileMode: <n>",
// "DeviceFileModify: <0|1>" lines (the NVIDIA driver's nv-caps.c; the MIG
// User Guide, "Device Nodes and Capabilities").
StatusOr<SpecBuilder::Capability> SpecBuilder::ParseAccessFile(const std::string& path,
                                                               const std::string& text) const {
  Capability out;
  bool have_minor = false;
  for (absl::string_view line : StrippedLines(text)) {
    if (line.empty()) continue;
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits(':', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    std::optional<uint32_t> num = ParseUint(absl::StripAsciiWhitespace(kv.second));
    if (key.empty() || key == line || !num) {
      return InvalidArgumentError(path + ": malformed line \"" + std::string(line) +
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
  if (!have_minor) return InvalidArgumentError(path + ": no \"DeviceFileMinor: <n>\" line");
  return out;
}

// The static table: "<cap> <minor>" lines, e.g. "gpu0/gi2/ci0/access 28"
// (/proc/driver/nvidia-caps/mig-minors, written by the driver at load).
StatusOr<SpecBuilder::Capability> SpecBuilder::ReadMinorsTable(
    const std::string& cap, const std::string& instance_file) const {
  const std::string minors_file = options_.proc_root + "/driver/nvidia-caps/mig-minors";
  StatusOr<std::string> table = reader_->ReadFile(minors_file);
  if (!table.ok()) {
    if (IsNotFound(table.status())) {
      return NotFoundError("no minor for MIG capability " + cap + ": neither " + instance_file +
                           " nor " + minors_file + " exists");
    }
    return table.status();
  }
  for (absl::string_view line : StrippedLines(*table)) {
    const size_t sp = line.rfind(' ');
    if (sp == absl::string_view::npos || absl::StripAsciiWhitespace(line.substr(0, sp)) != cap) {
      continue;
    }
    std::optional<uint32_t> minor = ParseUint(line.substr(sp + 1));
    if (!minor) {
      return InvalidArgumentError(minors_file + ": malformed line \"" + std::string(line) + "\"");
    }
    return Capability{*minor, std::nullopt};
  }
  return NotFoundError("no minor for MIG capability " + cap + ": " + instance_file +
                       " does not exist and " + minors_file + " has no \"" + cap +
                       " <minor>\" line");
}

StatusOr<SpecBuilder::Capability> SpecBuilder::ReadCapability(const std::string& cap) const {
  // cap = "gpu<m>/gi<G>[/ci<C>]/access"; its per-instance file lives under
  // driver/nvidia/capabilities/gpu<m>/mig/gi<G>[/ci<C>]/access.
  const size_t slash = cap.find('/');
  const std::string instance_file = options_.proc_root + "/driver/nvidia/capabilities/" +
                                    cap.substr(0, slash) + "/mig" + cap.substr(slash);
  StatusOr<std::string> text = reader_->ReadFile(instance_file);
  if (text.ok()) return ParseAccessFile(instance_file, *text);
  if (!IsNotFound(text.status())) return text.status();
  return ReadMinorsTable(cap, instance_file);
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
  if (options_.common_edits_from.empty()) return options_.common_edits;
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

StatusOr<Device> SpecBuilder::BuildDevice(const MigInstance& instance,
                                          const std::string& name) const {
  const std::string gi = "gpu" + std::to_string(instance.gpu_minor) + "/gi" +
                         std::to_string(instance.gi_id.value());
  MIGD_ASSIGN_OR_RETURN(uint32_t caps_major, ReadCapsMajor());
  MIGD_ASSIGN_OR_RETURN(Capability gi_cap, ReadCapability(gi + "/access"));
  MIGD_ASSIGN_OR_RETURN(Capability ci_cap, ReadCapability(
                                               gi + "/ci" + std::to_string(instance.ci_id.value()) +
                                               "/access"));
  Device device;
  device.name = name;
  MIGD_ASSIGN_OR_RETURN(DeviceNode parent,
                        StatNode("nvidia" + std::to_string(instance.gpu_minor), nullptr));
  device.edits.device_nodes.push_back(std::move(parent));
  for (const Capability* cap : {&gi_cap, &ci_cap}) {
    DeviceNode node;
    node.path = "/dev/nvidia-caps/nvidia-cap" + std::to_string(cap->minor);
    node.type = "c";
    node.major = caps_major;
    node.minor = cap->minor;
    node.file_mode = cap->mode;
    device.edits.device_nodes.push_back(std::move(node));
  }
  return device;
}

StatusOr<ContainerEdits> SpecBuilder::BuildSpecEdits() const {
  ContainerEdits edits;
  edits.env.emplace_back(kVisibleDevicesVoid);
  for (const char* name : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
    MIGD_ASSIGN_OR_RETURN(DeviceNode node, StatNode(name, nullptr));
    edits.device_nodes.push_back(std::move(node));
  }
  bool modeset_present = false;
  MIGD_ASSIGN_OR_RETURN(DeviceNode modeset, StatNode("nvidia-modeset", &modeset_present));
  if (modeset_present) edits.device_nodes.push_back(std::move(modeset));
  return edits;
}

namespace {

void MergeCommonEdits(ContainerEdits common, const Device& device, ContainerEdits* edits) {
  // Fresh nodes from /dev win over a possibly stale base spec, and there is
  // one NVIDIA_VISIBLE_DEVICES value only (the CDI library applies env edits
  // in order, so a second value would silently override "void").
  std::set<std::string> node_paths;
  for (const DeviceNode& n : device.edits.device_nodes) node_paths.insert(n.path);
  for (const DeviceNode& n : edits->device_nodes) node_paths.insert(n.path);
  std::set<std::string> env(edits->env.begin(), edits->env.end());
  for (std::string& e : common.env) {
    if (e.starts_with(kVisibleDevicesKey) || !env.insert(e).second) continue;
    edits->env.push_back(std::move(e));
  }
  for (DeviceNode& n : common.device_nodes) {
    if (node_paths.insert(n.path).second) edits->device_nodes.push_back(std::move(n));
  }
  std::set<std::string> mount_paths;
  for (Mount& m : common.mounts) {
    if (mount_paths.insert(m.container_path).second) edits->mounts.push_back(std::move(m));
  }
  for (Hook& h : common.hooks) edits->hooks.push_back(std::move(h));
  for (uint32_t gid : common.additional_gids) {
    if (std::find(edits->additional_gids.begin(), edits->additional_gids.end(), gid) ==
        edits->additional_gids.end()) {
      edits->additional_gids.push_back(gid);
    }
  }
}

}  // namespace

StatusOr<BuiltSpec> SpecBuilder::Build(const MigInstance& instance) const {
  MIGD_RETURN_IF_ERROR(ValidateBuilderOptions(options_));
  BuiltSpec out;
  MIGD_ASSIGN_OR_RETURN(out.device_name, DeviceNameForMigUuid(instance.mig_uuid.value()));
  out.qualified_name = options_.kind.QualifiedName(out.device_name);
  MIGD_ASSIGN_OR_RETURN(Device device, BuildDevice(instance, out.device_name));
  Spec& spec = out.spec;
  spec.kind = options_.kind.ToString();
  MIGD_ASSIGN_OR_RETURN(spec.edits, BuildSpecEdits());
  MIGD_ASSIGN_OR_RETURN(ContainerEdits common, ReadCommonEdits());
  MergeCommonEdits(std::move(common), device, &spec.edits);
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
