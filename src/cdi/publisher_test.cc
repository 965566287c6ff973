#include "cdi/publisher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

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
using ::testing::Pair;

ino_t Inode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

class PublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFakeProc(dir_.Join("proc"));
    testing::AddStandardNodes(&reader_, dir_.Join("dev"));
    options_.proc_root = dir_.Join("proc");
    options_.dev_root = dir_.Join("dev");
    options_.spec_dir = dir_.Join("cdi");
    options_.sync = false;
  }
  std::string SpecPath(const std::string& uuid = kMigUuid) const {
    return options_.spec_dir + "/hami.io-mig_" + uuid + ".json";
  }

  TempDir dir_;
  testing::FakeHostReader reader_;
  Options options_;
};

TEST_F(PublisherTest, PublishWritesOnceAndRewritesOnlyWhenDifferent) {
  Publisher publisher(options_, &reader_);
  ASSERT_THAT(Publisher::ValidateOptions(options_), IsOk());
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, publisher.Publish(testing::StandardInstance()));
  MIGD_ASSERT_OK_AND_ASSIGN(std::string content, ReadFileToString(SpecPath()));
  EXPECT_EQ(content, built.content);
  EXPECT_THAT(testing::ValidateAgainstSchema(content), IsOk());
  const ino_t first = Inode(SpecPath());
  // Reuse path: unchanged file is not rewritten (rename would change the inode).
  MIGD_ASSERT_OK_AND_ASSIGN(built, publisher.Publish(testing::StandardInstance()));
  EXPECT_EQ(Inode(SpecPath()), first);
  // A tampered file is rewritten.
  WriteFileOrDie(SpecPath(), "{}");
  MIGD_ASSERT_OK_AND_ASSIGN(built, publisher.Publish(testing::StandardInstance()));
  MIGD_ASSERT_OK_AND_ASSIGN(content, ReadFileToString(SpecPath()));
  EXPECT_EQ(content, built.content);
}

TEST_F(PublisherTest, UnpublishRemovesAndSweepReportsMissing) {
  Publisher publisher(options_, &reader_);
  MigInstance second = testing::StandardInstance();
  second.mig_uuid = MigUuid(kMigUuid2);
  second.gi_id = NvmlGiId(5);
  second.ci_id = NvmlCiId(0);
  ASSERT_TRUE(publisher.Publish(testing::StandardInstance()).ok());
  ASSERT_TRUE(publisher.Publish(second).ok());
  EXPECT_THAT(publisher.Unpublish(MigUuid(kMigUuid)), IsOk());
  EXPECT_FALSE(std::filesystem::exists(SpecPath()));
  EXPECT_TRUE(std::filesystem::exists(SpecPath(kMigUuid2)));
  MIGD_ASSERT_OK_AND_ASSIGN(SweepReport report, publisher.Sweep({MigUuid(kMigUuid)}));
  EXPECT_THAT(report.removed, ElementsAre(kMigUuid2));
  EXPECT_THAT(report.missing, ElementsAre(kMigUuid));
  EXPECT_THAT(publisher.RetryPendingRemovals(), IsOk());
}

TEST_F(PublisherTest, FailedBuildWritesNothing) {
  Publisher publisher(options_, &reader_);
  MigInstance instance = testing::StandardInstance();
  instance.gi_id = NvmlGiId(9);  // no such GI: no access file; mig-minors has it
  std::filesystem::remove(options_.proc_root + "/driver/nvidia-caps/mig-minors");
  EXPECT_THAT(publisher.Publish(instance), StatusIs(StatusCode::kNotFound, HasSubstr("gi9")));
  EXPECT_FALSE(std::filesystem::exists(options_.spec_dir));
}

TEST_F(PublisherTest, DisabledKeepsOnlyTheLegacyForm) {
  options_.enabled = false;
  Publisher publisher(options_, &reader_);
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, publisher.Publish(testing::StandardInstance()));
  EXPECT_FALSE(std::filesystem::exists(options_.spec_dir));
  const AllocateDevices result = publisher.AllocateResult({built});
  EXPECT_THAT(result.cdi_devices, IsEmpty());
  EXPECT_THAT(result.envs, ElementsAre(Pair("NVIDIA_VISIBLE_DEVICES", kMigUuid)));
  EXPECT_EQ(result.device_nodes.size(), 6u);
  EXPECT_THAT(publisher.Unpublish(MigUuid(kMigUuid)), IsOk());
  MIGD_ASSERT_OK_AND_ASSIGN(SweepReport report, publisher.Sweep({MigUuid(kMigUuid)}));
  EXPECT_THAT(report.missing, IsEmpty());
}

TEST_F(PublisherTest, AllocateResultHasQualifiedNamesAndLegacyForm) {
  Publisher publisher(options_, &reader_);
  MigInstance second = testing::StandardInstance();
  second.mig_uuid = MigUuid(kMigUuid2);
  second.gi_id = NvmlGiId(5);
  second.ci_id = NvmlCiId(0);
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec a, publisher.Publish(testing::StandardInstance()));
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec b, publisher.Publish(second));
  const AllocateDevices result = publisher.AllocateResult({a, b});
  EXPECT_THAT(result.cdi_devices, ElementsAre(std::string("hami.io/mig=") + kMigUuid,
                                              std::string("hami.io/mig=") + kMigUuid2));
  EXPECT_THAT(result.envs,
              ElementsAre(Pair("NVIDIA_VISIBLE_DEVICES", std::string(kMigUuid) + "," + kMigUuid2)));
  std::vector<std::string> paths;
  for (const LegacyDeviceNode& n : result.device_nodes) {
    EXPECT_EQ(n.host_path, n.container_path);
    EXPECT_EQ(n.permissions, "rw");
    paths.push_back(n.container_path);
  }
  // GI 2/CI 1 → caps 156, 158; GI 5/CI 0 → 3+135+45 = 183, 184. Shared nodes once.
  EXPECT_THAT(paths, ElementsAre("/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap156",
                                 "/dev/nvidia-caps/nvidia-cap158", "/dev/nvidia-caps/nvidia-cap183",
                                 "/dev/nvidia-caps/nvidia-cap184", "/dev/nvidiactl",
                                 "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"));
  EXPECT_THAT(MakeAllocateDevices({}, true).envs, IsEmpty());
}

TEST_F(PublisherTest, ValidateOptions) {
  Options bad = options_;
  bad.kind.device_class = "mig.x";
  EXPECT_THAT(Publisher::ValidateOptions(bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("cdi.vendor/cdi.class")));
  bad = options_;
  bad.spec_dir = "";
  EXPECT_THAT(Publisher::ValidateOptions(bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("cdi.specDir")));
  bad = options_;
  bad.min_version = kVersion070;
  EXPECT_THAT(Publisher::ValidateOptions(bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("above the maximum")));
}

}  // namespace
}  // namespace migd::cdi
