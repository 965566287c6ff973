#include "daemon/state_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "daemon/daemon.h"
#include "testing/temp_dir.h"

namespace migd::daemon {
namespace {

using ::testing::HasSubstr;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(StateDirLockTest, CreatesAMissingDirectoryPrivate) {
  migd::testing::TempDir tmp;
  const std::string dir = tmp.Join("a/state");
  StateDirLock lock;
  EXPECT_EQ(lock.Acquire(dir), std::nullopt);
  EXPECT_EQ(ModeOf(dir), 0700u);
}

TEST(StateDirLockTest, OneHolderAtATime) {
  migd::testing::TempDir tmp;
  StateDirLock first, second, third;
  ASSERT_EQ(first.Acquire(tmp.path()), std::nullopt);
  std::optional<Failure> f = second.Acquire(tmp.path());
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->code, kExitStateDir);
  EXPECT_THAT(f->message, HasSubstr("another migd is using stateDir " + tmp.path()));
  first.Release();
  EXPECT_EQ(third.Acquire(tmp.path()), std::nullopt);
}

TEST(StateDirLockTest, AGroupWritableDirectoryIsRefusedWithTheFix) {
  migd::testing::TempDir tmp;
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0770), 0);
  StateDirLock lock;
  std::optional<Failure> f = lock.Acquire(tmp.path());
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->code, kExitStateDir);
  EXPECT_THAT(f->message, HasSubstr("is writable by group or others (mode 0770)"));
  EXPECT_THAT(f->message, HasSubstr("Fix: chmod 0700 " + tmp.path()));
}

TEST(StateDirLockTest, AFileIsNotADirectory) {
  migd::testing::TempDir tmp;
  const std::string file = tmp.Join("file");
  migd::testing::WriteFileOrDie(file, "x");
  StateDirLock lock;
  std::optional<Failure> f = lock.Acquire(file);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->message, "stateDir " + file + " is not a directory");
  // Nor can a directory be created below it.
  f = lock.Acquire(file + "/state");
  ASSERT_TRUE(f.has_value());
  EXPECT_THAT(f->message, HasSubstr("stateDir " + file + "/state: "));
}

}  // namespace
}  // namespace migd::daemon
