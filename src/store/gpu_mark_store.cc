// See store/gpu_mark_store.h.
#include "store/gpu_mark_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/json_reader.h"
#include "base/status_macros.h"
#include "store/private_dir.h"

namespace migd::store {
namespace {

constexpr int kVersion = 1;
constexpr std::string_view kSuffix = ".json";
constexpr size_t kMaxMarkBytes = 4096;

// The GPU a mark file's name gives ("<GPU UUID>.json"), if any.
std::optional<GpuUuid> GpuOfName(const std::string& name) {
  if (!name.ends_with(kSuffix)) return std::nullopt;
  std::string uuid = name.substr(0, name.size() - kSuffix.size());
  if (!IsValidGpuUuid(uuid)) return std::nullopt;
  return GpuUuid(std::move(uuid));
}

}  // namespace

std::string_view GpuMarkCauseName(GpuMarkCause cause) {
  return cause == GpuMarkCause::kLost ? "lost" : "fault";
}

std::string EncodeGpuMark(const GpuMark& mark) {
  nlohmann::ordered_json j;
  j["version"] = kVersion;
  j["gpuUUID"] = mark.gpu_uuid.value();
  j["gpuIndex"] = mark.gpu_index;
  j["bootID"] = mark.boot_id;
  j["reason"] = mark.reason;
  j["cause"] = GpuMarkCauseName(mark.cause);
  j["markedAtUnix"] = mark.marked_at_unix;
  return j.dump(2) + "\n";
}

StatusOr<GpuMark> DecodeGpuMark(std::string_view text, std::string_view source) {
  MIGD_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, source, StatusCode::kDataLoss));
  JsonReader r(doc, std::string(source), StatusCode::kDataLoss);
  MIGD_RETURN_IF_ERROR(r.ExpectObject());
  MIGD_ASSIGN_OR_RETURN(int64_t version, r.Int("version"));
  if (version != kVersion) {
    return r.ExpectedAt("version", "version 1 (this migd reads no other)");
  }
  MIGD_RETURN_IF_ERROR(
      r.NoUnknownKeys({"version", "gpuUUID", "gpuIndex", "bootID", "reason", "cause", "markedAtUnix"}));
  GpuMark m;
  MIGD_ASSIGN_OR_RETURN(std::string uuid, r.String("gpuUUID"));
  if (!IsValidGpuUuid(uuid)) return r.ExpectedAt("gpuUUID", "a GPU UUID (GPU-<hex and dashes>)");
  m.gpu_uuid = GpuUuid(std::move(uuid));
  MIGD_ASSIGN_OR_RETURN(m.gpu_index, r.Uint32("gpuIndex"));
  MIGD_ASSIGN_OR_RETURN(m.boot_id, r.String("bootID"));
  if (m.boot_id.empty()) return r.ExpectedAt("bootID", "a boot id");
  MIGD_ASSIGN_OR_RETURN(m.reason, r.String("reason"));
  // Added after version 1 shipped: a mark without it is a fault's (the
  // cause no policy clears).
  MIGD_ASSIGN_OR_RETURN(std::string cause,
                        r.OptionalString("cause", std::string(GpuMarkCauseName(GpuMarkCause::kFault))));
  if (cause == GpuMarkCauseName(GpuMarkCause::kLost)) {
    m.cause = GpuMarkCause::kLost;
  } else if (cause != GpuMarkCauseName(GpuMarkCause::kFault)) {
    return r.ExpectedAt("cause", "\"fault\" or \"lost\"");
  }
  MIGD_ASSIGN_OR_RETURN(m.marked_at_unix, r.Int("markedAtUnix", 0));
  return m;
}

StatusOr<std::unique_ptr<GpuMarkStore>> GpuMarkStore::Open(const std::string& state_dir,
                                                           std::string boot_id, Clock& clock,
                                                           FileOps* ops) {
  if (boot_id.empty()) return InvalidArgumentError("GpuMarkStore needs a boot id");
  FileOps& file_ops = ops != nullptr ? *ops : FileOps::Default();
  const std::string dir = state_dir + "/" + std::string(kGpuMarkDirName);
  Status made = file_ops.MakeDirectory(dir, 0700);
  if (made.ok()) {
    MIGD_RETURN_IF_ERROR(file_ops.SyncDirectory(state_dir));
  } else if (made.code() != StatusCode::kAlreadyExists) {
    return made;
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return ErrnoToStatus(errno, "lstat " + dir);
  MIGD_RETURN_IF_ERROR(CheckPrivateDir(dir, st, "GPU health mark directory"));
  return std::unique_ptr<GpuMarkStore>(
      new GpuMarkStore(dir, std::move(boot_id), clock, file_ops));
}

StatusOr<std::string> GpuMarkStore::PathOf(const GpuUuid& gpu) const {
  if (!IsValidGpuUuid(gpu.value())) {
    return InvalidArgumentError("not a GPU UUID: \"" + gpu.value() + "\"");
  }
  return dir_ + "/" + gpu.value() + std::string(kSuffix);
}

Status GpuMarkStore::Put(GpuMark mark) {
  MIGD_ASSIGN_OR_RETURN(std::string path, PathOf(mark.gpu_uuid));
  if (mark.boot_id.empty()) mark.boot_id = boot_id_;
  if (mark.marked_at_unix == 0) {
    mark.marked_at_unix = ToUnixSeconds(clock_.Now());
  }
  MutexLock lock(&mu_);
  AtomicWriteOptions options;
  options.mode = 0600;
  return ops_.WriteFileAtomically(path, EncodeGpuMark(mark), options);
}

Status GpuMarkStore::RemoveLocked(const std::string& path) {
  Status s = ops_.RemoveFile(path);
  if (s.code() == StatusCode::kNotFound) return OkStatus();
  MIGD_RETURN_IF_ERROR(s);
  return ops_.SyncDirectory(dir_);
}

Status GpuMarkStore::Remove(const GpuUuid& gpu) {
  MIGD_ASSIGN_OR_RETURN(std::string path, PathOf(gpu));
  MutexLock lock(&mu_);
  return RemoveLocked(path);
}

StatusOr<GpuMark> GpuMarkStore::LoadOne(const std::string& name, const GpuUuid& gpu) {
  const std::string path = dir_ + "/" + name;
  MIGD_ASSIGN_OR_RETURN(std::string text, ops_.ReadFile(path, kMaxMarkBytes));
  MIGD_ASSIGN_OR_RETURN(GpuMark mark, DecodeGpuMark(text, path));
  if (mark.gpu_uuid != gpu) {
    return DataLossError(path + ": /gpuUUID: expected " + gpu.value() + " (the file's name), got " +
                         mark.gpu_uuid.value());
  }
  return mark;
}

StatusOr<GpuMarkLoad> GpuMarkStore::LoadAll() {
  MutexLock lock(&mu_);
  MIGD_ASSIGN_OR_RETURN(const std::vector<std::string> names,
                        ListDirectory(dir_, "GPU health mark directory"));
  GpuMarkLoad out;
  for (const std::string& name : names) {
    const std::string path = dir_ + "/" + name;
    if (IsAtomicWriteTempName(name, kSuffix)) {
      MIGD_RETURN_IF_ERROR(RemoveLocked(path));  // an interrupted Put: old mark or new
      continue;
    }
    const std::optional<GpuUuid> gpu = GpuOfName(name);
    if (!gpu) {
      out.problems.push_back({name, std::nullopt,
                              path + ": not a GPU health mark (<GPU UUID>.json); left in place"});
      continue;
    }
    StatusOr<GpuMark> mark = LoadOne(name, *gpu);
    if (!mark.ok()) {
      out.problems.push_back({name, gpu, std::string(mark.status().message())});
    } else if (mark->boot_id != boot_id_) {
      MIGD_RETURN_IF_ERROR(RemoveLocked(path));
      out.other_boot.push_back(*std::move(mark));
    } else {
      out.marks.push_back(*std::move(mark));
    }
  }
  return out;
}

}  // namespace migd::store
