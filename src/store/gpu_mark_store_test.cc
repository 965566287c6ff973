// GpuMarkStore on a real temp dir: durable put/remove, boot scope, and the
// fail-closed reading of files it cannot trust.
#include "store/gpu_mark_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file_util.h"
#include "store/record_store.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::store {
namespace {

using ::migd::testing::StatusIs;
using ::migd::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kGpu0[] = "GPU-11111111-2222-3333-4444-555555555555";
constexpr char kGpu1[] = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

class GpuMarkStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<GpuMarkStore> Open(const std::string& boot = "boot-a") {
    StatusOr<std::unique_ptr<GpuMarkStore>> s = GpuMarkStore::Open(dir_.path(), boot, clock_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  std::string MarkPath(const std::string& name) {
    return dir_.Join(std::string(kGpuMarkDirName) + "/" + name);
  }
  static GpuMark Mark(const char* uuid, uint32_t index, std::string reason) {
    GpuMark m;
    m.gpu_uuid = GpuUuid(uuid);
    m.gpu_index = index;
    m.reason = std::move(reason);
    return m;
  }

  TempDir dir_;
  FakeClock clock_;
};

TEST_F(GpuMarkStoreTest, APutMarkIsLoadedWithItsBootAndTime) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  MIGD_ASSERT_OK(store->Put(Mark(kGpu1, 1, "GPU 1: xid 79")));
  MIGD_ASSERT_OK(store->Put(Mark(kGpu0, 0, "GPU 0: gpu-lost")));
  struct stat st {};
  ASSERT_EQ(::stat(MarkPath(std::string(kGpu1) + ".json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  MIGD_ASSERT_OK_AND_ASSIGN(GpuMarkLoad load, Open()->LoadAll());
  ASSERT_EQ(load.marks.size(), 2u);
  EXPECT_EQ(load.marks[0].gpu_uuid.value(), kGpu0);
  EXPECT_EQ(load.marks[1].gpu_uuid.value(), kGpu1);
  EXPECT_EQ(load.marks[1].gpu_index, 1u);
  EXPECT_EQ(load.marks[1].reason, "GPU 1: xid 79");
  EXPECT_EQ(load.marks[1].boot_id, "boot-a");
  EXPECT_EQ(load.marks[1].marked_at_unix, ToUnixSeconds(clock_.Now()));
  EXPECT_TRUE(load.problems.empty());
  EXPECT_TRUE(load.other_boot.empty());
}

TEST_F(GpuMarkStoreTest, TheCauseIsWrittenAndAMarkWithoutOneIsAFault) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  GpuMark lost = Mark(kGpu0, 0, "GPU 0: gpu-lost");
  lost.cause = GpuMarkCause::kLost;
  MIGD_ASSERT_OK(store->Put(lost));
  MIGD_ASSERT_OK(store->Put(Mark(kGpu1, 1, "GPU 1: xid 79")));
  MIGD_ASSERT_OK_AND_ASSIGN(GpuMarkLoad load, Open()->LoadAll());
  ASSERT_EQ(load.marks.size(), 2u);
  EXPECT_EQ(load.marks[0].cause, GpuMarkCause::kLost);
  EXPECT_EQ(load.marks[1].cause, GpuMarkCause::kFault);
  // A mark written before the field existed reads as a fault's.
  MIGD_ASSERT_OK_AND_ASSIGN(
      GpuMark old, DecodeGpuMark(R"({"version": 1, "gpuUUID": ")" + std::string(kGpu0) +
                                     R"(", "gpuIndex": 0, "bootID": "b", "reason": "r", "markedAtUnix": 1})",
                                 "old.json"));
  EXPECT_EQ(old.cause, GpuMarkCause::kFault);
  EXPECT_THAT(DecodeGpuMark(R"({"version": 1, "gpuUUID": ")" + std::string(kGpu0) +
                                R"(", "gpuIndex": 0, "bootID": "b", "reason": "r", "cause": "gone", "markedAtUnix": 1})",
                            "bad.json")
                  .status(),
              ::migd::testing::StatusIs(StatusCode::kDataLoss, ::testing::HasSubstr("cause")));
}

TEST_F(GpuMarkStoreTest, RemoveIsDurableAndOkWhenThereIsNoMark) {
  auto store = Open();
  MIGD_ASSERT_OK(store->Put(Mark(kGpu0, 0, "lost")));
  MIGD_ASSERT_OK(store->Remove(GpuUuid(kGpu0)));
  MIGD_ASSERT_OK(store->Remove(GpuUuid(kGpu0)));
  EXPECT_NE(::access(MarkPath(std::string(kGpu0) + ".json").c_str(), F_OK), 0);
  MIGD_ASSERT_OK_AND_ASSIGN(GpuMarkLoad load, store->LoadAll());
  EXPECT_TRUE(load.marks.empty());
  EXPECT_THAT(store->Remove(GpuUuid("gpu0")), StatusIs(StatusCode::kInvalidArgument, HasSubstr("")));
}

TEST_F(GpuMarkStoreTest, MarksOfAnotherBootAreRemovedDurably) {
  MIGD_ASSERT_OK(Open("boot-a")->Put(Mark(kGpu0, 0, "lost")));
  auto next_boot = Open("boot-b");
  MIGD_ASSERT_OK_AND_ASSIGN(GpuMarkLoad load, next_boot->LoadAll());
  EXPECT_TRUE(load.marks.empty());
  ASSERT_EQ(load.other_boot.size(), 1u);
  EXPECT_EQ(load.other_boot[0].boot_id, "boot-a");
  EXPECT_NE(::access(MarkPath(std::string(kGpu0) + ".json").c_str(), F_OK), 0);
}

TEST_F(GpuMarkStoreTest, ACorruptMarkIsAProblemOfItsGpuAndStaysInPlace) {
  auto store = Open();
  const std::string path = MarkPath(std::string(kGpu0) + ".json");
  migd::testing::WriteFileOrDie(path, "{\"version\": 1, \"gpuUUID\": ");
  migd::testing::WriteFileOrDie(MarkPath(std::string(kGpu1) + ".json"),
                                "{\"version\": 2, \"gpuUUID\": \"" + std::string(kGpu1) + "\"}");
  MIGD_ASSERT_OK_AND_ASSIGN(GpuMarkLoad load, store->LoadAll());
  EXPECT_TRUE(load.marks.empty());
  ASSERT_EQ(load.problems.size(), 2u);
  ASSERT_TRUE(load.problems[0].gpu_uuid.has_value());
  EXPECT_EQ(load.problems[0].gpu_uuid->value(), kGpu0);
  EXPECT_THAT(load.problems[0].reason, HasSubstr(path + ": not valid JSON"));
  EXPECT_THAT(load.problems[1].reason, HasSubstr("/version: expected version 1"));
  EXPECT_EQ(::access(path.c_str(), F_OK), 0);  // never dropped
  // The clear removes it.
  MIGD_ASSERT_OK(store->Remove(GpuUuid(kGpu0)));
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST_F(GpuMarkStoreTest, AMarkThatNamesAnotherGpuInsideIsAProblemOfTheNamedFile) {
  auto store = Open();
  MIGD_ASSERT_OK(store->Put(Mark(kGpu1, 1, "lost")));
  ASSERT_EQ(::rename(MarkPath(std::string(kGpu1) + ".json").c_str(),
                     MarkPath(std::string(kGpu0) + ".json").c_str()),
            0);
  MIGD_ASSERT_OK_AND_ASSIGN(GpuMarkLoad load, store->LoadAll());
  EXPECT_TRUE(load.marks.empty());
  ASSERT_EQ(load.problems.size(), 1u);
  EXPECT_EQ(load.problems[0].gpu_uuid->value(), kGpu0);
  EXPECT_THAT(load.problems[0].reason,
              HasSubstr("/gpuUUID: expected " + std::string(kGpu0) + " (the file's name)"));
}

TEST_F(GpuMarkStoreTest, OtherEntriesAreProblemsOfNoGpuAndStaleTempsAreRemoved) {
  auto store = Open();
  migd::testing::WriteFileOrDie(MarkPath("notes.txt"), "hello");
  const std::string temp = MarkPath("." + std::string(kGpu0) + ".json.123.1.tmp");
  migd::testing::WriteFileOrDie(temp, "{");
  MIGD_ASSERT_OK_AND_ASSIGN(GpuMarkLoad load, store->LoadAll());
  ASSERT_EQ(load.problems.size(), 1u);
  EXPECT_EQ(load.problems[0].file, "notes.txt");
  EXPECT_FALSE(load.problems[0].gpu_uuid.has_value());
  EXPECT_NE(::access(temp.c_str(), F_OK), 0);
}

TEST_F(GpuMarkStoreTest, OpenRefusesASymlinkInPlaceOfTheDirectory) {
  ASSERT_EQ(::symlink("/tmp", dir_.Join(std::string(kGpuMarkDirName)).c_str()), 0);
  EXPECT_THAT(GpuMarkStore::Open(dir_.path(), "boot-a", clock_).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("is a symbolic link; migd does not follow it")));
  EXPECT_THAT(GpuMarkStore::Open(dir_.path(), "", clock_).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("needs a boot id")));
}

TEST_F(GpuMarkStoreTest, OpenRefusesADirectoryOthersCanWrite) {
  const std::string dir = dir_.Join(std::string(kGpuMarkDirName));
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  EXPECT_THAT(GpuMarkStore::Open(dir_.path(), "boot-a", clock_).status(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("is writable by group or others (mode 0777): chmod 0700 " + dir)));
}

// FileOps that fails every atomic write.
class FailingWrites final : public FileOps {
 public:
  Status WriteFileAtomically(const std::string& path, std::string_view,
                             const AtomicWriteOptions&) override {
    return UnavailableError("injected: writing " + path);
  }
};

TEST_F(GpuMarkStoreTest, AFailedWriteIsReturnedAndLeavesThePreviousMark) {
  MIGD_ASSERT_OK(Open()->Put(Mark(kGpu0, 0, "first")));
  FailingWrites ops;
  MIGD_ASSERT_OK_AND_ASSIGN(auto store, GpuMarkStore::Open(dir_.path(), "boot-a", clock_, &ops));
  EXPECT_THAT(store->Put(Mark(kGpu0, 0, "second")),
              StatusIs(StatusCode::kUnavailable, HasSubstr("injected")));
  MIGD_ASSERT_OK_AND_ASSIGN(GpuMarkLoad load, Open()->LoadAll());
  ASSERT_EQ(load.marks.size(), 1u);
  EXPECT_EQ(load.marks[0].reason, "first");
}

TEST_F(GpuMarkStoreTest, TheRecordStoreSkipsTheMarkDirectory) {
  MIGD_ASSERT_OK(Open()->Put(Mark(kGpu0, 0, "lost")));
  MIGD_ASSERT_OK_AND_ASSIGN(auto records,
                            RecordStore::Open(dir_.path(), clock_, {.boot_id = "boot-a"}));
  MIGD_ASSERT_OK_AND_ASSIGN(LoadResult loaded, records->LoadAll());
  EXPECT_TRUE(loaded.records.empty());
  EXPECT_TRUE(loaded.problems.empty());
}

}  // namespace
}  // namespace migd::store
