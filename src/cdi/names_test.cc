#include "cdi/names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace migd::cdi {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(NamesTest, Vendor) {
  for (const char* ok : {"hami.io", "nvidia.com", "k8s.gpu.nvidia.com", "a", "a_b-c.d9"}) {
    EXPECT_THAT(ValidateVendor(ok), IsOk()) << ok;
  }
  for (const char* bad : {"", "1hami.io", ".hami", "hami.", "ha/mi", "ha=mi", "ha mi", "ha:mi"}) {
    EXPECT_THAT(ValidateVendor(bad), StatusIs(StatusCode::kInvalidArgument, HasSubstr("vendor")))
        << bad;
  }
}

TEST(NamesTest, ClassDotsOnlyFromSpec060) {
  for (const char* ok : {"mig", "gpu", "m", "mig_dev-2"}) EXPECT_THAT(ValidateClass(ok), IsOk());
  for (const char* bad : {"", "2mig", "mig-", "-mig", "mi/g", "mi.g"}) {
    EXPECT_THAT(ValidateClass(bad), StatusIs(StatusCode::kInvalidArgument, HasSubstr("class")))
        << bad;
  }
  EXPECT_THAT(ValidateClass("mi.g", /*allow_dots=*/true), IsOk());
}

TEST(NamesTest, DeviceName) {
  for (const char* ok :
       {"MIG-4f1c2a9e-1b2c-5d3e-8f90-0a1b2c3d4e5f", "0", "0:1", "a", "gpu0", "mig-1.2_3:4"}) {
    EXPECT_THAT(ValidateDeviceName(ok), IsOk()) << ok;
  }
  for (const char* bad : {"", "-a", "a-", "a/b", "a=b", "MIG-GPU-x/1/2", "a b", ":a"}) {
    EXPECT_THAT(ValidateDeviceName(bad),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("device name")))
        << bad;
  }
}

TEST(NamesTest, QualifiedNames) {
  Kind kind;
  EXPECT_EQ(kind.ToString(), "hami.io/mig");
  EXPECT_EQ(kind.QualifiedName("MIG-x"), "hami.io/mig=MIG-x");
  MIGD_ASSERT_OK_AND_ASSIGN(QualifiedDevice q, ParseQualifiedName("hami.io/mig=MIG-1:2"));
  EXPECT_EQ(q.kind, kind);
  EXPECT_EQ(q.name, "MIG-1:2");
  EXPECT_THAT(ParseQualifiedName("/dev/nvidia0"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("path")));
  EXPECT_THAT(ParseQualifiedName("hami.io/mig"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'='")));
  EXPECT_THAT(ParseQualifiedName("hami.io=x"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'/'")));
  EXPECT_THAT(ParseQualifiedName("hami.io/mig=a/b"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("device name")));
}

TEST(NamesTest, SpecFileNames) {
  Kind kind;
  EXPECT_EQ(SpecFileName(kind, "MIG-x"), "hami.io-mig_MIG-x.json");
  EXPECT_EQ(SpecFilePrefix(kind), "hami.io-mig_");
  EXPECT_EQ(DeviceFromSpecFileName(kind, "hami.io-mig_MIG-x.json"), "MIG-x");
  for (const char* other : {"hami.io-mig_MIG-x.yaml", "hami.io-mig_.json", "hami.io-mig.json",
                            ".hami.io-mig_MIG-x.json.1.2.tmp", "nvidia.com-gpu_MIG-x.json",
                            "hami.io-mig_-x.json", "hami.io-migx_MIG-x.json"}) {
    EXPECT_EQ(DeviceFromSpecFileName(kind, other), std::nullopt) << other;
  }
}

TEST(NamesTest, MigUuidIsTheDeviceName) {
  MIGD_ASSERT_OK_AND_ASSIGN(std::string name,
                            DeviceNameForMigUuid("MIG-4f1c2a9e-1b2c-5d3e-8f90-0a1b2c3d4e5f"));
  EXPECT_EQ(name, "MIG-4f1c2a9e-1b2c-5d3e-8f90-0a1b2c3d4e5f");
  EXPECT_THAT(DeviceNameForMigUuid("MIG-GPU-4f1c2a9e-1b2c-5d3e-8f90-0a1b2c3d4e5f/1/0"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("MIG UUID cannot be")));
}

TEST(NamesTest, Versions) {
  MIGD_ASSERT_OK_AND_ASSIGN(Version v, ParseVersion("0.5.0"));
  EXPECT_EQ(v, kVersion050);
  MIGD_ASSERT_OK_AND_ASSIGN(v, ParseVersion("v1.1.0"));
  EXPECT_EQ(v, kVersion110);
  EXPECT_LT(kVersion050, kVersion060);
  EXPECT_EQ(kVersion070.ToString(), "0.7.0");
  for (const char* bad : {"", "0.2.0", "0.5", "1.2.0", "x"}) {
    EXPECT_THAT(ParseVersion(bad), StatusIs(StatusCode::kInvalidArgument, HasSubstr("version")))
        << bad;
  }
}

}  // namespace
}  // namespace migd::cdi
