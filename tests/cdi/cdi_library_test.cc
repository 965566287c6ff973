// The specs migd writes, loaded and injected by the CDI Go library 0.5.2
// (Debian 12; what podman 4.3.1 links) through tests/cdi/cdi_check.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cdi/cdi_test_util.h"
#include "cdi/publisher.h"
#include "testing/status_matchers.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace migd::cdi {
namespace {

using ::migd::testing::CommandResult;
using ::migd::testing::RunCommand;
using ::migd::testing::TempDir;
using ::migd::testing::WriteFileOrDie;
using ::testing::Contains;
using ::testing::HasSubstr;
using Json = nlohmann::json;

class CdiLibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(MIGD_CDI_CHECK).empty() || !std::filesystem::exists(MIGD_CDI_CHECK)) {
      // No skip: `make check` installs both (scripts/install-deps.sh cdi-check);
      // configure with -DMIGD_CDI_GO_CHECK=OFF to leave this test out.
      FAIL() << "cdi_check not built: install golang-go and "
                "golang-github-container-orchestrated-devices-container-device-interface-dev "
                "(scripts/install-deps.sh cdi-check) and reconfigure";
    }
    testing::WriteFakeProc(dir_.Join("proc"));
    testing::AddStandardNodes(&reader_, dir_.Join("dev"));
    options_.proc_root = dir_.Join("proc");
    options_.dev_root = dir_.Join("dev");
    options_.spec_dir = dir_.Join("cdi");
    options_.sync = false;
  }

  CommandResult Check(const std::vector<std::string>& devices) {
    std::vector<std::string> argv = {MIGD_CDI_CHECK, "-spec-dir", options_.spec_dir};
    for (const std::string& d : devices) {
      argv.push_back("-device");
      argv.push_back(d);
    }
    std::filesystem::create_directories(dir_.Join("scratch"));
    return RunCommand(argv, dir_.Join("scratch"));
  }

  TempDir dir_;
  testing::FakeHostReader reader_;
  Options options_;
};

TEST_F(CdiLibraryTest, LibraryLoadsAndInjectsOurSpecs) {
  // A base spec in nvidia-ctk's shape, so merged mounts and hooks are checked too.
  const std::string common = dir_.Join("nvidia.yaml");
  WriteFileOrDie(
      common,
      "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\ncontainerEdits:\n"
      "  env: [NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu]\n"
      "  hooks:\n  - hookName: createContainer\n    path: /usr/bin/nvidia-cdi-hook\n"
      "    args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib]\n"
      "  mounts:\n  - hostPath: /usr/lib/libcuda.so.1\n"
      "    containerPath: /usr/lib/libcuda.so.1\n    options: [ro, nosuid, nodev, bind]\n");
  options_.common_edits_from = common;
  Publisher publisher(options_, &reader_);
  MigInstance second = testing::StandardInstance();
  second.mig_uuid = MigUuid(testing::kMigUuid2);
  second.gi_id = NvmlGiId(5);
  second.ci_id = NvmlCiId(0);
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec a, publisher.Publish(testing::StandardInstance()));
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec b, publisher.Publish(second));

  const CommandResult r = Check({a.qualified_name, b.qualified_name});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_THAT(r.err, HasSubstr(a.qualified_name));
  const Json oci = Json::parse(r.out);
  std::vector<std::string> nodes;
  for (const Json& d : oci["linux"]["devices"]) {
    nodes.push_back(d["path"].get<std::string>() + " " + d["type"].get<std::string>() + " " +
                    std::to_string(d["major"].get<int64_t>()) + ":" +
                    std::to_string(d["minor"].get<int64_t>()));
  }
  // Cap nodes resolve without existing on the host (fully specified).
  EXPECT_THAT(nodes, Contains("/dev/nvidia-caps/nvidia-cap156 c 508:156"));
  EXPECT_THAT(nodes, Contains("/dev/nvidia-caps/nvidia-cap158 c 508:158"));
  EXPECT_THAT(nodes, Contains("/dev/nvidia-caps/nvidia-cap183 c 508:183"));
  EXPECT_THAT(nodes, Contains("/dev/nvidia-caps/nvidia-cap184 c 508:184"));
  EXPECT_THAT(nodes, Contains("/dev/nvidia1 c 195:1"));
  EXPECT_THAT(nodes, Contains("/dev/nvidiactl c 195:255"));
  EXPECT_THAT(nodes, Contains("/dev/nvidia-uvm c 511:0"));
  EXPECT_THAT(oci["process"]["env"], Contains("NVIDIA_VISIBLE_DEVICES=void"));
  EXPECT_THAT(oci["process"]["env"], Contains("NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu"));
  EXPECT_EQ(oci["hooks"]["createContainer"][0]["path"], "/usr/bin/nvidia-cdi-hook");
  EXPECT_EQ(oci["mounts"][0]["destination"], "/usr/lib/libcuda.so.1");
}

TEST_F(CdiLibraryTest, LibraryRejectsWhatMigdRefusesToWrite) {
  // The library agrees with our refusals: a newer version, or a dotted class.
  std::filesystem::create_directories(options_.spec_dir);
  Publisher publisher(options_, &reader_);
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built,
                            publisher.builder().Build(testing::StandardInstance()));
  Spec newer = built.spec;
  newer.version = "0.6.0";
  WriteFileOrDie(options_.spec_dir + "/newer.json", SerializeSpec(newer));
  Spec dotted = built.spec;
  dotted.kind = "hami.io/mig.v2";
  dotted.devices[0].name = "other";
  WriteFileOrDie(options_.spec_dir + "/dotted.json", SerializeSpec(dotted));
  const CommandResult r = Check({built.qualified_name});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("invalid version \"0.6.0\""));
  EXPECT_THAT(r.err, HasSubstr("dotted.json"));
  EXPECT_THAT(r.err, HasSubstr("unresolvable CDI devices"));
}

// Two files defining the same device at the same priority: the library drops
// it (pkg/cdi/cache.go, resolveConflict) — why SpecWriter refuses to create such a collision.
TEST_F(CdiLibraryTest, SamePriorityConflictMakesTheDeviceUnresolvable) {
  Publisher publisher(options_, &reader_);
  MIGD_ASSERT_OK_AND_ASSIGN(BuiltSpec built, publisher.Publish(testing::StandardInstance()));
  WriteFileOrDie(options_.spec_dir + "/copy.json", built.content);
  const CommandResult r = Check({built.qualified_name});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("conflicting device"));
  EXPECT_THAT(publisher.writer().Write(built),
              migd::testing::StatusIs(StatusCode::kAlreadyExists, HasSubstr("copy.json")));
}

}  // namespace
}  // namespace migd::cdi
