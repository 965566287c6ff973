// File: sim/state_store.h
//
// StateStore: the state file ($MIGD_SIM_STATE) shared by every process that
// uses the simulator (migd, migctl, tests, each process that loaded
// libnvidia-ml-sim.so). Protocol, for every access:
//
//   1. lock: flock(LOCK_EX) on the sidecar "<state>.lock" (and a mutex for
//      threads of this process);
//   2. load: re-parse the file unless its (inode, mtime, size) and the
//      lock file's write generation are what this StateStore last read or
//      wrote (the generation guards against an inode reused within one
//      timestamp tick);
//   3. apply the caller's change to the in-memory SimState;
//   4. write: bump the generation, then AtomicWriteFile (temp file + rename),
//      with fsync of file and directory for a durable change, without for a
//      counter-only change; MIGD_SIM_FSYNC=0 drops every fsync;
//   5. unlock.
//
// So a mutation is durable when Update returns: the state survives kill -9 of
// the caller at any point (the rename is atomic), and a power loss after
// Update returns unless fsync is off. A corrupt file is reported as kDataLoss
// and never replaced.
//
// Example:
//   StateStore store({.path = "/tmp/sim/state.json"}, mig::Catalog::Default());
//   MIGD_RETURN_IF_ERROR(store.Update([](SimState& s) {
//     ++s.boot_count;
//     return Commit::kDurable;
//   }));
//
// Thread-safety: all methods are thread-safe. Two StateStore objects on one
// path (in one process or in several) exclude each other through the lock; a
// store used again in a fork()ed child reopens the lock file first.
#ifndef MIGD_SIM_STATE_STORE_H_
#define MIGD_SIM_STATE_STORE_H_

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <functional>
#include <optional>
#include <string>

#include "base/mutex.h"
#include "base/status.h"
#include "mig/catalog.h"
#include "sim/state.h"

namespace migd::sim {

// What Update writes back.
enum class Commit {
  kNone,          // nothing changed: no write
  kCountersOnly,  // only counters changed: atomic write without fsync
  kDurable,       // the machine changed: atomic write with fsync
};

struct StoreOptions {
  std::string path;
  bool fsync = true;  // false: MIGD_SIM_FSYNC=0
};

class StateStore {
 public:
  // REQUIRES: `catalog` outlives the store. Opens nothing yet.
  StateStore(StoreOptions options, const mig::Catalog& catalog);
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  const std::string& path() const { return options_.path; }
  std::string lock_path() const { return options_.path + ".lock"; }

  // Under the lock: if the state file does not exist, writes make()'s state
  // durably and returns true; if it exists, returns false without calling
  // make(). Errors: make()'s error; OS errors creating the directory, lock
  // file or state file.
  StatusOr<bool> CreateIfMissing(const std::function<StatusOr<SimState>()>& make);

  // The current state. kNotFound if the file does not exist; kDataLoss if it
  // is corrupt (the message names the file and the bad field).
  StatusOr<SimState> Read();

  // Runs `fn` on the current state under the lock, without writing the state
  // (for work that must not race with other processes, such as syncing the
  // fake /proc tree). Errors as Read(), or fn's.
  Status Inspect(const std::function<Status(const SimState&)>& fn);

  // Runs `apply` on the current state under the lock and writes back what it
  // returns (see Commit); a kNone result discards any change. Then, still
  // under the lock, runs `after_commit` (if given) on the committed state and
  // returns its status. Errors as Read(), or the OS error of the write (the
  // file then keeps its previous content).
  Status Update(const std::function<Commit(SimState&)>& apply,
                const std::function<Status(const SimState&)>& after_commit = nullptr);

 private:
  struct FileKey {
    ino_t inode = 0;
    timespec mtime{};
    off_t size = 0;
    bool operator==(const FileKey& o) const {
      return inode == o.inode && mtime.tv_sec == o.mtime.tv_sec &&
             mtime.tv_nsec == o.mtime.tv_nsec && size == o.size;
    }
  };
  class LockGuard;

  Status Lock() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // takes the file lock
  void Unlock() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t ReadGeneration() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status WriteGeneration(uint64_t generation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // REQUIRES: the file lock held. Fills cache_.
  Status LoadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status WriteLocked(const SimState& state, bool sync) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StoreOptions options_;
  const mig::Catalog* catalog_;
  Mutex mu_;
  // Also protected by the file lock while it is held:
  int lock_fd_ ABSL_GUARDED_BY(mu_) = -1;
  pid_t lock_pid_ ABSL_GUARDED_BY(mu_) = 0;  // the process that opened lock_fd_
  std::optional<SimState> cache_ ABSL_GUARDED_BY(mu_);
  FileKey cache_key_ ABSL_GUARDED_BY(mu_);
  uint64_t cache_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace migd::sim

#endif  // MIGD_SIM_STATE_STORE_H_
