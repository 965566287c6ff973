// Executor directly, over the in-process simulator behind
// FaultInjectingDriver: the create journal, the destroy fallbacks of
// DestroyHw, and the states it refuses to destroy.
#include "engine/executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "driver/fault_injecting_driver.h"
#include "engine/gpu_model_builder.h"
#include "engine/manager_testing.h"
#include "sim/fake_gpu_driver.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::engine {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;
using Method = driver::FaultInjectingDriver::Method;
using Timing = driver::FaultInjectingDriver::Timing;

constexpr uint32_t k1g = 19;  // A100-40GB 1g.5gb
constexpr uint32_t k3g = 9;   // A100-40GB 3g.20gb

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIGD_ASSERT_OK_AND_ASSIGN(fake_, sim::FakeGpuDriver::Create("a100-40gb:1", {}, 42));
    faults_ = std::make_unique<driver::FaultInjectingDriver>(fake_.get());
    MIGD_ASSERT_OK_AND_ASSIGN(std::vector<driver::GpuInfo> infos, fake_->ListGpus());
    MIGD_ASSERT_OK_AND_ASSIGN(std::vector<driver::GiProfileInfo> profiles,
                              fake_->GetGiProfiles(GpuIndex(0)));
    MIGD_ASSERT_OK_AND_ASSIGN(mig::GpuModel model, BuildGpuModel(infos[0], profiles));
    info_ = infos[0];
    gpus_.Init(infos, {});
    gpus_.Manage(0, info_, std::move(model));
    MIGD_ASSERT_OK_AND_ASSIGN(
        store_, testing::OpenStore(dir_.Join("state"), clock_, testing::kBootId, /*sync=*/false));
    journal_ = std::make_unique<RecordJournal>(*store_, testing::kBootId);
    executor_ =
        std::make_unique<Executor>(*faults_, *journal_, registry_, gpus_, obs_, clock_, nullptr);
  }
  store::RecordKey Key(uint32_t profile, uint32_t start, uint32_t size) const {
    return {info_.uuid, GiProfileId(profile), {.start = start, .size = size}};
  }
  // A Creating placeholder at `key`, as Allocate reserves it.
  void Placeholder(const store::RecordKey& key) {
    TrackedInstance ph;
    static_cast<store::RecordKey&>(ph.id) = key;
    ph.gpu = GpuIndex(0);
    ph.profile = "1g.5gb";
    MutexLock lock(registry_.mu());
    ASSERT_THAT(registry_.Transition(ph, InstanceState::kCreating, EventReason::kAllocate), IsOk());
    registry_.instances().emplace(key, ph);
  }
  std::optional<TrackedInstance> Tracked(const store::RecordKey& key) {
    MutexLock lock(registry_.mu());
    const TrackedInstance* t = registry_.Find(key);
    return t == nullptr ? std::nullopt : std::optional<TrackedInstance>(*t);
  }
  size_t LiveGis() { return fake_->ListGpuInstances(GpuIndex(0))->size(); }

  migd::testing::TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<sim::FakeGpuDriver> fake_;
  std::unique_ptr<driver::FaultInjectingDriver> faults_;
  driver::GpuInfo info_;
  GpuTable gpus_;
  Registry registry_{clock_, nullptr};
  std::unique_ptr<store::RecordStore> store_;
  std::unique_ptr<RecordJournal> journal_;
  testing::CountingObserver obs_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(ExecutorTest, CreateCommitsTheRecordAndPublishesAMigDevice) {
  const store::RecordKey key = Key(k1g, 3, 1);
  Placeholder(key);
  ASSERT_THAT(executor_->Create(key, store::Owner::Opaque("job"), "req", false), IsOk());
  std::optional<TrackedInstance> t = Tracked(key);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->state, InstanceState::kCreating) << "the caller makes it Active";
  EXPECT_TRUE(t->committed);
  EXPECT_TRUE(t->gi().has_value());
  EXPECT_TRUE(t->ci().has_value());
  testing::ExpectMigIdentity(key.gpu_uuid, t->id.mig_uuid);
  EXPECT_EQ(obs_.published(), std::set<std::string>{t->id.mig_uuid.value()});
  MIGD_ASSERT_OK_AND_ASSIGN(store::LoadResult loaded, store_->LoadAll());
  ASSERT_EQ(loaded.records.size(), 1u);
  EXPECT_EQ(loaded.records[0].phase, store::RecordPhase::kCommitted);
  EXPECT_EQ(loaded.records[0].state, store::RecordState::kActive);
  EXPECT_EQ(loaded.records[0].owner, store::Owner::Opaque("job"));
}

TEST_F(ExecutorTest, CreateNeedsACreatingPlaceholder) {
  EXPECT_THAT(executor_->Create(Key(k1g, 0, 1), store::Owner::Opaque("job"), "req", false),
              StatusIs(StatusCode::kInternal, HasSubstr("no Creating placeholder")));
  EXPECT_EQ(LiveGis(), 0u);
}

TEST_F(ExecutorTest, AFailedCiCreateDestroysTheGiAndDropsThePlaceholderAndIntent) {
  const store::RecordKey key = Key(k1g, 2, 1);
  Placeholder(key);
  faults_->FailNthCall(Method::kCreateCi, 1, InternalError("injected"));
  EXPECT_THAT(executor_->Create(key, store::Owner::Opaque("job"), "req", false),
              StatusIs(StatusCode::kInternal, HasSubstr("creating CI in GI")));
  EXPECT_EQ(LiveGis(), 0u);
  EXPECT_FALSE(Tracked(key).has_value());
  EXPECT_TRUE(store_->LoadAll()->records.empty());
  EXPECT_EQ(obs_.publishes(), 0);
}

TEST_F(ExecutorTest, DestroyHwWithoutAGiIdDestroysWhatIsAtTheJournaledPlacement) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(k3g), {4, 4}));
  (void)gi;
  EXPECT_THAT(executor_->DestroyHw(GpuIndex(0), Key(k3g, 0, 4), std::nullopt, std::nullopt), IsOk())
      << "nothing there: nothing to do";
  EXPECT_EQ(LiveGis(), 1u);
  EXPECT_THAT(executor_->DestroyHw(GpuIndex(0), Key(k3g, 4, 4), std::nullopt, std::nullopt),
              IsOk());
  EXPECT_EQ(LiveGis(), 0u);
}

TEST_F(ExecutorTest, DestroyHwBelievesNotFoundOnlyIfTheGiIsGone) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(k3g), {0, 4}));
  faults_->FailNthCall(Method::kDestroyGi, 1, NotFoundError("NVML_ERROR_NOT_FOUND"),
                       Timing::kInsteadOfCall);
  EXPECT_THAT(executor_->DestroyHw(GpuIndex(0), Key(k3g, 0, 4), gi.id, std::nullopt),
              StatusIs(StatusCode::kNotFound, HasSubstr("is still listed")));
  EXPECT_EQ(LiveGis(), 1u);
  faults_->FailNthCall(Method::kDestroyGi, 1, NotFoundError("NVML_ERROR_NOT_FOUND"),
                       Timing::kAfterCall);
  EXPECT_THAT(executor_->DestroyHw(GpuIndex(0), Key(k3g, 0, 4), gi.id, std::nullopt), IsOk());
  EXPECT_EQ(LiveGis(), 0u);
}

TEST_F(ExecutorTest, DestroyHwDestroysCisItDidNotKnowOfWhenTheGiIsInUse) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(k3g), {0, 4}));
  ASSERT_THAT(fake_->CreateCi(GpuIndex(0), gi.id), IsOk());
  EXPECT_THAT(executor_->DestroyHw(GpuIndex(0), Key(k3g, 0, 4), gi.id, std::nullopt), IsOk());
  EXPECT_EQ(LiveGis(), 0u);
  EXPECT_EQ(faults_->CallCount(Method::kDestroyCi), 1);
  EXPECT_EQ(faults_->CallCount(Method::kDestroyGi), 2) << "IN_USE, then the retry";
}

TEST_F(ExecutorTest, DestroyRefusesInstancesThatAreNotLeaving) {
  TrackedInstance active;
  static_cast<store::RecordKey&>(active.id) = Key(k1g, 0, 1);
  active.state = InstanceState::kActive;
  {
    MutexLock lock(registry_.mu());
    registry_.Load(active, EventReason::kRecovery);
  }
  EXPECT_THAT(executor_->Destroy(active.key()),
              StatusIs(StatusCode::kInternal, HasSubstr("refusing to destroy Active instance")));
  EXPECT_THAT(executor_->Destroy(Key(k1g, 5, 1)), IsOk()) << "untracked: nothing to do";
}

}  // namespace
}  // namespace migd::engine
