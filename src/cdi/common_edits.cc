#include "cdi/common_edits.h"

#include <dirent.h>
#include <unistd.h>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/json_reader.h"
#include "base/status_macros.h"
#include "cdi/run_command.h"

namespace migd::cdi {
namespace {

// *.json and *.yaml entries of `dir`, sorted: what the CDI library loads
// (pkg/cdi/spec-dirs.go scanSpecDirs). A missing directory is empty.
std::vector<std::string> SpecFiles(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.ends_with(".json") || name.ends_with(".yaml")) out.push_back(dir + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// A spec around `edits` at `max`: ValidateSpec then checks the edits and
// that they need no version above `max` (MinimumVersion).
Status CheckEditsFit(const ContainerEdits& edits, const Version& max) {
  Spec probe;
  probe.version = max.ToString();
  probe.kind = "migd.probe/common";
  Device device;
  device.name = "probe";
  device.edits.env = {"PROBE=1"};
  probe.devices.push_back(std::move(device));
  probe.edits = edits;
  return ValidateSpec(probe, max);
}

}  // namespace

std::string_view CommonEditsSourceName(CommonEditsSource source) {
  switch (source) {
    case CommonEditsSource::kExplicit:
      return "explicit";
    case CommonEditsSource::kNodeSpec:
      return "node-spec";
    case CommonEditsSource::kGenerated:
      return "generated";
    case CommonEditsSource::kNone:
      break;
  }
  return "none";
}

std::string DescribeEdits(const ContainerEdits& e) {
  std::vector<std::string> parts;
  auto add = [&](size_t n, const char* what) {
    if (n > 0) parts.push_back(absl::StrCat(n, " ", what));
  };
  add(e.mounts.size(), e.mounts.size() == 1 ? "mount" : "mounts");
  add(e.hooks.size(), e.hooks.size() == 1 ? "hook" : "hooks");
  add(e.device_nodes.size(), e.device_nodes.size() == 1 ? "device node" : "device nodes");
  add(e.env.size(), "env");
  add(e.additional_gids.size(), "additional GIDs");
  return parts.empty() ? "no edits" : absl::StrJoin(parts, ", ");
}

CommonEditsResolver::CommonEditsResolver(CommonEditsOptions options, const HostReader* reader,
                                         CommandRunner run)
    : options_(std::move(options)), reader_(reader), run_(std::move(run)) {
  if (!run_) {
    run_ = [](const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
      return RunForOutput(argv, timeout);
    };
  }
}

StatusOr<ContainerEdits> CommonEditsResolver::ReadSpecEdits(const std::string& path,
                                                            std::string_view kind) const {
  MIGD_ASSIGN_OR_RETURN(std::string text, reader_->ReadFile(path));
  MIGD_ASSIGN_OR_RETURN(Spec spec, ParseSpecDocument(text, path));
  if (!kind.empty() && spec.kind != kind) {
    return NotFoundError(absl::StrCat(path, " is of kind ", spec.kind, ", not ", std::string(kind)));
  }
  if (Status fit = CheckEditsFit(spec.edits, options_.max_version); !fit.ok()) {
    return InvalidArgumentError(
        absl::StrCat(path, ": its containerEdits cannot go into migd's specs: ", std::string(fit.message())));
  }
  return std::move(spec.edits);
}

std::optional<CommonEdits> CommonEditsResolver::FindNodeSpec(
    std::vector<std::string>* warnings) const {
  for (auto dir = options_.spec_dirs.rbegin(); dir != options_.spec_dirs.rend(); ++dir) {
    for (const std::string& path : SpecFiles(*dir)) {
      StatusOr<ContainerEdits> edits = ReadSpecEdits(path, options_.nvidia_kind);
      if (IsNotFound(edits.status())) continue;  // another kind, or gone meanwhile
      if (!edits.ok()) {
        warnings->push_back(absl::StrCat("skipped ", options_.nvidia_kind,
                                         " spec: ", std::string(edits.status().message())));
        continue;
      }
      CommonEdits out;
      out.source = CommonEditsSource::kNodeSpec;
      out.path = path;
      out.summary = absl::StrCat("node-spec ", path, " (", DescribeEdits(*edits), ")");
      out.edits = std::move(*edits);
      return out;
    }
  }
  return std::nullopt;
}

std::optional<ContainerEdits> CommonEditsResolver::ReadCache() const {
  if (options_.cache_file.empty()) return std::nullopt;
  StatusOr<std::string> text = reader_->ReadFile(options_.cache_file);
  if (!text.ok()) return std::nullopt;
  StatusOr<nlohmann::json> doc = ParseJson(*text, options_.cache_file);
  if (!doc.ok()) return std::nullopt;
  JsonReader r(*doc, options_.cache_file);
  StatusOr<std::string> version = r.String("driverVersion");
  StatusOr<std::string> spec_text = r.String("spec");
  if (!version.ok() || !spec_text.ok() || *version != options_.driver_version) return std::nullopt;
  StatusOr<Spec> spec = ParseSpecDocument(*spec_text, options_.cache_file + " (spec)");
  if (!spec.ok() || !CheckEditsFit(spec->edits, options_.max_version).ok()) return std::nullopt;
  return std::move(spec->edits);
}

void CommonEditsResolver::WriteCache(const std::string& spec_json, const std::string& ctk,
                                     std::vector<std::string>* warnings) const {
  if (options_.cache_file.empty()) return;
  nlohmann::ordered_json doc;
  doc["driverVersion"] = options_.driver_version;
  doc["generatedBy"] = ctk + " cdi generate";
  doc["spec"] = spec_json;
  AtomicWriteOptions write;
  write.mode = 0644;
  write.temp_suffix = ".tmp";
  if (Status s = AtomicWriteFile(options_.cache_file, doc.dump(2) + "\n", write); !s.ok()) {
    warnings->push_back(absl::StrCat("cannot keep the generated edits in ", options_.cache_file,
                                     " (nvidia-ctk runs again at the next start): ",
                                     std::string(s.message())));
  }
}

std::optional<CommonEdits> CommonEditsResolver::Generate(
    std::vector<std::string>* warnings) const {
  auto ctk = std::find_if(options_.nvidia_ctk.begin(), options_.nvidia_ctk.end(),
                          [](const std::string& p) { return ::access(p.c_str(), X_OK) == 0; });
  if (ctk == options_.nvidia_ctk.end()) return std::nullopt;
  CommonEdits out;
  out.source = CommonEditsSource::kGenerated;
  if (std::optional<ContainerEdits> cached = ReadCache()) {
    out.edits = std::move(*cached);
    out.summary = absl::StrCat("generated by ", *ctk, " for driver ", options_.driver_version,
                               ", kept in ", options_.cache_file, " (",
                               DescribeEdits(out.edits), ")");
    return out;
  }
  // nvidia-ctk writes the spec to stdout when --output is not given
  // (cmd/nvidia-ctk/cdi/generate/generate.go: Save with an empty filename).
  StatusOr<std::string> json =
      run_({*ctk, "cdi", "generate", "--format=json"}, options_.generate_timeout);
  StatusOr<Spec> spec = json.ok() ? ParseSpecDocument(*json, *ctk + " cdi generate")
                                  : StatusOr<Spec>(json.status());
  Status fit = spec.ok() ? CheckEditsFit(spec->edits, options_.max_version) : spec.status();
  if (!fit.ok()) {
    warnings->push_back(absl::StrCat(*ctk, " cdi generate failed: ", std::string(fit.message())));
    return std::nullopt;
  }
  WriteCache(*json, *ctk, warnings);
  out.edits = std::move(spec->edits);
  out.summary = absl::StrCat("generated by ", *ctk, " for driver ", options_.driver_version, " (",
                             DescribeEdits(out.edits), ")");
  return out;
}

StatusOr<CommonEdits> CommonEditsResolver::Resolve() const {
  CommonEdits out;
  if (!options_.explicit_path.empty()) {
    StatusOr<ContainerEdits> edits = ReadSpecEdits(options_.explicit_path, "");
    if (!edits.ok()) {
      return Status(edits.status().code(),
                    absl::StrCat("cdi.commonEditsFrom: ", std::string(edits.status().message()),
                                 " (expected a CDI spec, e.g. written by `nvidia-ctk cdi "
                                 "generate`; or remove the key to detect one)"));
    }
    out.source = CommonEditsSource::kExplicit;
    out.path = options_.explicit_path;
    out.summary = absl::StrCat("explicit ", out.path, " (", DescribeEdits(*edits), ")");
    out.edits = std::move(*edits);
    return out;
  }
  std::vector<std::string> warnings;
  std::optional<CommonEdits> found = FindNodeSpec(&warnings);
  if (!found) found = Generate(&warnings);
  if (!found) {
    found = CommonEdits{};
    found->summary = "none";
    warnings.push_back(absl::StrCat(
        "CDI specs carry the MIG device nodes but no driver libraries (libcuda, "
        "libnvidia-ml), binaries or hooks: a CUDA container will not start. No ",
        options_.nvidia_kind, " spec in ", absl::StrJoin(options_.spec_dirs, " or "),
        " and no nvidia-ctk in ", absl::StrJoin(options_.nvidia_ctk, ", "),
        ". Fix: run `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml` (NVIDIA "
        "Container Toolkit) and restart migd, or set cdi.commonEditsFrom to such a spec"));
  }
  found->warnings = std::move(warnings);
  return *found;
}

}  // namespace migd::cdi
