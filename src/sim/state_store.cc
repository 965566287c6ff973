#include "sim/state_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "base/file_util.h"
#include "base/status_macros.h"

namespace migd::sim {

// Holds mu_ and the file lock for one access.
class ABSL_SCOPED_LOCKABLE StateStore::LockGuard {
 public:
  explicit LockGuard(StateStore& store) ABSL_EXCLUSIVE_LOCK_FUNCTION(store.mu_) : store_(store) {
    store.mu_.Lock();
    status_ = store.Lock();
  }
  ~LockGuard() ABSL_UNLOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (status_.ok()) store_.Unlock();
    store_.mu_.Unlock();
  }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  StateStore& store_;
  Status status_;
};

StateStore::StateStore(StoreOptions options, const mig::Catalog& catalog)
    : options_(std::move(options)), catalog_(&catalog) {}

StateStore::~StateStore() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Status StateStore::Lock() {
  if (options_.path.empty()) return InvalidArgumentError("no state file path");
  if (lock_fd_ >= 0 && lock_pid_ != ::getpid()) {
    // A fork()ed child shares the parent's open file description, and with
    // it the flock; it needs a description of its own to be excluded.
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
  if (lock_fd_ < 0) {
    const std::string dir = std::filesystem::path(options_.path).parent_path().string();
    if (!dir.empty()) MIGD_RETURN_IF_ERROR(MakeDirectories(dir));
    lock_fd_ = ::open(lock_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (lock_fd_ < 0) return ErrnoToStatus(errno, "opening lock file " + lock_path());
    lock_pid_ = ::getpid();
  }
  while (::flock(lock_fd_, LOCK_EX) != 0) {
    if (errno != EINTR) return ErrnoToStatus(errno, "flock " + lock_path());
  }
  return OkStatus();
}

void StateStore::Unlock() { ::flock(lock_fd_, LOCK_UN); }

uint64_t StateStore::ReadGeneration() const {
  uint64_t g = 0;
  if (::pread(lock_fd_, &g, sizeof(g), 0) != static_cast<ssize_t>(sizeof(g))) return 0;
  return g;
}

Status StateStore::WriteGeneration(uint64_t generation) {
  if (::pwrite(lock_fd_, &generation, sizeof(generation), 0) !=
      static_cast<ssize_t>(sizeof(generation))) {
    return ErrnoToStatus(errno, "writing " + lock_path());
  }
  return OkStatus();
}

Status StateStore::LoadLocked() {
  struct stat st {};
  if (::stat(options_.path.c_str(), &st) != 0) {
    cache_.reset();
    if (errno == ENOENT) {
      return NotFoundError("simulator state file " + options_.path + " does not exist");
    }
    return ErrnoToStatus(errno, "stat " + options_.path);
  }
  const FileKey key{st.st_ino, st.st_mtim, st.st_size};
  const uint64_t generation = ReadGeneration();
  if (cache_ && key == cache_key_ && generation == cache_generation_) return OkStatus();
  cache_.reset();
  MIGD_ASSIGN_OR_RETURN(std::string text, ReadFileToString(options_.path));
  StatusOr<SimState> parsed = ParseState(text, *catalog_, options_.path);
  if (!parsed.ok()) {
    return DataLossError(std::string(parsed.status().message()) +
                         " (the simulator state file is corrupt: fix it or delete it to start a "
                         "new machine)");
  }
  cache_ = std::move(parsed).value();
  cache_key_ = key;
  cache_generation_ = generation;
  return OkStatus();
}

Status StateStore::WriteLocked(const SimState& state, bool sync) {
  // Bump the generation first: a crash between the two writes only costs
  // other processes one needless re-parse.
  const uint64_t generation = ReadGeneration() + 1;
  MIGD_RETURN_IF_ERROR(WriteGeneration(generation));
  AtomicWriteOptions options;
  options.sync = sync && options_.fsync;
  options.mode = 0644;
  Status s = AtomicWriteFile(options_.path, SerializeState(state), options);
  if (!s.ok()) {
    cache_.reset();
    return s;
  }
  struct stat st {};
  if (::stat(options_.path.c_str(), &st) != 0) {
    cache_.reset();
    return OkStatus();  // written; the next access re-parses
  }
  cache_ = state;
  cache_key_ = FileKey{st.st_ino, st.st_mtim, st.st_size};
  cache_generation_ = generation;
  return OkStatus();
}

StatusOr<bool> StateStore::CreateIfMissing(const std::function<StatusOr<SimState>()>& make) {
  LockGuard guard(*this);
  MIGD_RETURN_IF_ERROR(guard.status());
  struct stat st {};
  if (::lstat(options_.path.c_str(), &st) == 0) return false;
  if (errno != ENOENT) return ErrnoToStatus(errno, "stat " + options_.path);
  MIGD_ASSIGN_OR_RETURN(SimState state, make());
  MIGD_RETURN_IF_ERROR(ValidateState(state, *catalog_));
  MIGD_RETURN_IF_ERROR(WriteLocked(state, /*sync=*/true));
  return true;
}

StatusOr<SimState> StateStore::Read() {
  LockGuard guard(*this);
  MIGD_RETURN_IF_ERROR(guard.status());
  MIGD_RETURN_IF_ERROR(LoadLocked());
  return *cache_;
}

Status StateStore::Inspect(const std::function<Status(const SimState&)>& fn) {
  LockGuard guard(*this);
  MIGD_RETURN_IF_ERROR(guard.status());
  MIGD_RETURN_IF_ERROR(LoadLocked());
  return fn(*cache_);
}

Status StateStore::Update(const std::function<Commit(SimState&)>& apply,
                          const std::function<Status(const SimState&)>& after_commit) {
  LockGuard guard(*this);
  MIGD_RETURN_IF_ERROR(guard.status());
  MIGD_RETURN_IF_ERROR(LoadLocked());
  SimState state = *cache_;
  const Commit commit = apply(state);
  if (commit == Commit::kNone) return OkStatus();
  MIGD_RETURN_IF_ERROR(WriteLocked(state, commit == Commit::kDurable));
  if (after_commit) return after_commit(state);
  return OkStatus();
}

}  // namespace migd::sim
