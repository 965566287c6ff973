#include "cdi/common_edits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <sstream>

#include "base/file_util.h"
#include "cdi/run_command.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::cdi {
namespace {

using ::migd::testing::StatusIs;
using ::migd::testing::TempDir;
using ::migd::testing::WriteFileOrDie;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// A spec in the layout `nvidia-ctk cdi generate` writes: devices of its own
// plus spec-level containerEdits with the driver's libraries and hooks.
std::string GeneratedStyleSpec(const std::string& kind, const std::string& lib) {
  return R"({"cdiVersion": "0.5.0", "kind": ")" + kind + R"(",
  "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}},
              {"name": "all", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}],
  "containerEdits": {
    "env": ["NVIDIA_VISIBLE_DEVICES=void"],
    "deviceNodes": [{"path": "/dev/nvidiactl"}],
    "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook",
               "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib64"]}],
    "mounts": [{"hostPath": ")" + lib + R"(", "containerPath": ")" + lib + R"(",
                "options": ["ro", "nosuid", "nodev", "bind"]}]}})";
}

class CommonEditsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Join("etc/cdi"));
    std::filesystem::create_directories(dir_.Join("run/cdi"));
    options_.spec_dirs = {dir_.Join("etc/cdi"), dir_.Join("run/cdi")};
    options_.nvidia_ctk = {dir_.Join("bin/nvidia-ctk")};
    options_.cache_file = dir_.Join("run/cdi/.migd-common-edits");
    options_.driver_version = "580.95.05";
  }

  // An executable nvidia-ctk that records each run in <dir>/ctk-runs and
  // prints `spec` (or fails with `exit_code`).
  void InstallFakeCtk(const std::string& spec, int exit_code = 0) {
    std::filesystem::create_directories(dir_.Join("bin"));
    WriteFileOrDie(dir_.Join("ctk-spec.json"), spec);
    WriteFileOrDie(dir_.Join("bin/nvidia-ctk"),
                   "#!/bin/sh\necho \"$*\" >> " + dir_.Join("ctk-runs") + "\n" +
                       (exit_code != 0 ? "echo 'ERRO NVML: Driver Not Loaded' >&2\nexit " +
                                             std::to_string(exit_code) + "\n"
                                       : "cat " + dir_.Join("ctk-spec.json") + "\n"));
    ASSERT_EQ(::chmod(dir_.Join("bin/nvidia-ctk").c_str(), 0755), 0);
  }

  std::vector<std::string> CtkRuns() {
    StatusOr<std::string> text = ReadFileToString(dir_.Join("ctk-runs"));
    if (!text.ok()) return {};
    std::vector<std::string> out;
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

  StatusOr<CommonEdits> Resolve() { return CommonEditsResolver(options_, &reader_).Resolve(); }

  TempDir dir_;
  OsHostReader reader_;
  CommonEditsOptions options_;
};

TEST_F(CommonEditsTest, ExplicitFileWinsOverEverything) {
  WriteFileOrDie(dir_.Join("mine.json"), GeneratedStyleSpec("example.com/x", "/lib/mine.so"));
  WriteFileOrDie(dir_.Join("run/cdi/nvidia.json"),
                 GeneratedStyleSpec("nvidia.com/gpu", "/lib/node.so"));
  InstallFakeCtk(GeneratedStyleSpec("nvidia.com/gpu", "/lib/generated.so"));
  options_.explicit_path = dir_.Join("mine.json");
  MIGD_ASSERT_OK_AND_ASSIGN(CommonEdits found, Resolve());
  EXPECT_EQ(found.source, CommonEditsSource::kExplicit);
  EXPECT_EQ(found.path, dir_.Join("mine.json"));
  ASSERT_THAT(found.edits.mounts, SizeIs(1));
  EXPECT_EQ(found.edits.mounts[0].host_path, "/lib/mine.so");
  EXPECT_THAT(found.warnings, IsEmpty());
  EXPECT_THAT(CtkRuns(), IsEmpty());
}

TEST_F(CommonEditsTest, ExplicitFileThatIsUnusableIsAnError) {
  options_.explicit_path = dir_.Join("absent.json");
  EXPECT_THAT(Resolve(), StatusIs(StatusCode::kNotFound,
                                  AllOf(HasSubstr("cdi.commonEditsFrom"),
                                        HasSubstr("absent.json"), HasSubstr("remove the key"))));
  WriteFileOrDie(dir_.Join("bad.yaml"), "cdiVersion: 0.5.0\nkind: a.b/c\nbogus: 1\n");
  options_.explicit_path = dir_.Join("bad.yaml");
  EXPECT_THAT(Resolve(), StatusIs(StatusCode::kInvalidArgument,
                                  AllOf(HasSubstr("cdi.commonEditsFrom"), HasSubstr("/bogus"))));
}

TEST_F(CommonEditsTest, NodeSpecOfTheNvidiaKindIsFoundRunDirFirst) {
  WriteFileOrDie(dir_.Join("etc/cdi/nvidia.yaml"),
                 GeneratedStyleSpec("nvidia.com/gpu", "/lib/etc.so"));
  WriteFileOrDie(dir_.Join("run/cdi/a-management.json"),
                 GeneratedStyleSpec("management.nvidia.com/gpu", "/lib/management.so"));
  WriteFileOrDie(dir_.Join("run/cdi/hami.io-mig_MIG-x.json"),
                 GeneratedStyleSpec("hami.io/mig", "/lib/ours.so"));
  WriteFileOrDie(dir_.Join("run/cdi/nvidia.json"),
                 GeneratedStyleSpec("nvidia.com/gpu", "/lib/run.so"));
  InstallFakeCtk(GeneratedStyleSpec("nvidia.com/gpu", "/lib/generated.so"));
  MIGD_ASSERT_OK_AND_ASSIGN(CommonEdits found, Resolve());
  EXPECT_EQ(found.source, CommonEditsSource::kNodeSpec);
  EXPECT_EQ(found.path, dir_.Join("run/cdi/nvidia.json"));
  ASSERT_THAT(found.edits.mounts, SizeIs(1));
  EXPECT_EQ(found.edits.mounts[0].host_path, "/lib/run.so");
  // Spec-level edits only: that spec's devices are not migd's.
  EXPECT_THAT(found.edits.device_nodes, SizeIs(1));
  EXPECT_THAT(found.summary, HasSubstr("node-spec " + dir_.Join("run/cdi/nvidia.json")));
  EXPECT_THAT(CtkRuns(), IsEmpty());

  std::filesystem::remove(dir_.Join("run/cdi/nvidia.json"));
  MIGD_ASSERT_OK_AND_ASSIGN(found, Resolve());
  EXPECT_EQ(found.path, dir_.Join("etc/cdi/nvidia.yaml"));
}

TEST_F(CommonEditsTest, UnusableNodeSpecsAreSkippedWithAWarning) {
  WriteFileOrDie(dir_.Join("run/cdi/a-broken.yaml"),
                 "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\nnewField: 1\n");
  WriteFileOrDie(dir_.Join("run/cdi/b-too-new.json"),
                 R"({"cdiVersion": "0.7.0", "kind": "nvidia.com/gpu", "devices": [],
                     "containerEdits": {"additionalGids": [44]}})");
  WriteFileOrDie(dir_.Join("etc/cdi/nvidia.json"),
                 GeneratedStyleSpec("nvidia.com/gpu", "/lib/etc.so"));
  MIGD_ASSERT_OK_AND_ASSIGN(CommonEdits found, Resolve());
  EXPECT_EQ(found.source, CommonEditsSource::kNodeSpec);
  EXPECT_EQ(found.path, dir_.Join("etc/cdi/nvidia.json"));
  EXPECT_THAT(found.warnings,
              ElementsAre(AllOf(HasSubstr("a-broken.yaml"), HasSubstr("/newField")),
                          AllOf(HasSubstr("b-too-new.json"), HasSubstr("0.7.0"))));
}

TEST_F(CommonEditsTest, GeneratedOnceAndKeptUntilTheDriverVersionChanges) {
  InstallFakeCtk(GeneratedStyleSpec("nvidia.com/gpu", "/lib/generated.so"));
  MIGD_ASSERT_OK_AND_ASSIGN(CommonEdits found, Resolve());
  EXPECT_EQ(found.source, CommonEditsSource::kGenerated);
  EXPECT_THAT(found.path, IsEmpty());
  ASSERT_THAT(found.edits.mounts, SizeIs(1));
  EXPECT_EQ(found.edits.mounts[0].host_path, "/lib/generated.so");
  EXPECT_THAT(found.edits.hooks, SizeIs(1));
  EXPECT_THAT(CtkRuns(), ElementsAre("cdi generate --format=json"));

  // A restart with the same driver: the kept edits, nvidia-ctk not run again.
  MIGD_ASSERT_OK_AND_ASSIGN(CommonEdits again, Resolve());
  EXPECT_EQ(again.edits, found.edits);
  EXPECT_THAT(again.summary, HasSubstr("kept in " + options_.cache_file));
  EXPECT_THAT(CtkRuns(), SizeIs(1));

  // A new driver: generated again.
  InstallFakeCtk(GeneratedStyleSpec("nvidia.com/gpu", "/lib/generated-590.so"));
  options_.driver_version = "590.10.01";
  MIGD_ASSERT_OK_AND_ASSIGN(CommonEdits upgraded, Resolve());
  EXPECT_THAT(CtkRuns(), SizeIs(2));
  EXPECT_EQ(upgraded.edits.mounts[0].host_path, "/lib/generated-590.so");
  // The cache is not a file the runtime loads (neither *.json nor *.yaml).
  EXPECT_FALSE(options_.cache_file.ends_with(".json") || options_.cache_file.ends_with(".yaml"));
}

TEST_F(CommonEditsTest, FailedGenerationFallsThroughToTheWarning) {
  InstallFakeCtk("", /*exit_code=*/1);
  MIGD_ASSERT_OK_AND_ASSIGN(CommonEdits found, Resolve());
  EXPECT_EQ(found.source, CommonEditsSource::kNone);
  EXPECT_TRUE(found.edits.empty());
  EXPECT_THAT(found.warnings,
              ElementsAre(AllOf(HasSubstr("cdi generate failed"), HasSubstr("status 1"),
                                HasSubstr("Driver Not Loaded")),
                          HasSubstr("no driver libraries")));
  InstallFakeCtk("not a spec");
  MIGD_ASSERT_OK_AND_ASSIGN(found, Resolve());
  EXPECT_EQ(found.source, CommonEditsSource::kNone);
  EXPECT_THAT(found.warnings, Contains(HasSubstr("cdi generate failed")));
}

TEST_F(CommonEditsTest, NothingFoundWarnsLoudlyWithTheFix) {
  MIGD_ASSERT_OK_AND_ASSIGN(CommonEdits found, Resolve());
  EXPECT_EQ(found.source, CommonEditsSource::kNone);
  EXPECT_EQ(CommonEditsSourceName(found.source), "none");
  EXPECT_THAT(found.warnings,
              ElementsAre(AllOf(HasSubstr("CUDA container will not start"),
                                HasSubstr("nvidia-ctk cdi generate"),
                                HasSubstr("cdi.commonEditsFrom"))));
}

TEST(RunForOutputTest, ReturnsStdoutAndNamesFailures) {
  TempDir dir;
  WriteFileOrDie(dir.Join("ok"), "#!/bin/sh\necho out; echo noise >&2\n");
  WriteFileOrDie(dir.Join("fail"), "#!/bin/sh\necho first >&2\necho 'the reason' >&2\nexit 7\n");
  WriteFileOrDie(dir.Join("hang"), "#!/bin/sh\nexec sleep 30\n");
  for (const char* f : {"ok", "fail", "hang"}) {
    ASSERT_EQ(::chmod(dir.Join(f).c_str(), 0755), 0);
  }
  MIGD_ASSERT_OK_AND_ASSIGN(std::string out, RunForOutput({dir.Join("ok")}, std::chrono::seconds(30)));
  EXPECT_EQ(out, "out\n");
  EXPECT_THAT(RunForOutput({dir.Join("fail")}, std::chrono::seconds(30)),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("status 7"), HasSubstr("the reason"))));
  EXPECT_THAT(RunForOutput({dir.Join("hang")}, std::chrono::milliseconds(200)),
              StatusIs(StatusCode::kDeadlineExceeded, HasSubstr("killed")));
  EXPECT_THAT(RunForOutput({dir.Join("absent")}, std::chrono::seconds(1)),
              StatusIs(StatusCode::kNotFound, HasSubstr("absent")));
}

}  // namespace
}  // namespace migd::cdi
