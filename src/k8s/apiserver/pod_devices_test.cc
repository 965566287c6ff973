// hami.io/vgpu-devices-to-allocate (HAMi pkg/device/devices.go).
#include "k8s/apiserver/pod_devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace migd::k8s::hami {
namespace {

using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(PodDevicesTest, DecodesAndEncodesHamiFormat) {
  MIGD_ASSERT_OK_AND_ASSIGN(PodDevices d, DecodePodDevices("GPU-abc,NVIDIA,9984,29:;"));
  ASSERT_EQ(d.size(), 1u);
  ASSERT_EQ(d[0].size(), 1u);
  EXPECT_EQ(d[0][0], (ContainerDevice{"GPU-abc", "NVIDIA", 9984, 29}));
  EXPECT_EQ(EncodePodDevices(d), "GPU-abc,NVIDIA,9984,29:;");

  // Init container without devices, a container with two instances, and one
  // already erased: positions are kept.
  const std::string multi = ";GPU-a,NVIDIA,4864,15:GPU-a,NVIDIA,9856,29:;;";
  MIGD_ASSERT_OK_AND_ASSIGN(PodDevices m, DecodePodDevices(multi));
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(m[0].empty());
  EXPECT_EQ(m[1].size(), 2u);
  EXPECT_TRUE(m[2].empty());
  EXPECT_EQ(EncodePodDevices(m), multi);
  EXPECT_EQ(NextContainer(m), 1);
  m[1].clear();  // erasing a container leaves its ';'
  EXPECT_EQ(EncodePodDevices(m), ";;;");
  EXPECT_EQ(NextContainer(m), std::nullopt);
  MIGD_ASSERT_OK_AND_ASSIGN(PodDevices e, DecodePodDevices(""));
  EXPECT_TRUE(e.empty());
}

TEST(PodDevicesTest, RejectsMalformedDevices) {
  EXPECT_THAT(DecodePodDevices("GPU-a,NVIDIA,9984:;").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("fewer than 4 fields")));
  EXPECT_THAT(DecodePodDevices("GPU-a,NVIDIA,lots,29:;").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("Usedmem")));
  EXPECT_THAT(DecodePodDevices("GPU-a,NVIDIA,1,x:;").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("Usedcores")));
}

}  // namespace
}  // namespace migd::k8s::hami
