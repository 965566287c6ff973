#include "engine/journal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::engine {
namespace {

using ::migd::testing::IsOk;

constexpr char kGpu[] = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";
constexpr char kMig[] = "MIG-0b6a1c3e-2f4d-5a6b-8c9d-0e1f2a3b4c5d";

TrackedInstance Placeholder() {
  TrackedInstance t;
  static_cast<store::RecordKey&>(t.id) = {GpuUuid(kGpu), GiProfileId(19), {.start = 2, .size = 1}};
  t.gpu = GpuIndex(0);
  t.profile = "1g.5gb";
  t.owner = store::Owner::Opaque("job");
  t.request_id = "req";
  t.created_at = Clock::TimePoint(std::chrono::seconds(100));
  return t;
}

TrackedInstance Created() {
  TrackedInstance t = Placeholder();
  t.set_gi(NvmlGiId(0));
  t.set_ci(NvmlCiId(0));
  t.id.mig_uuid = MigUuid(kMig);
  t.last_used = Clock::TimePoint(std::chrono::seconds(200));
  return t;
}

TEST(RecordOfTest, AnIntentCarriesOnlyWhatExists) {
  const store::Record r =
      RecordOf(Placeholder(), InstanceState::kCreating, store::RecordPhase::kIntent, "boot");
  EXPECT_EQ(r.key, Placeholder().key());
  EXPECT_EQ(r.phase, store::RecordPhase::kIntent);
  EXPECT_EQ(r.state, store::RecordState::kCreating);
  EXPECT_EQ(r.gi_id, std::nullopt);
  EXPECT_EQ(r.ci_id, std::nullopt);
  EXPECT_EQ(r.mig_uuid, std::nullopt);
  EXPECT_TRUE(r.owner.empty()) << "only Active records name the owner";
  EXPECT_EQ(r.boot_id, "boot");
  EXPECT_EQ(r.created_at, Placeholder().created_at);
  EXPECT_THAT(store::ValidateRecord(r), IsOk());
}

TEST(RecordOfTest, ACommittedRecordCarriesTheIdentityAndTheOwnerWhenActive) {
  const store::Record active =
      RecordOf(Created(), InstanceState::kActive, store::RecordPhase::kCommitted, "boot");
  EXPECT_EQ(active.gi_id, NvmlGiId(0));
  EXPECT_EQ(active.ci_id, NvmlCiId(0));
  EXPECT_EQ(active.mig_uuid, MigUuid(kMig));
  EXPECT_EQ(active.owner, store::Owner::Opaque("job"));
  EXPECT_EQ(active.request_id, "req");
  EXPECT_EQ(active.last_used_at, Created().last_used);
  EXPECT_THAT(store::ValidateRecord(active), IsOk());
  for (InstanceState s : {InstanceState::kIdle, InstanceState::kDeleting, InstanceState::kError}) {
    const store::Record r = RecordOf(Created(), s, store::RecordPhase::kCommitted, "boot");
    EXPECT_EQ(r.state, ToRecordState(s));
    EXPECT_TRUE(r.owner.empty()) << InstanceStateName(s);
    EXPECT_TRUE(r.request_id.empty()) << InstanceStateName(s);
  }
}

TEST(RecordJournalTest, WritesStampedRecordsAndNamesTheKeyOnError) {
  migd::testing::TempDir dir;
  FakeClock clock;
  store::RecordStoreOptions so;
  auto store = store::RecordStore::Open(dir.Join("state"), clock, so);
  ASSERT_THAT(store, IsOk());
  RecordJournal journal(**store, "boot-7");
  ASSERT_THAT(journal.Write(Created(), InstanceState::kIdle, store::RecordPhase::kCommitted),
              IsOk());
  auto loaded = (*store)->LoadAll();
  ASSERT_THAT(loaded, IsOk());
  ASSERT_EQ(loaded->records.size(), 1u);
  EXPECT_EQ(loaded->records[0].boot_id, "boot-7");
  EXPECT_EQ(loaded->records[0].state, store::RecordState::kIdle);
  // An intent over a committed record is refused by the store's journal rules.
  Status s = journal.Write(Placeholder(), InstanceState::kCreating, store::RecordPhase::kIntent);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("writing record " + Created().key().ToString()));
  ASSERT_THAT(journal.Remove(Created().key()), IsOk());
  EXPECT_TRUE((*store)->LoadAll()->records.empty());
}

}  // namespace
}  // namespace migd::engine
