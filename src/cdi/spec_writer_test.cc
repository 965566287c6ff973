#include "cdi/spec_writer.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <thread>

#include "base/file_util.h"
#include "cdi/cdi_test_util.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::cdi {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::migd::testing::TempDir;
using ::migd::testing::WriteFileOrDie;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::kMigUuid;
using testing::kMigUuid2;

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class SpecWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFakeProc(dir_.Join("proc"));
    testing::AddStandardNodes(&reader_, dir_.Join("dev"));
    builder_options_.proc_root = dir_.Join("proc");
    builder_options_.dev_root = dir_.Join("dev");
    writer_options_.spec_dir = spec_dir();
    writer_options_.sync = false;
  }
  std::string spec_dir() const { return dir_.Join("cdi"); }
  BuiltSpec MustBuild(const std::string& uuid = kMigUuid, uint32_t ci = 1) {
    MigInstance instance = testing::StandardInstance();
    instance.mig_uuid = MigUuid(uuid);
    instance.ci_id = NvmlCiId(ci);
    StatusOr<BuiltSpec> built = SpecBuilder(builder_options_, &reader_).Build(instance);
    EXPECT_TRUE(built.ok()) << built.status();
    return built.ok() ? *built : BuiltSpec{};
  }
  std::string OurFile(const std::string& uuid = kMigUuid) const {
    return "hami.io-mig_" + uuid + ".json";
  }

  TempDir dir_;
  testing::FakeHostReader reader_;
  BuilderOptions builder_options_;
  WriterOptions writer_options_;
};

TEST_F(SpecWriterTest, WritesNamedFileWithMode0644AndNoTempLeft) {
  SpecWriter writer(writer_options_);
  const BuiltSpec built = MustBuild();
  ASSERT_THAT(writer.Write(built), IsOk());  // also creates spec_dir
  EXPECT_EQ(writer.PathFor(kMigUuid), spec_dir() + "/" + OurFile());
  EXPECT_THAT(Entries(spec_dir()), ElementsAre(OurFile()));
  struct stat st {};
  ASSERT_EQ(::stat(writer.PathFor(kMigUuid).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  MIGD_ASSERT_OK_AND_ASSIGN(std::string content, ReadFileToString(writer.PathFor(kMigUuid)));
  EXPECT_EQ(content, built.content);
  EXPECT_THAT(testing::ValidateAgainstSchema(content), IsOk());
  // Rewrite in place (same name) is fine.
  EXPECT_THAT(writer.Write(built), IsOk());
  EXPECT_THAT(Entries(spec_dir()), ElementsAre(OurFile()));
}

TEST_F(SpecWriterTest, RefusesWrongKindAndBadNames) {
  SpecWriter writer(writer_options_);
  BuiltSpec built = MustBuild();
  built.spec.kind = "nvidia.com/gpu";
  EXPECT_THAT(writer.Write(built), StatusIs(StatusCode::kInvalidArgument, HasSubstr("kind")));
  built = MustBuild();
  built.device_name = "MIG-GPU-x/1/2";
  EXPECT_THAT(writer.Write(built), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'/'")));
  WriterOptions bad = writer_options_;
  bad.kind = Kind{"hami.io", "-mig"};
  EXPECT_THAT(SpecWriter(bad).Write(MustBuild()),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("class")));
  EXPECT_THAT(writer.Verify("bad/name", ""),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("/")));
  EXPECT_THAT(writer.Remove("=x"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("device")));
}

TEST_F(SpecWriterTest, RefusesSymlinkedEntry) {
  ASSERT_THAT(MakeDirectories(spec_dir()), IsOk());
  const std::string target = dir_.Join("elsewhere.json");
  WriteFileOrDie(target, "{}");
  ASSERT_EQ(::symlink(target.c_str(), (spec_dir() + "/" + OurFile()).c_str()), 0);
  SpecWriter writer(writer_options_);
  EXPECT_THAT(writer.Write(MustBuild()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
  EXPECT_THAT(writer.Verify(kMigUuid, "{}"),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
  EXPECT_THAT(writer.Remove(kMigUuid),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
  EXPECT_THAT(writer.PendingRemovals(), IsEmpty());
  MIGD_ASSERT_OK_AND_ASSIGN(std::string content, ReadFileToString(target));
  EXPECT_EQ(content, "{}");  // never followed
  // A directory at our name is refused too.
  std::filesystem::remove(spec_dir() + "/" + OurFile());
  std::filesystem::create_directory(spec_dir() + "/" + OurFile());
  EXPECT_THAT(writer.Write(MustBuild()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not a regular file")));
}

TEST_F(SpecWriterTest, ReportsCollisionWithAnotherFileDefiningTheDevice) {
  ASSERT_THAT(MakeDirectories(spec_dir()), IsOk());
  SpecWriter writer(writer_options_);
  // Same kind + device in a YAML file of another writer.
  const std::string other = spec_dir() + "/other.yaml";
  WriteFileOrDie(other, std::string("cdiVersion: 0.5.0\nkind: hami.io/mig\ndevices:\n- name: ") +
                            kMigUuid + "\n  containerEdits:\n    env: [A=b]\n");
  EXPECT_THAT(writer.Write(MustBuild()),
              StatusIs(StatusCode::kAlreadyExists,
                       ::testing::AllOf(HasSubstr(other), HasSubstr("hami.io/mig="))));
  EXPECT_THAT(Entries(spec_dir()), ElementsAre("other.yaml"));  // nothing written
  // Same device name under another kind, or an unparsable file: no collision.
  WriteFileOrDie(other, std::string("{\"cdiVersion\":\"0.5.0\",\"kind\":\"nvidia.com/gpu\","
                                    "\"devices\":[{\"name\":\"") +
                            kMigUuid + "\"}]}");
  WriteFileOrDie(spec_dir() + "/garbage.json", std::string("{ ") + kMigUuid);
  EXPECT_THAT(writer.Write(MustBuild()), IsOk());
  // A JSON file of the same kind naming the device collides as well.
  WriteFileOrDie(spec_dir() + "/dup.json",
                 std::string("{\"cdiVersion\":\"0.5.0\",\"kind\":"
                             "\"hami.io/mig\",\"devices\":[{\"name\":\"") +
                     kMigUuid + "\"}]}");
  EXPECT_THAT(writer.Write(MustBuild()),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("dup.json")));
}

TEST_F(SpecWriterTest, VerifyReportsMatchMissingAndDiffers) {
  SpecWriter writer(writer_options_);
  const BuiltSpec built = MustBuild();
  MIGD_ASSERT_OK_AND_ASSIGN(VerifyResult r, writer.Verify(kMigUuid, built.content));
  EXPECT_EQ(r, VerifyResult::kMissing);
  ASSERT_THAT(writer.Write(built), IsOk());
  MIGD_ASSERT_OK_AND_ASSIGN(r, writer.Verify(kMigUuid, built.content));
  EXPECT_EQ(r, VerifyResult::kMatches);
  const BuiltSpec other_ci = MustBuild(kMigUuid, 0);
  MIGD_ASSERT_OK_AND_ASSIGN(r, writer.Verify(kMigUuid, other_ci.content));
  EXPECT_EQ(r, VerifyResult::kDiffers);
}

TEST_F(SpecWriterTest, RemoveIsIdempotentAndFailedRemovalsAreRetried) {
  int failures_left = 2;
  writer_options_.unlink = [&failures_left](const std::string& path) {
    if (failures_left > 0) {
      --failures_left;
      errno = EBUSY;
      return -1;
    }
    return ::unlink(path.c_str());
  };
  SpecWriter writer(writer_options_);
  ASSERT_THAT(writer.Write(MustBuild()), IsOk());
  EXPECT_THAT(writer.Remove(kMigUuid), StatusIs(StatusCode::kInternal, HasSubstr(OurFile())));
  EXPECT_THAT(writer.PendingRemovals(), ElementsAre(kMigUuid));
  EXPECT_THAT(writer.RetryPendingRemovals(),
              StatusIs(StatusCode::kInternal, HasSubstr("1 CDI spec removal(s) pending")));
  EXPECT_THAT(writer.RetryPendingRemovals(), IsOk());
  EXPECT_THAT(writer.PendingRemovals(), IsEmpty());
  EXPECT_THAT(Entries(spec_dir()), IsEmpty());
  EXPECT_THAT(writer.Remove(kMigUuid), IsOk());  // absent: fine
}

TEST_F(SpecWriterTest, WritingADeviceCancelsItsPendingRemoval) {
  bool fail = true;
  writer_options_.unlink = [&fail](const std::string& path) {
    if (fail) {
      errno = EIO;
      return -1;
    }
    return ::unlink(path.c_str());
  };
  SpecWriter writer(writer_options_);
  ASSERT_THAT(writer.Write(MustBuild()), IsOk());
  EXPECT_THAT(writer.Remove(kMigUuid), StatusIs(StatusCode::kUnavailable, HasSubstr("removing")));
  ASSERT_THAT(writer.Write(MustBuild()), IsOk());
  EXPECT_THAT(writer.PendingRemovals(), IsEmpty());
  fail = false;
  EXPECT_THAT(writer.RetryPendingRemovals(), IsOk());
  EXPECT_THAT(Entries(spec_dir()), ElementsAre(OurFile()));
}

TEST_F(SpecWriterTest, SweepRemovesOnlyOurDeadFilesAndReportsMissing) {
  SpecWriter writer(writer_options_);
  ASSERT_THAT(writer.Write(MustBuild(kMigUuid)), IsOk());
  ASSERT_THAT(writer.Write(MustBuild(kMigUuid2)), IsOk());
  const std::string live3 = "MIG-11111111-2222-5333-8444-555555555555";
  // Not ours: other kinds, other extensions, another prefix.
  WriteFileOrDie(spec_dir() + "/nvidia.yaml", "cdiVersion: 0.5.0\n");
  WriteFileOrDie(spec_dir() + "/hami.io-mig.json", "{}");
  WriteFileOrDie(spec_dir() + "/hami.io-migx_MIG-1.json", "{}");
  WriteFileOrDie(spec_dir() + "/hami.io-mig_" + std::string(kMigUuid2) + ".yaml", "{}");
  // Ours but a symlink: left alone and reported.
  ASSERT_EQ(::symlink("/dev/null", (spec_dir() + "/hami.io-mig_MIG-link.json").c_str()), 0);
  // A temp file of a crashed writer (another pid) and one of this process.
  const std::string stale_tmp = ".hami.io-mig_" + std::string(kMigUuid) + ".json.999999999.0.tmp";
  const std::string own_tmp =
      ".hami.io-mig_" + std::string(kMigUuid) + ".json." + std::to_string(::getpid()) + ".7.tmp";
  WriteFileOrDie(spec_dir() + "/" + stale_tmp, "{");
  WriteFileOrDie(spec_dir() + "/" + own_tmp, "{");

  MIGD_ASSERT_OK_AND_ASSIGN(SweepReport report, writer.Sweep({kMigUuid, live3}));
  EXPECT_THAT(report.kept, ElementsAre(kMigUuid));
  EXPECT_THAT(report.removed, ElementsAre(kMigUuid2));
  EXPECT_THAT(report.missing, ElementsAre(live3));
  EXPECT_THAT(report.refused, ElementsAre("hami.io-mig_MIG-link.json"));
  EXPECT_THAT(report.failed, IsEmpty());
  EXPECT_THAT(report.temp_files_removed, ElementsAre(stale_tmp));
  EXPECT_THAT(
      Entries(spec_dir()),
      ElementsAre(own_tmp, "hami.io-mig.json", "hami.io-mig_" + std::string(kMigUuid) + ".json",
                  "hami.io-mig_" + std::string(kMigUuid2) + ".yaml", "hami.io-mig_MIG-link.json",
                  "hami.io-migx_MIG-1.json", "nvidia.yaml"));
}

TEST_F(SpecWriterTest, SweepOfMissingDirectoryAndFailedRemovals) {
  SpecWriter absent(writer_options_);
  MIGD_ASSERT_OK_AND_ASSIGN(SweepReport report, absent.Sweep({kMigUuid}));
  EXPECT_THAT(report.missing, ElementsAre(kMigUuid));
  ASSERT_THAT(absent.Write(MustBuild(kMigUuid2)), IsOk());
  writer_options_.unlink = [](const std::string&) {
    errno = EIO;
    return -1;
  };
  SpecWriter failing(writer_options_);
  MIGD_ASSERT_OK_AND_ASSIGN(report, failing.Sweep({}));
  EXPECT_THAT(report.failed, ElementsAre(kMigUuid2));
  EXPECT_THAT(failing.PendingRemovals(), ElementsAre(kMigUuid2));
}

// Whatever else lies in the spec dir, of any type, size or content, never
// blocks, crashes or fails a Write (the collision check reads other *.json
// and *.yaml files), and the startup sweep touches none of it.
TEST_F(SpecWriterTest, HostileEntriesInTheSpecDirAreSkippedNeverOpenedNorRemoved) {
  ASSERT_THAT(MakeDirectories(spec_dir()), IsOk());
  const std::string d = spec_dir() + "/";
  ASSERT_EQ(::mkfifo((d + "fifo.json").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((d + "fifo.yaml").c_str(), 0600), 0);
  std::filesystem::create_directory(d + "dir.json");
  WriteFileOrDie(d + "empty.json", "");
  WriteFileOrDie(d + "nul.json", std::string("{\"kind\":\"hami.io/mig\",") + std::string(1, '\0') +
                                     "\xff\xfe" + kMigUuid);
  WriteFileOrDie(d + "deep.json", std::string(60000, '[') + kMigUuid);
  WriteFileOrDie(d + "deep.yaml", std::string(60000, '[') + kMigUuid);
  {
    // Larger than ReadFileToString's default cap, sparse.
    const int fd = ::open((d + "huge.json").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);
    ::close(fd);
  }
  // Our own names, as a FIFO and as a stale temp file that is a FIFO.
  const std::string fifo_ours = OurFile(kMigUuid2);
  const std::string fifo_tmp = "." + OurFile(kMigUuid2) + ".999999999.0.tmp";
  ASSERT_EQ(::mkfifo((d + fifo_ours).c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((d + fifo_tmp).c_str(), 0600), 0);
  const bool have_dev = ::mknod((d + "dev.json").c_str(), S_IFCHR | 0600, ::makedev(1, 3)) == 0;
  std::vector<std::string> before = Entries(spec_dir());

  SpecWriter writer(writer_options_);
  ASSERT_THAT(writer.Write(MustBuild(kMigUuid)), IsOk());
  EXPECT_THAT(writer.Write(MustBuild(kMigUuid2)),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not a regular file")));
  EXPECT_THAT(writer.Verify(kMigUuid2, "{}"),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("is a FIFO")));
  MIGD_ASSERT_OK_AND_ASSIGN(SweepReport report, writer.Sweep({}));
  EXPECT_THAT(report.removed, ElementsAre(kMigUuid));
  EXPECT_THAT(report.refused, ElementsAre(fifo_ours));
  EXPECT_THAT(report.temp_files_removed, IsEmpty());
  EXPECT_EQ(Entries(spec_dir()), before);  // everything else untouched
  EXPECT_EQ(have_dev, std::filesystem::exists(d + "dev.json"));
}

TEST(CheckSpecDirTest, AcceptsAPrivateOrReadOnlyForOthersDirectory) {
  TempDir dir;
  std::string warning = "stale";
  for (mode_t mode : {0700, 0755}) {
    ASSERT_EQ(::chmod(dir.path().c_str(), mode), 0);
    EXPECT_THAT(CheckSpecDir(dir.path(), &warning), IsOk()) << std::oct << mode;
    EXPECT_THAT(warning, IsEmpty());
  }
}

TEST(CheckSpecDirTest, RefusesGroupOrOtherWritableWithTheFix) {
  TempDir dir;
  std::string warning;
  for (mode_t mode : {0775, 0757, 0777}) {
    ASSERT_EQ(::chmod(dir.path().c_str(), mode), 0);
    EXPECT_THAT(CheckSpecDir(dir.path(), &warning),
                StatusIs(StatusCode::kFailedPrecondition,
                         ::testing::AllOf(HasSubstr(dir.path()), HasSubstr("writable by group"),
                                          HasSubstr("chmod go-w " + dir.path()))))
        << std::oct << mode;
  }
}

TEST(CheckSpecDirTest, StickyWorldWritableIsAcceptedWithAWarning) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);
  std::string warning;
  EXPECT_THAT(CheckSpecDir(dir.path(), &warning), IsOk());
  EXPECT_THAT(warning, ::testing::AllOf(HasSubstr(dir.path()), HasSubstr("1777"),
                                        HasSubstr("chmod 0755")));
}

TEST(CheckSpecDirTest, RefusesASymlinkAFileAndAMissingDirectory) {
  TempDir dir;
  std::string warning;
  ASSERT_EQ(::mkdir(dir.Join("real").c_str(), 0755), 0);
  ASSERT_EQ(::symlink(dir.Join("real").c_str(), dir.Join("link").c_str()), 0);
  EXPECT_THAT(CheckSpecDir(dir.Join("link"), &warning),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
  WriteFileOrDie(dir.Join("file"), "");
  EXPECT_THAT(CheckSpecDir(dir.Join("file"), &warning),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not a directory")));
  EXPECT_THAT(CheckSpecDir(dir.Join("absent"), &warning),
              StatusIs(StatusCode::kNotFound, HasSubstr(dir.Join("absent"))));
}

TEST(CheckSpecDirTest, RefusesADirectoryOwnedBySomeoneElse) {
  TempDir dir;
  if (::geteuid() != 0) GTEST_SKIP() << "chown to another uid needs root";
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::chown(dir.path().c_str(), 12345, 12345), 0);
  std::string warning;
  EXPECT_THAT(CheckSpecDir(dir.path(), &warning),
              StatusIs(StatusCode::kFailedPrecondition,
                       ::testing::AllOf(HasSubstr("owned by uid 12345"), HasSubstr("chown root"))));
  ASSERT_EQ(::chown(dir.path().c_str(), 0, 0), 0);
}

// A reader polling the directory while a writer creates, rewrites and removes
// specs never sees a partial or invalid *.json file. Bounded iterations, no
// timing: the reader runs until the writer is done, then one more pass.
TEST_F(SpecWriterTest, ConcurrentReaderNeverSeesPartialSpec) {
  SpecWriter writer(writer_options_);
  ASSERT_THAT(MakeDirectories(spec_dir()), IsOk());
  // Two versions per device with different sizes, so a torn write would show.
  std::vector<BuiltSpec> versions;
  for (const char* uuid : {kMigUuid, kMigUuid2}) {
    for (uint32_t ci : {0u, 1u}) versions.push_back(MustBuild(uuid, ci));
  }
  versions[1].spec.edits.env.push_back("PADDING=" + std::string(20000, 'x'));
  versions[1].content = SerializeSpec(versions[1].spec);

  std::atomic<bool> done{false};
  std::atomic<int> files_seen{0};
  std::vector<std::string> problems;
  std::thread reader([&] {
    bool last_pass = false;
    while (!last_pass) {
      last_pass = done.load();
      DIR* d = ::opendir(spec_dir().c_str());
      if (d == nullptr) continue;
      std::vector<std::string> names;
      while (struct dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
      ::closedir(d);
      for (const std::string& name : names) {
        if (!name.ends_with(".json") && !name.ends_with(".yaml")) continue;
        StatusOr<std::string> text = ReadFileToString(spec_dir() + "/" + name);
        if (!text.ok()) {
          if (!IsNotFound(text.status())) problems.push_back(text.status().ToString());
          continue;  // removed between readdir and open
        }
        ++files_seen;
        StatusOr<Spec> spec = ParseSpecDocument(*text, name);
        if (!spec.ok()) {
          problems.push_back(name + ": " + spec.status().ToString());
          continue;
        }
        Status valid = ValidateSpec(*spec, kVersion050);
        if (!valid.ok()) problems.push_back(name + ": " + valid.ToString());
        Status schema = testing::ValidateAgainstSchema(*text);
        if (!schema.ok()) problems.push_back(name + ": " + schema.ToString());
        if (problems.size() > 10) return;
      }
    }
  });
  constexpr int kIterations = 300;
  for (int i = 0; i < kIterations; ++i) {
    const BuiltSpec& a = versions[static_cast<size_t>(i % 2)];
    const BuiltSpec& b = versions[2 + static_cast<size_t>((i / 2) % 2)];
    EXPECT_THAT(writer.Write(a), IsOk());
    EXPECT_THAT(writer.Write(b), IsOk());
    if (i % 3 == 0) {
      EXPECT_THAT(writer.Remove(b.device_name), IsOk());
    }
  }
  done = true;
  reader.join();
  EXPECT_THAT(problems, IsEmpty());
  EXPECT_GT(files_seen.load(), 0);
  // Only complete files and no temp files remain.
  for (const std::string& name : Entries(spec_dir())) {
    EXPECT_TRUE(name.ends_with(".json")) << name;
  }
}

}  // namespace
}  // namespace migd::cdi
