#include "k8s/apiserver/placeholder_id.h"

#include <gtest/gtest.h>

namespace migd::k8s {
namespace {

TEST(PlaceholderIdTest, RoundTripsHamisReplicaIds) {
  const std::string gpu = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";
  EXPECT_EQ(PlaceholderId(gpu, 3), gpu + "-3");
  const std::optional<Placeholder> p = ParsePlaceholderId(gpu + "-12");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->gpu_uuid, gpu);
  EXPECT_EQ(p->replica, 12);
}

TEST(PlaceholderIdTest, RefusesOtherShapes) {
  for (const char* bad : {"", "-1", "GPU-a-", "GPU-a-x", "GPU-a-+1", "nodash", "GPU-a-99999999999",
                          "GPU-a::1", "MIG-a[1-0]"}) {
    EXPECT_FALSE(ParsePlaceholderId(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace migd::k8s
