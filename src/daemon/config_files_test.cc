// LoadConfigFile: reading the file, and its refusal of a config that someone
// other than migd's user (or root) could change (docs/security.md).
#include "daemon/config_files.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "daemon/config.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::daemon {
namespace {

using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kYaml[] = "lifecycle:\n  idleTTL: 10m\n";

// A config file in a fresh 0700 directory, with `mode`.
std::string WriteConfig(const migd::testing::TempDir& dir, mode_t mode) {
  const std::string path = dir.Join("migd.yaml");
  migd::testing::WriteFileOrDie(path, kYaml);
  EXPECT_EQ(::chmod(path.c_str(), mode), 0);
  return path;
}

TEST(ConfigFilesTest, OwnerOnlyFileIsAccepted) {
  migd::testing::TempDir dir;
  const std::string path = WriteConfig(dir, 0644);
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFile(path));
  EXPECT_EQ(c.lifecycle.idle_ttl, std::chrono::minutes(10));
}

TEST(ConfigFilesTest, GroupWritableFileIsRefused) {
  migd::testing::TempDir dir;
  const std::string path = WriteConfig(dir, 0664);
  EXPECT_THAT(
      LoadConfigFile(path),
      StatusIs(StatusCode::kFailedPrecondition,
               HasSubstr("config file " + path + " is writable by group or others (mode 0664)")));
}

TEST(ConfigFilesTest, WorldWritableFileIsRefusedWithTheFix) {
  migd::testing::TempDir dir;
  const std::string path = WriteConfig(dir, 0646);
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("Fix: chmod go-w " + path)));
}

TEST(ConfigFilesTest, GroupWritableDirectoryIsRefused) {
  migd::testing::TempDir dir;
  const std::string path = WriteConfig(dir, 0600);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0770), 0);
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("config directory " + dir.path() + " is writable")));
}

TEST(ConfigFilesTest, StickyWorldWritableDirectoryIsAccepted) {
  // /tmp: others may add files there but not replace or rename ours.
  migd::testing::TempDir dir;
  const std::string path = WriteConfig(dir, 0600);
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);
  EXPECT_THAT(LoadConfigFile(path), migd::testing::IsOk());
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);  // the same without the sticky bit
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("(mode 0777)")));
}

TEST(ConfigFilesTest, SymlinkIsRefused) {
  migd::testing::TempDir dir;
  const std::string target = WriteConfig(dir, 0600);
  const std::string link = dir.Join("link.yaml");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_THAT(LoadConfigFile(link),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is a symbolic link")));
}

TEST(ConfigFilesTest, DirectoryInsteadOfFileIsRefused) {
  migd::testing::TempDir dir;
  EXPECT_THAT(LoadConfigFile(dir.path()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is not a regular file")));
}

TEST(ConfigFilesTest, FileOwnedByAnotherUserIsRefused) {
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

TEST(ConfigFilesTest, OversizedFileIsRefused) {
  migd::testing::TempDir dir;
  const std::string path = dir.Join("migd.yaml");
  migd::testing::WriteFileOrDie(path, "# " + std::string(1 << 20, 'x') + "\n");
  EXPECT_THAT(LoadConfigFile(path), StatusIs(StatusCode::kOutOfRange, HasSubstr("larger than")));
}

TEST(ConfigFilesTest, FifoSocketAndDeviceAreRefusedWithoutBlocking) {
  migd::testing::TempDir dir;
  const std::string fifo = dir.Join("fifo.yaml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(LoadConfigFile(fifo),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(fifo), HasSubstr("is not a regular file"))));
  const std::string dev = dir.Join("dev.yaml");
  if (::mknod(dev.c_str(), S_IFCHR | 0600, ::makedev(1, 3)) == 0) {
    EXPECT_THAT(LoadConfigFile(dev),
                StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is not a regular file")));
  }
}

TEST(ConfigFilesTest, HugeSparseFileIsRefusedUnread) {
  migd::testing::TempDir dir;
  const std::string path = dir.Join("migd.yaml");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);
  ::close(fd);
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(StatusCode::kOutOfRange, AllOf(HasSubstr(path), HasSubstr("larger than"))));
}

// Content no config has: each is an InvalidArgument naming the file, never a
// crash, a hang or a silently default config.
TEST(ConfigFilesTest, HostileContentIsInvalidArgumentNamingTheFile) {
  migd::testing::TempDir dir;
  const std::string path = dir.Join("migd.yaml");
  const std::vector<std::string> contents = {
      std::string("stateDir: /var/x\0\nlog:\n  level: info\n", 37),
      std::string("\0\0\0\0", 4),
      "stateDir: \"/var/\xff\xfe\"\n",
      "log:\n  level: \"\xc3(\"\n",
      std::string(100000, '[') + "\n",
      std::string(100000, '{') + "\n",
      std::string(50000, '-') + " x\n",
      "a: &a [*a]\n",
      "lifecycle: &x\n  idleTTL: *x\n",
      "\xef\xbb\xbf\xef\xbb\xbf: 1\n",
      "log: !!binary AAAA\n",
      "api:\n  socketMode: 99999999999999999999999999\n",
  };
  for (const std::string& content : contents) {
    migd::testing::WriteFileOrDie(path, content);
    StatusOr<Config> c = LoadConfigFile(path);
    EXPECT_THAT(c, StatusIs(StatusCode::kInvalidArgument, HasSubstr(path)))
        << "content: " << ::testing::PrintToString(content.substr(0, 60));
  }
}

TEST(ConfigFilesTest, LoadConfigFileReadsAndNamesTheFile) {
  migd::testing::TempDir dir;
  const std::string path = dir.Join("migd.yaml");
  migd::testing::WriteFileOrDie(path, "lifecycle:\n  idleTTL: 10m\n");
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFile(path));
  EXPECT_EQ(c.lifecycle.idle_ttl, std::chrono::minutes(10));

  migd::testing::WriteFileOrDie(path, "lifecycle:\n  idleTTL: 5x\n");
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("config " + path + ": lifecycle.idleTTL: \"5x\"")));
  EXPECT_THAT(LoadConfigFile(dir.Join("missing.yaml")),
              StatusIs(StatusCode::kNotFound, HasSubstr("reading config file")));
}

}  // namespace
}  // namespace migd::daemon
