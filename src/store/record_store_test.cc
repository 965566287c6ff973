// RecordStore: Open, Put, Remove and the removal queue, concurrency, and the
// FileOps defaults.
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
#include <cerrno>
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
#include "store/record_store_test_util.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::store {
namespace {

namespace fs = std::filesystem;
using ::migd::store::testing::At;
using ::migd::store::testing::Committed;
using ::migd::store::testing::InjectingFileOps;
using ::migd::store::testing::Intent;
using ::migd::store::testing::IsSymlink;
using ::migd::store::testing::kBoot;
using ::migd::store::testing::Key;
using ::migd::store::testing::kGpu;
using ::migd::store::testing::kGpu2;
using ::migd::store::testing::kMig;
using ::migd::store::testing::kMig2;
using ::migd::store::testing::kOtherBoot;
using ::migd::store::testing::kStart;
using ::migd::store::testing::kStartCompact;
using ::migd::store::testing::List;
using ::migd::store::testing::ModeOf;
using ::migd::store::testing::NameOf;
using ::migd::store::testing::Read;
using ::migd::store::testing::RecordStoreTest;
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

// As root: a fresh directory given to another uid. As anyone else: "/",
// which belongs to root (or to the overflow uid in a user namespace), never
// to this test's euid. Either way a real directory of another owner.
TEST_F(RecordStoreTest, OpenRefusesADirOwnedBySomeoneElse) {
  std::string dir = StateDir();
  uid_t owner = 0;
  if (::geteuid() == 0) {
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    owner = 4242;
    ASSERT_EQ(::chown(dir.c_str(), owner, static_cast<gid_t>(-1)), 0) << std::strerror(errno);
  } else {
    dir = "/";
    struct stat st {};
    ASSERT_EQ(::lstat(dir.c_str(), &st), 0) << std::strerror(errno);
    ASSERT_NE(st.st_uid, ::geteuid()) << "/ belongs to this test's euid: nothing to refuse";
    owner = st.st_uid;
  }
  EXPECT_THAT(RecordStore::Open(dir, clock_, Options()),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("owned by uid " + std::to_string(owner)),
                             HasSubstr("chown " + std::to_string(::geteuid()) + " " + dir))));
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

bool OnMemoryFilesystem(const std::string& path) {
  StatusOr<bool> m = IsOnMemoryFilesystem(path);
  return m.ok() && *m;
}

// A store that fsyncs: Put fsyncs the file (and, inside AtomicWriteFile, the
// directory), Remove fsyncs the directory through the store's FileOps.
void ExpectPutAndRemoveFsync(RecordStore& store, InjectingFileOps& ops) {
  EXPECT_TRUE(store.syncs());
  const int syncs = ops.sync_calls.load();
  ASSERT_THAT(store.Put(Committed()), IsOk());
  EXPECT_EQ(ops.synced_writes.load(), 1);
  EXPECT_EQ(ops.sync_calls.load(), syncs);
  ASSERT_THAT(store.Remove(Key()), IsOk());
  EXPECT_EQ(ops.sync_calls.load(), syncs + 1);
}

// On tmpfs fsync writes nothing and a power loss erases the records anyway:
// Put and Remove leave the fsyncs out, and stay atomic (temp file + rename).
TEST_F(RecordStoreTest, OnTmpfsPutAndRemoveMakeNoFsync) {
  if (!OnMemoryFilesystem("/dev/shm")) GTEST_SKIP() << "/dev/shm is not tmpfs here";
  TempDir shm("/dev/shm");
  RecordStoreOptions options{.boot_id = kBoot, .file_ops = &ops_};  // Sync::kAuto
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RecordStore> store,
                            RecordStore::Open(shm.Join("state"), clock_, options));
  EXPECT_FALSE(store->syncs());
  const int syncs_after_open = ops_.sync_calls.load();
  ASSERT_THAT(store->Put(Committed()), IsOk());
  ASSERT_THAT(store->Put(Committed()), IsOk());
  EXPECT_EQ(ops_.synced_writes.load(), 0);
  MIGD_ASSERT_OK_AND_ASSIGN(std::string path, store->PathOf(Key()));
  EXPECT_THAT(DecodeRecord(Read(path), path), IsOk());
  ASSERT_THAT(store->Remove(Key()), IsOk());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(ops_.sync_calls.load(), syncs_after_open);
}

TEST_F(RecordStoreTest, SyncAlwaysFsyncsOnTmpfsToo) {
  if (!OnMemoryFilesystem("/dev/shm")) GTEST_SKIP() << "/dev/shm is not tmpfs here";
  TempDir shm("/dev/shm");
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RecordStore> store,
                            RecordStore::Open(shm.Join("state"), clock_, Options()));
  ExpectPutAndRemoveFsync(*store, ops_);
}

// Anywhere else kAuto keeps every fsync (the working directory of the test:
// the build tree, on disk).
TEST_F(RecordStoreTest, OnADiskFilesystemAutoFsyncs) {
  const std::string cwd = fs::current_path().string();
  if (OnMemoryFilesystem(cwd)) GTEST_SKIP() << cwd << " is in memory here";
  TempDir disk(cwd);
  RecordStoreOptions options{.boot_id = kBoot, .file_ops = &ops_};  // Sync::kAuto
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RecordStore> store,
                            RecordStore::Open(disk.Join("state"), clock_, options));
  ExpectPutAndRemoveFsync(*store, ops_);
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
