// api/convert: every validation rule names its field; conversions keep every
// field.
#include "api/convert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "mig/catalog.h"
#include "testing/status_matchers.h"

namespace migd::api {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

v1::AllocateRequest Good() {
  v1::AllocateRequest r;
  r.set_request_id("req-1");
  v1::PodOwner* pod = r.mutable_owner()->mutable_pod();
  pod->set_namespace_("ns");
  pod->set_name("p");
  pod->set_uid("0b7c-uid");
  pod->set_container("main");
  r.add_instances()->set_profile("3g.20gb");
  return r;
}

TEST(ConvertTest, GoodAllocateRequestConverts) {
  v1::AllocateRequest r = Good();
  v1::InstanceSpec* s = r.add_instances();
  s->set_profile("1g.10gb+me");
  s->set_gpu(1);
  s->mutable_placement()->set_start(6);
  s->mutable_placement()->set_size(1);
  MIGD_ASSERT_OK_AND_ASSIGN(engine::AllocateRequest a, FromProto(r));
  EXPECT_EQ(a.request_id, "req-1");
  EXPECT_EQ(a.owner, store::Owner::Pod("ns", "p", PodUid("0b7c-uid"), "main"));
  ASSERT_EQ(a.instances.size(), 2u);
  EXPECT_EQ(a.instances[0].profile, "3g.20gb");
  EXPECT_FALSE(a.instances[0].gpu.has_value());
  EXPECT_FALSE(a.instances[0].placement.has_value());
  EXPECT_EQ(a.instances[1].gpu, GpuIndex(1));
  EXPECT_EQ(a.instances[1].placement, (mig::Placement{.start = 6, .size = 1}));
}

TEST(ConvertTest, RequestIdRules) {
  v1::AllocateRequest r = Good();
  r.clear_request_id();
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument, "request_id: required"));
  r.set_request_id(std::string(300, 'a'));
  EXPECT_THAT(FromProto(r),
              StatusIs(StatusCode::kInvalidArgument, "request_id: 300 bytes, at most 253"));
  r.set_request_id(std::string(253, 'a'));
  EXPECT_THAT(FromProto(r), IsOk());
  r.set_request_id("abc!d");
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument,
                                     "request_id: '!' at offset 3 is not allowed; use "
                                     "[A-Za-z0-9._:/@-]"));
  r.set_request_id("a b");
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument,
                                     StartsWith("request_id: byte 0x20 at offset 1")));
  r.set_request_id("ns/pod@x:1_2.3-4");
  EXPECT_THAT(FromProto(r), IsOk());
}

TEST(ConvertTest, OwnerRules) {
  v1::AllocateRequest r = Good();
  r.clear_owner();
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument, StartsWith("owner: required")));
  r = Good();
  r.mutable_owner()->mutable_pod()->clear_uid();
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument, "owner.pod.uid: required"));
  r = Good();
  r.mutable_owner()->mutable_pod()->clear_namespace_();
  EXPECT_THAT(FromProto(r),
              StatusIs(StatusCode::kInvalidArgument, "owner.pod.namespace: required"));
  r = Good();
  r.mutable_owner()->mutable_pod()->clear_name();
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument, "owner.pod.name: required"));
  r = Good();
  r.mutable_owner()->mutable_pod()->clear_container();  // optional
  EXPECT_THAT(FromProto(r), IsOk());
  r.mutable_owner()->mutable_pod()->set_container("a\tb");
  EXPECT_THAT(FromProto(r),
              StatusIs(StatusCode::kInvalidArgument,
                       "owner.pod.container: control character U+0009 at offset 1 is not allowed"));
  r = Good();
  r.mutable_owner()->set_opaque_id("");
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument, "owner.opaque_id: required"));
  r.mutable_owner()->set_opaque_id("Jöb 7 (ünïcode ok)");
  MIGD_ASSERT_OK_AND_ASSIGN(engine::AllocateRequest a, FromProto(r));
  EXPECT_EQ(a.owner, store::Owner::Opaque("Jöb 7 (ünïcode ok)"));
  r.mutable_owner()->set_opaque_id(std::string(254, 'x'));
  EXPECT_THAT(FromProto(r),
              StatusIs(StatusCode::kInvalidArgument, "owner.opaque_id: 254 bytes, at most 253"));
}

TEST(ConvertTest, TextRejectsBadUtf8AndC1Controls) {
  EXPECT_THAT(ValidateText("ab\xff", "f", true),
              StatusIs(StatusCode::kInvalidArgument, "f: invalid UTF-8 at offset 2"));
  EXPECT_THAT(ValidateText("\xc0\xaf", "f", true),  // overlong '/'
              StatusIs(StatusCode::kInvalidArgument, "f: invalid UTF-8 at offset 0"));
  EXPECT_THAT(ValidateText("\xed\xa0\x80", "f", true),  // surrogate
              StatusIs(StatusCode::kInvalidArgument, "f: invalid UTF-8 at offset 0"));
  EXPECT_THAT(ValidateText("x\xc2\x85", "f", true),  // U+0085 NEL
              StatusIs(StatusCode::kInvalidArgument,
                       "f: control character U+0085 at offset 1 is not allowed"));
  EXPECT_THAT(ValidateText("x\x7f", "f", true),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("U+007F")));
  EXPECT_THAT(ValidateText("", "f", false), IsOk());
  EXPECT_THAT(ValidateText("日本語 🙂", "f", true), IsOk());
}

TEST(ConvertTest, InstancesRules) {
  v1::AllocateRequest r = Good();
  r.clear_instances();
  EXPECT_THAT(FromProto(r),
              StatusIs(StatusCode::kInvalidArgument, "instances: required, 1 to 64 entries"));
  for (int i = 0; i < 65; ++i) r.add_instances()->set_profile("1g.5gb");
  EXPECT_THAT(FromProto(r),
              StatusIs(StatusCode::kInvalidArgument, "instances: 65 entries, at most 64"));
  r.mutable_instances()->RemoveLast();
  EXPECT_THAT(FromProto(r), IsOk());

  r = Good();
  v1::InstanceSpec* s = r.add_instances();
  s->mutable_placement()->set_size(1);
  EXPECT_THAT(FromProto(r),
              StatusIs(StatusCode::kInvalidArgument, "instances[1].profile: required"));
  s->set_profile("1g.5gb");
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument,
                                     "instances[1].placement: requires instances[1].gpu"));
  s->set_gpu(0);
  s->mutable_placement()->set_size(0);
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument,
                                     "instances[1].placement.size: required (> 0)"));
  s->mutable_placement()->set_start(30);
  s->mutable_placement()->set_size(4);
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument,
                                     "instances[1].placement: 30:4 exceeds 32 memory slices"));
  s->mutable_placement()->set_start(0xFFFFFFFFu);
  s->mutable_placement()->set_size(2);
  EXPECT_THAT(FromProto(r),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("exceeds 32 memory slices")));
  s->set_profile("1g 5gb");
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument,
                                     StartsWith("instances[1].profile: byte 0x20 at offset 2")));
  s->set_profile(std::string(254, 'g'));
  EXPECT_THAT(FromProto(r), StatusIs(StatusCode::kInvalidArgument,
                                     "instances[1].profile: 254 bytes, at most 253"));
}

TEST(ConvertTest, ReleaseRules) {
  v1::ReleaseRequest r;
  EXPECT_THAT(ValidateRelease(r),
              StatusIs(StatusCode::kInvalidArgument, "target: required (request_id or mig_uuid)"));
  r.set_request_id("");
  EXPECT_THAT(ValidateRelease(r), StatusIs(StatusCode::kInvalidArgument, "request_id: required"));
  r.set_request_id("r1");
  EXPECT_THAT(ValidateRelease(r), IsOk());
  r.set_mig_uuid("MIG-nope");
  EXPECT_THAT(ValidateRelease(r), StatusIs(StatusCode::kInvalidArgument,
                                           StartsWith("mig_uuid: 'MIG-nope' is not a MIG UUID")));
  r.set_mig_uuid("GPU-0a1b2c3d-0000-4000-8000-00000000abcd");
  EXPECT_THAT(ValidateRelease(r),
              StatusIs(StatusCode::kInvalidArgument,
                       StartsWith("mig_uuid: 'GPU-0a1b2c3d-0000-4000-8000-00000000abcd' is a GPU "
                                  "UUID, not a MIG UUID")));
  r.set_mig_uuid("");
  EXPECT_THAT(ValidateRelease(r), StatusIs(StatusCode::kInvalidArgument, "mig_uuid: required"));
  r.set_mig_uuid("MIG-0a1b2c3d-0000-4000-8000-00000000abcd");
  EXPECT_THAT(ValidateRelease(r), IsOk());
}

TEST(ConvertTest, ReclaimAndListRules) {
  v1::ReclaimRequest rr;
  MIGD_ASSERT_OK_AND_ASSIGN(engine::ReclaimFilter f, FromProto(rr));
  EXPECT_FALSE(f.gpu.has_value());
  EXPECT_FALSE(f.profile.has_value());
  rr.set_gpu(1);
  rr.set_profile("1g.10gb+me");
  MIGD_ASSERT_OK_AND_ASSIGN(f, FromProto(rr));
  EXPECT_EQ(f.gpu, GpuIndex(1));
  EXPECT_EQ(f.profile, "1g.10gb+me");
  rr.set_profile("1g;rm");
  EXPECT_THAT(FromProto(rr),
              StatusIs(StatusCode::kInvalidArgument, StartsWith("profile: ';' at offset 2")));

  v1::ListRequest lr;
  lr.add_states(v1::INSTANCE_STATE_IDLE);
  lr.add_states(v1::INSTANCE_STATE_ACTIVE);
  MIGD_ASSERT_OK_AND_ASSIGN(auto states, StatesFromProto(lr));
  EXPECT_EQ(states, (std::vector<engine::InstanceState>{engine::InstanceState::kIdle,
                                                        engine::InstanceState::kActive}));
  lr.add_states(v1::INSTANCE_STATE_DESTROYED);
  EXPECT_THAT(StatesFromProto(lr),
              StatusIs(StatusCode::kInvalidArgument,
                       "states[2]: INSTANCE_STATE_DESTROYED only appears in Watch events"));
  lr.set_states(2, v1::INSTANCE_STATE_UNSPECIFIED);
  EXPECT_THAT(StatesFromProto(lr),
              StatusIs(StatusCode::kInvalidArgument,
                       "states[2]: INSTANCE_STATE_UNSPECIFIED is not a state"));
  lr.set_states(2, static_cast<v1::InstanceState>(42));
  EXPECT_THAT(StatesFromProto(lr),
              StatusIs(StatusCode::kInvalidArgument, "states[2]: unknown state 42"));
}

TEST(ConvertTest, StatesAndPathsMapOneToOne) {
  EXPECT_EQ(ToProto(engine::InstanceState::kCreating), v1::INSTANCE_STATE_CREATING);
  EXPECT_EQ(ToProto(engine::InstanceState::kActive), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(ToProto(engine::InstanceState::kIdle), v1::INSTANCE_STATE_IDLE);
  EXPECT_EQ(ToProto(engine::InstanceState::kReclaiming), v1::INSTANCE_STATE_RECLAIMING);
  EXPECT_EQ(ToProto(engine::InstanceState::kDeleting), v1::INSTANCE_STATE_DELETING);
  EXPECT_EQ(ToProto(engine::InstanceState::kError), v1::INSTANCE_STATE_ERROR);
  EXPECT_EQ(ToProto(engine::InstanceState::kNone), v1::INSTANCE_STATE_DESTROYED);
  for (engine::InstanceState s : engine::kAllInstanceStates) {
    if (s == engine::InstanceState::kNone) continue;
    MIGD_ASSERT_OK_AND_ASSIGN(engine::InstanceState back, FromProto(ToProto(s), "s"));
    EXPECT_EQ(back, s);
  }
  EXPECT_EQ(ToProto(planner::Stage::kReuse), v1::ALLOCATION_PATH_REUSE);
  EXPECT_EQ(ToProto(planner::Stage::kFree), v1::ALLOCATION_PATH_CREATE);
  EXPECT_EQ(ToProto(planner::Stage::kReclaim), v1::ALLOCATION_PATH_RECLAIM_CREATE);
}

TEST(ConvertTest, InstanceViewKeepsEveryField) {
  engine::InstanceView v;
  v.state = engine::InstanceState::kActive;
  v.gpu = GpuIndex(1);
  v.gpu_uuid = GpuUuid("GPU-11111111-2222-3333-4444-555555555555");
  v.profile_id = GiProfileId(9);
  v.profile = "3g.20gb";
  v.placement = {.start = 4, .size = 4};
  v.gi_id = NvmlGiId(2);
  v.ci_id = NvmlCiId(0);
  v.mig_uuid = MigUuid("MIG-0a1b2c3d-0000-4000-8000-00000000abcd");
  v.owner = store::Owner::Pod("ns", "p", PodUid("u"), "c");
  v.request_id = "r1";
  v.last_used = Clock::TimePoint(std::chrono::milliseconds(1767225600123));
  v1::Instance out;
  ToProto(v, "hami.io/mig=MIG-0a1b2c3d-0000-4000-8000-00000000abcd", &out);
  EXPECT_EQ(out.state(), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(out.gpu_index(), 1u);
  EXPECT_EQ(out.gpu_uuid(), v.gpu_uuid.value());
  EXPECT_EQ(out.profile(), "3g.20gb");
  EXPECT_EQ(out.profile_id(), 9u);
  EXPECT_EQ(out.placement().start(), 4u);
  EXPECT_EQ(out.placement().size(), 4u);
  EXPECT_EQ(out.gi_id(), 2u);
  EXPECT_EQ(out.ci_id(), 0u);
  EXPECT_EQ(out.mig_uuid(), v.mig_uuid.value());
  EXPECT_EQ(out.owner().pod().namespace_(), "ns");
  EXPECT_EQ(out.owner().pod().name(), "p");
  EXPECT_EQ(out.owner().pod().uid(), "u");
  EXPECT_EQ(out.owner().pod().container(), "c");
  EXPECT_EQ(out.request_id(), "r1");
  EXPECT_EQ(out.last_used_unix_ms(), 1767225600123);
  EXPECT_EQ(out.cdi_device(), "hami.io/mig=MIG-0a1b2c3d-0000-4000-8000-00000000abcd");
  v.owner = store::Owner();
  v.last_used.reset();
  out.Clear();
  ToProto(v, "", &out);
  EXPECT_FALSE(out.has_owner());
  EXPECT_EQ(out.last_used_unix_ms(), 0);
  EXPECT_FALSE(out.unhealthy());
  v.unhealthy = true;
  v.health_reason = "xid 94";
  ToProto(v, "", &out);
  EXPECT_TRUE(out.unhealthy());
  EXPECT_EQ(out.health_reason(), "xid 94");
}

TEST(ConvertTest, GpuCarriesProfilesAndPlacementsOnlyWithMig) {
  const mig::GpuModel* model = mig::Catalog::Default().FindModel("a100-40gb");
  ASSERT_NE(model, nullptr);
  engine::GpuView g;
  g.info.index = GpuIndex(3);
  g.info.uuid = GpuUuid("GPU-11111111-2222-3333-4444-555555555555");
  g.info.name = "NVIDIA A100-SXM4-40GB";
  g.info.minor = 5;
  g.info.memory_total_mib = 40960;
  g.info.mig.supported = true;
  g.info.mig.current = driver::MigMode::kEnabled;
  g.model = model;
  v1::Gpu out;
  ToProto(g, &out);
  EXPECT_EQ(out.index(), 3u);
  EXPECT_EQ(out.minor(), 5u);
  EXPECT_TRUE(out.mig_enabled());
  EXPECT_EQ(out.memory_slices(), 8u);
  EXPECT_EQ(out.memory_total_mib(), 40960u);
  EXPECT_FALSE(out.unhealthy());
  EXPECT_EQ(out.health_reason(), "");
  ASSERT_EQ(out.profiles_size(), static_cast<int>(model->gi_profiles.size()));
  const v1::Profile& p0 = out.profiles(0);
  EXPECT_EQ(p0.name(), model->gi_profiles[0].name);
  EXPECT_EQ(p0.id(), model->gi_profiles[0].id.value());
  EXPECT_EQ(p0.placements_size(), static_cast<int>(model->gi_profiles[0].placements.size()));
  EXPECT_EQ(p0.slice_count(), model->gi_profiles[0].placement_size());
  g.model = nullptr;
  g.info.mig.current = driver::MigMode::kDisabled;
  out.Clear();
  ToProto(g, &out);
  EXPECT_FALSE(out.mig_enabled());
  EXPECT_EQ(out.profiles_size(), 0);
  EXPECT_EQ(out.memory_slices(), 0u);
  g.unhealthy = true;
  g.health_reason = "GPU 3: gpu lost";
  out.Clear();
  ToProto(g, &out);
  EXPECT_TRUE(out.unhealthy());
  EXPECT_EQ(out.health_reason(), "GPU 3: gpu lost");
}

TEST(ConvertTest, PlanNamesReusedAndReclaimedInstances) {
  planner::Plan plan;
  plan.search = planner::Search::kExhaustive;
  planner::InstancePlan reuse;
  reuse.stage = planner::Stage::kReuse;
  reuse.gpu = GpuIndex(0);
  reuse.profile = "1g.5gb";
  reuse.profile_id = GiProfileId(19);
  reuse.placement = {.start = 2, .size = 1};
  reuse.reuse_key = "MIG-a";
  planner::InstancePlan create;
  create.stage = planner::Stage::kReclaim;
  create.gpu = GpuIndex(1);
  create.profile = "4g.20gb";
  create.profile_id = GiProfileId(5);
  create.placement = {.start = 0, .size = 4};
  create.reclaim.push_back({GpuIndex(1), "MIG-b", "1g.5gb", {.start = 0, .size = 1}, 7});
  plan.instances = {reuse, create};
  v1::PlanResponse out;
  ToProto(plan, &out);
  EXPECT_EQ(out.search(), "exhaustive");
  ASSERT_EQ(out.instances_size(), 2);
  EXPECT_EQ(out.instances(0).path(), v1::ALLOCATION_PATH_REUSE);
  EXPECT_EQ(out.instances(0).reuse_mig_uuid(), "MIG-a");
  EXPECT_EQ(out.instances(0).placement().start(), 2u);
  EXPECT_EQ(out.instances(1).path(), v1::ALLOCATION_PATH_RECLAIM_CREATE);
  EXPECT_EQ(out.instances(1).profile_id(), 5u);
  ASSERT_EQ(out.instances(1).reclaims_size(), 1);
  EXPECT_EQ(out.instances(1).reclaims(0).mig_uuid(), "MIG-b");
  EXPECT_EQ(out.instances(1).reclaims(0).gpu_index(), 1u);
  EXPECT_EQ(out.instances(1).reclaims(0).profile(), "1g.5gb");
}

TEST(ConvertTest, EventCarriesTransitionAndReason) {
  engine::InstanceEvent e;
  e.sequence = 17;
  e.time = Clock::TimePoint(std::chrono::milliseconds(1767225600999));
  e.from = engine::InstanceState::kNone;
  e.to = engine::InstanceState::kCreating;
  e.reason = engine::EventReason::kAllocate;
  e.instance.state = engine::InstanceState::kCreating;
  v1::InstanceEvent out;
  ToProto(e, "", &out);
  EXPECT_EQ(out.sequence(), 17u);
  EXPECT_EQ(out.time_unix_ms(), 1767225600999);
  EXPECT_EQ(out.from(), v1::INSTANCE_STATE_UNSPECIFIED);
  EXPECT_EQ(out.to(), v1::INSTANCE_STATE_CREATING);
  EXPECT_EQ(out.reason(), "allocate");
  e.from = engine::InstanceState::kDeleting;
  e.to = engine::InstanceState::kNone;
  e.reason = engine::EventReason::kDestroy;
  ToProto(e, "", &out);
  EXPECT_EQ(out.from(), v1::INSTANCE_STATE_DELETING);
  EXPECT_EQ(out.to(), v1::INSTANCE_STATE_DESTROYED);
  EXPECT_EQ(out.instance().state(), v1::INSTANCE_STATE_DESTROYED);
  EXPECT_EQ(out.reason(), "destroy");
}

TEST(ConvertTest, AHealthMarkIsAWatchEventWithTheInstanceUnhealthy) {
  engine::InstanceEvent e;
  e.from = engine::InstanceState::kIdle;
  e.to = engine::InstanceState::kIdle;
  e.reason = engine::EventReason::kMarkedUnhealthy;
  e.instance.state = engine::InstanceState::kIdle;
  e.instance.unhealthy = true;
  e.instance.health_reason = "xid 94";
  v1::InstanceEvent out;
  ToProto(e, "", &out);
  EXPECT_EQ(out.from(), v1::INSTANCE_STATE_IDLE);
  EXPECT_EQ(out.to(), v1::INSTANCE_STATE_IDLE);
  EXPECT_EQ(out.reason(), "marked-unhealthy");
  EXPECT_TRUE(out.instance().unhealthy());
  EXPECT_EQ(out.instance().health_reason(), "xid 94");
}

}  // namespace
}  // namespace migd::api
