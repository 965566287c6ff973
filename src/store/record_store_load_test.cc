// RecordStore::LoadAll: records, problems, quarantine, and hostile entries in
// the state directory.
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
#include "store/record_store.h"
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
                    "/bootID: expected a string, got nothing (the member is missing)");
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

// A record whose MIG UUID is not a MIG device's (what a driver that read the
// "Parent device" field would have written) is refused at load, naming both.
TEST_F(RecordStoreTest, RecordWhoseMigUuidIsItsParentGpuUuidIsQuarantined) {
  auto store = OpenOrDie();
  Record r = Committed();
  r.boot_id = kBoot;
  r.mig_uuid = MigUuid(kGpu);
  ExpectQuarantined(
      *store, StateDir(), NameOf(Key()), EncodeRecord(r), ProblemKind::kInvalidRecord,
      std::string("MIG UUID '") + kGpu + "' is the UUID of its parent GPU '" + kGpu + "'");
}

TEST_F(RecordStoreTest, RecordWhoseMigUuidLacksTheMigPrefixIsQuarantined) {
  auto store = OpenOrDie();
  Record r = Committed();
  r.boot_id = kBoot;
  r.mig_uuid = MigUuid(kGpu2);
  ExpectQuarantined(*store, StateDir(), NameOf(Key()), EncodeRecord(r), ProblemKind::kInvalidRecord,
                    std::string("MIG UUID '") + kGpu2 + "' of an instance of GPU '" + kGpu +
                        "' does not start with MIG-");
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
  const std::vector<std::string> json_names = {"..json",
                                               "...json",
                                               ".json",
                                               "..%2f..%2fetc%2fpasswd.json",
                                               "GPU-..json",
                                               "a\nfile=forged problem=none.json",
                                               "\x1b[31m.json",
                                               "bad\xff\xfe.json",
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

}  // namespace
}  // namespace migd::store
