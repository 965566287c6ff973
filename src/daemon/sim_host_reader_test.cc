#include "daemon/sim_host_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::daemon {
namespace {

using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

class SimHostReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    migd::testing::WriteFileOrDie(dir_.Join("proc/devices"),
                                  "Character devices:\n  1 mem\n195 nvidia-frontend\n"
                                  "508 nvidia-caps\n511 nvidia-uvm\n\nBlock devices:\n"
                                  "  8 nvidia-uvm\n");
  }
  cdi::DeviceNodeInfo Stat(const std::string& name) {
    StatusOr<cdi::DeviceNodeInfo> info = reader_.StatDeviceNode("/dev/" + name);
    EXPECT_TRUE(info.ok()) << name << ": " << info.status();
    return info.ok() ? *info : cdi::DeviceNodeInfo{};
  }

  migd::testing::TempDir dir_;
  SimHostReader reader_{dir_.Join("proc"), "/dev"};
};

TEST_F(SimHostReaderTest, SynthesisesNvidiaNodesFromProcDevices) {
  EXPECT_EQ(Stat("nvidia3"), (cdi::DeviceNodeInfo{'c', 195, 3, 0666}));
  EXPECT_EQ(Stat("nvidiactl"), (cdi::DeviceNodeInfo{'c', 195, 255, 0666}));
  EXPECT_EQ(Stat("nvidia-modeset"), (cdi::DeviceNodeInfo{'c', 195, 254, 0666}));
  EXPECT_EQ(Stat("nvidia-uvm"), (cdi::DeviceNodeInfo{'c', 511, 0, 0666}));
  EXPECT_EQ(Stat("nvidia-uvm-tools"), (cdi::DeviceNodeInfo{'c', 511, 1, 0666}));
  EXPECT_EQ(Stat("nvidia-caps/nvidia-cap21"), (cdi::DeviceNodeInfo{'c', 508, 21, 0444}));
}

TEST_F(SimHostReaderTest, OtherPathsAreNotFound) {
  for (const std::string path : {"/dev/sda", "/dev/nvidia-foo", "/dev/nvidia-caps/x",
                                 "/other/nvidia0", "/dev/nvidia12345"}) {
    EXPECT_THAT(reader_.StatDeviceNode(path), StatusIs(StatusCode::kNotFound, ::testing::_))
        << path;
  }
}

TEST_F(SimHostReaderTest, MissingMajorIsNotFound) {
  migd::testing::WriteFileOrDie(dir_.Join("proc/devices"), "Character devices:\n  1 mem\n");
  EXPECT_THAT(reader_.StatDeviceNode("/dev/nvidia0"),
              StatusIs(StatusCode::kNotFound, HasSubstr("no \"nvidia-frontend\" major")));
}

TEST_F(SimHostReaderTest, ReadsFilesFromDisk) {
  EXPECT_THAT(reader_.ReadFile(dir_.Join("proc/devices")).value(), HasSubstr("nvidia-caps"));
  EXPECT_THAT(reader_.ReadFile(dir_.Join("proc/none")),
              StatusIs(StatusCode::kNotFound, ::testing::_));
}

}  // namespace
}  // namespace migd::daemon
