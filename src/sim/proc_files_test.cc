#include "sim/proc_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "base/file_util.h"
#include "sim/machine.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::sim {
namespace {

using ::testing::HasSubstr;

const mig::Catalog& Cat() { return mig::Catalog::Default(); }

std::string Read(const std::string& path) {
  StatusOr<std::string> s = ReadFileToString(path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : "";
}

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

TEST(ProcFilesTest, MinorFormulaMatchesTheGuide) {
  EXPECT_EQ(GiAccessMinor(0, 0), 3u);
  EXPECT_EQ(CiAccessMinor(0, 0, 0), 4u);
  EXPECT_EQ(CiAccessMinor(31, 14, 7), 4322u);
  // The guide's GI 1 with CIs 0, 1, 2 on gpu0 → nvidia-cap12, 13, 14, 15.
  EXPECT_EQ(GiAccessMinor(0, 1), 12u);
  EXPECT_EQ(CiAccessMinor(0, 1, 0), 13u);
  EXPECT_EQ(CiAccessMinor(0, 1, 2), 15u);
  EXPECT_EQ(GiAccessMinor(1, 0), 138u);
}

TEST(ProcFilesTest, CapabilityFileFormat) {
  EXPECT_EQ(CapabilityFileContent(1, 256, 1),
            "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n");
}

TEST(ProcFilesTest, MigMinorsListsEveryEntryInTableOrder) {
  const std::string content = MigMinorsContent();
  std::istringstream in(content);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u + 32 * 15 * 9);
  EXPECT_EQ(lines[0], "config 1");
  EXPECT_EQ(lines[1], "monitor 2");
  EXPECT_EQ(lines[2], "gpu0/gi0/access 3");
  EXPECT_EQ(lines[3], "gpu0/gi0/ci0/access 4");
  EXPECT_EQ(lines[10], "gpu0/gi0/ci7/access 11");
  EXPECT_EQ(lines[11], "gpu0/gi1/access 12");
  EXPECT_EQ(lines.back(), "gpu31/gi14/ci7/access 4322");
  // Every line's minor is the formula's.
  for (size_t i = 2; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].substr(lines[i].rfind(' ') + 1), std::to_string(i + 1)) << lines[i];
  }
}

TEST(ProcFilesTest, StaticFilesAndInstanceFilesFollowTheState) {
  migd::testing::TempDir dir;
  MachineOptions o;
  o.gpus = {{"a100-40gb", 2}};
  o.proc_root = dir.Join("proc");
  SimState s = *NewMachineState(o, Cat());
  s.gpus[1].minor = 5;  // the path uses the device minor, not the index
  ASSERT_TRUE(WriteStaticProcFiles(s, Cat()).ok());
  const std::string root = dir.Join("proc");
  const std::string devices = Read(root + "/devices");
  EXPECT_THAT(devices, HasSubstr("Character devices:\n"));
  EXPECT_THAT(devices, HasSubstr("\n195 nvidia-frontend\n"));
  EXPECT_THAT(devices, HasSubstr("\n508 nvidia-caps\n"));
  EXPECT_THAT(devices, HasSubstr("\n511 nvidia-uvm\n"));
  EXPECT_EQ(Read(root + "/driver/nvidia-caps/mig-minors"), MigMinorsContent());
  EXPECT_EQ(Read(root + "/driver/nvidia-caps/nvlink-minors"), "fabric-mgmt 0\n");
  EXPECT_EQ(Read(root + "/driver/nvidia/capabilities/mig/config"),
            "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n");
  EXPECT_EQ(Read(root + "/driver/nvidia/capabilities/mig/monitor"),
            "DeviceFileMinor: 2\nDeviceFileMode: 292\nDeviceFileModify: 1\n");
  EXPECT_THAT(Read(root + "/driver/nvidia/gpus/0000:37:00.0/information"),
              HasSubstr("Device Minor: \t 5\n"));

  Machine m(s, Cat());
  SimOr<SimGi> gi = m.CreateGi(GpuIndex(1), GiProfileId(9), mig::Placement{4, 4});  // GI 2
  ASSERT_TRUE(gi.ok());
  SimOr<SimCi> c0 = m.CreateCi(GpuIndex(1), gi->id, CiProfileId(0), std::nullopt);
  SimOr<SimCi> c1 = m.CreateCi(GpuIndex(1), gi->id, CiProfileId(0), std::nullopt);
  ASSERT_TRUE(c0.ok() && c1.ok());
  ASSERT_TRUE(SyncInstanceProcFiles(s).ok());
  const std::string gi_dir = root + "/driver/nvidia/capabilities/gpu5/mig/gi2";
  EXPECT_EQ(Read(gi_dir + "/access"), CapabilityFileContent(3 + 135 * 5 + 9 * 2, 292, 1));
  EXPECT_EQ(Read(gi_dir + "/ci0/access"), CapabilityFileContent(3 + 135 * 5 + 18 + 1, 292, 1));
  EXPECT_EQ(Read(gi_dir + "/ci1/access"), CapabilityFileContent(3 + 135 * 5 + 18 + 2, 292, 1));
  EXPECT_FALSE(Exists(root + "/driver/nvidia/capabilities/gpu1"));

  ASSERT_TRUE(m.DestroyCi(GpuIndex(1), gi->id, c0->id).ok());
  ASSERT_TRUE(SyncInstanceProcFiles(s).ok());
  EXPECT_FALSE(Exists(gi_dir + "/ci0"));
  EXPECT_TRUE(Exists(gi_dir + "/ci1/access"));
  EXPECT_TRUE(Exists(gi_dir + "/access"));

  m.Reboot();
  ASSERT_TRUE(SyncInstanceProcFiles(s).ok());
  EXPECT_FALSE(Exists(gi_dir));
  EXPECT_TRUE(Exists(root + "/driver/nvidia/capabilities/mig/config"));
}

TEST(ProcFilesTest, NoRootNoFiles) {
  MachineOptions o;
  o.gpus = {{"a100-40gb", 1}};
  SimState s = *NewMachineState(o, Cat());
  EXPECT_TRUE(WriteStaticProcFiles(s, Cat()).ok());
  EXPECT_TRUE(SyncInstanceProcFiles(s).ok());
}

}  // namespace
}  // namespace migd::sim
