// LoadConfigFile's refusal of a config that someone other than migd's user
// (or root) could change (issue 8 §5, docs/security.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "daemon/config.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::daemon {
namespace {

using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kYaml[] = "lifecycle:\n  idleTTL: 10m\n";

// A config file in a fresh 0700 directory, with `mode`.
std::string WriteConfig(const migd::testing::TempDir& dir, mode_t mode) {
  const std::string path = dir.Join("migd.yaml");
  migd::testing::WriteFileOrDie(path, kYaml);
  EXPECT_EQ(::chmod(path.c_str(), mode), 0);
  return path;
}

TEST(ConfigPermsTest, OwnerOnlyFileIsAccepted) {
  migd::testing::TempDir dir;
  const std::string path = WriteConfig(dir, 0644);
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFile(path));
  EXPECT_EQ(c.lifecycle.idle_ttl, std::chrono::minutes(10));
}

TEST(ConfigPermsTest, GroupWritableFileIsRefused) {
  migd::testing::TempDir dir;
  const std::string path = WriteConfig(dir, 0664);
  EXPECT_THAT(
      LoadConfigFile(path),
      StatusIs(StatusCode::kFailedPrecondition,
               HasSubstr("config file " + path + " is writable by group or others (mode 0664)")));
}

TEST(ConfigPermsTest, WorldWritableFileIsRefusedWithTheFix) {
  migd::testing::TempDir dir;
  const std::string path = WriteConfig(dir, 0646);
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("Fix: chmod go-w " + path)));
}

TEST(ConfigPermsTest, GroupWritableDirectoryIsRefused) {
  migd::testing::TempDir dir;
  const std::string path = WriteConfig(dir, 0600);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0770), 0);
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("config directory " + dir.path() + " is writable")));
}

TEST(ConfigPermsTest, StickyWorldWritableDirectoryIsAccepted) {
  // /tmp: others may add files there but not replace or rename ours.
  migd::testing::TempDir dir;
  const std::string path = WriteConfig(dir, 0600);
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);
  EXPECT_THAT(LoadConfigFile(path), migd::testing::IsOk());
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);  // the same without the sticky bit
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("(mode 0777)")));
}

TEST(ConfigPermsTest, SymlinkIsRefused) {
  migd::testing::TempDir dir;
  const std::string target = WriteConfig(dir, 0600);
  const std::string link = dir.Join("link.yaml");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_THAT(LoadConfigFile(link),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is a symbolic link")));
}

TEST(ConfigPermsTest, DirectoryInsteadOfFileIsRefused) {
  migd::testing::TempDir dir;
  EXPECT_THAT(LoadConfigFile(dir.path()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is not a regular file")));
}

TEST(ConfigPermsTest, FileOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown the file to another user";
  migd::testing::TempDir dir;
  const std::string path = WriteConfig(dir, 0644);
  ASSERT_EQ(::chown(path.c_str(), 4242, static_cast<gid_t>(-1)), 0);
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is owned by uid 4242")));
  ASSERT_EQ(::chown(dir.path().c_str(), 4242, static_cast<gid_t>(-1)), 0);
  ASSERT_EQ(::chown(path.c_str(), 0, static_cast<gid_t>(-1)), 0);
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("config directory " + dir.path() + " is owned by uid 4242")));
}

TEST(ConfigPermsTest, OversizedFileIsRefused) {
  migd::testing::TempDir dir;
  const std::string path = dir.Join("migd.yaml");
  migd::testing::WriteFileOrDie(path, "# " + std::string(1 << 20, 'x') + "\n");
  EXPECT_THAT(LoadConfigFile(path), StatusIs(StatusCode::kOutOfRange, HasSubstr("larger than")));
}

}  // namespace
}  // namespace migd::daemon
