#include "store/instance_identity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "testing/status_matchers.h"

namespace migd::store {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kGpu[] = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";
constexpr char kMig[] = "MIG-0b6a1c3e-2f4d-5a6b-8c9d-0e1f2a3b4c5d";

InstanceIdentity Identity() {
  InstanceIdentity id;
  id.gpu_uuid = GpuUuid(kGpu);
  id.profile_id = GiProfileId(19);
  id.placement = {.start = 2, .size = 1};
  id.gi_id = NvmlGiId(9);
  id.ci_id = NvmlCiId(0);
  id.mig_uuid = MigUuid(kMig);
  return id;
}

TEST(InstanceIdentityTest, KeyIsTheSlot) {
  const InstanceIdentity id = Identity();
  const RecordKey want{GpuUuid(kGpu), GiProfileId(19), {.start = 2, .size = 1}};
  EXPECT_EQ(id.key(), want);
  InstanceIdentity other = id;
  other.mig_uuid = MigUuid("MIG-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(other.key(), id.key());
  EXPECT_FALSE(other == id) << "the runtime names are part of the identity";
  other.mig_uuid = id.mig_uuid;
  EXPECT_TRUE(other == id);
}

TEST(InstanceIdentityTest, ToStringNamesEveryPart) {
  EXPECT_EQ(Identity().ToString(),
            std::string("gpu=") + kGpu + " profile=19 placement=2:1 gi=9 ci=0 mig=" + kMig);
  InstanceIdentity placeholder;
  static_cast<RecordKey&>(placeholder) = Identity().key();
  EXPECT_THAT(placeholder.ToString(), HasSubstr(" gi=0 ci=0 mig=-"));
  std::ostringstream os;
  os << Identity().key();
  EXPECT_EQ(os.str(), std::string("gpu=") + kGpu + " profile=19 placement=2:1");
}

TEST(ValidateMigUuidOfTest, AcceptsAMigDeviceUuid) {
  EXPECT_THAT(ValidateMigUuidOf(GpuUuid(kGpu), MigUuid(kMig)), IsOk());
}

TEST(ValidateMigUuidOfTest, RefusesTheParentsOwnUuidNamingBoth) {
  EXPECT_THAT(ValidateMigUuidOf(GpuUuid(kGpu), MigUuid(kGpu)),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(std::string("MIG UUID '") + kGpu + "'"),
                             HasSubstr(std::string("parent GPU '") + kGpu + "'"),
                             HasSubstr("read from the parent device"))));
}

TEST(ValidateMigUuidOfTest, RefusesAUuidWithoutTheMigPrefixNamingBoth) {
  const char* other_gpu = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
  EXPECT_THAT(ValidateMigUuidOf(GpuUuid(kGpu), MigUuid(other_gpu)),
              StatusIs(StatusCode::kInvalidArgument, AllOf(HasSubstr(other_gpu), HasSubstr(kGpu),
                                                           HasSubstr("does not start with MIG-"))));
  EXPECT_THAT(ValidateMigUuidOf(GpuUuid(kGpu), MigUuid("")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("does not start with MIG-")));
}

TEST(ValidateMigUuidOfTest, RefusesOtherFormsAndQuotesAtMost64Characters) {
  EXPECT_THAT(ValidateMigUuidOf(GpuUuid(kGpu), MigUuid("MIG-GPU-x/1/0")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("is not of the form MIG-")));
  const std::string huge = "MIG-" + std::string(1000, 'a');
  Status s = ValidateMigUuidOf(GpuUuid(kGpu), MigUuid(huge));
  EXPECT_THAT(s, StatusIs(StatusCode::kInvalidArgument, HasSubstr(huge.substr(0, 64) + "'")));
  EXPECT_LT(s.message().size(), 300u);
}

}  // namespace
}  // namespace migd::store
