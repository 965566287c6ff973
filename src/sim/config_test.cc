#include "sim/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "testing/status_matchers.h"

namespace migd::sim {
namespace {

using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ParseGpuSpecsTest, CountsAndOptions) {
  StatusOr<std::vector<GpuSpec>> s =
      ParseGpuSpecs("a100-40gb:2,h100-80gb:1, a30-24gb:1:mig-off:no-permission,b200-180gb");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(
      *s, ElementsAre(GpuSpec{"a100-40gb", 2, true, true}, GpuSpec{"h100-80gb", 1, true, true},
                      GpuSpec{"a30-24gb", 1, false, false}, GpuSpec{"b200-180gb", 1, true, true}));
  EXPECT_THAT(ParseGpuSpecs(""), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(ParseGpuSpecs("a100-40gb:0"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("count")));
  EXPECT_THAT(ParseGpuSpecs("a100-40gb:x"), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(ParseGpuSpecs("a100-40gb:1:turbo"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("turbo")));
  EXPECT_THAT(ParseGpuSpecs("a100-40gb:1,,h100-80gb:1"),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

TEST(ParseGiIdPolicyTest, DeterministicAndShuffle) {
  EXPECT_EQ(*ParseGiIdPolicy("deterministic"), GiIdPolicy{});
  EXPECT_EQ(*ParseGiIdPolicy("shuffle:42"), (GiIdPolicy{GiIdMode::kShuffle, 42}));
  EXPECT_EQ(*ParseGiIdPolicy("shuffle:0x10"), (GiIdPolicy{GiIdMode::kShuffle, 16}));
  EXPECT_FALSE(ParseGiIdPolicy("shuffle").ok());
  EXPECT_FALSE(ParseGiIdPolicy("shuffle:-1").ok());
  EXPECT_FALSE(ParseGiIdPolicy("random").ok());
}

TEST(FaultPlanTest, ParsesEveryForm) {
  StatusOr<FaultPlan> p = FaultPlan::Parse(
      "nvmlGpuInstanceDestroy=IN_USE@2,nvmlDeviceCreateGpuInstanceWithPlacement=GPU_IS_LOST,"
      "nvmlComputeInstanceDestroy=NVML_ERROR_TIMEOUT@3+,nvmlShutdown=999,"
      "nvmlGpuInstanceCreateComputeInstance=CRASH@1,nvmlDeviceGetCount_v2=CRASH_AFTER,"
      "nvmlInit_v2=ERROR_UNKNOWN");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->rules().size(), 7u);
  EXPECT_EQ(p->rules()[0], (FaultRule{"nvmlGpuInstanceDestroy", FaultAction::kReturn,
                                      NVML_ERROR_IN_USE, 2, false}));
  EXPECT_EQ(p->rules()[1].code, NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(p->rules()[1].nth, 0u);
  EXPECT_EQ(p->rules()[2].code, NVML_ERROR_TIMEOUT);
  EXPECT_TRUE(p->rules()[2].and_later);
  EXPECT_EQ(p->rules()[3].code, NVML_ERROR_UNKNOWN);
  EXPECT_EQ(p->rules()[4].action, FaultAction::kCrash);
  EXPECT_EQ(p->rules()[5].action, FaultAction::kCrashAfter);
  EXPECT_EQ(p->rules()[6].code, NVML_ERROR_UNKNOWN);
}

TEST(FaultPlanTest, RejectsBadEntries) {
  EXPECT_THAT(FaultPlan::Parse("nvmlFoo=IN_USE"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown function 'nvmlFoo'")));
  EXPECT_THAT(FaultPlan::Parse("nvmlShutdown=SOMETIMES"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown error 'SOMETIMES'")));
  EXPECT_FALSE(FaultPlan::Parse("nvmlShutdown=SUCCESS").ok());
  EXPECT_FALSE(FaultPlan::Parse("nvmlShutdown=0").ok());
  EXPECT_FALSE(FaultPlan::Parse("nvmlShutdown=IN_USE@0").ok());
  EXPECT_FALSE(FaultPlan::Parse("nvmlShutdown=IN_USE@").ok());
  EXPECT_FALSE(FaultPlan::Parse("nvmlShutdown=IN_USE@x+").ok());
  EXPECT_FALSE(FaultPlan::Parse("nvmlShutdown").ok());
  EXPECT_TRUE(FaultPlan::Parse("")->empty());
}

TEST(FaultPlanTest, MatchSemantics) {
  FaultPlan p = *FaultPlan::Parse(
      "nvmlGpuInstanceDestroy=IN_USE@2,nvmlComputeInstanceDestroy=TIMEOUT@3+,"
      "nvmlDeviceGetCount_v2=UNKNOWN");
  EXPECT_FALSE(p.Match("nvmlGpuInstanceDestroy", 1));
  EXPECT_TRUE(p.Match("nvmlGpuInstanceDestroy", 2));
  EXPECT_FALSE(p.Match("nvmlGpuInstanceDestroy", 3));
  EXPECT_FALSE(p.Match("nvmlComputeInstanceDestroy", 2));
  EXPECT_TRUE(p.Match("nvmlComputeInstanceDestroy", 3));
  EXPECT_TRUE(p.Match("nvmlComputeInstanceDestroy", 300));
  EXPECT_TRUE(p.Match("nvmlDeviceGetCount_v2", 1));
  EXPECT_TRUE(p.Match("nvmlDeviceGetCount_v2", 77));
  EXPECT_FALSE(p.Match("nvmlDeviceGetCount", 1));
}

TEST(LatencyTest, ParsesAndLooksUp) {
  auto lat = ParseLatencies(
      "nvmlGpuInstanceDestroy=1000, nvmlDeviceCreateGpuInstanceWithPlacement=250,*=5");
  ASSERT_TRUE(lat.ok()) << lat.status();
  SimConfig c;
  c.latency_ms = *lat;
  EXPECT_EQ(c.LatencyFor("nvmlGpuInstanceDestroy"), 1000u);
  EXPECT_EQ(c.LatencyFor("nvmlDeviceCreateGpuInstanceWithPlacement"), 250u);
  EXPECT_EQ(c.LatencyFor("nvmlDeviceGetCount_v2"), 5u);
  c.latency_ms.erase("*");
  EXPECT_EQ(c.LatencyFor("nvmlDeviceGetCount_v2"), 0u);
  EXPECT_THAT(ParseLatencies("nvmlFoo=1"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("nvmlFoo")));
  EXPECT_FALSE(ParseLatencies("nvmlShutdown=-1").ok());
  EXPECT_FALSE(ParseLatencies("nvmlShutdown=600001").ok());
  EXPECT_FALSE(ParseLatencies("nvmlShutdown").ok());
  EXPECT_TRUE(ParseLatencies("")->empty());
}

class EnvTest : public ::testing::Test {
 protected:
  StatusOr<SimConfig> Read() {
    return SimConfigFromEnv(mig::Catalog::Default(), [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    });
  }
  std::map<std::string, std::string> env_;
};

TEST_F(EnvTest, DefaultsWithNothingSet) {
  StatusOr<SimConfig> c = Read();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->state_path, "");
  EXPECT_FALSE(c->gpus.has_value());
  EXPECT_EQ(c->gi_id_policy, GiIdPolicy{});
  EXPECT_TRUE(c->faults.empty());
  EXPECT_EQ(c->profile_info_max_version, 3);
  EXPECT_TRUE(c->fsync);
  EXPECT_EQ(c->mig_index, MigIndexMode::kShuffled);
  EXPECT_EQ(c->legacy_mig_uuid, LegacyMigUuidLookup::kAccepted);
  EXPECT_EQ(c->parent_instance_id, ParentInstanceIdAnswer::kNotSupported);
  EXPECT_EQ(c->new_ci_hidden_walks, 0u);
  EXPECT_FALSE(MachineOptionsFromConfig(*c).ok());
}

TEST_F(EnvTest, ReadsEveryKnob) {
  env_ = {{"MIGD_SIM_STATE", "/tmp/s.json"},
          {"MIGD_SIM_GPUS", "a100-40gb:2"},
          {"MIGD_SIM_GI_IDS", "shuffle:7"},
          {"MIGD_SIM_NONCE", "0x2a"},
          {"MIGD_SIM_PROC_ROOT", "/tmp/proc/"},
          {"MIGD_SIM_FAULTS", "nvmlShutdown=IN_USE"},
          {"MIGD_SIM_LATENCY_MS", "nvmlShutdown=3"},
          {"MIGD_SIM_PROFILE_INFO_MAX_VERSION", "2"},
          {"MIGD_SIM_FSYNC", "0"},
          {"MIGD_SIM_MIG_INDEX", "sparse"},
          {"MIGD_SIM_LEGACY_MIG_UUID", "invalid-argument"},
          {"MIGD_SIM_PARENT_INSTANCE_ID", "invalid-argument"},
          {"MIGD_SIM_NEW_CI_VISIBILITY", "after-walks:3"}};
  StatusOr<SimConfig> c = Read();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state_path, "/tmp/s.json");
  EXPECT_EQ(c->gpus->size(), 1u);
  EXPECT_EQ(c->gi_id_policy, (GiIdPolicy{GiIdMode::kShuffle, 7}));
  EXPECT_EQ(c->nonce, 42u);
  EXPECT_EQ(c->proc_root, "/tmp/proc");
  EXPECT_EQ(c->faults.rules().size(), 1u);
  EXPECT_EQ(c->LatencyFor("nvmlShutdown"), 3u);
  EXPECT_EQ(c->profile_info_max_version, 2);
  EXPECT_FALSE(c->fsync);
  EXPECT_EQ(c->mig_index, MigIndexMode::kSparse);
  EXPECT_EQ(c->legacy_mig_uuid, LegacyMigUuidLookup::kInvalidArgument);
  EXPECT_EQ(c->parent_instance_id, ParentInstanceIdAnswer::kInvalidArgument);
  EXPECT_EQ(c->new_ci_hidden_walks, 3u);
  StatusOr<MachineOptions> o = MachineOptionsFromConfig(*c);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->nonce, 42u);
  EXPECT_EQ(o->proc_root, "/tmp/proc");
  EXPECT_EQ(o->gi_id_policy.mode, GiIdMode::kShuffle);
}

TEST_F(EnvTest, EveryBadValueNamesItsVariable) {
  const std::map<std::string, std::string> bad = {
      {"MIGD_SIM_GPUS", "z100:1"},
      {"MIGD_SIM_GI_IDS", "random"},
      {"MIGD_SIM_NONCE", "abc"},
      {"MIGD_SIM_PROC_ROOT", "relative/dir"},
      {"MIGD_SIM_FAULTS", "nvmlShutdown=NOPE"},
      {"MIGD_SIM_LATENCY_MS", "nvmlShutdown=slow"},
      {"MIGD_SIM_PROFILE_INFO_MAX_VERSION", "4"},
      {"MIGD_SIM_FSYNC", "yes"},
      {"MIGD_SIM_MIG_INDEX", "random"},
      {"MIGD_SIM_LEGACY_MIG_UUID", "refused"},
      {"MIGD_SIM_PARENT_INSTANCE_ID", "zero"},
      {"MIGD_SIM_NEW_CI_VISIBILITY", "after-walks:0"},
  };
  for (const auto& [name, value] : bad) {
    env_ = {{"MIGD_SIM_STATE", "/tmp/s.json"}, {name, value}};
    EXPECT_THAT(Read(), StatusIs(StatusCode::kInvalidArgument, StartsWith(name + ":")))
        << name << "=" << value;
  }
  for (const char* v : {"after-walks:9", "after-walks:", "later", "after-walks:x"}) {
    env_ = {{"MIGD_SIM_NEW_CI_VISIBILITY", v}};
    EXPECT_THAT(Read(), StatusIs(StatusCode::kInvalidArgument,
                                 HasSubstr("expected immediate or after-walks:<1..8>")))
        << v;
  }
  env_ = {{"MIGD_SIM_MIG_INDEX", "dense"}};
  EXPECT_EQ(Read()->mig_index, MigIndexMode::kDense);
  env_ = {{"MIGD_SIM_GPUS", "a100-40gb:20,h100-80gb:13"}};
  EXPECT_THAT(Read(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("more than 32")));
}

}  // namespace
}  // namespace migd::sim
