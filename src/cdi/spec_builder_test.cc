#include "cdi/spec_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

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
using testing::AddStandardNodes;
using testing::FakeHostReader;
using ::testing::HasSubstr;
using testing::StandardInstance;

// The exact file for StandardInstance() on the standard fake host: GPU minor 1,
// GI 2 → nvidia-cap(3 + 135·1 + 9·2) = 156, CI 1 → 156 + 1 + 1 = 158, caps
// major 508 (sim /proc/devices), DeviceFileMode 292 (0444).
constexpr char kGolden[] = R"({
  "cdiVersion": "0.5.0",
  "kind": "hami.io/mig",
  "devices": [
    {
      "name": "MIG-4f1c2a9e-1b2c-5d3e-8f90-0a1b2c3d4e5f",
      "containerEdits": {
        "deviceNodes": [
          {
            "path": "/dev/nvidia1",
            "type": "c",
            "major": 195,
            "minor": 1
          },
          {
            "path": "/dev/nvidia-caps/nvidia-cap156",
            "type": "c",
            "major": 508,
            "minor": 156,
            "fileMode": 292
          },
          {
            "path": "/dev/nvidia-caps/nvidia-cap158",
            "type": "c",
            "major": 508,
            "minor": 158,
            "fileMode": 292
          }
        ]
      }
    }
  ],
  "containerEdits": {
    "env": [
      "NVIDIA_VISIBLE_DEVICES=void"
    ],
    "deviceNodes": [
      {
        "path": "/dev/nvidiactl",
        "type": "c",
        "major": 195,
        "minor": 255
      },
      {
        "path": "/dev/nvidia-uvm",
        "type": "c",
        "major": 511
      },
      {
        "path": "/dev/nvidia-uvm-tools",
        "type": "c",
        "major": 511,
        "minor": 1
      }
    ]
  }
}
)";

class SpecBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFakeProc(proc_root());
    AddStandardNodes(&reader_, dev_root());
    options_.proc_root = proc_root();
    options_.dev_root = dev_root();
  }
  std::string proc_root() const { return dir_.Join("proc"); }
  std::string dev_root() const { return dir_.Join("dev"); }
  std::string caps_dir() const { return proc_root() + "/driver/nvidia/capabilities/gpu1/mig"; }
  StatusOr<BuiltSpec> Build(const MigInstance& instance = StandardInstance()) {
    return SpecBuilder(options_, &reader_).Build(instance);
  }

  TempDir dir_;
  FakeHostReader reader_;
  BuilderOptions options_;
};

TEST_F(SpecBuilderTest, GoldenSpecForGiAndCiOnSimulatedProc) {
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, Build());
  EXPECT_EQ(built.content, kGolden);
  EXPECT_EQ(built.device_name, testing::kMigUuid);
  EXPECT_EQ(built.qualified_name, std::string("hami.io/mig=") + testing::kMigUuid);
  EXPECT_EQ(built.spec.version, "0.5.0");
  EXPECT_THAT(testing::ValidateAgainstSchema(built.content), IsOk());
  EXPECT_THAT(ValidateSpec(built.spec, kVersion050), IsOk());
}

TEST_F(SpecBuilderTest, MinorsFollowTheDriverTableForEveryLiveInstance) {
  for (auto [gi, ci] : {std::pair{2u, 0u}, {2u, 1u}, {5u, 0u}}) {
    MigInstance instance = StandardInstance();
    instance.gi_id = NvmlGiId(gi);
    instance.ci_id = NvmlCiId(ci);
    MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, Build(instance));
    const auto& nodes = built.spec.devices[0].edits.device_nodes;
    ASSERT_EQ(nodes.size(), 3u);
    EXPECT_EQ(nodes[1].minor, sim::GiAccessMinor(1, gi));
    EXPECT_EQ(nodes[2].minor, sim::CiAccessMinor(1, gi, ci));
    EXPECT_EQ(nodes[1].minor, 3 + 135 * 1 + 9 * gi);
    EXPECT_EQ(nodes[2].minor, 3 + 135 * 1 + 9 * gi + 1 + ci);
    EXPECT_EQ(nodes[2].path, "/dev/nvidia-caps/nvidia-cap" + std::to_string(*nodes[2].minor));
  }
}

TEST_F(SpecBuilderTest, CustomKind) {
  options_.kind = Kind{"example.com", "mig-dev"};
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, Build());
  EXPECT_EQ(built.spec.kind, "example.com/mig-dev");
  EXPECT_EQ(built.qualified_name, std::string("example.com/mig-dev=") + testing::kMigUuid);
}

TEST_F(SpecBuilderTest, ModesetIncludedWhenPresent) {
  reader_.AddNode(dev_root() + "/nvidia-modeset", {'c', 195, 254, 0666});
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, Build());
  ASSERT_EQ(built.spec.edits.device_nodes.size(), 4u);
  EXPECT_EQ(built.spec.edits.device_nodes[3].path, "/dev/nvidia-modeset");
  EXPECT_EQ(built.spec.edits.device_nodes[3].minor, 254);
}

TEST_F(SpecBuilderTest, FallsBackToMigMinorsWithoutInstanceFile) {
  std::filesystem::remove(caps_dir() + "/gi2/ci1/access");
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, Build());
  const DeviceNode& ci = built.spec.devices[0].edits.device_nodes[2];
  EXPECT_EQ(ci.minor, 158);
  EXPECT_EQ(ci.major, 508);
  EXPECT_FALSE(ci.file_mode.has_value());  // mig-minors has no mode
  EXPECT_THAT(testing::ValidateAgainstSchema(built.content), IsOk());
}

TEST_F(SpecBuilderTest, MissingCapabilityEverywhereNamesBothFiles) {
  std::filesystem::remove(caps_dir() + "/gi2/ci1/access");
  std::filesystem::remove(proc_root() + "/driver/nvidia-caps/mig-minors");
  EXPECT_THAT(Build(), StatusIs(StatusCode::kNotFound,
                                ::testing::AllOf(HasSubstr("gpu1/gi2/ci1/access"),
                                                 HasSubstr("driver/nvidia-caps/mig-minors"))));
}

TEST_F(SpecBuilderTest, CapabilityAbsentFromMigMinors) {
  std::filesystem::remove(caps_dir() + "/gi2/ci1/access");
  WriteFileOrDie(proc_root() + "/driver/nvidia-caps/mig-minors", "config 1\nmonitor 2\n");
  EXPECT_THAT(Build(), StatusIs(StatusCode::kNotFound, HasSubstr("has no \"gpu1/gi2/ci1/access")));
}

TEST_F(SpecBuilderTest, MalformedAccessFile) {
  WriteFileOrDie(caps_dir() + "/gi2/access", "DeviceFileMinor: twelve\n");
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument,
                                ::testing::AllOf(HasSubstr("gi2/access"),
                                                 HasSubstr("DeviceFileMinor: <n>"))));
  WriteFileOrDie(caps_dir() + "/gi2/access", "DeviceFileMode: 292\nDeviceFileModify: 1\n");
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("no \"DeviceFileMinor")));
}

TEST_F(SpecBuilderTest, MissingProcDevices) {
  std::filesystem::remove(proc_root() + "/devices");
  EXPECT_THAT(Build(),
              StatusIs(StatusCode::kNotFound, ::testing::AllOf(HasSubstr(proc_root() + "/devices"),
                                                               HasSubstr("nvidia-caps major"))));
}

TEST_F(SpecBuilderTest, UnknownCapsMajor) {
  WriteFileOrDie(proc_root() + "/devices",
                 "Character devices:\n195 nvidia-frontend\n511 nvidia-uvm\n\nBlock devices:\n"
                 "508 nvidia-caps\n");  // only as a block device: not ours
  EXPECT_THAT(Build(), StatusIs(StatusCode::kFailedPrecondition,
                                ::testing::AllOf(HasSubstr("/devices"), HasSubstr("nvidia-caps"))));
  WriteFileOrDie(proc_root() + "/devices", "Character devices:\nabc nvidia-caps\n");
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("malformed")));
}

TEST_F(SpecBuilderTest, MissingControlOrParentNode) {
  for (const char* name : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia1"}) {
    SCOPED_TRACE(name);
    reader_.RemoveNode(dev_root() + "/" + name);
    EXPECT_THAT(Build(),
                StatusIs(StatusCode::kNotFound, ::testing::AllOf(HasSubstr(dev_root() + "/" + name),
                                                                 HasSubstr("character device"))));
    AddStandardNodes(&reader_, dev_root());
  }
}

TEST_F(SpecBuilderTest, BadMigUuidAndBadKind) {
  MigInstance instance = StandardInstance();
  instance.mig_uuid = MigUuid("MIG-GPU-00000000-0000-0000-0000-000000000000/2/1");
  EXPECT_THAT(Build(instance), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'/'")));
  options_.kind = Kind{"hami.io", "mig.v1"};  // dots need 0.6.0
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("class")));
  options_.kind = Kind{"1hami.io", "mig"};
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("vendor")));
}

TEST_F(SpecBuilderTest, VersionFloorAndCeiling) {
  options_.min_version = kVersion060;
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("above the maximum")));
  options_.min_version = kVersion030;
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, Build());
  EXPECT_EQ(built.spec.version, "0.3.0");  // what the content itself needs
}

// A base spec in the shape `nvidia-ctk cdi generate` writes (YAML, 0.5.0).
constexpr char kNvidiaCtkYaml[] = R"(---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  - NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu
  deviceNodes:
  - path: /dev/nvidiactl
    hostPath: /dev/nvidiactl
  - path: /dev/nvidia-uvm
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args:
    - nvidia-cdi-hook
    - update-ldcache
    - --folder
    - /usr/lib/x86_64-linux-gnu
    env:
    - NVIDIA_CTK_DEBUG=false
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    options:
    - ro
    - nosuid
    - nodev
    - rbind
    - rprivate
  - hostPath: /usr/bin/nvidia-smi
    containerPath: /usr/bin/nvidia-smi
    options: [ro, nosuid, nodev, rbind, rprivate]
)";

TEST_F(SpecBuilderTest, MergesCommonEditsFromNvidiaCtkYaml) {
  const std::string common = dir_.Join("nvidia.yaml");
  WriteFileOrDie(common, kNvidiaCtkYaml);
  options_.common_edits_from = common;
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, Build());
  const ContainerEdits& e = built.spec.edits;
  EXPECT_THAT(e.env, ::testing::ElementsAre("NVIDIA_VISIBLE_DEVICES=void",
                                            "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu"));
  // Our freshly stat'ed nodes win over the base spec's.
  ASSERT_EQ(e.device_nodes.size(), 3u);
  EXPECT_EQ(e.device_nodes[0].path, "/dev/nvidiactl");
  EXPECT_EQ(e.device_nodes[0].host_path, "");
  ASSERT_EQ(e.mounts.size(), 2u);
  EXPECT_EQ(e.mounts[1].container_path, "/usr/bin/nvidia-smi");
  EXPECT_THAT(e.mounts[0].options,
              ::testing::ElementsAre("ro", "nosuid", "nodev", "rbind", "rprivate"));
  ASSERT_EQ(e.hooks.size(), 1u);
  EXPECT_EQ(e.hooks[0].hook_name, "createContainer");
  EXPECT_THAT(e.hooks[0].env, ::testing::ElementsAre("NVIDIA_CTK_DEBUG=false"));
  // The base spec's devices are not copied.
  ASSERT_EQ(built.spec.devices.size(), 1u);
  EXPECT_EQ(built.spec.version, "0.5.0");
  EXPECT_THAT(testing::ValidateAgainstSchema(built.content), IsOk());
}

TEST_F(SpecBuilderTest, MergesCommonEditsFromJsonAndKeepsOtherHostPathNodes) {
  const std::string common = dir_.Join("nvidia.json");
  WriteFileOrDie(common, R"({"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[],
    "containerEdits":{"deviceNodes":[{"path":"/dev/nvidia-modeset","hostPath":"/host/dev/nvidia-modeset"}],
    "env":["NVIDIA_VISIBLE_DEVICES=all","A=b"]}})");
  options_.common_edits_from = common;
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, Build());
  EXPECT_THAT(built.spec.edits.env, ::testing::ElementsAre("NVIDIA_VISIBLE_DEVICES=void", "A=b"));
  ASSERT_EQ(built.spec.edits.device_nodes.size(), 4u);
  EXPECT_EQ(built.spec.edits.device_nodes[3].host_path, "/host/dev/nvidia-modeset");
  EXPECT_EQ(built.spec.version, "0.5.0");  // hostPath needs 0.5.0
  EXPECT_THAT(testing::ValidateAgainstSchema(built.content), IsOk());
}

TEST_F(SpecBuilderTest, CommonSpecNeedingNewerVersion) {
  const std::string common = dir_.Join("nvidia.yaml");
  WriteFileOrDie(common,
                 "cdiVersion: 0.7.0\nkind: nvidia.com/gpu\ndevices: []\n"
                 "containerEdits:\n  additionalGids: [44]\n");
  options_.common_edits_from = common;
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument,
                                ::testing::AllOf(HasSubstr("0.7.0"), HasSubstr(common))));
  options_.max_version = kVersion070;
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, Build());
  EXPECT_EQ(built.spec.version, "0.7.0");
  EXPECT_THAT(testing::ValidateAgainstSchema(built.content), IsOk());
}

TEST_F(SpecBuilderTest, MissingUnreadableOrMalformedCommonSpec) {
  options_.common_edits_from = dir_.Join("absent.yaml");
  EXPECT_THAT(Build(),
              StatusIs(StatusCode::kNotFound, ::testing::AllOf(HasSubstr("cdi.commonEditsFrom"),
                                                               HasSubstr("absent.yaml"))));
  options_.common_edits_from = dir_.path();  // a directory
  EXPECT_THAT(Build(), StatusIs(StatusCode::kFailedPrecondition, HasSubstr(dir_.path())));
  const std::string yaml = dir_.Join("bad.yaml");
  WriteFileOrDie(yaml, "cdiVersion: [unclosed\n");
  options_.common_edits_from = yaml;
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument,
                                ::testing::AllOf(HasSubstr(yaml), HasSubstr("malformed YAML"))));
  const std::string json = dir_.Join("bad.json");
  WriteFileOrDie(json, "{\"cdiVersion\": ");
  options_.common_edits_from = json;
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument,
                                ::testing::AllOf(HasSubstr(json), HasSubstr("not valid JSON"))));
  WriteFileOrDie(json, R"({"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[],
    "containerEdits":{"mounts":[{"hostPath":"/a","containerPath":"/a","bogus":1}]}})");
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument,
                                HasSubstr("/containerEdits/mounts/0/bogus: unknown member")));
  WriteFileOrDie(json, R"({"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[],
    "containerEdits":{"env":["=novalue"]}})");
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("invalid env")));
  WriteFileOrDie(json, R"({"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[],
    "containerEdits":{"hooks":[{"hookName":"sometime","path":"/bin/true"}]}})");
  EXPECT_THAT(Build(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("invalid hookName")));
}

// The real reader against real character devices (needs CAP_MKNOD).
TEST(SpecBuilderOsTest, RealDeviceNodesUnderDevRoot) {
  TempDir dir;
  testing::WriteFakeProc(dir.Join("proc"));
  const std::string dev = dir.Join("dev");
  ASSERT_THAT(MakeDirectories(dev), IsOk());
  struct Node {
    const char* name;
    unsigned major, minor;
  };
  for (Node n : {Node{"nvidia1", 195, 1}, Node{"nvidiactl", 195, 255}, Node{"nvidia-uvm", 511, 0},
                 Node{"nvidia-uvm-tools", 511, 1}}) {
    if (::mknod((dev + "/" + n.name).c_str(), S_IFCHR | 0666, ::makedev(n.major, n.minor)) != 0) {
      GTEST_SKIP() << "mknod not permitted here: " << std::strerror(errno);
    }
  }
  WriteFileOrDie(dev + "/nvidia-modeset", "not a device");
  BuilderOptions options;
  options.proc_root = dir.Join("proc");
  options.dev_root = dev;
  OsHostReader reader;
  EXPECT_THAT(SpecBuilder(options, &reader).Build(StandardInstance()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("nvidia-modeset")));
  std::filesystem::remove(dev + "/nvidia-modeset");
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built,
                            SpecBuilder(options, &reader).Build(StandardInstance()));
  EXPECT_EQ(built.content, kGolden);
}

}  // namespace
}  // namespace migd::cdi
