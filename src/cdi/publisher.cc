#include "cdi/publisher.h"

#include <algorithm>

#include "base/status_macros.h"

namespace migd::cdi {
namespace {

BuilderOptions ToBuilderOptions(const Options& o) {
  BuilderOptions b;
  b.kind = o.kind;
  b.proc_root = o.proc_root;
  b.dev_root = o.dev_root;
  b.common_edits_from = o.common_edits_from;
  b.common_edits = o.common_edits;
  b.min_version = o.min_version;
  b.max_version = o.max_version;
  return b;
}

WriterOptions ToWriterOptions(const Options& o) {
  WriterOptions w;
  w.kind = o.kind;
  w.spec_dir = o.spec_dir;
  w.sync = o.sync;
  return w;
}

}  // namespace

AllocateDevices MakeAllocateDevices(const std::vector<BuiltSpec>& specs, bool cdi_enabled) {
  AllocateDevices out;
  std::string visible;
  std::set<std::string> seen_nodes;
  auto add_nodes = [&](const ContainerEdits& edits) {
    for (const DeviceNode& n : edits.device_nodes) {
      if (!seen_nodes.insert(n.path).second) continue;
      out.device_nodes.push_back(
          LegacyDeviceNode{n.path, n.host_path.empty() ? n.path : n.host_path, "rw"});
    }
  };
  for (const BuiltSpec& s : specs) {
    if (cdi_enabled) out.cdi_devices.push_back(s.qualified_name);
    if (!visible.empty()) visible += ",";
    visible += s.device_name;
    for (const Device& d : s.spec.devices) add_nodes(d.edits);
  }
  for (const BuiltSpec& s : specs) add_nodes(s.spec.edits);
  if (!specs.empty()) out.envs.emplace_back("NVIDIA_VISIBLE_DEVICES", visible);
  return out;
}

Publisher::Publisher(Options options, const HostReader* reader)
    : options_(std::move(options)),
      builder_(ToBuilderOptions(options_), reader),
      writer_(ToWriterOptions(options_)) {}

Status Publisher::ValidateOptions(const Options& options) {
  MIGD_RETURN_IF_ERROR(ValidateBuilderOptions(ToBuilderOptions(options)));
  if (options.enabled && options.spec_dir.empty()) {
    return InvalidArgumentError("cdi.specDir is empty");
  }
  return OkStatus();
}

StatusOr<BuiltSpec> Publisher::Publish(const MigInstance& instance) {
  MIGD_ASSIGN_OR_RETURN(BuiltSpec built, builder_.Build(instance));
  return PublishBuilt(std::move(built));
}

StatusOr<BuiltSpec> Publisher::PublishBuilt(BuiltSpec built) {
  if (!options_.enabled) return built;
  MIGD_ASSIGN_OR_RETURN(VerifyResult current, writer_.Verify(built.device_name, built.content));
  // A queued removal of this device (a failed Unpublish of an instance with
  // the same UUID) must not delete the file again: Write drops it.
  const std::vector<std::string> pending = writer_.PendingRemovals();
  const bool removal_pending =
      std::find(pending.begin(), pending.end(), built.device_name) != pending.end();
  if (current != VerifyResult::kMatches || removal_pending) {
    MIGD_RETURN_IF_ERROR(writer_.Write(built));
  }
  return built;
}

Status Publisher::Unpublish(const MigUuid& mig_uuid) {
  if (!options_.enabled) return OkStatus();
  MIGD_ASSIGN_OR_RETURN(std::string device, DeviceNameForMigUuid(mig_uuid.value()));
  return writer_.Remove(device);
}

StatusOr<SweepReport> Publisher::Sweep(const std::vector<MigUuid>& live) {
  if (!options_.enabled) return SweepReport{};
  std::set<std::string> devices;
  for (const MigUuid& uuid : live) {
    MIGD_ASSIGN_OR_RETURN(std::string device, DeviceNameForMigUuid(uuid.value()));
    devices.insert(std::move(device));
  }
  return writer_.Sweep(devices);
}

}  // namespace migd::cdi
