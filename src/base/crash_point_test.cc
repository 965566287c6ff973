#include "base/crash_point.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

// Each death test re-executes the binary, so MIGD_CRASH_POINTS is read fresh
// by the child that sets it.
class CrashPointTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(CrashPointTest, ArmedPointKillsOnTheNthArrival) {
  EXPECT_EXIT(
      {
        ::setenv("MIGD_CRASH_POINTS", "cdi.remove@3", 1);
        CrashPoint("cdi.remove");
        CrashPoint("cdi.remove");
        std::fprintf(stderr, "two arrivals survived\n");
        CrashPoint("cdi.remove");
        std::fprintf(stderr, "third arrival survived\n");
        ::_exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "two arrivals survived");
}

TEST_F(CrashPointTest, OtherPointsAndUnsetVariableDoNothing) {
  EXPECT_EXIT(
      {
        ::setenv("MIGD_CRASH_POINTS", "record.remove@1", 1);
        for (int i = 0; i < 5; ++i) {
          CrashPoint("cdi.remove");
          CrashPoint("record.write.before_rename");
        }
        ::_exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        ::unsetenv("MIGD_CRASH_POINTS");
        for (std::string_view name : kCrashPointNames) CrashPoint(name);
        ::_exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(CrashPointTest, MalformedEntriesAreReportedAndIgnored) {
  EXPECT_EXIT(
      {
        ::setenv("MIGD_CRASH_POINTS", "bogus@1,cdi.remove@0,cdi.remove@x,cdi.remove,record.remove@2",
                 1);
        CrashPoint("cdi.remove");
        CrashPoint("record.remove");
        std::fprintf(stderr, "alive\n");
        CrashPoint("record.remove");
        ::_exit(0);
      },
      ::testing::KilledBySignal(SIGKILL),
      "ignoring \"bogus@1\"(.|\n)*ignoring \"cdi.remove@0\"(.|\n)*ignoring \"cdi.remove@x\"(.|\n)*"
      "ignoring \"cdi.remove\"(.|\n)*alive");
}

// A kill between the temp file and the rename leaves the old content (here:
// no file) and a temp file that readers skip.
TEST_F(CrashPointTest, AtomicWriteKilledBeforeRenameLeavesNoTarget) {
  // "fast" (fork without exec): the child must write into this test's temp
  // dir. Safe because this process never reaches a crash point itself, so
  // the child parses MIGD_CRASH_POINTS afresh.
  GTEST_FLAG_SET(death_test_style, "fast");
  testing::TempDir dir;
  const std::string path = dir.Join("rec.json");
  EXPECT_EXIT(
      {
        ::setenv("MIGD_CRASH_POINTS", "record.write.before_rename@1", 1);
        AtomicWriteOptions o;
        o.crash_points = "record.write";
        (void)AtomicWriteFile(path, "{}", o);
        ::_exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "");
  EXPECT_FALSE(std::filesystem::exists(path));
  int temps = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    temps += e.path().filename().string().rfind(".rec.json.", 0) == 0;
  }
  EXPECT_EQ(temps, 1);

  EXPECT_EXIT(
      {
        ::setenv("MIGD_CRASH_POINTS", "record.write.after_rename@1", 1);
        AtomicWriteOptions o;
        o.crash_points = "record.write";
        (void)AtomicWriteFile(path, "{}", o);
        ::_exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "");
  EXPECT_TRUE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace migd
