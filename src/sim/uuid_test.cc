#include "sim/uuid.h"

#include <gtest/gtest.h>

#include <string>

#include "base/ids.h"

namespace migd::sim {
namespace {

std::string Hex(const std::array<uint8_t, 20>& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : d) {
    out += kHex[b >> 4];
    out += kHex[b & 0xF];
  }
  return out;
}

TEST(Sha1Test, KnownVectors) {
  EXPECT_EQ(Hex(Sha1("")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(Hex(Sha1("abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(Hex(Sha1("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(Hex(Sha1(std::string(1000, 'a'))), "291e9a6c66994949b57ba5e650361e98fc36b1ba");
}

TEST(UuidTest, GpuUuidIsDeterministicAndWellFormed) {
  const std::string a = MakeGpuUuid("h100-80gb", 0, 7);
  EXPECT_TRUE(IsValidGpuUuid(a)) << a;
  EXPECT_EQ(a, MakeGpuUuid("h100-80gb", 0, 7));
  EXPECT_NE(a, MakeGpuUuid("h100-80gb", 1, 7));
  EXPECT_NE(a, MakeGpuUuid("h100-80gb", 0, 8));
  EXPECT_NE(a, MakeGpuUuid("a100-40gb", 0, 7));
}

TEST(UuidTest, MigUuidIsVersion5WithRfc4122Variant) {
  for (uint64_t serial = 1; serial < 50; ++serial) {
    const std::string u = MakeMigUuid("GPU-0a70c8df-4fdb-6bb7-9530-aa9ef752e878", 7, 0, serial);
    ASSERT_TRUE(IsValidMigUuid(u)) << u;
    // MIG-xxxxxxxx-xxxx-5xxx-yxxx-xxxxxxxxxxxx
    EXPECT_EQ(u[18], '5') << u;
    EXPECT_NE(std::string("89ab").find(u[23]), std::string::npos) << u;
    EXPECT_EQ(u, MakeMigUuid("GPU-0a70c8df-4fdb-6bb7-9530-aa9ef752e878", 7, 0, serial));
    EXPECT_NE(u, MakeMigUuid("GPU-0a70c8df-4fdb-6bb7-9530-aa9ef752e878", 7, 0, serial + 1));
  }
}

TEST(UuidTest, Mix64IsABijectionOnSamples) {
  EXPECT_NE(Mix64(0), Mix64(1));
  EXPECT_EQ(Mix64(12345), Mix64(12345));
}

}  // namespace
}  // namespace migd::sim
