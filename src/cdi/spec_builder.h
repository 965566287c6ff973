// File: cdi/spec_builder.h
//
// SpecBuilder: builds the CDI spec of one MIG instance (device nodes and
// capabilities as the NVIDIA MIG User Guide, "Device Nodes and Capabilities",
// describes them). Reads the host at every call (never
// caches majors or minors across a driver reload) through a HostReader:
//
//   device edits  /dev/nvidia<gpu minor>                   type/major/minor from stat of <devRoot>
//                 /dev/nvidia-caps/nvidia-cap<gi minor>    fully specified: type c, major from
//                 /dev/nvidia-caps/nvidia-cap<ci minor>    <procRoot>/devices "nvidia-caps", minor
//                                                          and fileMode from the instance's access
//                                                          file (fallback: nvidia-caps/mig-minors)
//   spec edits    NVIDIA_VISIBLE_DEVICES=void; /dev/nvidiactl, /dev/nvidia-uvm,
//                 /dev/nvidia-uvm-tools (required) and /dev/nvidia-modeset (if present), from
//                 stat; then the common edits — the containerEdits of `common_edits_from`, or
//                 `common_edits` (cdi/common_edits.h) — minus entries that duplicate ours.
//
// cdiVersion = max(min_version, MinimumVersion(spec)); the spec must validate
// at max_version (0.5.0 by default: readable by podman 4.3+, containerd 1.7.0+,
// CRI-O 1.25+).
//
// Example:
//   cdi::OsHostReader reader;
//   cdi::SpecBuilder builder(cdi::BuilderOptions{}, &reader);
//   MIGD_ASSIGN_OR_RETURN(cdi::BuiltSpec built, builder.Build(instance));
//   // built.qualified_name == "hami.io/mig=MIG-…", built.content is the file.
//
// Thread-safety: Build is const and thread-safe when the reader is.
#ifndef MIGD_CDI_SPEC_BUILDER_H_
#define MIGD_CDI_SPEC_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/ids.h"
#include "base/status.h"
#include "cdi/host_reader.h"
#include "cdi/names.h"
#include "cdi/spec.h"

namespace migd::cdi {

struct BuilderOptions {
  Kind kind;                          // cdi.vendor / cdi.class
  std::string proc_root = "/proc";    // where /proc/devices and driver/ are read
  std::string dev_root = "/dev";      // where device nodes are stat'ed
  std::string common_edits_from;      // a CDI spec file read at every Build; "" = none
  ContainerEdits common_edits;        // used when common_edits_from is "" (e.g. generated)
  Version min_version = kVersion050;  // floor of cdiVersion
  Version max_version = kVersion050;  // ceiling: an error above it
};

// What the builder needs to know about an instance.
struct MigInstance {
  uint32_t gpu_minor = 0;  // device minor of the parent GPU (/dev/nvidia<minor>)
  NvmlGiId gi_id;
  NvmlCiId ci_id;
  MigUuid mig_uuid;
};

struct BuiltSpec {
  std::string device_name;     // the MIG UUID
  std::string qualified_name;  // "<vendor>/<class>=<device_name>"
  Spec spec;
  std::string content;  // SerializeSpec(spec): the bytes of the file
};

// kInvalidArgument if the kind is not valid CDI grammar (dots in the class
// only when max_version ≥ 0.6.0) or min_version > max_version.
Status ValidateBuilderOptions(const BuilderOptions& options);

class SpecBuilder {
 public:
  // `reader` is not owned and must outlive the builder.
  SpecBuilder(BuilderOptions options, const HostReader* reader);

  const BuilderOptions& options() const { return options_; }

  // Builds and validates the spec of `instance`. Nothing is written.
  // Errors (each names the file and what was expected):
  //   kInvalidArgument    bad options, a MIG UUID that is no valid device name,
  //                       a malformed /proc file or common spec, or a spec
  //                       that needs a version above max_version;
  //   kNotFound           a missing /proc file, device node or common spec;
  //   kFailedPrecondition no nvidia-caps major, a non-device at a node path;
  //   others              the reader's errors, with the path.
  StatusOr<BuiltSpec> Build(const MigInstance& instance) const;

  // The capability major: the "nvidia-caps" line of <proc_root>/devices.
  StatusOr<uint32_t> ReadCapsMajor() const;

  // The spec-level edits of common_edits_from, or common_edits when unset.
  StatusOr<ContainerEdits> ReadCommonEdits() const;

 private:
  struct Capability {
    uint32_t minor = 0;
    std::optional<uint32_t> mode;
  };
  // `cap` is "gpu<m>/gi<G>[/ci<C>]/access": the per-instance access file,
  // else the static mig-minors table.
  StatusOr<Capability> ReadCapability(const std::string& cap) const;
  StatusOr<Capability> ParseAccessFile(const std::string& path, const std::string& text) const;
  StatusOr<Capability> ReadMinorsTable(const std::string& cap,
                                       const std::string& instance_file) const;
  // The device entry (parent GPU node, GI and CI capability nodes).
  StatusOr<Device> BuildDevice(const MigInstance& instance, const std::string& name) const;
  // The spec-level edits migd itself adds (control nodes, NVIDIA_VISIBLE_DEVICES=void).
  StatusOr<ContainerEdits> BuildSpecEdits() const;
  StatusOr<DeviceNode> StatNode(const std::string& name, bool* present) const;

  BuilderOptions options_;
  const HostReader* reader_;
};

}  // namespace migd::cdi

#endif  // MIGD_CDI_SPEC_BUILDER_H_
