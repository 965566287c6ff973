#include "base/file_util.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "testing/privileges.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

namespace fs = std::filesystem;
using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::migd::testing::TempDir;
using ::migd::testing::WriteFileOrDie;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// Names in `dir`, dot files included (a leftover temp file starts with '.').
std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

std::string ReadOrEmpty(const std::string& path) {
  StatusOr<std::string> s = ReadFileToString(path);
  return s.ok() ? *s : std::string();
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

TEST(IsOnMemoryFilesystemTest, TellsTmpfsFromOtherFilesystems) {
  // /proc is procfs on every Linux: not a memory filesystem in this sense.
  StatusOr<bool> proc = IsOnMemoryFilesystem("/proc");
  ASSERT_THAT(proc, IsOk());
  EXPECT_FALSE(*proc);
  StatusOr<bool> shm = IsOnMemoryFilesystem("/dev/shm");
  if (!shm.ok()) GTEST_SKIP() << "no /dev/shm here: " << shm.status();
  // /dev/shm is tmpfs wherever glibc's shm_open works (it needs tmpfs there).
  EXPECT_TRUE(*shm);
}

TEST(IsOnMemoryFilesystemTest, AMissingPathIsNotFound) {
  EXPECT_THAT(IsOnMemoryFilesystem("/nonexistent/migd"),
              StatusIs(StatusCode::kNotFound, HasSubstr("statfs /nonexistent/migd")));
}

TEST(AtomicWriteFileTest, WritesContentAndMode) {
  TempDir dir;
  const std::string path = dir.Join("state.json");
  ASSERT_THAT(AtomicWriteFile(path, "{\"v\":1}\n", {.mode = 0600}), IsOk());
  EXPECT_EQ(ReadOrEmpty(path), "{\"v\":1}\n");
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_THAT(List(dir.path()), ElementsAre("state.json"));
}

TEST(AtomicWriteFileTest, ModeIgnoresTheUmask) {
  TempDir dir;
  const std::string path = dir.Join("spec.json");
  const mode_t old_umask = ::umask(0077);
  const Status s = AtomicWriteFile(path, "x", {.mode = 0644});
  ::umask(old_umask);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(ModeOf(path), 0644u);
}

TEST(AtomicWriteFileTest, DefaultModeIs0644) {
  TempDir dir;
  const std::string path = dir.Join("f");
  ASSERT_THAT(AtomicWriteFile(path, ""), IsOk());
  EXPECT_EQ(ModeOf(path), 0644u);
  EXPECT_EQ(ReadOrEmpty(path), "");
}

TEST(AtomicWriteFileTest, ReplacesExistingContentAndMode) {
  TempDir dir;
  const std::string path = dir.Join("state.json");
  ASSERT_THAT(AtomicWriteFile(path, "a much longer first version", {.mode = 0600}), IsOk());
  ASSERT_THAT(AtomicWriteFile(path, "short", {.mode = 0640}), IsOk());
  EXPECT_EQ(ReadOrEmpty(path), "short");
  EXPECT_EQ(ModeOf(path), 0640u);
  EXPECT_THAT(List(dir.path()), ElementsAre("state.json"));
}

TEST(AtomicWriteFileTest, WithoutSync) {
  TempDir dir;
  const std::string path = dir.Join("counter");
  ASSERT_THAT(AtomicWriteFile(path, "42", {.sync = false}), IsOk());
  EXPECT_EQ(ReadOrEmpty(path), "42");
}

TEST(AtomicWriteFileTest, LargeContent) {
  TempDir dir;
  const std::string path = dir.Join("big");
  std::string data;
  for (int i = 0; i < 100000; ++i) data += static_cast<char>('a' + i % 26);
  data += '\0';
  data += "tail";
  ASSERT_THAT(AtomicWriteFile(path, data), IsOk());
  EXPECT_EQ(ReadOrEmpty(path), data);
}

TEST(AtomicWriteFileTest, RefusesASymlinkAndLeavesItsTargetAlone) {
  TempDir dir;
  const std::string target = dir.Join("target");
  const std::string link = dir.Join("link");
  WriteFileOrDie(target, "original");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_THAT(AtomicWriteFile(link, "attacker"),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
  EXPECT_EQ(ReadOrEmpty(target), "original");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(fs::read_symlink(link).string(), target);
  EXPECT_THAT(List(dir.path()), UnorderedElementsAre("target", "link"));
}

TEST(AtomicWriteFileTest, RefusesADanglingSymlink) {
  TempDir dir;
  const std::string link = dir.Join("link");
  ASSERT_EQ(::symlink(dir.Join("nowhere").c_str(), link.c_str()), 0);
  EXPECT_THAT(AtomicWriteFile(link, "x"),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr(link)));
  EXPECT_FALSE(fs::exists(dir.Join("nowhere")));
}

TEST(AtomicWriteFileTest, RefusesADirectory) {
  TempDir dir;
  const std::string sub = dir.Join("sub");
  ASSERT_TRUE(fs::create_directory(sub));
  EXPECT_THAT(AtomicWriteFile(sub, "x"),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not a regular file")));
  EXPECT_TRUE(fs::is_directory(sub));
  EXPECT_THAT(List(dir.path()), ElementsAre("sub"));
}

TEST(AtomicWriteFileTest, RefusesAFifo) {
  TempDir dir;
  const std::string fifo = dir.Join("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(AtomicWriteFile(fifo, "x"), StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
}

TEST(AtomicWriteFileTest, RejectsBadPaths) {
  EXPECT_THAT(AtomicWriteFile("", "x"), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  TempDir dir;
  EXPECT_THAT(AtomicWriteFile(dir.path() + "/", "x"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr(dir.path())));
}

TEST(AtomicWriteFileTest, MissingDirectoryFailsWithoutLeftovers) {
  TempDir dir;
  const std::string path = dir.Join("missing/state.json");
  EXPECT_THAT(AtomicWriteFile(path, "x"), StatusIs(StatusCode::kNotFound, HasSubstr("missing")));
  EXPECT_THAT(List(dir.path()), IsEmpty());
}

// The write runs without root's privileges (testing/privileges.h), so the
// directory's permission bits bind it as they bind any user.
TEST(AtomicWriteFileTest, ReadOnlyDirectoryFailsWithoutLeftovers) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string ro = dir.Join("ro");
  ASSERT_TRUE(fs::create_directory(ro));
  WriteFileOrDie(ro + "/state.json", "old");
  ASSERT_EQ(::chmod((ro + "/state.json").c_str(), 0644), 0);
  ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);
  EXPECT_THAT(migd::testing::RunUnprivileged(
                  [&] { return AtomicWriteFile(ro + "/state.json", "new"); }),
              StatusIs(StatusCode::kPermissionDenied, HasSubstr(ro)));
  ::chmod(ro.c_str(), 0700);
  EXPECT_EQ(ReadOrEmpty(ro + "/state.json"), "old");
  EXPECT_THAT(List(ro), ElementsAre("state.json"));
}

// A write that fails half-way (file size limit) must keep the old content and
// remove the temporary file. Works as root, unlike a permission failure.
TEST(AtomicWriteFileTest, FailedWriteKeepsOldContentAndRemovesTheTempFile) {
  TempDir dir;
  const std::string path = dir.Join("state.json");
  WriteFileOrDie(path, "old");
  const std::string big(64 * 1024, 'x');

  struct sigaction ignore {};
  struct sigaction old_action {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &old_action), 0);
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  // Nothing else may write a file until the limit is restored.
  const Status s = AtomicWriteFile(path, big);
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &old_action, nullptr);

  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("writing"));
  EXPECT_EQ(ReadOrEmpty(path), "old");
  EXPECT_THAT(List(dir.path()), ElementsAre("state.json"));
}

TEST(ReadFileToStringTest, ReadsWholeFile) {
  TempDir dir;
  const std::string path = dir.Join("f");
  WriteFileOrDie(path, "line 1\nline 2\n");
  StatusOr<std::string> s = ReadFileToString(path);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(*s, "line 1\nline 2\n");
  WriteFileOrDie(dir.Join("empty"), "");
  EXPECT_EQ(ReadOrEmpty(dir.Join("empty")), "");
}

TEST(ReadFileToStringTest, NotFound) {
  TempDir dir;
  EXPECT_THAT(ReadFileToString(dir.Join("absent")),
              StatusIs(StatusCode::kNotFound, HasSubstr("absent")));
}

TEST(ReadFileToStringTest, RefusesASymlink) {
  TempDir dir;
  WriteFileOrDie(dir.Join("target"), "secret");
  ASSERT_EQ(::symlink(dir.Join("target").c_str(), dir.Join("link").c_str()), 0);
  EXPECT_THAT(ReadFileToString(dir.Join("link")),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
}

TEST(ReadFileToStringTest, RefusesNonRegularFiles) {
  TempDir dir;
  EXPECT_THAT(ReadFileToString(dir.path()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not a regular file")));
  // A FIFO without a writer must not block the reader.
  ASSERT_EQ(::mkfifo(dir.Join("fifo").c_str(), 0600), 0);
  EXPECT_THAT(ReadFileToString(dir.Join("fifo")),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not a regular file")));
}

TEST(ReadFileToStringTest, NamesTheFileTypeItRefuses) {
  TempDir dir;
  EXPECT_THAT(ReadFileToString(dir.path()),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(dir.path()), HasSubstr("is a directory"))));
  ASSERT_EQ(::mkfifo(dir.Join("fifo").c_str(), 0600), 0);
  EXPECT_THAT(ReadFileToString(dir.Join("fifo")),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is a FIFO")));
}

// A FIFO that has a writer: the reader must still refuse it (not wait for the
// writer to close, not return its data).
TEST(ReadFileToStringTest, RefusesAFifoThatHasAWriter) {
  TempDir dir;
  const std::string fifo = dir.Join("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(rd, 0);
  const int wr = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(wr, 0);
  ASSERT_EQ(::write(wr, "data", 4), 4);
  EXPECT_THAT(ReadFileToString(fifo), StatusIs(StatusCode::kFailedPrecondition,
                                                HasSubstr("not a regular file")));
  ::close(wr);
  ::close(rd);
}

// Opening a unix socket fails with ENXIO; the type check must come first so
// the caller learns what the entry is rather than an OS error.
TEST(ReadFileToStringTest, RefusesASocketWithoutOpeningIt) {
  TempDir dir;
  const std::string path = dir.Join("sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_THAT(ReadFileToString(path),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is a socket")));
  ::close(fd);
}

// A device node is refused before open(2): opening one can have effects (a
// tty becomes the controlling terminal, a watchdog starts). With CAP_MKNOD
// (root, as CI runs) the node has a major number without a driver, so an
// open would fail with ENXIO (kInternal) instead of the type error; without
// it the test reads /dev/null, which every Linux has, for the type check.
TEST(ReadFileToStringTest, RefusesADeviceNodeWithoutOpeningIt) {
  EXPECT_THAT(ReadFileToString("/dev/null"),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is a character device")));
  if (!migd::testing::HasCapability(migd::testing::kCapMknod)) return;
  TempDir dir;
  const std::string path = dir.Join("dev");
  ASSERT_EQ(::mknod(path.c_str(), S_IFCHR | 0600, ::makedev(511, 0)), 0) << std::strerror(errno);
  EXPECT_THAT(ReadFileToString(path),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is a character device")));
  const std::string null_like = dir.Join("null");
  ASSERT_EQ(::mknod(null_like.c_str(), S_IFCHR | 0600, ::makedev(1, 3)), 0);
  EXPECT_THAT(ReadFileToString(null_like),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is a character device")));
}

// A sparse file far over the cap is refused from its size, without reading
// it.
TEST(ReadFileToStringTest, HugeSparseFileIsRefusedFromItsSize) {
  TempDir dir;
  const std::string path = dir.Join("huge");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);
  ::close(fd);
  EXPECT_THAT(ReadFileToString(path),
              StatusIs(StatusCode::kOutOfRange,
                       AllOf(HasSubstr(path), HasSubstr(std::to_string(16 << 20)))));
}

TEST(ReadFileToStringTest, ReturnsNulBytesAndInvalidUtf8Unchanged) {
  TempDir dir;
  const std::string path = dir.Join("binary");
  const std::string content("a\0b\xff\xfe\xc3(\0", 8);
  WriteFileOrDie(path, content);
  StatusOr<std::string> s = ReadFileToString(path);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(*s, content);
}

// Root reads any file, so the check runs as "nobody" in a child process
// (directly when the test itself is not root).
TEST(ReadFileToStringTest, UnreadableFileIsPermissionDeniedNamingThePath) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string path = dir.Join("secret");
  WriteFileOrDie(path, "x");
  ASSERT_EQ(::chmod(path.c_str(), 0000), 0);
  auto check = [&path] {
    StatusOr<std::string> r = ReadFileToString(path);
    return !r.ok() && r.status().code() == StatusCode::kPermissionDenied &&
           r.status().message().find(path) != std::string_view::npos;
  };
  if (::geteuid() != 0) {
    EXPECT_TRUE(check());
    return;
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    ::_exit(check() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: wrong status, 2: could not drop privileges";
}

TEST(ReadFileToStringTest, TooLargeIsOutOfRange) {
  TempDir dir;
  const std::string path = dir.Join("f");
  WriteFileOrDie(path, "0123456789");
  EXPECT_THAT(ReadFileToString(path, 9), StatusIs(StatusCode::kOutOfRange, HasSubstr("9 bytes")));
  StatusOr<std::string> exact = ReadFileToString(path, 10);
  ASSERT_THAT(exact, IsOk());
  EXPECT_EQ(*exact, "0123456789");
  // Past the limit in a later chunk of a multi-chunk read.
  const std::string big(40000, 'y');
  WriteFileOrDie(path, big);
  EXPECT_THAT(ReadFileToString(path, 39999), StatusIs(StatusCode::kOutOfRange, ::testing::_));
  EXPECT_EQ(ReadOrEmpty(path), big);
}

// Kubernetes' service-account layout: token -> ..data/token.
TEST(ReadFileFollowingSymlinksTest, FollowsTheLinkButKeepsEveryOtherCheck) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.Join("..data").c_str(), 0755), 0);
  WriteFileOrDie(dir.Join("..data/token"), "secret-token");
  ASSERT_EQ(::symlink("..data/token", dir.Join("token").c_str()), 0);
  StatusOr<std::string> s = ReadFileFollowingSymlinks(dir.Join("token"));
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(*s, "secret-token");
  EXPECT_THAT(ReadFileToString(dir.Join("token")),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));

  ASSERT_EQ(::mkfifo(dir.Join("fifo").c_str(), 0600), 0);
  ASSERT_EQ(::symlink(dir.Join("fifo").c_str(), dir.Join("to-fifo").c_str()), 0);
  EXPECT_THAT(ReadFileFollowingSymlinks(dir.Join("to-fifo")),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is a FIFO")));
  ASSERT_EQ(::symlink(dir.path().c_str(), dir.Join("to-dir").c_str()), 0);
  EXPECT_THAT(ReadFileFollowingSymlinks(dir.Join("to-dir")),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is a directory")));
  WriteFileOrDie(dir.Join("big"), std::string(100, 'x'));
  ASSERT_EQ(::symlink(dir.Join("big").c_str(), dir.Join("to-big").c_str()), 0);
  EXPECT_THAT(ReadFileFollowingSymlinks(dir.Join("to-big"), 99),
              StatusIs(StatusCode::kOutOfRange, HasSubstr("larger than 99 bytes")));
  ASSERT_EQ(::symlink(dir.Join("absent").c_str(), dir.Join("dangling").c_str()), 0);
  EXPECT_THAT(ReadFileFollowingSymlinks(dir.Join("dangling")),
              StatusIs(StatusCode::kNotFound, HasSubstr(dir.Join("dangling"))));
}

TEST(RemoveFileTest, RemovesAFile) {
  TempDir dir;
  WriteFileOrDie(dir.Join("f"), "x");
  EXPECT_THAT(RemoveFile(dir.Join("f")), IsOk());
  EXPECT_THAT(List(dir.path()), IsEmpty());
  EXPECT_THAT(RemoveFile(dir.Join("f")), StatusIs(StatusCode::kNotFound, ::testing::_));
}

TEST(RemoveFileTest, RefusesADirectory) {
  TempDir dir;
  ASSERT_TRUE(fs::create_directory(dir.Join("sub")));
  EXPECT_FALSE(RemoveFile(dir.Join("sub")).ok());
  EXPECT_TRUE(fs::is_directory(dir.Join("sub")));
}

TEST(MakeDirectoriesTest, CreatesMissingParents) {
  TempDir dir;
  const std::string deep = dir.Join("a/b/c");
  ASSERT_THAT(MakeDirectories(deep, 0750), IsOk());
  EXPECT_TRUE(fs::is_directory(deep));
  EXPECT_THAT(MakeDirectories(deep), IsOk());  // existing is fine
  EXPECT_THAT(MakeDirectories(dir.Join("a/b/")), IsOk());
}

TEST(MakeDirectoriesTest, FailsOnAFileInTheWay) {
  TempDir dir;
  WriteFileOrDie(dir.Join("file"), "x");
  EXPECT_THAT(MakeDirectories(dir.Join("file")),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not a directory")));
  EXPECT_THAT(MakeDirectories(dir.Join("file/sub")),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(MakeDirectories(""), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

TEST(SyncDirectoryTest, SyncsAnExistingDirectory) {
  TempDir dir;
  EXPECT_THAT(SyncDirectory(dir.path()), IsOk());
  EXPECT_THAT(SyncDirectory(dir.Join("absent")), StatusIs(StatusCode::kNotFound, ::testing::_));
}

TEST(ErrnoToStatusTest, MapsCommonErrors) {
  EXPECT_THAT(ErrnoToStatus(ENOENT, "opening /x"),
              StatusIs(StatusCode::kNotFound, HasSubstr("opening /x: ")));
  EXPECT_EQ(ErrnoToStatus(EACCES, "x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoToStatus(EPERM, "x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoToStatus(ELOOP, "x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrnoToStatus(EEXIST, "x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrnoToStatus(ENOSPC, "x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoToStatus(EAGAIN, "x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(ErrnoToStatus(EBADF, "x").code(), StatusCode::kInternal);
}

TEST(ListDirectoryTest, ListsEveryEntryButDotAndDotDotSorted) {
  TempDir dir;
  WriteFileOrDie(dir.Join("b.json"), "");
  WriteFileOrDie(dir.Join(".a.json.1.2.tmp"), "");
  ASSERT_EQ(::mkdir(dir.Join("c").c_str(), 0700), 0);
  StatusOr<std::vector<std::string>> names = ListDirectory(dir.path());
  ASSERT_THAT(names, IsOk());
  EXPECT_THAT(*names, ElementsAre(".a.json.1.2.tmp", "b.json", "c"));
}

TEST(ListDirectoryTest, AMissingDirectoryIsNotFoundNamingWhatItIs) {
  TempDir dir;
  EXPECT_THAT(ListDirectory(dir.Join("none"), "state directory").status(),
              StatusIs(StatusCode::kNotFound,
                       HasSubstr("opening state directory " + dir.Join("none"))));
}

// The names AtomicWriteFile gives its temporary files, and near misses.
TEST(IsAtomicWriteTempNameTest, MatchesOnlyTheTempNameOfAFileWithTheSuffix) {
  EXPECT_TRUE(IsAtomicWriteTempName(".r.json.123.4.tmp", ".json"));
  EXPECT_TRUE(IsAtomicWriteTempName(".r.json.1.0.part", ".json", ".part"));
  EXPECT_FALSE(IsAtomicWriteTempName("r.json.123.4.tmp", ".json"));   // no leading dot
  EXPECT_FALSE(IsAtomicWriteTempName(".r.json.x.4.tmp", ".json"));    // pid not digits
  EXPECT_FALSE(IsAtomicWriteTempName(".r.json.123.tmp", ".json"));    // one number only
  EXPECT_FALSE(IsAtomicWriteTempName("..json.123.4.tmp", ".json"));   // empty base
  EXPECT_FALSE(IsAtomicWriteTempName(".r.yaml.123.4.tmp", ".json"));  // other suffix
  EXPECT_FALSE(IsAtomicWriteTempName(".r.json.123.4", ".json"));      // no temp suffix
}

}  // namespace
}  // namespace migd
