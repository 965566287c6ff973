// File: cdi/publisher.h
//
// Publisher: what the engine calls at its publish/unpublish points
// (engine/instance_observer.h; an adapter there maps PublishedInstance to
// cdi::MigInstance). It owns a SpecBuilder and a SpecWriter configured from
// the `cdi:` section of the config, and produces the Allocate result
// (CDI-qualified names plus the legacy env/device-node form).
//
// Ordering contract: Publish before Allocate returns (created
// or reused instance; recovery for every verified Active/Idle instance);
// Unpublish only after the GI/CI was destroyed, never on release.
//
// Example:
//   cdi::OsHostReader reader;
//   cdi::Publisher publisher(options, &reader);
//   MIGD_ASSIGN_OR_RETURN(cdi::BuiltSpec built, publisher.Publish(instance));
//   cdi::AllocateDevices result = publisher.AllocateResult({built});
//
// Thread-safety: all methods are thread-safe (the reader must be). Calls for
// one instance must not overlap (the engine serialises per GPU).
#ifndef MIGD_CDI_PUBLISHER_H_
#define MIGD_CDI_PUBLISHER_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "cdi/host_reader.h"
#include "cdi/spec_builder.h"
#include "cdi/spec_writer.h"

namespace migd::cdi {

// The `cdi:` configuration section.
struct Options {
  bool enabled = true;                    // cdi.enabled: false → legacy form only, no files
  Kind kind;                              // cdi.vendor, cdi.class (default hami.io/mig)
  std::string spec_dir = "/var/run/cdi";  // cdi.specDir
  std::string common_edits_from;          // a spec read at every Build ("" = none)
  ContainerEdits common_edits;            // used when common_edits_from is "" (generated)
  std::string proc_root = "/proc";
  std::string dev_root = "/dev";
  Version min_version = kVersion050;
  Version max_version = kVersion050;
  bool sync = true;
};

// The legacy (non-CDI) description of one device node for kubelet's
// DeviceSpec: the host node, bound at the same path, with cgroup "rw".
struct LegacyDeviceNode {
  std::string container_path;
  std::string host_path;
  std::string permissions = "rw";
  friend bool operator==(const LegacyDeviceNode&, const LegacyDeviceNode&) = default;
};

// What Allocate hands back for a set of instances.
//
// `cdi_devices` goes into ContainerAllocateResponse.cdi_devices (empty when
// cdi.enabled is false). `envs` (NVIDIA_VISIBLE_DEVICES=MIG-a,MIG-b) and
// `device_nodes` are the legacy form. With CDI the spec's
// NVIDIA_VISIBLE_DEVICES=void replaces the env value (the CDI library's env
// edit overrides an existing key), so a legacy NVIDIA hook injects nothing.
// Note: kubelet stats the host path of every legacy DeviceSpec, so the
// capability nodes must exist on the host for `device_nodes` to be usable;
// the CDI path does not need them (fully specified nodes).
struct AllocateDevices {
  std::vector<std::string> cdi_devices;
  std::vector<std::pair<std::string, std::string>> envs;
  std::vector<LegacyDeviceNode> device_nodes;  // deduplicated, in spec order
};

// Builds the Allocate result from built specs (in request order).
AllocateDevices MakeAllocateDevices(const std::vector<BuiltSpec>& specs, bool cdi_enabled);

class Publisher {
 public:
  // `reader` is not owned and must outlive the publisher.
  Publisher(Options options, const HostReader* reader);

  const Options& options() const { return options_; }

  // kInvalidArgument for bad options (grammar, version range, empty spec_dir).
  static Status ValidateOptions(const Options& options);

  // Builds the instance's spec; when enabled, makes the file equal to it
  // (Verify, then Write unless it already matches). Returns the built spec
  // (also when disabled, for the legacy device nodes). Errors: SpecBuilder's
  // and SpecWriter::Write's.
  StatusOr<BuiltSpec> Publish(const MigInstance& instance);
  // The second half of Publish for a spec built earlier for the same
  // instance (the reuse path: no host files are read): verify the file, write
  // it only if it differs or is missing.
  StatusOr<BuiltSpec> PublishBuilt(BuiltSpec built);

  // Removes the instance's spec (no-op when disabled). A failure is queued
  // for RetryPendingRemovals and returned.
  Status Unpublish(const MigUuid& mig_uuid);

  Status RetryPendingRemovals() { return writer_.RetryPendingRemovals(); }

  // Startup: removes spec files of our kind whose MIG UUID is not live;
  // reports those missing (the caller then Publishes them). No-op (empty
  // report) when disabled.
  StatusOr<SweepReport> Sweep(const std::vector<MigUuid>& live);

  AllocateDevices AllocateResult(const std::vector<BuiltSpec>& specs) const {
    return MakeAllocateDevices(specs, options_.enabled);
  }

  SpecWriter& writer() { return writer_; }
  // For metrics: the writer's operation counts and queued removals.
  std::vector<OperationCount> OperationCounts() const { return writer_.OperationCounts(); }
  size_t PendingRemovalCount() const { return writer_.PendingRemovals().size(); }
  const SpecBuilder& builder() const { return builder_; }

 private:
  const Options options_;
  SpecBuilder builder_;
  SpecWriter writer_;
};

}  // namespace migd::cdi

#endif  // MIGD_CDI_PUBLISHER_H_
