// Hostile entries in the files and directories the real migd reads at
// startup: stateDir, cdi.specDir and the
// config file holding FIFOs, device nodes, symlinks, huge sparse files,
// empty files, NUL bytes, junk names; a spec dir others can write. migd must
// start without hanging and leave what is not its own alone, or refuse to
// start with an error that names the path and the fix.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "migd/v1/migd.grpc.pb.h"
#include "store/record.h"
#include "testing/daemon_process.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

namespace fs = std::filesystem;
using ::migd::testing::DaemonExit;
using ::migd::testing::DaemonOptions;
using ::migd::testing::DaemonProcess;
using ::migd::testing::TempDir;
using ::migd::testing::WriteFileOrDie;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kGpu[] = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";
// Exit codes of migd (daemon/daemon.h).
constexpr int kExitConfig = 1;
constexpr int kExitStartup = 6;

std::string RecordName(uint32_t start) {
  store::RecordKey key{GpuUuid(kGpu), GiProfileId(19), {.start = start, .size = 1}};
  return store::RecordFileName(key).value();
}

void MakeSparse(const std::string& path, off_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::ftruncate(fd, size), 0);
  ::close(fd);
}

// A char device like /dev/null; false without CAP_MKNOD.
bool MakeCharDevice(const std::string& path) {
  return ::mknod(path.c_str(), S_IFCHR | 0600, ::makedev(1, 3)) == 0;
}

bool IsFifo(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

class HostileFilesTest : public ::testing::Test {
 protected:
  std::string Socket() const { return dir_.Join("api.socket"); }
  std::string StateDir() const { return dir_.Join("state"); }
  std::string CdiDir() const { return dir_.Join("cdi"); }

  std::vector<std::string> Args() const {
    return {"--simulate",       "a100-40gb:1", "--socket",       Socket(),
            "--state-dir",      StateDir(),    "--cdi-spec-dir", CdiDir(),
            "--metrics-listen", "127.0.0.1:0", "--log-level",    "info"};
  }

  DaemonOptions Options(std::vector<std::string> args) const {
    DaemonOptions o;
    o.args = std::move(args);
    o.env = migd::testing::SimulatedMachineEnv(dir_.Join("sim"));
    return o;
  }

  std::unique_ptr<DaemonProcess> Start(std::vector<std::string> args) {
    DaemonOptions o = Options(std::move(args));
    o.socket_path = Socket();
    StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }

  DaemonExit RunToExit(std::vector<std::string> args) {
    StatusOr<std::unique_ptr<DaemonProcess>> d =
        DaemonProcess::Start(Options(std::move(args)), dir_.path());
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return {};
    return (*d)->WaitForExit();
  }

  grpc::Status Allocate(const std::string& request_id, v1::AllocateResponse* resp) {
    auto stub = v1::MigManager::NewStub(
        grpc::CreateChannel("unix:" + Socket(), grpc::InsecureChannelCredentials()));
    v1::AllocateRequest req;
    req.set_request_id(request_id);
    req.mutable_owner()->set_opaque_id("job");
    req.add_instances()->set_profile("1g.5gb");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub->Allocate(&ctx, req, resp);
  }

  void StopCleanly(DaemonProcess& migd) {
    const DaemonExit exit = migd.Stop();
    EXPECT_EQ(exit.exit_code, 0) << exit.err;
    EXPECT_THAT(exit.err, Not(HasSubstr(" critical ")));
  }

  TempDir dir_;
};

TEST_F(HostileFilesTest, StateDirEntriesOfEveryShapeAreReportedAndNoneHangsStartup) {
  ASSERT_EQ(::mkdir(StateDir().c_str(), 0700), 0);
  const std::string s = StateDir() + "/";
  ASSERT_EQ(::mkfifo((s + RecordName(0)).c_str(), 0600), 0);
  const bool have_dev = MakeCharDevice(s + RecordName(1));
  ASSERT_EQ(::symlink("/etc/passwd", (s + RecordName(2)).c_str()), 0);
  WriteFileOrDie(s + RecordName(3), "");
  MakeSparse(s + RecordName(4), off_t{1} << 40);
  WriteFileOrDie(s + RecordName(5), std::string("{\"version\":1,\0\xff", 15));
  WriteFileOrDie(s + "junk\nname", "x");
  ASSERT_EQ(::mkdir((s + RecordName(6)).c_str(), 0700), 0);

  std::unique_ptr<DaemonProcess> migd = Start(Args());
  ASSERT_NE(migd, nullptr);
  const std::string err = migd->Stderr();
  EXPECT_THAT(err, HasSubstr("file=" + RecordName(0) + " problem=not_regular"));
  if (have_dev) {
    EXPECT_THAT(err, HasSubstr("file=" + RecordName(1) + " problem=not_regular"));
  }
  EXPECT_THAT(err, HasSubstr("file=" + RecordName(2) + " problem=symlink"));
  EXPECT_THAT(err, HasSubstr("file=" + RecordName(3) + " problem=corrupt"));
  EXPECT_THAT(err, HasSubstr("file=" + RecordName(4) + " problem=too_large"));
  EXPECT_THAT(err, HasSubstr("file=" + RecordName(5) + " problem=corrupt"));
  EXPECT_THAT(err, HasSubstr("file=" + RecordName(6) + " problem=not_regular"));
  // Not ours: left exactly where they were; bad records moved to quarantine.
  EXPECT_TRUE(IsFifo(s + RecordName(0)));
  EXPECT_EQ(have_dev, fs::exists(fs::symlink_status(s + RecordName(1))));
  EXPECT_TRUE(fs::is_symlink(s + RecordName(2)));
  EXPECT_TRUE(fs::exists(s + "junk\nname"));
  EXPECT_FALSE(fs::exists(s + RecordName(3)));
  EXPECT_FALSE(fs::exists(s + RecordName(4)));

  v1::AllocateResponse resp;
  const grpc::Status st = Allocate("r1", &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  StopCleanly(*migd);
}

// Thousands of junk entries are all quarantined or left alone, but the log
// names only the first 100 and counts the rest.
TEST_F(HostileFilesTest, ManyJunkEntriesDoNotFloodTheLog) {
  ASSERT_EQ(::mkdir(StateDir().c_str(), 0700), 0);
  for (int i = 0; i < 250; ++i) {
    WriteFileOrDie(StateDir() + "/junk-" + std::to_string(i), "x");
  }
  std::unique_ptr<DaemonProcess> migd = Start(Args());
  ASSERT_NE(migd, nullptr);
  const std::string err = migd->Stderr();
  size_t lines = 0;
  for (size_t pos = err.find("state dir entry not loaded"); pos != std::string::npos;
       pos = err.find("state dir entry not loaded", pos + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 100u);
  EXPECT_THAT(err, HasSubstr("more state dir entries not loaded (not listed) listed=100 "
                             "not_listed=150"));
  StopCleanly(*migd);
}

TEST_F(HostileFilesTest, SpecDirWritableByOthersIsRefusedWithTheFix) {
  for (mode_t mode : {0777, 0775, 0757}) {
    ASSERT_EQ(::mkdir(CdiDir().c_str(), 0700), 0);
    ASSERT_EQ(::chmod(CdiDir().c_str(), mode), 0);
    const DaemonExit exit = RunToExit(Args());
    EXPECT_EQ(exit.exit_code, kExitStartup) << exit.err;
    EXPECT_THAT(exit.err, HasSubstr("cdi.specDir " + CdiDir() + " is writable by group or others"));
    EXPECT_THAT(exit.err, HasSubstr("chmod go-w " + CdiDir()));
    EXPECT_TRUE(fs::is_empty(CdiDir()));
    EXPECT_FALSE(fs::exists(Socket()));
    fs::remove(CdiDir());
  }
}

TEST_F(HostileFilesTest, SymlinkedSpecDirIsRefused) {
  ASSERT_EQ(::mkdir(dir_.Join("real-cdi").c_str(), 0755), 0);
  ASSERT_EQ(::symlink(dir_.Join("real-cdi").c_str(), CdiDir().c_str()), 0);
  const DaemonExit exit = RunToExit(Args());
  EXPECT_EQ(exit.exit_code, kExitStartup) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("cdi.specDir " + CdiDir() + " is a symbolic link"));
  EXPECT_TRUE(fs::is_empty(dir_.Join("real-cdi")));
}

TEST_F(HostileFilesTest, StickySpecDirStartsWithAWarning) {
  ASSERT_EQ(::mkdir(CdiDir().c_str(), 0700), 0);
  ASSERT_EQ(::chmod(CdiDir().c_str(), 01777), 0);
  std::unique_ptr<DaemonProcess> migd = Start(Args());
  ASSERT_NE(migd, nullptr);
  EXPECT_THAT(migd->Stderr(), HasSubstr("cdi.specDir " + CdiDir() + " is writable by group"));
  EXPECT_THAT(migd->Stderr(), HasSubstr("chmod 0755 " + CdiDir()));
  StopCleanly(*migd);
}

// The collision check reads every *.json / *.yaml in the spec dir on each
// write, and the startup sweep lists it: neither may block on a FIFO, open a
// device, read a terabyte or touch what is not migd's.
TEST_F(HostileFilesTest, SpecDirEntriesOfEveryShapeNeitherHangNorBreakAllocate) {
  ASSERT_EQ(::mkdir(CdiDir().c_str(), 0755), 0);
  const std::string c = CdiDir() + "/";
  const std::string ours_fifo = "hami.io-mig_MIG-11111111-2222-5333-8444-555555555555.json";
  const std::string temp_fifo = "." + ours_fifo + ".999999999.0.tmp";
  ASSERT_EQ(::mkfifo((c + "fifo.json").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((c + "fifo.yaml").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((c + ours_fifo).c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((c + temp_fifo).c_str(), 0600), 0);
  const bool have_dev = MakeCharDevice(c + "dev.yaml");
  MakeSparse(c + "huge.json", off_t{1} << 40);
  WriteFileOrDie(c + "nul.yaml", std::string("kind: hami.io/mig\0\xff\xfe", 20));
  WriteFileOrDie(c + "deep.yaml", std::string(100000, '['));
  WriteFileOrDie(c + "empty.json", "");
  ASSERT_EQ(::symlink("/etc/passwd", (c + "link.json").c_str()), 0);
  ASSERT_EQ(::mkdir((c + "dir.json").c_str(), 0755), 0);

  std::unique_ptr<DaemonProcess> migd = Start(Args());
  ASSERT_NE(migd, nullptr);
  v1::AllocateResponse resp;
  const grpc::Status st = Allocate("r1", &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.instances_size(), 1);
  const std::string spec = c + "hami.io-mig_" + resp.instances(0).instance().mig_uuid() + ".json";
  MIGD_ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(spec));
  EXPECT_THAT(text, HasSubstr(resp.instances(0).instance().mig_uuid()));
  for (const std::string& fifo :
       std::vector<std::string>{"fifo.json", "fifo.yaml", ours_fifo, temp_fifo}) {
    EXPECT_TRUE(IsFifo(c + fifo)) << fifo;
  }
  EXPECT_EQ(have_dev, fs::exists(fs::symlink_status(c + "dev.yaml")));
  EXPECT_EQ(fs::file_size(c + "huge.json"), uintmax_t{1} << 40);
  EXPECT_TRUE(fs::is_symlink(c + "link.json"));
  EXPECT_TRUE(fs::is_directory(c + "dir.json"));
  StopCleanly(*migd);
}

TEST_F(HostileFilesTest, ConfigOfTheWrongShapeIsRefusedAtOnce) {
  const std::string fifo = dir_.Join("fifo.yaml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::vector<std::string> args = Args();
  args.insert(args.end(), {"--config", fifo});
  DaemonExit exit = RunToExit(args);
  EXPECT_EQ(exit.exit_code, kExitConfig) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr(fifo));
  EXPECT_THAT(exit.err, HasSubstr("not a regular file"));

  const std::string huge = dir_.Join("huge.yaml");
  MakeSparse(huge, off_t{1} << 40);
  args = Args();
  args.insert(args.end(), {"--config", huge});
  exit = RunToExit(args);
  EXPECT_EQ(exit.exit_code, kExitConfig) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr(huge + " is larger than"));

  const std::string nul = dir_.Join("nul.yaml");
  WriteFileOrDie(nul, std::string("log:\n  level: info\0\nbogusKey: 1\n", 32));
  args = Args();
  args.insert(args.end(), {"--config", nul});
  exit = RunToExit(args);
  EXPECT_EQ(exit.exit_code, kExitConfig) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr(nul));
}

}  // namespace
}  // namespace migd
