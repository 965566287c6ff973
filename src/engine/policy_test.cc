#include "engine/policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mig/catalog.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

InstanceSpec Spec(const std::string& profile, std::optional<uint32_t> gpu = std::nullopt) {
  InstanceSpec s;
  s.profile = profile;
  if (gpu) s.gpu = GpuIndex(*gpu);
  return s;
}

class PolicyTest : public ::testing::Test {
 protected:
  // GPU 0: A100-40GB, GPU 1: H100-80GB, both managed; GPU 2 unmanaged.
  void SetUp() override {
    std::vector<driver::GpuInfo> infos(3);
    for (uint32_t i = 0; i < 3; ++i) {
      infos[i].index = GpuIndex(i);
      infos[i].uuid = GpuUuid("GPU-00000000-0000-0000-0000-00000000000" + std::to_string(i));
    }
    gpus_.Init(infos, {});
    gpus_.Manage(0, infos[0], *mig::Catalog::Default().FindModel("a100-40gb"));
    gpus_.Manage(1, infos[1], *mig::Catalog::Default().FindModel("h100-80gb"));
  }
  GpuTable gpus_;
  Policy policy_{ManagerPolicy{}};
};

TEST_F(PolicyTest, SetChecksTtlAndProfilesAndChangesNothingOnError) {
  ManagerPolicy p;
  p.idle_ttl = std::chrono::seconds(0);
  EXPECT_THAT(policy_.Set(p, gpus_),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("idleTTL must be positive")));
  p.idle_ttl = std::chrono::seconds(5);
  p.warm_pool["9g.99gb"] = 1;
  EXPECT_THAT(policy_.Set(p, gpus_), StatusIs(StatusCode::kInvalidArgument,
                                              AllOf(HasSubstr("warmPool"), HasSubstr("9g.99gb"))));
  p.warm_pool = {{"3g.40gb", 1}};  // offered by the H100 only: fine
  p.profile_allowlist = {"1g.5gb", "nope"};
  EXPECT_THAT(policy_.Set(p, gpus_),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("migProfileAllowlist"), HasSubstr("nope"))));
  EXPECT_EQ(policy_.Get(), ManagerPolicy{}) << "nothing changed";
  p.profile_allowlist = {"1g.5gb"};
  EXPECT_THAT(policy_.Set(p, gpus_), IsOk());
  EXPECT_EQ(policy_.Get(), p);
}

TEST_F(PolicyTest, WithoutManagedGpusNamesAreNotChecked) {
  GpuTable none;
  none.Init({}, {});
  ManagerPolicy p;
  p.warm_pool["9g.99gb"] = 1;
  EXPECT_THAT(policy_.Set(p, none), IsOk());
}

TEST_F(PolicyTest, AllowlistRefusesOtherProfilesNamingProfileAndList) {
  EXPECT_THAT(policy_.CheckAllowlist({Spec("2g.10gb")}, gpus_), IsOk()) << "empty: all allowed";
  ManagerPolicy p;
  p.profile_allowlist = {"1g.5gb", "3g.40gb"};
  ASSERT_THAT(policy_.Set(p, gpus_), IsOk());
  EXPECT_THAT(policy_.CheckAllowlist({Spec("1g.5gb"), Spec("3g.40gb")}, gpus_), IsOk());
  EXPECT_THAT(policy_.CheckAllowlist({Spec("1g.5gb"), Spec("2g.10gb")}, gpus_),
              StatusIs(StatusCode::kPermissionDenied,
                       AllOf(HasSubstr("profile 2g.10gb is not in migProfileAllowlist"),
                             HasSubstr("(1g.5gb, 3g.40gb)"))));
}

TEST_F(PolicyTest, AllowlistResolvesAliasesOnTheGpusASpecMayUse) {
  // Another name of one of the H100's profiles: an alias from the catalogue,
  // or the driver's "MIG " prefixed form.
  const mig::GpuModel& h100 = *gpus_.Model(1);
  std::string canonical = "3g.40gb";
  std::string other = "MIG 3g.40gb";
  for (const mig::GiProfile& q : h100.gi_profiles) {
    if (!q.aliases.empty()) {
      canonical = q.name;
      other = q.aliases[0];
      break;
    }
  }
  ASSERT_EQ(h100.FindProfileByName(other)->name, canonical);
  ManagerPolicy pol;
  pol.profile_allowlist = {canonical};
  ASSERT_THAT(policy_.Set(pol, gpus_), IsOk());
  EXPECT_THAT(policy_.CheckAllowlist({Spec(other)}, gpus_), IsOk());
  EXPECT_THAT(policy_.CheckAllowlist({Spec(other, 1)}, gpus_), IsOk());
  // Pinned to a GPU where the name resolves to nothing: refused.
  if (gpus_.Model(0)->FindProfileByName(other) == nullptr) {
    EXPECT_THAT(policy_.CheckAllowlist({Spec(other, 0)}, gpus_),
                StatusIs(StatusCode::kPermissionDenied, HasSubstr(other)));
  }
  pol.profile_allowlist = {other};
  ASSERT_THAT(policy_.Set(pol, gpus_), IsOk());
  EXPECT_THAT(policy_.CheckAllowlist({Spec(canonical)}, gpus_), IsOk());
}

}  // namespace
}  // namespace migd::engine
