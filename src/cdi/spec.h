// File: cdi/spec.h
//
// The CDI spec model: the subset of the format that migd writes and that it
// reads from a base spec (`cdi.commonEditsFrom`, e.g. `nvidia-ctk cdi
// generate` output), its canonical JSON form, the minimum-version rules of the
// CDI library (MinimumRequiredVersion, pkg/cdi/version.go of
// cncf-tags/container-device-interface) and its validation rules
// (pkg/cdi/spec.go, container-edits.go, pkg/parser).
//
// The model has no `annotations`, `intelRdt` or `netDevices`: migd never
// writes them (library 0.5.2 does not know them). Parsing a document that
// carries `intelRdt` or `netDevices` edits fails; spec/device annotations are
// read and dropped.
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(cdi::Spec base, cdi::ParseSpecDocument(text, path));
//   MIGD_RETURN_IF_ERROR(cdi::ValidateSpec(spec, cdi::kVersion050));
//   std::string bytes = cdi::SerializeSpec(spec);
//
// Thread-safety: value types and reentrant functions.
#ifndef MIGD_CDI_SPEC_H_
#define MIGD_CDI_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cdi/names.h"

namespace migd::cdi {

struct DeviceNode {
  std::string path;       // in the container; required
  std::string host_path;  // "" = same as path (non-empty needs spec 0.5.0)
  std::string type;       // "", "b", "c", "u", "p"
  std::optional<int64_t> major;
  std::optional<int64_t> minor;
  std::optional<uint32_t> file_mode;  // permission bits, JSON decimal
  std::string permissions;            // subset of "rwm"; "" = runtime default
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  friend bool operator==(const DeviceNode&, const DeviceNode&) = default;
};

struct Mount {
  std::string host_path;
  std::string container_path;
  std::vector<std::string> options;
  std::string type;  // non-empty needs spec 0.4.0
  friend bool operator==(const Mount&, const Mount&) = default;
};

struct Hook {
  std::string hook_name;
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::optional<int64_t> timeout;
  friend bool operator==(const Hook&, const Hook&) = default;
};

struct ContainerEdits {
  std::vector<std::string> env;  // "KEY=VALUE"
  std::vector<DeviceNode> device_nodes;
  std::vector<Mount> mounts;
  std::vector<Hook> hooks;
  std::vector<uint32_t> additional_gids;  // needs spec 0.7.0
  bool empty() const {
    return env.empty() && device_nodes.empty() && mounts.empty() && hooks.empty() &&
           additional_gids.empty();
  }
  friend bool operator==(const ContainerEdits&, const ContainerEdits&) = default;
};

struct Device {
  std::string name;
  ContainerEdits edits;
  friend bool operator==(const Device&, const Device&) = default;
};

struct Spec {
  std::string version;  // cdiVersion
  std::string kind;     // "<vendor>/<class>"
  std::vector<Device> devices;
  ContainerEdits edits;  // spec-level containerEdits
  friend bool operator==(const Spec&, const Spec&) = default;
};

// The smallest spec version that can express `spec` (the library's
// MinimumRequiredVersion): 0.3.0, raised by mount types (0.4.0), device-node
// host paths and digit-initial device names (0.5.0), a '.' in the class
// (0.6.0), additional GIDs (0.7.0).
Version MinimumVersion(const Spec& spec);

// The library's validation plus migd's version policy: kind and device names
// follow the grammar (dots in the class only from 0.6.0); at least one device;
// no duplicate device names; no device with empty edits; env entries have '='
// at an index > 0; device nodes have a path, a known type and permissions
// within "rwm"; mounts have both paths; hooks have a known hookName and a path;
// `version` is known, ≥ MinimumVersion(spec) and ≤ `max_version`.
// kInvalidArgument naming the offending field otherwise.
Status ValidateSpec(const Spec& spec, const Version& max_version);

// Canonical JSON (2-space indent, trailing newline), fields in the order of
// the Go types, empty optional fields omitted (Go's omitempty). Deterministic.
std::string SerializeSpec(const Spec& spec);

// Parses a spec document, JSON or YAML (YAML when `source` ends in .yaml/.yml
// or the text does not start with '{'). Strict like the Go library: an
// unknown field fails; `intelRdt` / `netDevices` fail as unsupported;
// `annotations` are dropped. Does not call ValidateSpec.
// kInvalidArgument with `source` and the JSON path of the offending field.
StatusOr<Spec> ParseSpecDocument(std::string_view text, std::string_view source);

// The kind and device names of any spec document, read leniently (unknown
// fields are ignored), for detecting that another file defines a device.
// kInvalidArgument if the text is not a JSON/YAML mapping.
struct SpecHeader {
  std::string kind;
  std::vector<std::string> device_names;
};
StatusOr<SpecHeader> ParseSpecHeader(std::string_view text, std::string_view source);

}  // namespace migd::cdi

#endif  // MIGD_CDI_SPEC_H_
