// File: store/record_store.h
//
// RecordStore: durable ownership records of MIG instances, one file per
// instance in `stateDir` (mode 0700; migd's default, /run/migd/state, is the
// `stateDir` key of daemon/config_schema.cc). The engine is its only writer:
// it journals every create through it and hands the loaded records to
// recovery. Format and file naming are in store/record.h.
//
// Durability. Every Put is AtomicWriteFile (temp file in stateDir, fsync,
// rename over the record, fsync of stateDir); every Remove is unlink + fsync of
// stateDir. When a call returns OK its effect survives kill -9 and power loss.
// A reader sees the old record or the new one, never a mix. On tmpfs or ramfs
// (RecordStoreOptions::sync) the fsyncs are left out: the rename and unlink
// alone survive kill -9, and nothing there survives a power loss.
//
// Safety. stateDir must be a real directory owned by our euid and not
// writable by group or others (Open refuses anything else). Record paths are
// built only from validated keys, so no name can leave stateDir. Symlinks and
// non-regular files are never followed, written through, deleted or moved.
// Bad files are moved to <stateDir>/quarantine/ and reported, never deleted.
//
// Crash contract. The engine writes records in this order:
//
//   1. Put(intent: key, Creating)   durable BEFORE CreateGi is called
//   2. CreateGi, CreateCi           (optionally Put(intent) again with the ids)
//   3. Put(committed: + GI id, CI id, MIG UUID)   same file, one atomic rewrite
//   4. ... Put(committed) on every state/owner change ...
//   5. DestroyCi, DestroyGi, then Remove(key)
//
// so a crash at any instant leaves, for each key, one of:
//
//   - no file: nothing was created for it (crash before 1 completed), or the
//     instance was destroyed and its record removed (after 5). A live GI at
//     that placement is not migd's: recovery preserves it as foreign (or
//     adopts it under adoptExistingMIGInstances).
//   - an intent: a GI and CI may or may not exist at exactly that GPU, profile
//     and placement (crash between 1 and 3). Recovery, in the same boot: if
//     a GI exists there it is migd's (nobody else creates at a placement we
//     journaled; the intent's ids, when present, must match) — destroy it
//     (or, with its CI, commit it as Idle) and then resolve the record; if
//     nothing exists there, Remove the intent.
//   - a committed record: the instance existed with these ids. Recovery
//     verifies it against the live layout (UUID, parent GPU, profile,
//     placement, GI id, CI id); a record whose instance is gone (crash inside
//     5, or a reboot) is removed; a mismatch fails startup closed.
//   - records from another boot (boot_id differs): MIG instances do not
//     survive a reboot, so they describe nothing; recovery drops them (the
//     store loads them with their boot id intact and does not filter).
//   - stale temp files (crash inside an AtomicWriteFile): the record itself is
//     the old version; LoadAll reports the temp file and quarantines it.
//
// All of that recovery logic belongs to the engine; the store guarantees only
// the file-level states above.
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(std::string boot, ReadBootId());
//   MIGD_ASSIGN_OR_RETURN(std::unique_ptr<store::RecordStore> records,
//                         store::RecordStore::Open("/run/migd/state", clock,
//                                                  {.boot_id = boot}));
//   MIGD_ASSIGN_OR_RETURN(store::LoadResult loaded, records->LoadAll());
//   for (const store::LoadProblem& p : loaded.problems) LOG_WARN(p.ToString());
//   ...
//   record.phase = store::RecordPhase::kIntent;
//   MIGD_RETURN_IF_ERROR(records->Put(record).status());   // before CreateGi
//
// Thread-safety: all methods are thread-safe. Calls for one key are
// serialised; calls for different keys run concurrently (no lock is held
// across disk I/O except the per-key one). LoadAll excludes every other call
// while it runs. One stateDir must have one RecordStore (one process).
#ifndef MIGD_STORE_RECORD_STORE_H_
#define MIGD_STORE_RECORD_STORE_H_

#include <absl/base/thread_annotations.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "store/file_ops.h"
#include "store/record.h"

namespace migd::store {

// Subdirectory of stateDir that receives quarantined files.
inline constexpr std::string_view kQuarantineDirName = "quarantine";
// File names HAMi's own device plugin uses in the same directory (left alone).
inline constexpr std::string_view kHamiRecordPrefix = "hami-owned-";

struct RecordStoreOptions {
  // Written into records that are Put without a boot id (ReadBootId()).
  std::string boot_id;
  // Larger record files are quarantined on load; Put refuses larger records.
  size_t max_record_bytes = size_t{64} * 1024;
  // Not owned; must outlive the store. nullptr: FileOps::Default().
  FileOps* file_ops = nullptr;
  // kAuto: fsync record files and stateDir unless stateDir is on tmpfs or
  // ramfs (IsOnMemoryFilesystem), where fsync writes nothing and what it
  // would protect against (a power loss) erases the records anyway. kAlways:
  // fsync on every filesystem.
  enum class Sync { kAuto, kAlways };
  Sync sync = Sync::kAuto;
};

// Why LoadAll did not return a file as a record.
enum class ProblemKind {
  kCorrupt,        // not JSON, a missing or mistyped field (quarantined)
  kUnknownSchema,  // a schema version this migd does not read (quarantined)
  kInvalidRecord,  // well-formed but breaks ValidateRecord (quarantined)
  kNameMismatch,   // the file name is not the one derived from its key (quarantined)
  kTooLarge,       // larger than max_record_bytes (quarantined)
  kStaleTemp,      // an AtomicWriteFile temp file left by a crash (quarantined)
  kSymlink,        // a symbolic link (left alone, never followed)
  kNotRegular,     // a directory, FIFO, socket, device named like a record (left alone)
  kUnreadable,     // could not be read (left alone)
  kForeign,        // HAMi's own record ("hami-owned-*.json"; left alone, not loaded)
  kUnknownEntry,   // any other name (left alone)
};

// "corrupt", "unknown_schema", …: stable, for metric labels.
std::string_view ProblemKindName(ProblemKind kind);

struct LoadProblem {
  std::string file;  // the entry's name within stateDir
  ProblemKind kind = ProblemKind::kCorrupt;
  // What is wrong (for kCorrupt the kDataLoss message, which names the file).
  std::string reason;
  // Where the file now lies when it was quarantined; empty when it was left
  // in place.
  std::string quarantined_to;
  // Set when quarantining was attempted and failed (the file stays in place).
  std::string quarantine_error;

  // "file=<name> problem=<kind> reason=<…> [quarantined=<path>|quarantine_error=<…>]".
  std::string ToString() const;
};

struct LoadResult {
  std::vector<Record> records;        // sorted by key
  std::vector<LoadProblem> problems;  // sorted by file name
};

class RecordStore {
 public:
  // Opens (creating if missing) the state directory `dir`. A missing `dir` is
  // created with mode 0700 (missing parents with 0755) and the parent is
  // fsynced. Reads no records (see LoadAll).
  // Errors: kInvalidArgument if `dir` is not an absolute path;
  // kFailedPrecondition (naming the path and the fix) if `dir` is a symbolic
  // link, not a directory, not owned by our euid, or writable by group or
  // others; kInvalidArgument if options.max_record_bytes is 0; OS errors
  // creating it.
  // REQUIRES: `clock` outlives the store.
  static StatusOr<std::unique_ptr<RecordStore>> Open(std::string dir, Clock& clock,
                                                     RecordStoreOptions options = {});

  RecordStore(const RecordStore&) = delete;
  RecordStore& operator=(const RecordStore&) = delete;
  ~RecordStore();

  const std::string& dir() const { return dir_; }
  // Whether Put and Remove fsync (RecordStoreOptions::sync).
  bool syncs() const { return syncs_; }
  // <dir>/<RecordFileName(key)>. Errors: kInvalidArgument for an invalid key.
  StatusOr<std::string> PathOf(const RecordKey& key) const;

  // Writes `record` durably to its file (replacing the previous version) and
  // returns what was written. Stamps: generation = previous
  // generation of the key + 1 (1 for a new key); updated_at = now; created_at
  // kept from the existing record of the key, otherwise the caller's value or
  // now if the caller left it at the epoch; boot_id = options.boot_id if the
  // record has none. Times are floored to whole seconds. A successful Put
  // cancels a pending removal of the key.
  // Journal rules (against the existing record of the key):
  //   - intent: allowed over no record, an intent, or a record whose removal
  //     is pending; refused over a live committed record;
  //   - committed: allowed over no record, an intent, a committed record with
  //     the same MIG UUID, or a record whose removal is pending; refused over
  //     a committed record of another MIG UUID.
  // Errors: kInvalidArgument if ValidateRecord fails, the record has no boot
  // id and options.boot_id is empty, or the encoded record exceeds
  // max_record_bytes; kFailedPrecondition for a refused journal step, or if
  // the record's path is a symlink or not a regular file, or holds a file
  // that cannot be decoded (run LoadAll to quarantine it); OS errors from the
  // write. On error the file is unchanged.
  StatusOr<Record> Put(Record record);

  // Removes the record of `key` durably. OK if there was none.
  // On failure the key joins the removal queue (RetryPendingRemovals) and the
  // error is returned: kFailedPrecondition if the path is a symlink or not a
  // regular file (it is left alone); OS errors from unlink or the directory
  // fsync. Errors: also kInvalidArgument for an invalid key (not queued).
  Status Remove(const RecordKey& key);

  // Retries every queued removal; a key whose file is already gone counts as
  // removed. Keys that still fail stay queued. OK when the queue is empty
  // afterwards; otherwise the first failure with the count of failures.
  Status RetryPendingRemovals();

  // The number of queued removals (for metrics) and the keys themselves.
  size_t pending_removals() const;
  std::vector<RecordKey> PendingRemovals() const;

  // Reads every record in stateDir. Entries are classified by name and
  // lstat(2), never followed:
  //   - "<…>.json" regular files are read (O_NOFOLLOW) and decoded; a file
  //     that is too large, corrupt, of an unknown schema, invalid, or whose
  //     name is not RecordFileName(its key) is moved to
  //     <stateDir>/quarantine/<name>.<YYYYMMDDTHHMMSSZ>[.<n>] and reported;
  //   - ".<…>.json.<pid>.<n>.tmp" (AtomicWriteFile temps) are stale after a
  //     crash: reported and quarantined;
  //   - symlinks, non-regular entries, unreadable files, HAMi's
  //     "hami-owned-*.json" and other names are reported and left in place;
  //   - the quarantine directory and the GPU mark directory
//     (store/gpu_mark_store.h) are skipped.
  // Records of other boots are returned with their boot id. Keys queued for
  // removal are not returned. Resets the store's view of which records exist.
  // Quarantine moves are made durable by one fsync of the quarantine
  // directory and one of stateDir per call, however many files moved (a
  // failed fsync sets quarantine_error on each moved file's problem).
  // Errors: OS errors listing stateDir only; per-file trouble is in
  // `problems` and never fails the call.
  StatusOr<LoadResult> LoadAll();

 private:
  // What Put needs to know about the existing record of a key.
  struct Known {
    RecordPhase phase = RecordPhase::kIntent;
    std::optional<MigUuid> mig_uuid;
    Clock::TimePoint created_at{};
    uint64_t generation = 0;
  };
  class KeyLock;

  RecordStore(std::string dir, Clock& clock, RecordStoreOptions options, bool syncs);
  // SyncDirectory of `dir` when the store syncs; OK otherwise.
  Status SyncDir(const std::string& dir);

  // The per-key lock (see KeyLock) and the exclusive gate of LoadAll (both
  // built on mu_ and cv_; none of them is held across disk I/O as mu_).
  void LockKey(const RecordKey& key) ABSL_LOCKS_EXCLUDED(mu_);
  void UnlockKey(const RecordKey& key) ABSL_LOCKS_EXCLUDED(mu_);
  void LockAll() ABSL_LOCKS_EXCLUDED(mu_);
  void UnlockAll() ABSL_LOCKS_EXCLUDED(mu_);

  // Reads the existing file of a key that this store has not seen yet.
  StatusOr<std::optional<Known>> PeekExisting(const RecordKey& key, const std::string& path) const;
  // unlink + fsync of stateDir; OK if the file is already gone.
  Status RemovePath(const std::string& path);
  // Moves <dir>/<name> into the quarantine directory and records the outcome
  // in `problem` (quarantined_to or quarantine_error). Does not fsync: LoadAll
  // syncs both directories once after all of its moves.
  void Quarantine(const std::string& name, LoadProblem& problem);
  // Returns the quarantine directory, creating it if missing.
  StatusOr<std::string> QuarantineDir();
  // Reads, decodes and validates the regular file <dir>/<name>. On failure
  // fills `problem` and returns nullopt.
  std::optional<Record> LoadOne(const std::string& name, LoadProblem& problem);

  const std::string dir_;
  Clock& clock_;
  const RecordStoreOptions options_;
  FileOps& ops_;
  const bool syncs_;

  mutable Mutex mu_;
  CondVar cv_;  // busy_keys_ or loading_ changed
  // Keys with a Put/Remove/retry in progress (the per-key lock).
  std::set<RecordKey> busy_keys_ ABSL_GUARDED_BY(mu_);
  // LoadAll holds the gate / waits for it; no key lock is granted meanwhile.
  bool loading_ ABSL_GUARDED_BY(mu_) = false;
  int loaders_waiting_ ABSL_GUARDED_BY(mu_) = 0;
  // Records known to exist on disk (from LoadAll and Put; erased by Remove).
  std::map<RecordKey, Known> known_ ABSL_GUARDED_BY(mu_);
  // Keys whose Remove failed; RetryPendingRemovals retries them.
  std::set<RecordKey> pending_removals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace migd::store

#endif  // MIGD_STORE_RECORD_STORE_H_
