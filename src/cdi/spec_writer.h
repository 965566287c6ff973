// File: cdi/spec_writer.h
//
// SpecWriter: one CDI spec file per MIG instance in the dynamic spec
// directory (the CDI library's spec directories, pkg/cdi/spec-dirs.go):
//
//   <spec_dir>/<vendor>-<class>_<MIG UUID>.json
//
// written atomically (temp file ".<name>.<pid>.<n>.tmp" in the same directory —
// runtimes load only *.json and *.yaml —, fsync, fchmod 0644, rename, fsync of
// the directory; base/AtomicWriteFile). A reader (a runtime's registry
// refresh) sees the old file, the new file or no file, never a partial one.
// Symbolic links at a spec path are refused, never followed or replaced.
//
// Removal failures are queued and retried by RetryPendingRemovals() (the
// reconciler calls it); writing a device again drops its pending removal.
// Sweep() runs once at startup after reconciliation.
//
// Example:
//   cdi::SpecWriter writer({.kind = kind, .spec_dir = "/var/run/cdi"});
//   MIGD_RETURN_IF_ERROR(writer.Write(built));           // before Allocate returns
//   ...
//   writer.Remove(built.device_name).IgnoreError();      // after the GI/CI is destroyed
//
// Thread-safety: all methods are thread-safe. Operations on one device name
// are serialised by a lock striped over names, held across that file's I/O
// (a deliberate exception to "no lock across disk I/O": it only orders
// operations on the same file); different names proceed in parallel.
#ifndef MIGD_CDI_SPEC_WRITER_H_
#define MIGD_CDI_SPEC_WRITER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "base/mutex.h"
#include "base/status.h"
#include "cdi/names.h"
#include "cdi/spec_builder.h"

namespace migd::cdi {

struct WriterOptions {
  Kind kind;
  std::string spec_dir = "/var/run/cdi";  // cdi.specDir
  // false skips the fsyncs (tests only; still atomic against a process crash).
  bool sync = true;
  // Seam for tests: removes a file, returning 0 or -1 with errno set, like
  // unlink(2) (the default when empty). Lets a test make removals fail, which
  // root cannot provoke with permissions.
  std::function<int(const std::string& path)> unlink;
};

enum class VerifyResult {
  kMatches,  // the file holds exactly the expected bytes
  kMissing,  // no file
  kDiffers,  // a file with other content
};

struct SweepReport {
  std::vector<std::string> kept;     // device names of live instances whose file exists
  std::vector<std::string> removed;  // device names whose files were removed
  std::vector<std::string> missing;  // live device names without a file (rewrite them)
  std::vector<std::string> refused;  // file names of ours that are symlinks/non-regular: untouched
  std::vector<std::string> failed;   // device names whose removal failed: queued for retry
  std::vector<std::string> temp_files_removed;  // stale temp files of a crashed writer
};

// How many times one kind of operation ended with one result (metrics:
// migd_cdi_operations_total).
struct OperationCount {
  std::string kind;    // "write", "verify", "remove" (retries and sweep removals included)
  std::string result;  // "ok" or the lower-case status code name, e.g. "failed_precondition"
  uint64_t count = 0;
  friend bool operator==(const OperationCount&, const OperationCount&) = default;
};

// Checks that `spec_dir` may hold specs the container runtime trusts: the
// runtime hands every device a spec there defines to containers, so whoever
// can add or replace files in it can give a container any device or mount.
// Accepted: a real directory (not a symbolic link) owned by root or migd's
// euid and not writable by group or others. A group/other-writable directory
// with the sticky bit (others may add files but not replace or remove ours) is
// accepted with `*warning` set to the risk and the fix; otherwise `*warning`
// is cleared.
// Errors (naming the path and the fix): kFailedPrecondition for a symlink, a
// non-directory, a foreign owner or a non-sticky group/other-writable
// directory; kNotFound if it does not exist; other OS errors from lstat(2).
// Thread-safety: a plain function.
Status CheckSpecDir(const std::string& spec_dir, std::string* warning);

class SpecWriter {
 public:
  explicit SpecWriter(WriterOptions options);
  SpecWriter(const SpecWriter&) = delete;
  SpecWriter& operator=(const SpecWriter&) = delete;

  const WriterOptions& options() const { return options_; }

  // <spec_dir>/<vendor>-<class>_<device>.json. REQUIRES: a valid device name.
  std::string PathFor(std::string_view device) const;

  // Writes `built.content` as the spec file of `built.device_name`, creating
  // spec_dir (0755) if needed. Drops a pending removal of that device.
  // Errors: kInvalidArgument if the spec's kind is not this writer's or a name
  // breaks the CDI grammar; kAlreadyExists if another file in spec_dir defines
  // the same qualified device (the runtime would drop both as conflicting);
  // kFailedPrecondition if the target is a symlink or not a regular file;
  // OS errors with the path. On error the previous file (or its absence) is
  // unchanged and no temp file is left.
  Status Write(const BuiltSpec& built);

  // Compares the file of `device` with `expected` byte for byte (the reuse
  // path: rewrite unless kMatches). kFailedPrecondition for a symlink or
  // non-regular file; OS errors with the path.
  StatusOr<VerifyResult> Verify(std::string_view device, std::string_view expected) const;

  // Removes the file of `device`; OK if it does not exist. On an OS error the
  // removal is queued for RetryPendingRemovals and the error returned.
  // kFailedPrecondition (not queued) if the entry is a symlink or not a
  // regular file: it is left alone.
  Status Remove(std::string_view device);

  // Retries every queued removal once. OK if the queue is now empty; else the
  // first error, with the number still pending.
  Status RetryPendingRemovals();

  // Device names whose removal is queued, sorted.
  std::vector<std::string> PendingRemovals() const;

  // Every Write, Verify and removal attempt so far, by kind and result,
  // sorted by (kind, result). A Verify that finds the file missing or
  // different counts as "ok" (the check itself succeeded).
  std::vector<OperationCount> OperationCounts() const;

  // Startup sweep: removes every "<vendor>-<class>_<device>.json" in spec_dir
  // whose device is not in `live_devices`, and stale temp files of this kind
  // left by another (crashed) process; never touches other names, symlinks or
  // non-regular files. A missing spec_dir is empty. Failed removals are queued.
  // Errors: OS errors listing the directory.
  StatusOr<SweepReport> Sweep(const std::set<std::string>& live_devices);

 private:
  // The stripe lock of `device`: serialises the I/O on that device's file.
  Mutex& LockFor(std::string_view device) const;
  // kAlreadyExists if a *.json/*.yaml file other than `own_file` defines
  // kind=device. Unreadable or unparsable files are skipped (the runtime
  // would drop them, not their devices' counterparts).
  Status CheckCollision(const std::string& device, const std::string& own_file) const;
  // Counts the attempt (kind "remove"), then RemoveLockedUncounted.
  Status RemoveLocked(const std::string& device);
  Status RemoveLockedUncounted(const std::string& device);
  Status WriteUncounted(const BuiltSpec& built);
  StatusOr<VerifyResult> VerifyUncounted(std::string_view device, std::string_view expected) const;
  void CountOperation(std::string_view kind, const Status& status) const;

  const WriterOptions options_;
  mutable std::array<Mutex, 32> name_locks_;
  mutable Mutex mu_;
  std::set<std::string> pending_removals_ ABSL_GUARDED_BY(mu_);
  mutable Mutex counts_mu_;
  // (kind, result) -> count.
  mutable std::map<std::pair<std::string, std::string>, uint64_t> op_counts_
      ABSL_GUARDED_BY(counts_mu_);
};

}  // namespace migd::cdi

#endif  // MIGD_CDI_SPEC_WRITER_H_
