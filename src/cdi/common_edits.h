// File: cdi/common_edits.h
//
// CommonEditsResolver: where the driver's container edits come from — the
// libraries, binaries, hooks and control nodes that every CUDA container
// needs and that NVIDIA's own CDI generator puts into the spec-level
// containerEdits of its spec (NVIDIA/nvidia-container-toolkit pkg/nvcdi:
// GetCommonEdits, applied with spec.WithEdits in wrapper.go GetSpec). A migd
// spec without them gives a container the MIG device nodes but no libcuda.
// In order, the first that applies wins:
//
//   kExplicit   cdi.commonEditsFrom: that file (errors are the operator's);
//   kNodeSpec   a spec of kind nvidia.com/gpu already on the node, as
//               `nvidia-ctk cdi generate` or the GPU Operator writes it, in
//               the runtime's spec directories (/var/run/cdi before /etc/cdi:
//               the CDI library gives the later directory priority,
//               pkg/cdi/spec-dirs.go and cache.go);
//   kGenerated  `nvidia-ctk cdi generate` run once when it is installed; its
//               edits are kept in `cache_file` with the driver version and
//               regenerated only when the driver version changes;
//   kNone       none of these: a warning that names the fix.
//
// Only spec-level containerEdits are used (that spec's devices are not
// migd's). A candidate that does not parse, or whose edits would need a CDI
// version above `max_version`, is skipped with a warning.
//
// Example:
//   cdi::CommonEditsResolver resolver(options, &reader);
//   MIGD_ASSIGN_OR_RETURN(cdi::CommonEdits found, resolver.Resolve());
//   // found.source, found.path (read at every Build) or found.edits.
//
// Thread-safety: Resolve is const and safe to call concurrently (it writes
// cache_file atomically).
#ifndef MIGD_CDI_COMMON_EDITS_H_
#define MIGD_CDI_COMMON_EDITS_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cdi/host_reader.h"
#include "cdi/names.h"
#include "cdi/spec.h"

namespace migd::cdi {

enum class CommonEditsSource { kExplicit, kNodeSpec, kGenerated, kNone };
// "explicit", "node-spec", "generated", "none".
std::string_view CommonEditsSourceName(CommonEditsSource source);

struct CommonEditsOptions {
  std::string explicit_path;  // cdi.commonEditsFrom; "" = detect
  // The runtime's spec directories, lowest priority first.
  std::vector<std::string> spec_dirs = {"/etc/cdi", "/var/run/cdi"};
  std::string nvidia_kind = "nvidia.com/gpu";  // nvidia-ctk's default --vendor/--class
  // Where nvidia-ctk is looked for; the first executable one is run.
  std::vector<std::string> nvidia_ctk = {"/usr/bin/nvidia-ctk", "/usr/local/bin/nvidia-ctk",
                                         "/usr/local/nvidia/toolkit/nvidia-ctk"};
  std::chrono::milliseconds generate_timeout{60000};
  // Generated edits with the driver version they belong to ("" = no cache).
  std::string cache_file;
  std::string driver_version;  // nvmlSystemGetDriverVersion
  Version max_version = kVersion050;
};

struct CommonEdits {
  CommonEditsSource source = CommonEditsSource::kNone;
  // kExplicit / kNodeSpec: the file (SpecBuilder reads it at every Build).
  std::string path;
  // The edits as read now (kGenerated: the edits SpecBuilder uses).
  ContainerEdits edits;
  // One line for the log and `migctl status`, e.g.
  // "node-spec /var/run/cdi/nvidia.yaml (4 mounts, 2 hooks)".
  std::string summary;
  // Candidates skipped and, for kNone, the loud warning with the fix.
  std::vector<std::string> warnings;
};

// Runs argv and returns its stdout (RunForOutput in production).
using CommandRunner = std::function<StatusOr<std::string>(const std::vector<std::string>& argv,
                                                          std::chrono::milliseconds timeout)>;

class CommonEditsResolver {
 public:
  // `reader` is not owned and must outlive the resolver. `run` defaults to
  // RunForOutput.
  CommonEditsResolver(CommonEditsOptions options, const HostReader* reader,
                      CommandRunner run = nullptr);

  // Errors only for kExplicit: the file cannot be read or is not a CDI spec
  // whose edits fit max_version (the message names cdi.commonEditsFrom).
  // Detection problems are warnings, never errors.
  StatusOr<CommonEdits> Resolve() const;

 private:
  // The edits of the spec at `path` if it is of `kind` (any kind when
  // empty) and fits max_version; kNotFound if it is of another kind.
  StatusOr<ContainerEdits> ReadSpecEdits(const std::string& path, std::string_view kind) const;
  // kNodeSpec candidate, or nullopt (with warnings for skipped files).
  std::optional<CommonEdits> FindNodeSpec(std::vector<std::string>* warnings) const;
  std::optional<CommonEdits> Generate(std::vector<std::string>* warnings) const;
  std::optional<ContainerEdits> ReadCache() const;
  void WriteCache(const std::string& spec_json, const std::string& ctk,
                  std::vector<std::string>* warnings) const;

  CommonEditsOptions options_;
  const HostReader* reader_;
  CommandRunner run_;
};

// "4 mounts, 2 hooks, 1 env, 3 device nodes" (empty kinds left out).
std::string DescribeEdits(const ContainerEdits& edits);

}  // namespace migd::cdi

#endif  // MIGD_CDI_COMMON_EDITS_H_
