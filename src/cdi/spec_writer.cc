#include "cdi/spec_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <functional>

#include "base/crash_point.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace migd::cdi {
namespace {

// Entries of `dir` (names only, without "." and ".."). A missing directory
// is empty.
StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  StatusOr<std::vector<std::string>> names = ListDirectory(dir, "CDI spec directory");
  if (names.status().code() == StatusCode::kNotFound) return std::vector<std::string>{};
  return names;
}

enum class EntryKind { kAbsent, kRegular, kSymlink, kOther };

StatusOr<EntryKind> Lstat(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return EntryKind::kAbsent;
    return ErrnoToStatus(errno, "lstat " + path);
  }
  if (S_ISLNK(st.st_mode)) return EntryKind::kSymlink;
  if (S_ISREG(st.st_mode)) return EntryKind::kRegular;
  return EntryKind::kOther;
}

}  // namespace

Status CheckSpecDir(const std::string& spec_dir, std::string* warning) {
  warning->clear();
  struct stat st {};
  if (::lstat(spec_dir.c_str(), &st) != 0) {
    return ErrnoToStatus(errno, "cdi.specDir " + spec_dir);
  }
  const std::string what = "cdi.specDir " + spec_dir;
  if (S_ISLNK(st.st_mode)) {
    return FailedPreconditionError(what +
                                   " is a symbolic link; migd does not follow it (whoever "
                                   "can change the link chooses where the runtime's specs come "
                                   "from). Fix: point cdi.specDir at the real directory");
  }
  if (!S_ISDIR(st.st_mode)) {
    return FailedPreconditionError(what +
                                   " exists but is not a directory. Fix: move it away or set "
                                   "cdi.specDir to a directory");
  }
  const uid_t euid = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != euid) {
    return FailedPreconditionError(what + " is owned by uid " + std::to_string(st.st_uid) +
                                   ", not by root or migd's uid " + std::to_string(euid) +
                                   "; that user can make the container runtime hand out any "
                                   "device. Fix: chown root " +
                                   spec_dir);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    const std::string risk = what + " is writable by group or others (mode " + mode +
                             "); anyone who can write it can make the container runtime hand "
                             "any device or mount to a container";
    if ((st.st_mode & S_ISVTX) == 0) {
      return FailedPreconditionError(risk + ". Fix: chmod go-w " + spec_dir);
    }
    // Sticky: others cannot replace or remove migd's files, so migd's own
    // specs stay intact; the injection risk is the runtime's, not migd's.
    *warning = risk + " (sticky: migd's own files cannot be replaced). Fix: chmod 0755 " +
               spec_dir;
  }
  return OkStatus();
}

SpecWriter::SpecWriter(WriterOptions options) : options_(std::move(options)) {}

std::string SpecWriter::PathFor(std::string_view device) const {
  return options_.spec_dir + "/" + SpecFileName(options_.kind, device);
}

Mutex& SpecWriter::LockFor(std::string_view device) const {
  return name_locks_[std::hash<std::string_view>()(device) % name_locks_.size()];
}

Status SpecWriter::CheckCollision(const std::string& device, const std::string& own_file) const {
  MIGD_ASSIGN_OR_RETURN(std::vector<std::string> entries, ListDir(options_.spec_dir));
  const std::string kind = options_.kind.ToString();
  for (const std::string& name : entries) {
    if (name == own_file) continue;
    if (!(name.ends_with(".json") || name.ends_with(".yaml"))) continue;
    const std::string path = options_.spec_dir + "/" + name;
    StatusOr<std::string> text = ReadFileToString(path);
    if (!text.ok()) continue;
    if (text->find(device) == std::string::npos) continue;  // cheap filter
    StatusOr<SpecHeader> header = ParseSpecHeader(*text, path);
    if (!header.ok() || header->kind != kind) continue;
    for (const std::string& other : header->device_names) {
      if (other == device) {
        return AlreadyExistsError(path + " already defines CDI device " +
                                  options_.kind.QualifiedName(device) + "; refusing to write " +
                                  own_file + " (the runtime would drop both as conflicting)");
      }
    }
  }
  return OkStatus();
}

Status SpecWriter::Write(const BuiltSpec& built) {
  Status s = WriteUncounted(built);
  CountOperation("write", s);
  return s;
}

Status SpecWriter::WriteUncounted(const BuiltSpec& built) {
  MIGD_RETURN_IF_ERROR(ValidateKind(options_.kind, /*allow_dots_in_class=*/true));
  MIGD_RETURN_IF_ERROR(ValidateDeviceName(built.device_name));
  if (built.spec.kind != options_.kind.ToString()) {
    return InvalidArgumentError("CDI spec of kind \"" + built.spec.kind +
                                "\" given to the writer of kind " + options_.kind.ToString());
  }
  const std::string file = SpecFileName(options_.kind, built.device_name);
  const std::string path = options_.spec_dir + "/" + file;
  MutexLock name_lock(&LockFor(built.device_name));
  {
    MutexLock lock(&mu_);
    pending_removals_.erase(built.device_name);
  }
  MIGD_RETURN_IF_ERROR(MakeDirectories(options_.spec_dir, 0755));
  MIGD_RETURN_IF_ERROR(CheckCollision(built.device_name, file));
  AtomicWriteOptions write_options;
  write_options.mode = 0644;
  write_options.sync = options_.sync;
  write_options.temp_suffix = ".tmp";
  write_options.crash_points = "cdi.write";
  return AtomicWriteFile(path, built.content, write_options);
}

StatusOr<VerifyResult> SpecWriter::Verify(std::string_view device,
                                          std::string_view expected) const {
  StatusOr<VerifyResult> r = VerifyUncounted(device, expected);
  CountOperation("verify", r.ok() ? OkStatus() : r.status());
  return r;
}

StatusOr<VerifyResult> SpecWriter::VerifyUncounted(std::string_view device,
                                                   std::string_view expected) const {
  MIGD_RETURN_IF_ERROR(ValidateDeviceName(device));
  const std::string path = PathFor(device);
  MutexLock name_lock(&LockFor(device));
  StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    if (IsNotFound(text.status())) return VerifyResult::kMissing;
    return text.status();
  }
  return *text == expected ? VerifyResult::kMatches : VerifyResult::kDiffers;
}

Status SpecWriter::RemoveLocked(const std::string& device) {
  Status s = RemoveLockedUncounted(device);
  CountOperation("remove", s);
  return s;
}

Status SpecWriter::RemoveLockedUncounted(const std::string& device) {
  const std::string path = PathFor(device);
  StatusOr<EntryKind> kind = Lstat(path);
  Status s;
  if (!kind.ok()) {
    s = kind.status();
  } else if (*kind == EntryKind::kSymlink || *kind == EntryKind::kOther) {
    {
      MutexLock lock(&mu_);
      pending_removals_.erase(device);
    }
    return FailedPreconditionError(
        path + (*kind == EntryKind::kSymlink ? " is a symbolic link" : " is not a regular file") +
        "; leaving it alone");
  } else if (*kind == EntryKind::kRegular) {
    CrashPoint("cdi.remove");
    if ((options_.unlink ? options_.unlink(path) : ::unlink(path.c_str())) != 0 &&
        errno != ENOENT) {
      s = ErrnoToStatus(errno, "removing CDI spec " + path);
    }
  }
  if (s.ok() && options_.sync && *kind == EntryKind::kRegular) {
    s = SyncDirectory(options_.spec_dir);
  }
  MutexLock lock(&mu_);
  if (s.ok()) {
    pending_removals_.erase(device);
  } else {
    pending_removals_.insert(device);
  }
  return s;
}

Status SpecWriter::Remove(std::string_view device) {
  if (Status v = ValidateDeviceName(device); !v.ok()) {
    CountOperation("remove", v);
    return v;
  }
  const std::string name(device);
  MutexLock name_lock(&LockFor(name));
  return RemoveLocked(name);
}

Status SpecWriter::RetryPendingRemovals() {
  std::vector<std::string> todo = PendingRemovals();
  Status first;
  for (const std::string& device : todo) {
    MutexLock name_lock(&LockFor(device));
    {
      MutexLock lock(&mu_);
      if (!pending_removals_.contains(device)) continue;  // rewritten meanwhile
    }
    Status s = RemoveLocked(device);
    if (!s.ok() && first.ok()) first = std::move(s);
  }
  if (first.ok()) return first;
  const size_t left = PendingRemovals().size();
  return std::move(first).WithContext(std::to_string(left) + " CDI spec removal(s) pending");
}

void SpecWriter::CountOperation(std::string_view kind, const Status& status) const {
  std::string result(StatusCodeName(status.code()));
  std::transform(result.begin(), result.end(), result.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  MutexLock lock(&counts_mu_);
  ++op_counts_[{std::string(kind), std::move(result)}];
}

std::vector<OperationCount> SpecWriter::OperationCounts() const {
  MutexLock lock(&counts_mu_);
  std::vector<OperationCount> out;
  out.reserve(op_counts_.size());
  for (const auto& [key, n] : op_counts_) out.push_back({key.first, key.second, n});
  return out;
}

std::vector<std::string> SpecWriter::PendingRemovals() const {
  MutexLock lock(&mu_);
  return {pending_removals_.begin(), pending_removals_.end()};
}

StatusOr<SweepReport> SpecWriter::Sweep(const std::set<std::string>& live_devices) {
  MIGD_ASSIGN_OR_RETURN(std::vector<std::string> entries, ListDir(options_.spec_dir));
  SweepReport report;
  std::set<std::string> found;
  const std::string prefix = SpecFilePrefix(options_.kind);
  const std::string own_pid = "." + std::to_string(::getpid()) + ".";
  for (const std::string& name : entries) {
    const std::string path = options_.spec_dir + "/" + name;
    // Temp files: ".<prefix><device>.json.<pid>.<n>.tmp" (base/AtomicWriteFile).
    if (name.starts_with("." + prefix) && name.ends_with(".tmp")) {
      if (name.find(own_pid) != std::string::npos) continue;  // may be ours, in flight
      StatusOr<EntryKind> kind = Lstat(path);
      if (kind.ok() && *kind == EntryKind::kRegular && ::unlink(path.c_str()) == 0) {
        report.temp_files_removed.push_back(name);
      }
      continue;
    }
    std::optional<std::string> device = DeviceFromSpecFileName(options_.kind, name);
    if (!device) continue;
    MutexLock name_lock(&LockFor(*device));
    MIGD_ASSIGN_OR_RETURN(EntryKind kind, Lstat(path));
    if (kind == EntryKind::kAbsent) continue;
    if (kind != EntryKind::kRegular) {
      report.refused.push_back(name);
      continue;
    }
    if (live_devices.contains(*device)) {
      found.insert(*device);
      report.kept.push_back(*device);
      continue;
    }
    if (RemoveLocked(*device).ok()) {
      report.removed.push_back(*device);
    } else {
      report.failed.push_back(*device);
    }
  }
  for (const std::string& device : live_devices) {
    if (!found.contains(device)) report.missing.push_back(device);
  }
  for (auto* list : {&report.kept, &report.removed, &report.refused, &report.failed,
                     &report.temp_files_removed}) {
    std::sort(list->begin(), list->end());
  }
  return report;
}

}  // namespace migd::cdi
