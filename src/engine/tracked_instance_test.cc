#include "engine/tracked_instance.h"

#include <gtest/gtest.h>

namespace migd::engine {
namespace {

constexpr char kGpu[] = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";
constexpr char kMig[] = "MIG-0b6a1c3e-2f4d-5a6b-8c9d-0e1f2a3b4c5d";

store::Record Committed() {
  store::Record r;
  r.key = {GpuUuid(kGpu), GiProfileId(19), {.start = 2, .size = 1}};
  r.phase = store::RecordPhase::kCommitted;
  r.state = store::RecordState::kActive;
  r.profile_name = "1g.5gb";
  r.gi_id = NvmlGiId(0);
  r.ci_id = NvmlCiId(0);
  r.mig_uuid = MigUuid(kMig);
  r.owner = store::Owner::Opaque("job");
  r.request_id = "req";
  r.last_used_at = Clock::TimePoint(std::chrono::seconds(7));
  return r;
}

TEST(TrackedInstanceTest, RuntimeIdsAreKnownOrNotIndependentlyOfTheirValue) {
  TrackedInstance t;
  EXPECT_EQ(t.gi(), std::nullopt);
  EXPECT_EQ(t.ci(), std::nullopt);
  t.set_gi(NvmlGiId(0));  // GI id 0 exists (the full-GPU GI)
  EXPECT_EQ(t.gi(), NvmlGiId(0));
  t.set_ci(NvmlCiId(3));
  EXPECT_EQ(t.ci(), NvmlCiId(3));
  t.set_gi(std::nullopt);
  EXPECT_EQ(t.gi(), std::nullopt);
  EXPECT_EQ(t.id.gi_id, NvmlGiId(0));
}

TEST(TrackedInstanceTest, FromRecordKeepsWhatTheRecordKnows) {
  store::Record r = Committed();
  TrackedInstance t = TrackedFromRecord(r, GpuIndex(1), "1g.5gb");
  EXPECT_EQ(t.key(), r.key);
  EXPECT_EQ(t.gi(), NvmlGiId(0));
  EXPECT_EQ(t.ci(), NvmlCiId(0));
  EXPECT_EQ(t.id.mig_uuid, MigUuid(kMig));
  EXPECT_EQ(t.gpu, GpuIndex(1));
  EXPECT_EQ(t.owner, r.owner);
  EXPECT_EQ(t.request_id, "req");
  EXPECT_EQ(t.last_used, r.last_used_at);
  r.gi_id.reset();
  r.ci_id.reset();
  r.mig_uuid.reset();
  TrackedInstance intent = TrackedFromRecord(r, GpuIndex(1), "1g.5gb");
  EXPECT_EQ(intent.gi(), std::nullopt);
  EXPECT_EQ(intent.ci(), std::nullopt);
  EXPECT_TRUE(intent.id.mig_uuid.value().empty());
}

TEST(TrackedInstanceTest, ViewsCarryTheIdentity) {
  TrackedInstance t = TrackedFromRecord(Committed(), GpuIndex(1), "1g.5gb");
  t.state = InstanceState::kActive;
  const InstanceView v = ViewOf(t);
  EXPECT_TRUE(static_cast<const store::InstanceIdentity&>(v) == t.id);
  EXPECT_EQ(v.state, InstanceState::kActive);
  EXPECT_EQ(v.profile, "1g.5gb");
  EXPECT_EQ(v.owner, t.owner);
  const PublishedInstance p = PublishedOf(t, 5);
  EXPECT_TRUE(static_cast<const store::InstanceIdentity&>(p) == t.id);
  EXPECT_EQ(p.gpu_minor, 5u);
  EXPECT_EQ(p.gpu, GpuIndex(1));
}

TEST(TrackedInstanceTest, AllocationIdIsTheRequestOrTheInstance) {
  TrackedInstance t = TrackedFromRecord(Committed(), GpuIndex(0), "1g.5gb");
  EXPECT_EQ(AllocationIdOf(t), "req");
  t.ClearOwner();
  EXPECT_TRUE(t.owner.empty());
  EXPECT_EQ(AllocationIdOf(t), std::string("instance:") + kMig);
}

}  // namespace
}  // namespace migd::engine
