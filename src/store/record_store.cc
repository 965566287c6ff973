#include "store/record_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <utility>

#include "base/crash_point.h"
#include "base/defer.h"
#include "base/file_util.h"
#include "store/gpu_mark_store.h"
#include "store/private_dir.h"

namespace migd::store {
namespace {

constexpr std::string_view kJsonSuffix = ".json";
constexpr std::string_view kTempSuffix = ".tmp";
// Quarantine names keep at most this much of the original name, so that the
// timestamp suffix never pushes them past NAME_MAX (255).
constexpr size_t kMaxQuarantineBase = 200;
constexpr int kMaxQuarantineAttempts = 100;

// ".<base>.json.<pid>.<n>.tmp": the temp name AtomicWriteFile uses for a
// record (base/file_util.h).
bool IsRecordTempName(std::string_view name) {
  return IsAtomicWriteTempName(name, kJsonSuffix, kTempSuffix);
}

std::string ParentDir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == 0 || slash == std::string::npos) return "/";
  return path.substr(0, slash);
}

Clock::TimePoint FloorSeconds(Clock::TimePoint t) {
  return Clock::TimePoint(std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()));
}

// "2026-01-01T00:00:00Z" -> "20260101T000000Z".
std::string CompactTimestamp(Clock::TimePoint t) {
  std::string s = FormatRfc3339(t);
  std::erase_if(s, [](char c) { return c == '-' || c == ':'; });
  return s;
}

// What an entry of stateDir is, by name and lstat(2) (never followed). For
// anything but a record file or the quarantine dir, fills `problem` and says
// whether the entry is to be quarantined.
enum class EntryKind { kRecordFile, kSkippedDir, kProblem };

EntryKind ClassifyEntry(int dir_fd, const std::string& dir, const std::string& name,
                        LoadProblem& problem, bool& quarantine) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    problem.kind = ProblemKind::kUnreadable;
    problem.reason = ErrnoToStatus(errno, "lstat " + dir + "/" + name).ToString();
  } else if (S_ISLNK(st.st_mode)) {
    problem.kind = ProblemKind::kSymlink;
    problem.reason = "a symbolic link; not followed, left in place";
  } else if (S_ISDIR(st.st_mode) && (name == kQuarantineDirName || name == kGpuMarkDirName)) {
    return EntryKind::kSkippedDir;  // quarantine, or GpuMarkStore's (store/gpu_mark_store.h)
  } else if (!S_ISREG(st.st_mode)) {
    problem.kind = ProblemKind::kNotRegular;
    problem.reason = "not a regular file; left in place";
  } else if (IsRecordTempName(name)) {
    problem.kind = ProblemKind::kStaleTemp;
    problem.reason = "a temporary file of an interrupted record write";
    quarantine = true;
  } else if (name.starts_with(kHamiRecordPrefix) && name.ends_with(kJsonSuffix)) {
    problem.kind = ProblemKind::kForeign;
    problem.reason = "an ownership record of HAMi's device plugin; not loaded, left in place";
  } else if (!name.ends_with(kJsonSuffix)) {
    problem.kind = ProblemKind::kUnknownEntry;
    problem.reason = "not a record file name; left in place";
  } else {
    return EntryKind::kRecordFile;
  }
  return EntryKind::kProblem;
}

}  // namespace

std::string_view ProblemKindName(ProblemKind kind) {
  switch (kind) {
    case ProblemKind::kCorrupt:
      return "corrupt";
    case ProblemKind::kUnknownSchema:
      return "unknown_schema";
    case ProblemKind::kInvalidRecord:
      return "invalid_record";
    case ProblemKind::kNameMismatch:
      return "name_mismatch";
    case ProblemKind::kTooLarge:
      return "too_large";
    case ProblemKind::kStaleTemp:
      return "stale_temp";
    case ProblemKind::kSymlink:
      return "symlink";
    case ProblemKind::kNotRegular:
      return "not_regular";
    case ProblemKind::kUnreadable:
      return "unreadable";
    case ProblemKind::kForeign:
      return "foreign";
    case ProblemKind::kUnknownEntry:
      return "unknown_entry";
  }
  return "unknown";
}

std::string LoadProblem::ToString() const {
  std::string s =
      "file=" + file + " problem=" + std::string(ProblemKindName(kind)) + " reason=" + reason;
  if (!quarantined_to.empty()) s += " quarantined=" + quarantined_to;
  if (!quarantine_error.empty()) s += " quarantine_error=" + quarantine_error;
  return s;
}

class RecordStore::KeyLock {
 public:
  KeyLock(RecordStore& store, const RecordKey& key) : store_(store), key_(key) {
    store_.LockKey(key_);
  }
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;
  ~KeyLock() { store_.UnlockKey(key_); }

 private:
  RecordStore& store_;
  const RecordKey key_;
};

RecordStore::RecordStore(std::string dir, Clock& clock, RecordStoreOptions options, bool syncs)
    : dir_(std::move(dir)),
      clock_(clock),
      options_(std::move(options)),
      ops_(options_.file_ops != nullptr ? *options_.file_ops : FileOps::Default()),
      syncs_(syncs) {}

Status RecordStore::SyncDir(const std::string& dir) {
  return syncs_ ? ops_.SyncDirectory(dir) : OkStatus();
}

RecordStore::~RecordStore() = default;

StatusOr<std::unique_ptr<RecordStore>> RecordStore::Open(std::string dir, Clock& clock,
                                                         RecordStoreOptions options) {
  if (dir.empty() || dir.front() != '/') {
    return InvalidArgumentError("state directory '" + dir + "' is not an absolute path");
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (options.max_record_bytes == 0) {
    return InvalidArgumentError("max_record_bytes must be positive");
  }
  FileOps& ops = options.file_ops != nullptr ? *options.file_ops : FileOps::Default();

  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoToStatus(errno, "lstat of state directory " + dir);
    const std::string parent = ParentDir(dir);
    if (parent != "/") {
      Status s = MakeDirectories(parent, 0755);
      if (!s.ok()) return s.WithContext("creating the parent of state directory " + dir);
    }
    Status s = ops.MakeDirectory(dir, 0700);
    // Another process may have created it meanwhile: it is checked below.
    if (!s.ok() && s.code() != StatusCode::kAlreadyExists) {
      return s.WithContext("creating state directory");
    }
    s = ops.SyncDirectory(parent);
    if (!s.ok()) return s.WithContext("creating state directory " + dir);
    if (::lstat(dir.c_str(), &st) != 0) {
      return ErrnoToStatus(errno, "lstat of state directory " + dir);
    }
  }
  Status s = CheckPrivateDir(dir, st, "state directory");
  if (!s.ok()) return s;
  bool syncs = true;
  if (options.sync == RecordStoreOptions::Sync::kAuto) {
    StatusOr<bool> in_memory = IsOnMemoryFilesystem(dir);
    if (!in_memory.ok()) return in_memory.status().WithContext("state directory");
    syncs = !*in_memory;
  }
  return std::unique_ptr<RecordStore>(
      new RecordStore(std::move(dir), clock, std::move(options), syncs));
}

StatusOr<std::string> RecordStore::PathOf(const RecordKey& key) const {
  StatusOr<std::string> name = RecordFileName(key);
  if (!name.ok()) return name.status();
  return dir_ + "/" + *name;
}

void RecordStore::LockKey(const RecordKey& key) {
  MutexLock lock(&mu_);
  cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !loading_ && loaders_waiting_ == 0 && busy_keys_.count(key) == 0;
  });
  busy_keys_.insert(key);
}

void RecordStore::UnlockKey(const RecordKey& key) {
  {
    MutexLock lock(&mu_);
    busy_keys_.erase(key);
  }
  cv_.SignalAll();
}

void RecordStore::LockAll() {
  MutexLock lock(&mu_);
  ++loaders_waiting_;
  cv_.Wait(&mu_,
           [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !loading_ && busy_keys_.empty(); });
  --loaders_waiting_;
  loading_ = true;
}

void RecordStore::UnlockAll() {
  {
    MutexLock lock(&mu_);
    loading_ = false;
  }
  cv_.SignalAll();
}

StatusOr<std::optional<RecordStore::Known>> RecordStore::PeekExisting(
    const RecordKey& key, const std::string& path) const {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<Known>();
    return ErrnoToStatus(errno, "lstat " + path);
  }
  if (S_ISLNK(st.st_mode)) {
    return FailedPreconditionError(path + " is a symbolic link; refusing to write through it");
  }
  if (!S_ISREG(st.st_mode)) {
    return FailedPreconditionError(path + " exists and is not a regular file");
  }
  auto unreadable = [&path](const Status& why) {
    return FailedPreconditionError("existing record " + path + " cannot be read (" +
                                   why.ToString() +
                                   "); refusing to overwrite it: LoadAll quarantines it");
  };
  StatusOr<std::string> text = ops_.ReadFile(path, options_.max_record_bytes);
  if (!text.ok()) return unreadable(text.status());
  StatusOr<Record> rec = DecodeRecord(*text, path);
  if (!rec.ok()) return unreadable(rec.status());
  Status valid = ValidateRecord(*rec);
  if (!valid.ok()) return unreadable(valid);
  if (rec->key != key) {
    return unreadable(DataLossError("it holds the record of " + rec->key.ToString()));
  }
  return std::optional<Known>(Known{.phase = rec->phase,
                                    .mig_uuid = rec->mig_uuid,
                                    .created_at = rec->created_at,
                                    .generation = rec->generation});
}

StatusOr<Record> RecordStore::Put(Record record) {
  if (record.boot_id.empty()) record.boot_id = options_.boot_id;
  if (record.boot_id.empty()) {
    return InvalidArgumentError("record for " + record.key.ToString() +
                                " has no boot id and the store has none to stamp");
  }
  Status s = ValidateRecord(record);
  if (!s.ok()) return s.WithContext("record for " + record.key.ToString());
  StatusOr<std::string> path = PathOf(record.key);
  if (!path.ok()) return path.status();

  KeyLock key_lock(*this, record.key);
  std::optional<Known> known;
  bool pending = false;
  {
    MutexLock lock(&mu_);
    auto it = known_.find(record.key);
    if (it != known_.end()) known = it->second;
    pending = pending_removals_.count(record.key) != 0;
  }
  if (!known) {
    StatusOr<std::optional<Known>> peeked = PeekExisting(record.key, *path);
    if (!peeked.ok()) return peeked.status();
    known = *peeked;
  }

  if (known && !pending && known->phase == RecordPhase::kCommitted) {
    const std::string existing = known->mig_uuid ? known->mig_uuid->value() : "?";
    if (record.phase == RecordPhase::kIntent) {
      return FailedPreconditionError("record for " + record.key.ToString() + " is committed (" +
                                     existing + "); an intent cannot replace it: Remove it first");
    }
    if (known->mig_uuid != record.mig_uuid) {
      return FailedPreconditionError("record for " + record.key.ToString() + " belongs to " +
                                     existing + ", not " + record.mig_uuid->value() +
                                     ": Remove it first");
    }
  }

  const Clock::TimePoint now = FloorSeconds(clock_.Now());
  record.generation = known ? known->generation + 1 : 1;
  if (known && !pending) {
    record.created_at = known->created_at;
  } else if (record.created_at == Clock::TimePoint{}) {
    record.created_at = now;
  } else {
    record.created_at = FloorSeconds(record.created_at);
  }
  record.updated_at = now;
  if (record.last_used_at) record.last_used_at = FloorSeconds(*record.last_used_at);

  const std::string text = EncodeRecord(record);
  if (text.size() > options_.max_record_bytes) {
    return InvalidArgumentError("record for " + record.key.ToString() + " encodes to " +
                                std::to_string(text.size()) + " bytes, more than the limit of " +
                                std::to_string(options_.max_record_bytes));
  }
  s = ops_.WriteFileAtomically(*path, text,
                               {.mode = 0600, .sync = syncs_, .crash_points = "record.write"});
  if (!s.ok()) return s.WithContext("writing record for " + record.key.ToString());

  MutexLock lock(&mu_);
  known_[record.key] = Known{.phase = record.phase,
                             .mig_uuid = record.mig_uuid,
                             .created_at = record.created_at,
                             .generation = record.generation};
  pending_removals_.erase(record.key);
  return record;
}

Status RecordStore::RemovePath(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      return FailedPreconditionError(path +
                                     " is a symbolic link; migd does not remove it: check "
                                     "what created it and remove it by hand");
    }
    if (!S_ISREG(st.st_mode)) {
      return FailedPreconditionError(path +
                                     " is not a regular file; migd does not remove it: "
                                     "check what created it and remove it by hand");
    }
    CrashPoint("record.remove");
    Status s = ops_.RemoveFile(path);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  } else if (errno != ENOENT) {
    return ErrnoToStatus(errno, "lstat " + path);
  }
  // Also when the file was already gone: an earlier unlink may not be durable
  // yet (its directory fsync is what failed).
  return SyncDir(dir_);
}

Status RecordStore::Remove(const RecordKey& key) {
  StatusOr<std::string> path = PathOf(key);
  if (!path.ok()) return path.status();
  KeyLock key_lock(*this, key);
  Status s = RemovePath(*path);
  MutexLock lock(&mu_);
  if (s.ok()) {
    known_.erase(key);
    pending_removals_.erase(key);
    return s;
  }
  pending_removals_.insert(key);
  return std::move(s).WithContext("removing record for " + key.ToString() + " (queued for retry)");
}

Status RecordStore::RetryPendingRemovals() {
  std::vector<RecordKey> keys = PendingRemovals();
  Status first_error;
  size_t failures = 0;
  for (const RecordKey& key : keys) {
    // Keys in the queue were validated by Remove.
    StatusOr<std::string> path = PathOf(key);
    if (!path.ok()) continue;
    KeyLock key_lock(*this, key);
    {
      MutexLock lock(&mu_);
      // A Put since the failure superseded the removal.
      if (pending_removals_.count(key) == 0) continue;
    }
    Status s = RemovePath(*path);
    MutexLock lock(&mu_);
    if (s.ok()) {
      known_.erase(key);
      pending_removals_.erase(key);
    } else {
      ++failures;
      if (first_error.ok())
        first_error = std::move(s).WithContext("removing record for " + key.ToString());
    }
  }
  if (failures == 0) return OkStatus();
  return Status(
      first_error.code(),
      std::to_string(failures) + " of " + std::to_string(keys.size()) +
          " pending record removals failed; first: " + std::string(first_error.message()));
}

size_t RecordStore::pending_removals() const {
  MutexLock lock(&mu_);
  return pending_removals_.size();
}

std::vector<RecordKey> RecordStore::PendingRemovals() const {
  MutexLock lock(&mu_);
  return {pending_removals_.begin(), pending_removals_.end()};
}

StatusOr<std::string> RecordStore::QuarantineDir() {
  std::string qdir = dir_ + "/" + std::string(kQuarantineDirName);
  struct stat st {};
  if (::lstat(qdir.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoToStatus(errno, "lstat " + qdir);
    Status s = ops_.MakeDirectory(qdir, 0700);
    if (!s.ok() && s.code() != StatusCode::kAlreadyExists) return s;
    s = SyncDir(dir_);
    if (!s.ok()) return s;
    if (::lstat(qdir.c_str(), &st) != 0) return ErrnoToStatus(errno, "lstat " + qdir);
  }
  Status s = CheckPrivateDir(qdir, st, "quarantine directory");
  if (!s.ok()) return s;
  return qdir;
}

void RecordStore::Quarantine(const std::string& name, LoadProblem& problem) {
  StatusOr<std::string> qdir = QuarantineDir();
  if (!qdir.ok()) {
    problem.quarantine_error = qdir.status().ToString();
    return;
  }
  const std::string from = dir_ + "/" + name;
  const std::string base =
      *qdir + "/" + name.substr(0, kMaxQuarantineBase) + "." + CompactTimestamp(clock_.Now());
  Status s;
  for (int attempt = 0; attempt < kMaxQuarantineAttempts; ++attempt) {
    const std::string to = attempt == 0 ? base : base + "." + std::to_string(attempt);
    s = ops_.RenameNoReplace(from, to);
    if (s.code() == StatusCode::kAlreadyExists) continue;
    if (!s.ok()) break;
    problem.quarantined_to = to;
    return;
  }
  problem.quarantine_error = s.ToString();
}

std::optional<Record> RecordStore::LoadOne(const std::string& name, LoadProblem& problem) {
  const std::string path = dir_ + "/" + name;
  StatusOr<std::string> text = ops_.ReadFile(path, options_.max_record_bytes);
  if (!text.ok()) {
    problem.kind = text.status().code() == StatusCode::kOutOfRange ? ProblemKind::kTooLarge
                                                                   : ProblemKind::kUnreadable;
    problem.reason = text.status().ToString();
    return std::nullopt;
  }
  StatusOr<Record> rec = DecodeRecord(*text, name);
  if (!rec.ok()) {
    problem.kind = rec.status().code() == StatusCode::kUnimplemented ? ProblemKind::kUnknownSchema
                                                                     : ProblemKind::kCorrupt;
    problem.reason = rec.status().ToString();
    return std::nullopt;
  }
  Status s = ValidateRecord(*rec);
  if (!s.ok()) {
    problem.kind = ProblemKind::kInvalidRecord;
    problem.reason = DataLossError(name + ": " + std::string(s.message())).ToString();
    return std::nullopt;
  }
  // ValidateRecord checked the key, so the name exists.
  const std::string expected = RecordFileName(rec->key).value();
  if (expected != name) {
    problem.kind = ProblemKind::kNameMismatch;
    problem.reason = DataLossError(name + ": holds the record of " + rec->key.ToString() +
                                   ", whose file is " + expected)
                         .ToString();
    return std::nullopt;
  }
  return std::move(rec).value();
}

StatusOr<LoadResult> RecordStore::LoadAll() {
  LockAll();
  Defer unlock([this] { UnlockAll(); });

  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return ErrnoToStatus(errno, "opening state directory " + dir_);
  Defer close_dir([d] { ::closedir(d); });
  std::vector<std::string> names;
  while (true) {
    errno = 0;
    const dirent* e = ::readdir(d);
    if (e == nullptr) {
      if (errno != 0) return ErrnoToStatus(errno, "listing state directory " + dir_);
      break;
    }
    std::string name(e->d_name);
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());

  LoadResult result;
  std::map<RecordKey, Known> known;
  std::vector<size_t> quarantined;  // indices into result.problems
  for (const std::string& name : names) {
    LoadProblem problem;
    problem.file = name;
    bool quarantine = false;
    const EntryKind kind = ClassifyEntry(::dirfd(d), dir_, name, problem, quarantine);
    if (kind == EntryKind::kSkippedDir) continue;
    if (kind == EntryKind::kRecordFile) {
      std::optional<Record> rec = LoadOne(name, problem);
      if (rec) {
        const RecordKey key = rec->key;
        known[key] = Known{.phase = rec->phase,
                           .mig_uuid = rec->mig_uuid,
                           .created_at = rec->created_at,
                           .generation = rec->generation};
        MutexLock lock(&mu_);
        if (pending_removals_.count(key) == 0) result.records.push_back(std::move(*rec));
        continue;
      }
      quarantine = problem.kind != ProblemKind::kUnreadable;
    }
    if (quarantine) Quarantine(name, problem);
    if (!problem.quarantined_to.empty()) quarantined.push_back(result.problems.size());
    result.problems.push_back(std::move(problem));
  }
  // One pair of directory fsyncs for every move of this pass, not one per
  // file: a state dir full of junk (thousands of corrupt files) would
  // otherwise stall startup for minutes. The moves themselves happened; a
  // failed fsync only makes them less durable, and is reported on each.
  if (!quarantined.empty()) {
    Status s = SyncDir(dir_ + "/" + std::string(kQuarantineDirName));
    if (s.ok()) s = SyncDir(dir_);
    if (!s.ok()) {
      for (size_t i : quarantined) result.problems[i].quarantine_error = s.ToString();
    }
  }
  std::sort(result.records.begin(), result.records.end(),
            [](const Record& a, const Record& b) { return a.key < b.key; });

  MutexLock lock(&mu_);
  known_ = std::move(known);
  return result;
}

}  // namespace migd::store
