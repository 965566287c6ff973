// File: store/gpu_mark_store.h
//
// GpuMarkStore: the durable health marks of whole GPUs (a GPU lost, an
// unattributed critical Xid; docs/health.md), one file per GPU in
// <stateDir>/gpu-health/ (mode 0700), named <GPU UUID>.json:
//
//   {"version": 1, "gpuUUID": "GPU-...", "gpuIndex": 1, "bootID": "...",
//    "reason": "GPU 1: xid 79", "cause": "fault", "markedAtUnix": 1767225600}
//
// "cause" is "lost" for a GPU that fell off the bus (a policy may clear it
// once the GPU answers again) and "fault" for anything else; a file without
// it (written before the field existed) reads as "fault".
//
// Durability is the record store's (store/record_store.h): Put is
// AtomicWriteFile (temp file, fsync, rename, fsync of the directory), Remove
// is unlink + fsync of the directory; when a call returns OK its effect
// survives kill -9 and power loss. A reader sees the old mark or the new one.
//
// Boot scope. A mark names the boot it was written in, like a record: a
// reboot resets the GPU (and MIG state does not survive it), so LoadAll
// removes marks of another boot durably and returns them apart. A mark of
// this boot survives any number of migd restarts until Remove.
//
// Fail closed. LoadAll never drops a file it cannot read: a <GPU UUID>.json
// that is corrupt, of an unknown version, or names another GPU inside is a
// problem tied to the GPU its name gives (the engine keeps that GPU
// unhealthy until the operator clears it, which removes the file); another
// entry is a problem tied to no GPU, left in place. Stale temp files of an
// interrupted Put are removed (the mark itself is the old or the new one).
//
// Thread-safety: all methods are thread-safe (one lock, held across the
// disk I/O of one call: marks change rarely). One directory, one store.
#ifndef MIGD_STORE_GPU_MARK_STORE_H_
#define MIGD_STORE_GPU_MARK_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/mutex.h"
#include "base/status.h"
#include "store/file_ops.h"

namespace migd::store {

// Subdirectory of stateDir that holds the GPU marks (RecordStore skips it).
inline constexpr std::string_view kGpuMarkDirName = "gpu-health";

// What set a GPU's mark: a loss (the condition can go away: the GPU answers
// again) or a fault (an unattributed critical Xid; only an operator clears).
enum class GpuMarkCause { kFault, kLost };
// "fault", "lost".
std::string_view GpuMarkCauseName(GpuMarkCause cause);

struct GpuMark {
  GpuUuid gpu_uuid;
  uint32_t gpu_index = 0;  // at the time of the mark (for people; the UUID is the key)
  std::string reason;      // as GpuView::health_reason
  GpuMarkCause cause = GpuMarkCause::kFault;
  std::string boot_id;     // stamped by Put when empty
  int64_t marked_at_unix = 0;  // stamped by Put when 0 (seconds)
};

// A file of the mark directory LoadAll could not read as a mark.
struct GpuMarkProblem {
  std::string file;                 // the entry's name within the directory
  std::optional<GpuUuid> gpu_uuid;  // the GPU its name gives, if it is <GPU UUID>.json
  std::string reason;               // what is wrong (names the path)
};

struct GpuMarkLoad {
  std::vector<GpuMark> marks;           // this boot's, sorted by GPU UUID
  std::vector<GpuMark> other_boot;      // another boot's: removed
  std::vector<GpuMarkProblem> problems; // left in place, sorted by file name
};

class GpuMarkStore {
 public:
  // Opens <state_dir>/gpu-health, creating it (mode 0700, state_dir fsynced)
  // if missing. `state_dir` is the RecordStore's (already checked by it).
  // Errors: kInvalidArgument for an empty boot id; kFailedPrecondition
  // (naming the path and the fix) if the entry is a symlink, not a
  // directory, not owned by our euid or writable by group or others; OS
  // errors. REQUIRES: `clock` and `ops` (if given) outlive the
  // store; null `ops` is FileOps::Default().
  static StatusOr<std::unique_ptr<GpuMarkStore>> Open(const std::string& state_dir,
                                                      std::string boot_id, Clock& clock,
                                                      FileOps* ops = nullptr);

  const std::string& dir() const { return dir_; }
  // <dir>/<uuid>.json. kInvalidArgument for an invalid GPU UUID.
  StatusOr<std::string> PathOf(const GpuUuid& gpu) const;

  // Writes `mark` durably, replacing the GPU's previous mark.
  // Errors: kInvalidArgument for an invalid GPU UUID; OS errors (the file
  // is unchanged then).
  Status Put(GpuMark mark) ABSL_LOCKS_EXCLUDED(mu_);
  // Removes the GPU's mark durably; OK if there is none (nothing synced).
  // A corrupt file of that GPU is removed too.
  Status Remove(const GpuUuid& gpu) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads every mark (see the file comment). Errors: OS errors listing the
  // directory, or removing a mark of another boot.
  StatusOr<GpuMarkLoad> LoadAll() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  GpuMarkStore(std::string dir, std::string boot_id, Clock& clock, FileOps& ops)
      : dir_(std::move(dir)), boot_id_(std::move(boot_id)), clock_(clock), ops_(ops) {}
  // Reads <dir>/<name> as the mark of `gpu`.
  StatusOr<GpuMark> LoadOne(const std::string& name, const GpuUuid& gpu);
  Status RemoveLocked(const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const std::string boot_id_;
  Clock& clock_;
  FileOps& ops_;
  Mutex mu_;  // serialises every call's disk I/O (guards the directory)
};

// The JSON text of `mark` (the format above) and its strict reader, which
// names the file and the field at fault (kDataLoss).
std::string EncodeGpuMark(const GpuMark& mark);
StatusOr<GpuMark> DecodeGpuMark(std::string_view text, std::string_view source);

}  // namespace migd::store

#endif  // MIGD_STORE_GPU_MARK_STORE_H_
