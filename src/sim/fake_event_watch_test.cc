#include "sim/fake_event_watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "sim/fake_gpu_driver.h"
#include "testing/status_matchers.h"

namespace migd::sim {
namespace {

using ::migd::driver::GpuEvent;
using ::migd::driver::GpuEventKind;
using ::migd::driver::GpuEventKinds;
using ::migd::driver::GpuEventWatch;
using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

constexpr std::chrono::milliseconds kNoWait{0};

std::optional<GpuEvent> Next(GpuEventWatch& w) {
  StatusOr<std::optional<GpuEvent>> e = w.Wait(kNoWait);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : std::nullopt;
}

struct Fixture {
  std::unique_ptr<FakeGpuDriver> driver;
  std::unique_ptr<GpuEventWatch> watch;
};

Fixture Open(std::string_view gpus) {
  Fixture f;
  StatusOr<std::unique_ptr<FakeGpuDriver>> d = FakeGpuDriver::Create(gpus);
  EXPECT_TRUE(d.ok()) << d.status();
  f.driver = std::move(d).value();
  StatusOr<std::unique_ptr<GpuEventWatch>> w = f.driver->OpenEventWatch();
  EXPECT_TRUE(w.ok()) << w.status();
  f.watch = std::move(w).value();
  return f;
}

TEST(FakeEventWatchTest, DeliversXidsWithTheirAttribution) {
  Fixture f = Open("h100-80gb:2");
  MIGD_ASSERT_OK_AND_ASSIGN(GpuEventKinds got, f.watch->Register(GpuIndex(1), GpuEventKinds::All()));
  EXPECT_EQ(got, GpuEventKinds::All());
  ASSERT_THAT(f.driver->InjectEvents("xid=79@1,xid=43@1/3/0,xid=31@0"), IsOk());
  GpuEvent a{GpuIndex(1), GpuEventKind::kXid, 79, std::nullopt, std::nullopt};
  GpuEvent b{GpuIndex(1), GpuEventKind::kXid, 43, NvmlGiId(3), NvmlCiId(0)};
  EXPECT_EQ(Next(*f.watch), a);
  EXPECT_EQ(Next(*f.watch), b);
  EXPECT_EQ(Next(*f.watch), std::nullopt);  // GPU 0 is not registered
}

TEST(FakeEventWatchTest, EventsBeforeRegistrationAreNotDelivered) {
  Fixture f = Open("a100-40gb:1");
  ASSERT_THAT(f.driver->InjectEvents("xid=79@0"), IsOk());
  ASSERT_THAT(f.watch->Register(GpuIndex(0), GpuEventKinds::All()), IsOk());
  EXPECT_EQ(Next(*f.watch), std::nullopt);
}

TEST(FakeEventWatchTest, CreateAndDestroyAreMigConfigChanges) {
  Fixture f = Open("a100-40gb:1");
  ASSERT_THAT(f.watch->Register(GpuIndex(0), GpuEventKinds{.mig_config_change = true}), IsOk());
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, f.driver->CreateGi(GpuIndex(0), GiProfileId(0), {0, 8}));
  ASSERT_THAT(f.driver->DestroyGi(GpuIndex(0), gi.id), IsOk());
  ASSERT_THAT(f.driver->InjectEvents("xid=79@0"), IsOk());  // not asked for
  for (int i = 0; i < 2; ++i) {
    std::optional<GpuEvent> e = Next(*f.watch);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->kind, GpuEventKind::kMigConfigChange);
  }
  EXPECT_EQ(Next(*f.watch), std::nullopt);
}

TEST(FakeEventWatchTest, ALostGpuIsReportedOnceThenLeftOut) {
  Fixture f = Open("a100-40gb:2");
  ASSERT_THAT(f.watch->Register(GpuIndex(0), GpuEventKinds::All()), IsOk());
  ASSERT_THAT(f.driver->InjectEvents("gpu-lost@0"), IsOk());
  std::optional<GpuEvent> e = Next(*f.watch);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, GpuEventKind::kGpuLost);
  EXPECT_EQ(Next(*f.watch), std::nullopt);
  EXPECT_THAT(f.watch->Register(GpuIndex(0), GpuEventKinds::All()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("GPU_IS_LOST")));
  EXPECT_THAT(f.driver->InjectEvents("xid=79@0"),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("GPU_IS_LOST")));
}

TEST(FakeEventWatchTest, RegistersOnlyTheSupportedKinds) {
  Fixture f = Open("a100-40gb:1");
  f.driver->SetSupportedEventKinds(GpuEventKinds{.xid = true});
  MIGD_ASSERT_OK_AND_ASSIGN(GpuEventKinds got, f.watch->Register(GpuIndex(0), GpuEventKinds::All()));
  EXPECT_EQ(got, (GpuEventKinds{.xid = true}));
  f.driver->SetSupportedEventKinds(GpuEventKinds{});
  Fixture g = Open("a100-40gb:1");
  g.driver->SetSupportedEventKinds(GpuEventKinds{});
  MIGD_ASSERT_OK_AND_ASSIGN(GpuEventKinds none, g.watch->Register(GpuIndex(0), GpuEventKinds::All()));
  EXPECT_TRUE(none.empty());
}

TEST(FakeEventWatchTest, ErrorsAfterCloseAndForUnknownGpus) {
  Fixture f = Open("a100-40gb:1");
  EXPECT_THAT(f.watch->Register(GpuIndex(4), GpuEventKinds::All()),
              StatusIs(StatusCode::kNotFound, HasSubstr("GPU 4")));
  EXPECT_THAT(f.driver->InjectEvents("xid=79@4"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("GPU 4")));
  EXPECT_THAT(f.watch->Close(), IsOk());
  EXPECT_THAT(f.watch->Close(), IsOk());
  EXPECT_THAT(f.watch->Wait(kNoWait), StatusIs(StatusCode::kFailedPrecondition, HasSubstr("closed")));
  EXPECT_THAT(f.watch->Register(GpuIndex(0), GpuEventKinds::All()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("closed")));
}

TEST(FakeEventWatchTest, AWaitingThreadWakesForAnEventOrAClose) {
  Fixture f = Open("a100-40gb:1");
  ASSERT_THAT(f.watch->Register(GpuIndex(0), GpuEventKinds::All()), IsOk());
  StatusOr<std::optional<GpuEvent>> got = std::optional<GpuEvent>();
  // The longest wait: the thread returns only because of the injection.
  std::thread waiter([&] { got = f.watch->Wait(GpuEventWatch::kMaxWait); });
  ASSERT_THAT(f.driver->InjectEvents("xid=79@0"), IsOk());
  waiter.join();
  // Either the event, or (if the wait began after the injection's signal)
  // the event on the next call: never lost.
  ASSERT_TRUE(got.ok());
  if (!got->has_value()) got = f.watch->Wait(kNoWait);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->xid, 79u);
  std::thread closer_waiter([&] { got = f.watch->Wait(GpuEventWatch::kMaxWait); });
  ASSERT_THAT(f.watch->Close(), IsOk());
  closer_waiter.join();
  EXPECT_FALSE(got.ok());
}

TEST(FakeEventWatchTest, OpenIsCounted) {
  Fixture f = Open("a100-40gb:1");
  EXPECT_EQ(f.driver->Snapshot().counters["OpenEventWatch"]["SUCCESS"], 1u);
}

}  // namespace
}  // namespace migd::sim
