// Test helpers of store_test (record_store_test.cc, record_store_load_test.cc):
// constants, record builders, file helpers, a FileOps that fails on request,
// and the RecordStoreTest fixture (a state dir in a temp dir, a FakeClock).
#ifndef MIGD_STORE_RECORD_STORE_TEST_UTIL_H_
#define MIGD_STORE_RECORD_STORE_TEST_UTIL_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "store/record_store.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::store::testing {

namespace fs = std::filesystem;
using ::migd::testing::IsOk;
using ::migd::testing::TempDir;

inline constexpr char kGpu[] = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";
inline constexpr char kGpu2[] = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
inline constexpr char kMig[] = "MIG-0b6a1c3e-2f4d-5a6b-8c9d-0e1f2a3b4c5d";
inline constexpr char kMig2[] = "MIG-11111111-2222-3333-4444-555555555555";
inline constexpr char kBoot[] = "0f5c7f0e-3c54-4c6b-9c1a-2b8e4f6a7d90";
inline constexpr char kOtherBoot[] = "99999999-3c54-4c6b-9c1a-2b8e4f6a7d90";
// FakeClock's default start, 2026-01-01T00:00:00Z.
inline constexpr int64_t kStart = 1767225600;
inline constexpr char kStartCompact[] = "20260101T000000Z";

inline Clock::TimePoint At(int64_t unix_seconds) {
  return Clock::TimePoint(std::chrono::seconds(unix_seconds));
}

inline RecordKey Key(uint32_t start = 0, uint32_t size = 1, uint32_t profile = 19,
                     const char* gpu = kGpu) {
  return {GpuUuid(gpu), GiProfileId(profile), {.start = start, .size = size}};
}

inline std::string NameOf(const RecordKey& key) { return RecordFileName(key).value(); }

inline Record Intent(const RecordKey& key = Key()) {
  Record r;
  r.key = key;
  r.phase = RecordPhase::kIntent;
  r.state = RecordState::kCreating;
  r.profile_name = "1g.10gb";
  r.request_id = "req-1";
  return r;
}

inline Record Committed(const RecordKey& key = Key(), const char* mig = kMig) {
  Record r = Intent(key);
  r.phase = RecordPhase::kCommitted;
  r.state = RecordState::kActive;
  r.gi_id = NvmlGiId(9);
  r.ci_id = NvmlCiId(0);
  r.mig_uuid = MigUuid(mig);
  r.owner = Owner::Pod("ml", "trainer-0", PodUid("6d8f0a4e-1111-2222-3333-444455556666"), "main");
  return r;
}

inline std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

inline std::string Read(const std::string& path) {
  StatusOr<std::string> s = ReadFileToString(path);
  return s.ok() ? *s : std::string("<unreadable: ") + s.status().ToString() + ">";
}

inline mode_t ModeOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

inline bool IsSymlink(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// Fails the next N calls of a chosen method; counts directory fsyncs.
class InjectingFileOps : public FileOps {
 public:
  std::atomic<int> fail_write{0};
  std::atomic<int> fail_read{0};
  std::atomic<int> fail_remove{0};
  std::atomic<int> fail_rename{0};
  std::atomic<int> fail_mkdir{0};
  std::atomic<int> fail_sync{0};
  std::atomic<int> sync_calls{0};
  std::atomic<int> synced_writes{0};  // WriteFileAtomically calls asked to fsync

  Status WriteFileAtomically(const std::string& path, std::string_view data,
                             const AtomicWriteOptions& options) override {
    if (options.sync) ++synced_writes;
    if (Take(fail_write)) return ResourceExhaustedError("injected: writing " + path);
    return FileOps::WriteFileAtomically(path, data, options);
  }
  StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes) override {
    if (Take(fail_read)) return UnavailableError("injected: reading " + path);
    return FileOps::ReadFile(path, max_bytes);
  }
  Status RemoveFile(const std::string& path) override {
    if (Take(fail_remove)) return UnavailableError("injected: removing " + path);
    return FileOps::RemoveFile(path);
  }
  Status RenameNoReplace(const std::string& from, const std::string& to) override {
    if (Take(fail_rename)) return UnavailableError("injected: renaming " + from);
    return FileOps::RenameNoReplace(from, to);
  }
  Status MakeDirectory(const std::string& dir, mode_t mode) override {
    if (Take(fail_mkdir)) return PermissionDeniedError("injected: mkdir " + dir);
    return FileOps::MakeDirectory(dir, mode);
  }
  Status SyncDirectory(const std::string& dir) override {
    ++sync_calls;
    if (Take(fail_sync)) return UnavailableError("injected: fsync of directory " + dir);
    return FileOps::SyncDirectory(dir);
  }

 private:
  static bool Take(std::atomic<int>& n) {
    int v = n.load();
    while (v > 0 && !n.compare_exchange_weak(v, v - 1)) {
    }
    return v > 0;
  }
};

class RecordStoreTest : public ::testing::Test {
 protected:
  std::string StateDir() const { return tmp_.Join("state"); }
  std::string PathOf(const RecordKey& key) const { return StateDir() + "/" + NameOf(key); }
  std::string QuarantineDir() const { return StateDir() + "/quarantine"; }

  // Stores that fsync on every filesystem: the fsync tests hold wherever the
  // temporary directory lies (tmpfs included).
  RecordStoreOptions Options() {
    return {.boot_id = kBoot, .file_ops = &ops_, .sync = RecordStoreOptions::Sync::kAlways};
  }

  std::unique_ptr<RecordStore> OpenOrDie(RecordStoreOptions options) {
    StatusOr<std::unique_ptr<RecordStore>> s =
        RecordStore::Open(StateDir(), clock_, std::move(options));
    EXPECT_THAT(s, IsOk());
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::unique_ptr<RecordStore> OpenOrDie() { return OpenOrDie(Options()); }

  LoadResult LoadOrDie(RecordStore& store) {
    StatusOr<LoadResult> r = store.LoadAll();
    EXPECT_THAT(r, IsOk());
    return r.ok() ? std::move(r).value() : LoadResult{};
  }

  TempDir tmp_;
  FakeClock clock_;
  InjectingFileOps ops_;
};

}  // namespace migd::store::testing

#endif  // MIGD_STORE_RECORD_STORE_TEST_UTIL_H_
