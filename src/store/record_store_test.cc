#include "store/record_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/file_util.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::store {
namespace {

namespace fs = std::filesystem;
using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::migd::testing::TempDir;
using ::migd::testing::WriteFileOrDie;
using ::testing::_;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr char kGpu[] = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";
constexpr char kGpu2[] = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
constexpr char kMig[] = "MIG-0b6a1c3e-2f4d-5a6b-8c9d-0e1f2a3b4c5d";
constexpr char kMig2[] = "MIG-11111111-2222-3333-4444-555555555555";
constexpr char kBoot[] = "0f5c7f0e-3c54-4c6b-9c1a-2b8e4f6a7d90";
constexpr char kOtherBoot[] = "99999999-3c54-4c6b-9c1a-2b8e4f6a7d90";
// FakeClock's default start, 2026-01-01T00:00:00Z.
constexpr int64_t kStart = 1767225600;
constexpr char kStartCompact[] = "20260101T000000Z";

Clock::TimePoint At(int64_t unix_seconds) {
  return Clock::TimePoint(std::chrono::seconds(unix_seconds));
}

RecordKey Key(uint32_t start = 0, uint32_t size = 1, uint32_t profile = 19,
              const char* gpu = kGpu) {
  return {GpuUuid(gpu), GiProfileId(profile), {.start = start, .size = size}};
}

std::string NameOf(const RecordKey& key) { return RecordFileName(key).value(); }

Record Intent(const RecordKey& key = Key()) {
  Record r;
  r.key = key;
  r.phase = RecordPhase::kIntent;
  r.state = RecordState::kCreating;
  r.profile_name = "1g.10gb";
  r.request_id = "req-1";
  return r;
}

Record Committed(const RecordKey& key = Key(), const char* mig = kMig) {
  Record r = Intent(key);
  r.phase = RecordPhase::kCommitted;
  r.state = RecordState::kActive;
  r.gi_id = NvmlGiId(9);
  r.ci_id = NvmlCiId(0);
  r.mig_uuid = MigUuid(mig);
  r.owner = Owner::Pod("ml", "trainer-0", PodUid("6d8f0a4e-1111-2222-3333-444455556666"), "main");
  return r;
}

std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string Read(const std::string& path) {
  StatusOr<std::string> s = ReadFileToString(path);
  return s.ok() ? *s : std::string("<unreadable: ") + s.status().ToString() + ">";
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

bool IsSymlink(const std::string& path) {
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

  Status WriteFileAtomically(const std::string& path, std::string_view data,
                             const AtomicWriteOptions& options) override {
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

  RecordStoreOptions Options() { return {.boot_id = kBoot, .file_ops = &ops_}; }

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

// ---- Open ----

TEST_F(RecordStoreTest, OpenCreatesTheDirectoryWithMode0700) {
  const std::string dir = tmp_.Join("var/run/hami/dynamic-mig-state");
  const mode_t old_umask = ::umask(0);  // the mode must not depend on the umask
  StatusOr<std::unique_ptr<RecordStore>> store = RecordStore::Open(dir, clock_, Options());
  ::umask(old_umask);
  ASSERT_THAT(store, IsOk());
  EXPECT_EQ((*store)->dir(), dir);
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(tmp_.Join("var/run/hami")), 0755u);
  EXPECT_GE(ops_.sync_calls.load(), 1);
}

TEST_F(RecordStoreTest, OpenAcceptsAnExistingPrivateDirectoryAndKeepsItsMode) {
  ASSERT_EQ(::mkdir(StateDir().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(StateDir().c_str(), 0755), 0);
  StatusOr<std::unique_ptr<RecordStore>> store =
      RecordStore::Open(StateDir() + "//", clock_, Options());
  ASSERT_THAT(store, IsOk());
  EXPECT_EQ((*store)->dir(), StateDir());
  EXPECT_EQ(ModeOf(StateDir()), 0755u);
}

TEST_F(RecordStoreTest, OpenRefusesRelativePathsAndZeroSizeLimit) {
  EXPECT_THAT(RecordStore::Open("state", clock_, Options()),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not an absolute path")));
  EXPECT_THAT(RecordStore::Open("", clock_, Options()),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not an absolute path")));
  RecordStoreOptions options = Options();
  options.max_record_bytes = 0;
  EXPECT_THAT(RecordStore::Open(StateDir(), clock_, options),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("max_record_bytes")));
}

TEST_F(RecordStoreTest, OpenRefusesASymlinkedStateDir) {
  const std::string real = tmp_.Join("real");
  ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(real.c_str(), StateDir().c_str()), 0);
  EXPECT_THAT(RecordStore::Open(StateDir(), clock_, Options()),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(StateDir()), HasSubstr("is a symbolic link"),
                             HasSubstr("point stateDir at a real directory"))));
  // A dangling link is refused too, and never created through.
  ASSERT_EQ(::rmdir(real.c_str()), 0);
  EXPECT_THAT(RecordStore::Open(StateDir(), clock_, Options()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is a symbolic link")));
  EXPECT_FALSE(fs::exists(real));
}

TEST_F(RecordStoreTest, OpenRefusesANonDirectory) {
  WriteFileOrDie(StateDir(), "x");
  EXPECT_THAT(RecordStore::Open(StateDir(), clock_, Options()),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(StateDir()), HasSubstr("is not a directory"))));
}

TEST_F(RecordStoreTest, OpenRefusesAGroupOrOtherWritableDir) {
  ASSERT_EQ(::mkdir(StateDir().c_str(), 0700), 0);
  for (mode_t mode : {0770, 0702, 0777, 01777}) {
    ASSERT_EQ(::chmod(StateDir().c_str(), mode), 0);
    EXPECT_THAT(
        RecordStore::Open(StateDir(), clock_, Options()),
        StatusIs(StatusCode::kFailedPrecondition, AllOf(HasSubstr("writable by group or others"),
                                                        HasSubstr("chmod 0700 " + StateDir()))))
        << std::oct << mode;
  }
}

TEST_F(RecordStoreTest, OpenRefusesADirOwnedBySomeoneElse) {
  ASSERT_EQ(::mkdir(StateDir().c_str(), 0700), 0);
  const uid_t other = ::geteuid() + 4242;
  if (::chown(StateDir().c_str(), other, static_cast<gid_t>(-1)) != 0) {
    GTEST_SKIP() << "cannot chown (not root)";
  }
  EXPECT_THAT(RecordStore::Open(StateDir(), clock_, Options()),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("owned by uid " + std::to_string(other)),
                             HasSubstr("chown " + std::to_string(::geteuid())))));
}

TEST_F(RecordStoreTest, OpenReportsCreationFailures) {
  WriteFileOrDie(tmp_.Join("file"), "x");
  EXPECT_THAT(RecordStore::Open(tmp_.Join("file/state"), clock_, Options()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("file")));
  // lstat of the state dir says ENOENT, but its parent is a dangling link.
  ASSERT_EQ(::symlink("/nonexistent/x", tmp_.Join("dangling").c_str()), 0);
  EXPECT_THAT(RecordStore::Open(tmp_.Join("dangling/state"), clock_, Options()),
              StatusIs(StatusCode::kNotFound, HasSubstr("creating the parent")));

  ops_.fail_mkdir = 1;
  EXPECT_THAT(RecordStore::Open(StateDir(), clock_, Options()),
              StatusIs(StatusCode::kPermissionDenied, HasSubstr("injected: mkdir")));
  EXPECT_FALSE(fs::exists(StateDir()));

  ops_.fail_sync = 1;
  EXPECT_THAT(RecordStore::Open(StateDir(), clock_, Options()),
              StatusIs(StatusCode::kUnavailable, HasSubstr("injected: fsync")));
  // The directory exists now; a later Open accepts it.
  EXPECT_THAT(RecordStore::Open(StateDir(), clock_, Options()), IsOk());
}

// ---- Put ----

TEST_F(RecordStoreTest, RoundTripsEveryField) {
  auto store = OpenOrDie();
  Record r = Committed();
  r.state = RecordState::kActive;
  r.owner = Owner::Pod("ns", "pod", PodUid("uid-1"), "ctr");
  r.request_id = "req-\xc3\xa9";
  r.boot_id = kOtherBoot;
  r.last_used_at = At(kStart - 30);
  r.created_at = At(kStart - 60);
  StatusOr<Record> written = store->Put(r);
  ASSERT_THAT(written, IsOk());
  EXPECT_EQ(written->boot_id, kOtherBoot);
  EXPECT_EQ(written->created_at, At(kStart - 60));
  EXPECT_EQ(written->updated_at, At(kStart));
  EXPECT_EQ(written->generation, 1u);
  EXPECT_EQ(ModeOf(PathOf(r.key)), 0600u);

  auto reopened = OpenOrDie();
  LoadResult loaded = LoadOrDie(*reopened);
  EXPECT_THAT(loaded.problems, IsEmpty());
  ASSERT_THAT(loaded.records, SizeIs(1));
  EXPECT_EQ(loaded.records[0], *written);
  EXPECT_EQ(Read(PathOf(r.key)), EncodeRecord(*written));
}

TEST_F(RecordStoreTest, PutStampsBootIdGenerationAndTimes) {
  auto store = OpenOrDie();
  clock_.Advance(std::chrono::milliseconds(1500));  // times are floored to seconds
  Record r = Intent();
  r.created_at = {};
  StatusOr<Record> first = store->Put(r);
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->boot_id, kBoot);
  EXPECT_EQ(first->generation, 1u);
  EXPECT_EQ(first->created_at, At(kStart + 1));
  EXPECT_EQ(first->updated_at, At(kStart + 1));

  clock_.Advance(std::chrono::seconds(10));
  Record update = Intent();
  update.created_at = At(5);  // ignored: the record exists
  update.generation = 1000;   // ignored: the store counts
  update.last_used_at = At(kStart + 3) + std::chrono::milliseconds(700);
  StatusOr<Record> second = store->Put(update);
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->generation, 2u);
  EXPECT_EQ(second->created_at, At(kStart + 1));
  EXPECT_EQ(second->updated_at, At(kStart + 11));
  EXPECT_EQ(second->last_used_at, At(kStart + 3));
}

TEST_F(RecordStoreTest, IntentIsCommittedByRewritingTheSameFile) {
  auto store = OpenOrDie();
  ASSERT_THAT(store->Put(Intent()), IsOk());
  EXPECT_THAT(List(StateDir()), ElementsAre(NameOf(Key())));
  clock_.Advance(std::chrono::seconds(2));

  StatusOr<Record> committed = store->Put(Committed());
  ASSERT_THAT(committed, IsOk());
  EXPECT_THAT(List(StateDir()), ElementsAre(NameOf(Key())));  // no second file, no temp left
  EXPECT_EQ(committed->generation, 2u);
  EXPECT_EQ(committed->created_at, At(kStart));

  LoadResult loaded = LoadOrDie(*store);
  ASSERT_THAT(loaded.records, SizeIs(1));
  EXPECT_EQ(loaded.records[0].phase, RecordPhase::kCommitted);
  EXPECT_EQ(loaded.records[0].mig_uuid, MigUuid(kMig));
  EXPECT_EQ(loaded.records[0], *committed);
}

TEST_F(RecordStoreTest, CommittedRecordAcceptsStateChangesButNotAnotherInstance) {
  auto store = OpenOrDie();
  ASSERT_THAT(store->Put(Committed()), IsOk());
  Record idle = Committed();
  idle.state = RecordState::kIdle;
  idle.owner = Owner();
  StatusOr<Record> updated = store->Put(idle);
  ASSERT_THAT(updated, IsOk());
  EXPECT_EQ(updated->generation, 2u);

  EXPECT_THAT(store->Put(Committed(Key(), kMig2)),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(std::string("belongs to ") + kMig), HasSubstr(kMig2))));
  EXPECT_THAT(store->Put(Intent()),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("an intent cannot replace it: Remove it first")));
  EXPECT_EQ(Read(PathOf(Key())), EncodeRecord(*updated));

  // After a removal the key is free for a new instance.
  ASSERT_THAT(store->Remove(Key()), IsOk());
  StatusOr<Record> fresh = store->Put(Intent());
  ASSERT_THAT(fresh, IsOk());
  EXPECT_EQ(fresh->generation, 1u);
  EXPECT_THAT(store->Put(Committed(Key(), kMig2)), IsOk());
}

TEST_F(RecordStoreTest, PutChecksARecordOnDiskItHasNotLoaded) {
  auto first = OpenOrDie();
  ASSERT_THAT(first->Put(Committed()), IsOk());
  clock_.Advance(std::chrono::seconds(5));

  auto second = OpenOrDie();  // no LoadAll
  EXPECT_THAT(second->Put(Committed(Key(), kMig2)),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("belongs to")));
  EXPECT_THAT(second->Put(Intent()), StatusIs(StatusCode::kFailedPrecondition, _));
  StatusOr<Record> same = second->Put(Committed());
  ASSERT_THAT(same, IsOk());
  EXPECT_EQ(same->generation, 2u);
  EXPECT_EQ(same->created_at, At(kStart));
}

TEST_F(RecordStoreTest, PutRefusesToOverwriteAnUnreadableOrForeignFile) {
  auto store = OpenOrDie();
  WriteFileOrDie(PathOf(Key()), "{garbage");
  EXPECT_THAT(store->Put(Intent()),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("cannot be read"), HasSubstr("not valid JSON"),
                             HasSubstr("LoadAll quarantines it"))));
  EXPECT_EQ(Read(PathOf(Key())), "{garbage");

  // The file of Key(0) holding the record of another key.
  Record other = Committed(Key(4));
  other.boot_id = kBoot;
  WriteFileOrDie(PathOf(Key()), EncodeRecord(other));
  EXPECT_THAT(store->Put(Intent()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("holds the record of")));

  Record invalid = Committed();
  invalid.owner = Owner();  // Active without owner
  invalid.boot_id = kBoot;
  WriteFileOrDie(PathOf(Key()), EncodeRecord(invalid));
  EXPECT_THAT(store->Put(Intent()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("Active record has no owner")));

  ops_.fail_read = 1;
  WriteFileOrDie(PathOf(Key()), EncodeRecord(other));
  EXPECT_THAT(store->Put(Intent()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("injected: reading")));
}

TEST_F(RecordStoreTest, PutRefusesInvalidGpuUuidsWithoutTouchingTheFilesystem) {
  auto store = OpenOrDie();
  for (const char* bad : {"../x", "GPU-../../../etc/cron.d/x", "/etc/passwd", "",
                          "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1/../../x"}) {
    Record r = Intent();
    r.key.gpu_uuid = GpuUuid(bad);
    EXPECT_THAT(store->Put(r), StatusIs(StatusCode::kInvalidArgument, HasSubstr("GPU UUID")))
        << bad;
    EXPECT_THAT(store->Remove(r.key), StatusIs(StatusCode::kInvalidArgument, _)) << bad;
  }
  EXPECT_THAT(List(StateDir()), IsEmpty());
  EXPECT_THAT(List(tmp_.path()), ElementsAre("state"));
  EXPECT_EQ(store->pending_removals(), 0u);
}

TEST_F(RecordStoreTest, PutRefusesInvalidMigUuids) {
  auto store = OpenOrDie();
  for (const char* bad : {"../x", "MIG-../../x", "", "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1",
                          "MIG-0b6a1c3e-2f4d-5a6b-8c9d-0e1f2a3b4c5d/../y"}) {
    Record r = Committed();
    r.mig_uuid = MigUuid(bad);
    EXPECT_THAT(store->Put(r), StatusIs(StatusCode::kInvalidArgument, HasSubstr("MIG UUID")))
        << bad;
  }
  EXPECT_THAT(List(StateDir()), IsEmpty());
}

TEST_F(RecordStoreTest, PutRefusesInvalidRecordsAndMissingBootId) {
  auto store = OpenOrDie();
  Record unowned = Committed();
  unowned.owner = Owner();
  EXPECT_THAT(store->Put(unowned), StatusIs(StatusCode::kInvalidArgument,
                                            AllOf(HasSubstr(Key().ToString()),
                                                  HasSubstr("Active record has no owner"))));
  Record early = Intent();
  early.created_at = At(-10);
  EXPECT_THAT(store->Put(early), StatusIs(StatusCode::kInvalidArgument, HasSubstr("created_at")));

  RecordStoreOptions no_boot = Options();
  no_boot.boot_id.clear();
  auto bootless = OpenOrDie(no_boot);
  EXPECT_THAT(bootless->Put(Intent()),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("has no boot id")));
  Record with_boot = Intent();
  with_boot.boot_id = kOtherBoot;
  EXPECT_THAT(bootless->Put(with_boot), IsOk());
}

TEST_F(RecordStoreTest, PutRefusesRecordsLargerThanTheLimit) {
  RecordStoreOptions options = Options();
  options.max_record_bytes = 300;
  auto store = OpenOrDie(options);
  Record r = Committed();
  r.request_id = std::string(200, 'r');
  EXPECT_THAT(store->Put(r),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("more than the limit of 300")));
  EXPECT_THAT(List(StateDir()), IsEmpty());
}

TEST_F(RecordStoreTest, PutRefusesToWriteThroughASymlink) {
  auto store = OpenOrDie();
  const std::string target = tmp_.Join("victim");
  WriteFileOrDie(target, "precious");
  ASSERT_EQ(::symlink(target.c_str(), PathOf(Key()).c_str()), 0);
  EXPECT_THAT(store->Put(Intent()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
  EXPECT_TRUE(IsSymlink(PathOf(Key())));
  EXPECT_EQ(Read(target), "precious");

  // Also when the store already knows the key (no peek on the way).
  auto store2 = OpenOrDie();
  ASSERT_THAT(store2->Put(Intent(Key(2))), IsOk());
  ASSERT_EQ(::unlink(PathOf(Key(2)).c_str()), 0);
  ASSERT_EQ(::symlink(target.c_str(), PathOf(Key(2)).c_str()), 0);
  EXPECT_THAT(store2->Put(Intent(Key(2))),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
  EXPECT_EQ(Read(target), "precious");
}

TEST_F(RecordStoreTest, PutRefusesANonRegularFileAtTheRecordPath) {
  auto store = OpenOrDie();
  ASSERT_EQ(::mkdir(PathOf(Key()).c_str(), 0700), 0);
  EXPECT_THAT(store->Put(Intent()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not a regular file")));
  EXPECT_TRUE(fs::is_directory(PathOf(Key())));
}

TEST_F(RecordStoreTest, FailedWriteLeavesTheOldRecordAndState) {
  auto store = OpenOrDie();
  StatusOr<Record> first = store->Put(Intent());
  ASSERT_THAT(first, IsOk());
  ops_.fail_write = 1;
  EXPECT_THAT(store->Put(Committed()),
              StatusIs(StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("writing record for"), HasSubstr("injected"))));
  EXPECT_EQ(Read(PathOf(Key())), EncodeRecord(*first));
  StatusOr<Record> retry = store->Put(Committed());
  ASSERT_THAT(retry, IsOk());
  EXPECT_EQ(retry->generation, 2u);
}

// ---- Remove ----

TEST_F(RecordStoreTest, RemoveIsDurableAndIdempotent) {
  auto store = OpenOrDie();
  ASSERT_THAT(store->Put(Committed()), IsOk());
  const int syncs = ops_.sync_calls.load();
  EXPECT_THAT(store->Remove(Key()), IsOk());
  EXPECT_GT(ops_.sync_calls.load(), syncs);
  EXPECT_FALSE(fs::exists(PathOf(Key())));
  EXPECT_THAT(store->Remove(Key()), IsOk());
  EXPECT_THAT(store->Remove(Key(6)), IsOk());  // never existed
  EXPECT_EQ(store->pending_removals(), 0u);
}

TEST_F(RecordStoreTest, FailedUnlinkIsQueuedAndRetried) {
  auto store = OpenOrDie();
  ASSERT_THAT(store->Put(Committed()), IsOk());
  ops_.fail_remove = 1;
  EXPECT_THAT(store->Remove(Key()),
              StatusIs(StatusCode::kUnavailable,
                       AllOf(HasSubstr("queued for retry"), HasSubstr("injected: removing"))));
  EXPECT_TRUE(fs::exists(PathOf(Key())));
  EXPECT_EQ(store->pending_removals(), 1u);
  EXPECT_THAT(store->PendingRemovals(), ElementsAre(Key()));
  // A record queued for removal is not handed to recovery again.
  LoadResult loaded = LoadOrDie(*store);
  EXPECT_THAT(loaded.records, IsEmpty());
  EXPECT_THAT(loaded.problems, IsEmpty());

  ops_.fail_remove = 1;
  EXPECT_THAT(store->RetryPendingRemovals(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("1 of 1 pending record removals")));
  EXPECT_EQ(store->pending_removals(), 1u);

  EXPECT_THAT(store->RetryPendingRemovals(), IsOk());
  EXPECT_EQ(store->pending_removals(), 0u);
  EXPECT_FALSE(fs::exists(PathOf(Key())));
  EXPECT_THAT(store->RetryPendingRemovals(), IsOk());  // empty queue
}

TEST_F(RecordStoreTest, RemovalOfANonRegularFileIsQueuedUntilItIsFixed) {
  // Root-proof failure: a non-empty directory where the record should be.
  auto store = OpenOrDie();
  ASSERT_EQ(::mkdir(PathOf(Key()).c_str(), 0700), 0);
  WriteFileOrDie(PathOf(Key()) + "/inner", "x");
  EXPECT_THAT(store->Remove(Key()),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("not a regular file"), HasSubstr("queued for retry"))));
  EXPECT_EQ(store->pending_removals(), 1u);
  EXPECT_THAT(store->RetryPendingRemovals(), StatusIs(StatusCode::kFailedPrecondition, _));
  EXPECT_TRUE(fs::exists(PathOf(Key()) + "/inner"));  // never deleted

  fs::remove_all(PathOf(Key()));
  EXPECT_THAT(store->RetryPendingRemovals(), IsOk());
  EXPECT_EQ(store->pending_removals(), 0u);
}

TEST_F(RecordStoreTest, RemoveNeverDeletesASymlink) {
  auto store = OpenOrDie();
  const std::string target = tmp_.Join("victim");
  WriteFileOrDie(target, "precious");
  ASSERT_EQ(::symlink(target.c_str(), PathOf(Key()).c_str()), 0);
  EXPECT_THAT(store->Remove(Key()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
  EXPECT_TRUE(IsSymlink(PathOf(Key())));
  EXPECT_EQ(Read(target), "precious");
  EXPECT_EQ(store->pending_removals(), 1u);
}

TEST_F(RecordStoreTest, FailedDirectorySyncAfterUnlinkIsQueued) {
  auto store = OpenOrDie();
  ASSERT_THAT(store->Put(Committed()), IsOk());
  ops_.fail_sync = 1;
  EXPECT_THAT(store->Remove(Key()),
              StatusIs(StatusCode::kUnavailable, HasSubstr("injected: fsync")));
  EXPECT_FALSE(fs::exists(PathOf(Key())));  // unlinked, but not yet durable
  EXPECT_EQ(store->pending_removals(), 1u);
  const int syncs = ops_.sync_calls.load();
  EXPECT_THAT(store->RetryPendingRemovals(), IsOk());
  EXPECT_GT(ops_.sync_calls.load(), syncs);  // the retry made it durable
  EXPECT_EQ(store->pending_removals(), 0u);
}

TEST_F(RecordStoreTest, RetryCountsEveryFailureAndKeepsThemQueued) {
  auto store = OpenOrDie();
  ASSERT_THAT(store->Put(Committed(Key(0))), IsOk());
  ASSERT_THAT(store->Put(Committed(Key(1), kMig2)), IsOk());
  ops_.fail_remove = 2;
  EXPECT_THAT(store->Remove(Key(0)), StatusIs(StatusCode::kUnavailable, _));
  EXPECT_THAT(store->Remove(Key(1)), StatusIs(StatusCode::kUnavailable, _));
  ops_.fail_remove = 2;
  EXPECT_THAT(
      store->RetryPendingRemovals(),
      StatusIs(StatusCode::kUnavailable, AllOf(HasSubstr("2 of 2 pending record removals failed"),
                                               HasSubstr(Key(0).ToString()))));
  EXPECT_THAT(store->PendingRemovals(), ElementsAre(Key(0), Key(1)));
  ops_.fail_remove = 1;
  EXPECT_THAT(store->RetryPendingRemovals(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("1 of 2")));
  EXPECT_THAT(store->PendingRemovals(), ElementsAre(Key(0)));
  EXPECT_THAT(store->RetryPendingRemovals(), IsOk());
}

TEST_F(RecordStoreTest, RetryIsIdempotentWhenTheFileIsAlreadyGone) {
  auto store = OpenOrDie();
  ASSERT_THAT(store->Put(Committed()), IsOk());
  ops_.fail_remove = 1;
  EXPECT_THAT(store->Remove(Key()), StatusIs(StatusCode::kUnavailable, _));
  ASSERT_EQ(::unlink(PathOf(Key()).c_str()), 0);  // someone else removed it
  EXPECT_THAT(store->RetryPendingRemovals(), IsOk());
  EXPECT_EQ(store->pending_removals(), 0u);
}

TEST_F(RecordStoreTest, PutSupersedesAPendingRemoval) {
  auto store = OpenOrDie();
  ASSERT_THAT(store->Put(Committed()), IsOk());
  ops_.fail_remove = 1;
  EXPECT_THAT(store->Remove(Key()), StatusIs(StatusCode::kUnavailable, _));
  // The instance was destroyed; a new one is created at the same placement.
  clock_.Advance(std::chrono::seconds(30));
  StatusOr<Record> intent = store->Put(Intent());
  ASSERT_THAT(intent, IsOk());
  EXPECT_EQ(intent->generation, 2u);
  EXPECT_EQ(intent->created_at, At(kStart + 30));  // a new instance, not the old one's time
  EXPECT_EQ(store->pending_removals(), 0u);
  EXPECT_THAT(store->RetryPendingRemovals(), IsOk());
  EXPECT_EQ(Read(PathOf(Key())), EncodeRecord(*intent));  // the new intent survives
  EXPECT_THAT(store->Put(Committed(Key(), kMig2)), IsOk());
}

// ---- LoadAll ----

TEST_F(RecordStoreTest, LoadAllReturnsRecordsSortedWithTheirBootIds) {
  auto store = OpenOrDie();
  Record old_boot = Committed(Key(0, 1, 19, kGpu2), kMig2);
  old_boot.boot_id = kOtherBoot;
  ASSERT_THAT(store->Put(old_boot), IsOk());
  ASSERT_THAT(store->Put(Intent(Key(4))), IsOk());
  ASSERT_THAT(store->Put(Committed(Key(0))), IsOk());

  auto reopened = OpenOrDie();
  LoadResult loaded = LoadOrDie(*reopened);
  EXPECT_THAT(loaded.problems, IsEmpty());
  ASSERT_THAT(loaded.records, SizeIs(3));
  EXPECT_EQ(loaded.records[0].key, Key(0));
  EXPECT_EQ(loaded.records[1].key, Key(4));
  EXPECT_EQ(loaded.records[2].key, Key(0, 1, 19, kGpu2));
  EXPECT_EQ(loaded.records[0].boot_id, kBoot);
  EXPECT_EQ(loaded.records[2].boot_id, kOtherBoot);  // filtering is the engine's job
  EXPECT_EQ(loaded.records[1].phase, RecordPhase::kIntent);

  // LoadAll tells the store what exists: the journal rules apply at once.
  EXPECT_THAT(reopened->Put(Intent(Key(0))), StatusIs(StatusCode::kFailedPrecondition, _));
  StatusOr<Record> next = reopened->Put(Committed(Key(0)));
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(next->generation, 2u);
}

TEST_F(RecordStoreTest, LoadAllOfAnEmptyDirectory) {
  auto store = OpenOrDie();
  LoadResult loaded = LoadOrDie(*store);
  EXPECT_THAT(loaded.records, IsEmpty());
  EXPECT_THAT(loaded.problems, IsEmpty());
  EXPECT_FALSE(fs::exists(QuarantineDir()));  // created only when needed
}

// Writes `content` under `name`, loads, and expects exactly one quarantined
// problem of `kind` with the bytes preserved.
void ExpectQuarantined(RecordStore& store, const std::string& dir, const std::string& name,
                       const std::string& content, ProblemKind kind, const std::string& reason) {
  WriteFileOrDie(dir + "/" + name, content);
  StatusOr<LoadResult> loaded = store.LoadAll();
  ASSERT_THAT(loaded, IsOk());
  EXPECT_THAT(loaded->records, IsEmpty());
  ASSERT_THAT(loaded->problems, SizeIs(1));
  const LoadProblem& p = loaded->problems[0];
  EXPECT_EQ(p.file, name);
  EXPECT_EQ(p.kind, kind) << p.ToString();
  EXPECT_THAT(p.reason, HasSubstr(reason));
  EXPECT_EQ(p.quarantine_error, "");
  EXPECT_EQ(p.quarantined_to, dir + "/quarantine/" + name + "." + kStartCompact);
  EXPECT_FALSE(fs::exists(dir + "/" + name));
  EXPECT_EQ(Read(p.quarantined_to), content);  // byte for byte
  EXPECT_EQ(ModeOf(dir + "/quarantine"), 0700u);
}

TEST_F(RecordStoreTest, CorruptJsonIsQuarantinedWithTheReason) {
  auto store = OpenOrDie();
  const std::string content = "{\"version\": 1, \"phase\": \"int\xff";
  ExpectQuarantined(*store, StateDir(), NameOf(Key()), content, ProblemKind::kCorrupt,
                    "DATA_LOSS: " + NameOf(Key()) + ": not valid JSON");
}

TEST_F(RecordStoreTest, RecordWithAMissingFieldIsQuarantined) {
  auto store = OpenOrDie();
  Record r = Committed();
  r.boot_id = kBoot;
  std::string content = EncodeRecord(r);
  const size_t pos = content.find("\"bootID\"");
  ASSERT_NE(pos, std::string::npos);
  content.replace(pos, 8, "\"bootId\"");
  ExpectQuarantined(*store, StateDir(), NameOf(Key()), content, ProblemKind::kCorrupt,
                    "bootID is missing");
}

TEST_F(RecordStoreTest, UnknownSchemaVersionIsQuarantined) {
  auto store = OpenOrDie();
  Record r = Committed();
  r.boot_id = kBoot;
  std::string content = EncodeRecord(r);
  const size_t pos = content.find("\"version\": 1");
  ASSERT_NE(pos, std::string::npos);
  content.replace(pos, 12, "\"version\": 2");
  ExpectQuarantined(*store, StateDir(), NameOf(Key()), content, ProblemKind::kUnknownSchema,
                    "schema version 2 is not supported");
}

TEST_F(RecordStoreTest, SemanticallyInvalidRecordIsQuarantined) {
  auto store = OpenOrDie();
  Record r = Committed();
  r.boot_id = kBoot;
  r.mig_uuid.reset();
  ExpectQuarantined(*store, StateDir(), NameOf(Key()), EncodeRecord(r), ProblemKind::kInvalidRecord,
                    "needs the GI id, the CI id and the MIG UUID");
}

TEST_F(RecordStoreTest, NameContentMismatchIsQuarantined) {
  auto store = OpenOrDie();
  Record r = Committed(Key(4));
  r.boot_id = kBoot;
  ExpectQuarantined(*store, StateDir(), NameOf(Key(0)), EncodeRecord(r), ProblemKind::kNameMismatch,
                    "whose file is " + NameOf(Key(4)));
}

TEST_F(RecordStoreTest, UnexpectedJsonNameIsQuarantinedAsMismatch) {
  auto store = OpenOrDie();
  Record r = Committed();
  r.boot_id = kBoot;
  ExpectQuarantined(*store, StateDir(), "instance.json", EncodeRecord(r),
                    ProblemKind::kNameMismatch, "holds the record of");
}

TEST_F(RecordStoreTest, OversizedFileIsQuarantined) {
  RecordStoreOptions options = Options();
  options.max_record_bytes = 1024;
  auto store = OpenOrDie(options);
  ExpectQuarantined(*store, StateDir(), NameOf(Key()), std::string(5000, ' ') + "{}",
                    ProblemKind::kTooLarge, "larger than 1024 bytes");
}

TEST_F(RecordStoreTest, StaleTempFilesAreReportedAndQuarantined) {
  auto store = OpenOrDie();
  ExpectQuarantined(*store, StateDir(), "." + NameOf(Key()) + ".4242.7.tmp", "{\"ver",
                    ProblemKind::kStaleTemp, "interrupted record write");
}

TEST_F(RecordStoreTest, QuarantineNeverReplacesAnEarlierFile) {
  auto store = OpenOrDie();
  const std::string name = NameOf(Key());
  WriteFileOrDie(PathOf(Key()), "first");
  LoadResult a = LoadOrDie(*store);
  WriteFileOrDie(PathOf(Key()), "second");
  LoadResult b = LoadOrDie(*store);  // same FakeClock second
  ASSERT_THAT(a.problems, SizeIs(1));
  ASSERT_THAT(b.problems, SizeIs(1));
  EXPECT_EQ(b.problems[0].quarantined_to, a.problems[0].quarantined_to + ".1");
  EXPECT_EQ(Read(a.problems[0].quarantined_to), "first");
  EXPECT_EQ(Read(b.problems[0].quarantined_to), "second");
  EXPECT_THAT(List(QuarantineDir()), SizeIs(2));
}

TEST_F(RecordStoreTest, QuarantineFailureLeavesTheFileInPlace) {
  auto store = OpenOrDie();
  WriteFileOrDie(PathOf(Key()), "junk");
  ops_.fail_rename = 1;
  LoadResult loaded = LoadOrDie(*store);
  ASSERT_THAT(loaded.problems, SizeIs(1));
  EXPECT_EQ(loaded.problems[0].kind, ProblemKind::kCorrupt);
  EXPECT_EQ(loaded.problems[0].quarantined_to, "");
  EXPECT_THAT(loaded.problems[0].quarantine_error, HasSubstr("injected: renaming"));
  EXPECT_EQ(Read(PathOf(Key())), "junk");

  // A failing fsync after the move still reports where the file went, on
  // every file of the pass.
  WriteFileOrDie(PathOf(Key(2)), "junk 2");
  ops_.fail_sync = 1;
  loaded = LoadOrDie(*store);
  ASSERT_THAT(loaded.problems, SizeIs(2));
  for (const LoadProblem& p : loaded.problems) {
    EXPECT_THAT(p.quarantined_to, StartsWith(QuarantineDir()));
    EXPECT_THAT(p.quarantine_error, HasSubstr("injected: fsync"));
  }
  EXPECT_EQ(Read(loaded.problems[0].quarantined_to), "junk");
}

TEST_F(RecordStoreTest, QuarantineDirectoryMustBePrivateAndReal) {
  auto store = OpenOrDie();
  const std::string elsewhere = tmp_.Join("elsewhere");
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), QuarantineDir().c_str()), 0);
  WriteFileOrDie(PathOf(Key()), "junk");
  LoadResult loaded = LoadOrDie(*store);
  ASSERT_THAT(loaded.problems, SizeIs(2));
  // Sorted by name: the record file, then the "quarantine" link itself.
  EXPECT_EQ(loaded.problems[0].file, NameOf(Key()));
  EXPECT_THAT(loaded.problems[0].quarantine_error,
              AllOf(HasSubstr("quarantine directory"), HasSubstr("symbolic link")));
  EXPECT_EQ(loaded.problems[1].file, "quarantine");
  EXPECT_EQ(loaded.problems[1].kind, ProblemKind::kSymlink);
  EXPECT_EQ(Read(PathOf(Key())), "junk");
  EXPECT_THAT(List(elsewhere), IsEmpty());

  ASSERT_EQ(::unlink(QuarantineDir().c_str()), 0);
  ASSERT_EQ(::mkdir(QuarantineDir().c_str(), 0777), 0);
  ASSERT_EQ(::chmod(QuarantineDir().c_str(), 0777), 0);
  loaded = LoadOrDie(*store);
  ASSERT_THAT(loaded.problems, SizeIs(1));
  EXPECT_THAT(loaded.problems[0].quarantine_error, HasSubstr("chmod 0700"));
  EXPECT_EQ(Read(PathOf(Key())), "junk");

  ASSERT_EQ(::rmdir(QuarantineDir().c_str()), 0);
  ops_.fail_mkdir = 1;
  loaded = LoadOrDie(*store);
  ASSERT_THAT(loaded.problems, SizeIs(1));
  EXPECT_THAT(loaded.problems[0].quarantine_error, HasSubstr("injected: mkdir"));

  WriteFileOrDie(QuarantineDir(), "not a dir");
  loaded = LoadOrDie(*store);
  ASSERT_THAT(loaded.problems, SizeIs(2));
  EXPECT_THAT(loaded.problems[0].quarantine_error, HasSubstr("is not a directory"));
  EXPECT_EQ(loaded.problems[1].kind, ProblemKind::kUnknownEntry);
  EXPECT_EQ(Read(PathOf(Key())), "junk");
}

TEST_F(RecordStoreTest, SymlinkEntriesAreReportedNeverFollowedNorTouched) {
  auto store = OpenOrDie();
  // A symlink named like a valid record, pointing at a valid record outside.
  Record r = Committed();
  r.boot_id = kBoot;
  const std::string target = tmp_.Join("outside.json");
  WriteFileOrDie(target, EncodeRecord(r));
  ASSERT_EQ(::symlink(target.c_str(), PathOf(Key()).c_str()), 0);
  ASSERT_EQ(::symlink("/nonexistent/x", (StateDir() + "/dangling.json").c_str()), 0);

  LoadResult loaded = LoadOrDie(*store);
  EXPECT_THAT(loaded.records, IsEmpty());
  ASSERT_THAT(loaded.problems, SizeIs(2));
  for (const LoadProblem& p : loaded.problems) {
    EXPECT_EQ(p.kind, ProblemKind::kSymlink) << p.ToString();
    EXPECT_EQ(p.quarantined_to, "");
  }
  EXPECT_TRUE(IsSymlink(PathOf(Key())));
  EXPECT_TRUE(IsSymlink(StateDir() + "/dangling.json"));
  EXPECT_EQ(Read(target), EncodeRecord(r));
  EXPECT_FALSE(fs::exists(QuarantineDir()));
}

TEST_F(RecordStoreTest, NonRegularEntriesAreReportedAndLeftAlone) {
  auto store = OpenOrDie();
  ASSERT_EQ(::mkdir(PathOf(Key()).c_str(), 0700), 0);
  ASSERT_EQ(::mkfifo((StateDir() + "/pipe.json").c_str(), 0600), 0);
  LoadResult loaded = LoadOrDie(*store);
  ASSERT_THAT(loaded.problems, SizeIs(2));
  EXPECT_EQ(loaded.problems[0].kind, ProblemKind::kNotRegular);
  EXPECT_EQ(loaded.problems[1].kind, ProblemKind::kNotRegular);
  EXPECT_TRUE(fs::is_directory(PathOf(Key())));
  EXPECT_TRUE(fs::is_fifo(StateDir() + "/pipe.json"));
}

TEST_F(RecordStoreTest, ForeignAndUnknownEntriesAreReportedAndLeftAlone) {
  auto store = OpenOrDie();
  const std::string hami = "hami-owned-mig-0a1b2c.json";
  WriteFileOrDie(StateDir() + "/" + hami, "{\"version\": 1}");
  WriteFileOrDie(StateDir() + "/README", "notes");
  WriteFileOrDie(StateDir() + "/.hidden.tmp", "x");       // not our temp pattern
  WriteFileOrDie(StateDir() + "/.a.json.12.x.tmp", "x");  // not our temp pattern
  LoadResult loaded = LoadOrDie(*store);
  ASSERT_THAT(loaded.problems, SizeIs(4));
  EXPECT_EQ(loaded.problems[0].file, ".a.json.12.x.tmp");
  EXPECT_EQ(loaded.problems[0].kind, ProblemKind::kUnknownEntry);
  EXPECT_EQ(loaded.problems[1].file, ".hidden.tmp");
  EXPECT_EQ(loaded.problems[1].kind, ProblemKind::kUnknownEntry);
  EXPECT_EQ(loaded.problems[2].file, "README");
  EXPECT_EQ(loaded.problems[2].kind, ProblemKind::kUnknownEntry);
  EXPECT_EQ(loaded.problems[3].file, hami);
  EXPECT_EQ(loaded.problems[3].kind, ProblemKind::kForeign);
  EXPECT_THAT(List(StateDir()), SizeIs(4));
  EXPECT_EQ(Read(StateDir() + "/" + hami), "{\"version\": 1}");
}

TEST_F(RecordStoreTest, UnreadableFileIsReportedAndLeftInPlace) {
  auto store = OpenOrDie();
  Record r = Committed();
  r.boot_id = kBoot;
  WriteFileOrDie(PathOf(Key()), EncodeRecord(r));
  ops_.fail_read = 1;
  LoadResult loaded = LoadOrDie(*store);
  EXPECT_THAT(loaded.records, IsEmpty());
  ASSERT_THAT(loaded.problems, SizeIs(1));
  EXPECT_EQ(loaded.problems[0].kind, ProblemKind::kUnreadable);
  EXPECT_THAT(loaded.problems[0].reason, HasSubstr("injected: reading"));
  EXPECT_EQ(loaded.problems[0].quarantined_to, "");
  EXPECT_TRUE(fs::exists(PathOf(Key())));
  EXPECT_THAT(LoadOrDie(*store).records, SizeIs(1));  // fine on the next attempt
}

TEST_F(RecordStoreTest, ValidAndBadFilesAreSeparated) {
  auto store = OpenOrDie();
  ASSERT_THAT(store->Put(Committed(Key(0))), IsOk());
  WriteFileOrDie(PathOf(Key(2)), "not json");
  LoadResult loaded = LoadOrDie(*store);
  ASSERT_THAT(loaded.records, SizeIs(1));
  EXPECT_EQ(loaded.records[0].key, Key(0));
  ASSERT_THAT(loaded.problems, SizeIs(1));
  EXPECT_EQ(loaded.problems[0].file, NameOf(Key(2)));
  EXPECT_THAT(List(StateDir()), ElementsAre(NameOf(Key(0)), "quarantine"));
  // A second load finds only the good record: problems are reported once.
  LoadResult again = LoadOrDie(*store);
  EXPECT_THAT(again.records, SizeIs(1));
  EXPECT_THAT(again.problems, IsEmpty());
}

// ---- Hostile entries in stateDir ----

// A socket or device node named like a record is reported and left alone,
// and never opened (opening a device can have effects of its own).
TEST_F(RecordStoreTest, SocketAndDeviceNamedLikeARecordAreNotOpened) {
  auto store = OpenOrDie();
  const std::string sock = PathOf(Key(0));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  size_t expected = 1;
  // Major 511 has no driver: an open(2) would fail, so a kUnreadable here
  // would mean the store opened it.
  if (::mknod(PathOf(Key(2)).c_str(), S_IFCHR | 0600, ::makedev(511, 0)) == 0) ++expected;
  LoadResult loaded = LoadOrDie(*store);
  ::close(fd);
  EXPECT_THAT(loaded.records, IsEmpty());
  ASSERT_THAT(loaded.problems, SizeIs(expected));
  for (const LoadProblem& p : loaded.problems) {
    EXPECT_EQ(p.kind, ProblemKind::kNotRegular) << p.ToString();
    EXPECT_EQ(p.quarantined_to, "");
    EXPECT_TRUE(fs::exists(fs::symlink_status(StateDir() + "/" + p.file))) << p.file;
  }
}

// Content that no record has: empty, NUL bytes, invalid UTF-8 inside a
// string, control characters, nesting far deeper than any record, a sparse
// file of a terabyte. Each is quarantined byte for byte (the sparse one
// unread), none crashes the loader, and a good record beside them loads.
TEST_F(RecordStoreTest, HostileContentIsQuarantinedAndGoodRecordsStillLoad) {
  auto store = OpenOrDie();
  ASSERT_THAT(store->Put(Committed(Key(0))), IsOk());
  Record r = Committed(Key(1));
  r.boot_id = kBoot;
  std::string bad_utf8 = EncodeRecord(r);
  const size_t req = bad_utf8.find("req-1");
  ASSERT_NE(req, std::string::npos);
  bad_utf8.replace(req, 5, "r\xc3(\xff\xfe");
  std::string with_nul = EncodeRecord(Committed(Key(2)));
  with_nul.replace(with_nul.find("req-1"), 5, std::string("r\0q", 3));
  std::string control = EncodeRecord(Committed(Key(3)));
  control.replace(control.find("req-1"), 5, "r\x1b[2Jq");
  const std::map<std::string, std::string> files = {
      {NameOf(Key(1)), bad_utf8},
      {NameOf(Key(2)), with_nul},
      {NameOf(Key(3)), control},
      {NameOf(Key(4)), ""},
      {NameOf(Key(5)), std::string(60000, '[')},
      {NameOf(Key(6)), std::string(20000, '{') + std::string(20000, '"')},
      {NameOf(Key(7, 1, 19, kGpu2)), std::string("\0\0\0\0", 4)},
  };
  for (const auto& [name, content] : files) WriteFileOrDie(StateDir() + "/" + name, content);
  const std::string huge = NameOf(Key(0, 1, 19, kGpu2));
  {
    const int fd = ::open((StateDir() + "/" + huge).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);
    ::close(fd);
  }

  LoadResult loaded = LoadOrDie(*store);
  ASSERT_THAT(loaded.records, SizeIs(1));
  EXPECT_EQ(loaded.records[0].key, Key(0));
  ASSERT_THAT(loaded.problems, SizeIs(files.size() + 1));
  for (const LoadProblem& p : loaded.problems) {
    EXPECT_NE(p.quarantined_to, "") << p.ToString();
    EXPECT_EQ(p.quarantine_error, "") << p.ToString();
    if (p.file == huge) {
      EXPECT_EQ(p.kind, ProblemKind::kTooLarge) << p.ToString();
      EXPECT_EQ(fs::file_size(p.quarantined_to), uintmax_t{1} << 40);
      continue;
    }
    EXPECT_EQ(p.kind, ProblemKind::kCorrupt) << p.ToString();
    EXPECT_THAT(p.reason, HasSubstr(p.file));
    ASSERT_TRUE(files.count(p.file)) << p.file;
    EXPECT_EQ(Read(p.quarantined_to), files.at(p.file));
  }
  EXPECT_THAT(List(StateDir()), ElementsAre(NameOf(Key(0)), "quarantine"));
}

// Names no record has: traversal look-alikes, control characters, invalid
// UTF-8, the longest name the file system allows. None escapes stateDir;
// *.json ones are quarantined under a bounded name, the rest left alone.
TEST_F(RecordStoreTest, HostileNamesStayInsideStateDir) {
  auto store = OpenOrDie();
  Record r = Committed();
  r.boot_id = kBoot;
  const std::string good = EncodeRecord(r);
  const std::vector<std::string> json_names = {
      "..json", "...json", ".json", "..%2f..%2fetc%2fpasswd.json", "GPU-..json",
      "a\nfile=forged problem=none.json", "\x1b[31m.json", "bad\xff\xfe.json",
      std::string(250, 'x') + ".json"};
  const std::vector<std::string> other_names = {"..", "x\ny", "..\xff", std::string(255, 'y')};
  for (const std::string& n : json_names) WriteFileOrDie(StateDir() + "/" + n, good);
  for (const std::string& n : other_names) {
    if (n != "..") WriteFileOrDie(StateDir() + "/" + n, good);
  }
  LoadResult loaded = LoadOrDie(*store);
  EXPECT_THAT(loaded.records, IsEmpty());
  ASSERT_THAT(loaded.problems, SizeIs(json_names.size() + other_names.size() - 1));
  for (const LoadProblem& p : loaded.problems) {
    if (p.kind == ProblemKind::kUnknownEntry) {
      EXPECT_EQ(p.quarantined_to, "") << p.ToString();
      EXPECT_EQ(Read(StateDir() + "/" + p.file), good);
      continue;
    }
    // Every *.json name here holds the record of Key(), whose file is
    // another name: moved into the quarantine directory, nowhere else.
    EXPECT_EQ(p.kind, ProblemKind::kNameMismatch) << p.ToString();
    EXPECT_THAT(p.quarantined_to, StartsWith(QuarantineDir() + "/")) << p.ToString();
    EXPECT_EQ(p.quarantined_to.find('/', QuarantineDir().size() + 1), std::string::npos);
    EXPECT_LE(p.quarantined_to.size() - QuarantineDir().size() - 1, size_t{255});
    EXPECT_EQ(Read(p.quarantined_to), good);
  }
  EXPECT_THAT(List(QuarantineDir()), SizeIs(json_names.size()));
  EXPECT_THAT(List(tmp_.path()), ElementsAre("state"));  // nothing escaped
}

// Thousands of entries (junk names, corrupt records) beside one good record:
// LoadAll still returns the record and reports every entry, each once, and
// makes the quarantine moves durable with two directory fsyncs in all, not
// two per file (which stalled startup for minutes with this many files).
TEST_F(RecordStoreTest, ManyJunkEntriesAreAllReportedAndTheRecordStillLoads) {
  auto store = OpenOrDie();
  ASSERT_THAT(store->Put(Committed(Key(0))), IsOk());
  constexpr int kJunk = 2000;
  for (int i = 0; i < kJunk; ++i) {
    WriteFileOrDie(StateDir() + "/junk-" + std::to_string(i), "x");
    WriteFileOrDie(StateDir() + "/corrupt-" + std::to_string(i) + ".json", "{");
  }
  const int syncs_before = ops_.sync_calls.load();
  LoadResult loaded = LoadOrDie(*store);
  // Creating the quarantine directory syncs stateDir once more.
  EXPECT_LE(ops_.sync_calls.load() - syncs_before, 3);
  ASSERT_THAT(loaded.records, SizeIs(1));
  EXPECT_THAT(loaded.problems, SizeIs(2 * kJunk));
  std::set<std::string> files;
  for (const LoadProblem& p : loaded.problems) files.insert(p.file);
  EXPECT_THAT(files, SizeIs(2 * kJunk));
  EXPECT_THAT(List(QuarantineDir()), SizeIs(kJunk));
  // The second pass sees only what was left in place.
  EXPECT_THAT(LoadOrDie(*store).problems, SizeIs(kJunk));
}

TEST_F(RecordStoreTest, LoadAllFailsOnlyWhenTheDirectoryCannotBeListed) {
  auto store = OpenOrDie();
  fs::remove_all(StateDir());
  EXPECT_THAT(store->LoadAll(),
              StatusIs(StatusCode::kNotFound, HasSubstr("opening state directory")));
}

TEST(ProblemKindTest, NamesAreStableAndDistinct) {
  std::set<std::string_view> names;
  for (ProblemKind k :
       {ProblemKind::kCorrupt, ProblemKind::kUnknownSchema, ProblemKind::kInvalidRecord,
        ProblemKind::kNameMismatch, ProblemKind::kTooLarge, ProblemKind::kStaleTemp,
        ProblemKind::kSymlink, ProblemKind::kNotRegular, ProblemKind::kUnreadable,
        ProblemKind::kForeign, ProblemKind::kUnknownEntry}) {
    names.insert(ProblemKindName(k));
  }
  EXPECT_EQ(names.size(), 11u);
  EXPECT_EQ(ProblemKindName(ProblemKind::kNameMismatch), "name_mismatch");
  LoadProblem p{.file = "a.json",
                .kind = ProblemKind::kCorrupt,
                .reason = "bad",
                .quarantined_to = "/q/a.json.x",
                .quarantine_error = ""};
  EXPECT_EQ(p.ToString(), "file=a.json problem=corrupt reason=bad quarantined=/q/a.json.x");
  p.quarantined_to.clear();
  p.quarantine_error = "E";
  EXPECT_EQ(p.ToString(), "file=a.json problem=corrupt reason=bad quarantine_error=E");
}

// ---- FileOps defaults ----

TEST(FileOpsTest, RenameNoReplaceNeverReplaces) {
  TempDir tmp;
  WriteFileOrDie(tmp.Join("a"), "a");
  WriteFileOrDie(tmp.Join("b"), "b");
  EXPECT_THAT(FileOps::Default().RenameNoReplace(tmp.Join("a"), tmp.Join("b")),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("renaming")));
  EXPECT_EQ(Read(tmp.Join("b")), "b");
  EXPECT_THAT(FileOps::Default().RenameNoReplace(tmp.Join("a"), tmp.Join("c")), IsOk());
  EXPECT_EQ(Read(tmp.Join("c")), "a");
  EXPECT_FALSE(fs::exists(tmp.Join("a")));
  EXPECT_THAT(FileOps::Default().RenameNoReplace(tmp.Join("a"), tmp.Join("d")),
              StatusIs(StatusCode::kNotFound, _));
}

TEST(FileOpsTest, MakeDirectoryAppliesTheExactMode) {
  TempDir tmp;
  const mode_t old_umask = ::umask(077);
  Status s = FileOps::Default().MakeDirectory(tmp.Join("d"), 0755);
  ::umask(old_umask);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(ModeOf(tmp.Join("d")), 0755u);
  EXPECT_THAT(FileOps::Default().MakeDirectory(tmp.Join("d"), 0700),
              StatusIs(StatusCode::kAlreadyExists, _));
}

TEST(FileOpsTest, ForwardsToBase) {
  TempDir tmp;
  FileOps& ops = FileOps::Default();
  ASSERT_THAT(ops.WriteFileAtomically(tmp.Join("f"), "data", {.mode = 0600}), IsOk());
  EXPECT_THAT(ops.ReadFile(tmp.Join("f"), 2), StatusIs(StatusCode::kOutOfRange, _));
  StatusOr<std::string> read = ops.ReadFile(tmp.Join("f"), 100);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(*read, "data");
  EXPECT_THAT(ops.SyncDirectory(tmp.path()), IsOk());
  EXPECT_THAT(ops.RemoveFile(tmp.Join("f")), IsOk());
  EXPECT_THAT(ops.RemoveFile(tmp.Join("f")), StatusIs(StatusCode::kNotFound, _));
}

// ---- Concurrency ----

TEST_F(RecordStoreTest, ConcurrentCallsAreSerialisedPerKey) {
  auto store = OpenOrDie();
  constexpr int kKeys = 4;
  constexpr int kThreadsPerKey = 2;
  constexpr int kPutsPerThread = 25;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int k = 0; k < kKeys; ++k) {
    for (int t = 0; t < kThreadsPerKey; ++t) {
      threads.emplace_back([&, k] {
        for (int i = 0; i < kPutsPerThread; ++i) {
          if (!store->Put(Intent(Key(static_cast<uint32_t>(k)))).ok()) ++failures;
        }
      });
    }
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 5; ++i) {
      if (!store->LoadAll().ok()) ++failures;
    }
  });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);

  LoadResult loaded = LoadOrDie(*store);
  EXPECT_THAT(loaded.problems, IsEmpty());
  ASSERT_THAT(loaded.records, SizeIs(kKeys));
  for (const Record& r : loaded.records) {
    EXPECT_EQ(r.generation, uint64_t{kThreadsPerKey * kPutsPerThread}) << r.key;
  }
  EXPECT_THAT(List(StateDir()), SizeIs(kKeys));  // no temp file left behind
}

}  // namespace
}  // namespace migd::store
