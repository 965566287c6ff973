#include "base/strong_id.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "base/ids.h"

namespace migd {
namespace {

// Construction from the representation is explicit.
static_assert(std::is_constructible_v<GpuIndex, uint32_t>);
static_assert(!std::is_convertible_v<uint32_t, GpuIndex>);
static_assert(!std::is_convertible_v<std::string, GpuUuid>);
// No way back to the representation but value().
static_assert(!std::is_convertible_v<GpuIndex, uint32_t>);
// Distinct kinds of id do not mix, even with the same representation.
static_assert(!std::is_convertible_v<GiProfileIndex, GiProfileId>);
static_assert(!std::is_convertible_v<GiProfileId, GiProfileIndex>);
static_assert(!std::is_constructible_v<GiProfileId, GiProfileIndex>);
static_assert(!std::is_convertible_v<NvmlGiId, NvmlCiId>);
static_assert(!std::is_convertible_v<CiProfileId, GiProfileId>);
static_assert(!std::is_convertible_v<GpuUuid, MigUuid>);
static_assert(!std::is_constructible_v<MigUuid, GpuUuid>);
static_assert(!std::is_same_v<GpuUuid, DeviceId>);
static_assert(!std::is_convertible_v<PodUid, DeviceId>);
// Usable in constant expressions.
static_assert(NvmlGiId(3).value() == 3);
static_assert(NvmlGiId(3) < NvmlGiId(4));
static_assert(NvmlGiId() == NvmlGiId(0));

TEST(StrongIdTest, DefaultIsTheRepresentationsDefault) {
  EXPECT_EQ(GpuIndex().value(), 0u);
  EXPECT_EQ(GpuUuid().value(), "");
}

TEST(StrongIdTest, Compares) {
  EXPECT_EQ(GiProfileId(19), GiProfileId(19));
  EXPECT_NE(GiProfileId(19), GiProfileId(14));
  EXPECT_LT(GiProfileId(0), GiProfileId(9));
  EXPECT_GT(GiProfileId(19), GiProfileId(15));
  EXPECT_LE(GiProfileId(5), GiProfileId(5));
  EXPECT_TRUE((GiProfileId(1) <=> GiProfileId(2)) < 0);
  EXPECT_LT(GpuUuid("GPU-a"), GpuUuid("GPU-b"));
}

TEST(StrongIdTest, OrderedContainers) {
  std::set<NvmlGiId> ids = {NvmlGiId(13), NvmlGiId(7), NvmlGiId(11), NvmlGiId(7)};
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids.begin()->value(), 7u);
  std::map<GpuUuid, int> by_uuid;
  by_uuid[GpuUuid("GPU-b")] = 2;
  by_uuid[GpuUuid("GPU-a")] = 1;
  EXPECT_EQ(by_uuid.begin()->second, 1);
}

TEST(StrongIdTest, HashesLikeTheRepresentation) {
  EXPECT_EQ(std::hash<GpuUuid>()(GpuUuid("GPU-1")), std::hash<std::string>()("GPU-1"));
  EXPECT_EQ(std::hash<NvmlCiId>()(NvmlCiId(5)), std::hash<uint32_t>()(5));
  std::unordered_set<MigUuid> uuids;
  uuids.insert(MigUuid("MIG-1"));
  uuids.insert(MigUuid("MIG-1"));
  uuids.insert(MigUuid("MIG-2"));
  EXPECT_EQ(uuids.size(), 2u);
  EXPECT_EQ(uuids.count(MigUuid("MIG-2")), 1u);
  std::unordered_map<PodUid, int> pods;
  pods[PodUid("uid-1")] = 3;
  EXPECT_EQ(pods.at(PodUid("uid-1")), 3);
}

TEST(StrongIdTest, Streams) {
  std::ostringstream os;
  os << GpuIndex(2) << " " << DeviceId("dev-0");
  EXPECT_EQ(os.str(), "2 dev-0");
}

TEST(IdsTest, ValidGpuUuid) {
  EXPECT_TRUE(IsValidGpuUuid("GPU-5c89d2a0-1b6e-7f3a-9c4d-0e1f2a3b4c5d"));
  EXPECT_TRUE(IsValidGpuUuid("GPU-5C89D2A0-1B6E-7F3A-9C4D-0E1F2A3B4C5D"));
}

TEST(IdsTest, InvalidGpuUuid) {
  for (const char* s : {
           "", "GPU-",
           "5c89d2a0-1b6e-7f3a-9c4d-0e1f2a3b4c5d",       // no prefix
           "MIG-5c89d2a0-1b6e-7f3a-9c4d-0e1f2a3b4c5d",   // other prefix
           "gpu-5c89d2a0-1b6e-7f3a-9c4d-0e1f2a3b4c5d",   // prefix is case-sensitive
           "GPU-5c89d2a0-1b6e-7f3a-9c4d-0e1f2a3b4c5",    // short last group
           "GPU-5c89d2a0-1b6e-7f3a-9c4d-0e1f2a3b4c5d0",  // long last group
           "GPU-5c89d2a01b6e-7f3a-9c4d-0e1f2a3b4c5d",    // missing dash
           "GPU-5c89d2a0-1b6e-7f3a-9c4d-0e1f2a3b4c5g",   // not hex
           "GPU-5c89d2a0_1b6e_7f3a_9c4d_0e1f2a3b4c5d",   // wrong separator
           " GPU-5c89d2a0-1b6e-7f3a-9c4d-0e1f2a3b4c5d",  // leading space
       }) {
    EXPECT_FALSE(IsValidGpuUuid(s)) << "'" << s << "'";
  }
}

TEST(IdsTest, MigUuid) {
  EXPECT_TRUE(IsValidMigUuid("MIG-8f1a0c6e-2d3b-5a4c-9e8f-7a6b5c4d3e2f"));
  EXPECT_FALSE(IsValidMigUuid("GPU-8f1a0c6e-2d3b-5a4c-9e8f-7a6b5c4d3e2f"));
  // The pre-R470 form MIG-GPU-<uuid>/<gi>/<ci> is not accepted.
  EXPECT_FALSE(IsValidMigUuid("MIG-GPU-8f1a0c6e-2d3b-5a4c-9e8f-7a6b5c4d3e2f/1/0"));
  EXPECT_FALSE(IsValidMigUuid("MIG-"));
  EXPECT_FALSE(IsValidGpuUuid("MIG-8f1a0c6e-2d3b-5a4c-9e8f-7a6b5c4d3e2f"));
}

}  // namespace
}  // namespace migd
