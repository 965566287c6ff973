// NvmlEventWatch (driver/nvml/nvml_events.h) through NvmlDriver over the
// simulator's libnvidia-ml-sim.so, loaded by path as every production NVML
// path is in tests. Events are injected with migdSimInjectEvents; the
// behaviours nvml.h leaves open are the simulator's knobs
// (MIGD_SIM_EVENT_WAIT_ZERO, MIGD_SIM_EVENT_COALESCE, MIGD_SIM_GPU_LOST).
#include "driver/nvml/nvml_events.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "testing/status_matchers.h"

namespace migd::driver {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;
using sim_testing::SimMachine;

constexpr std::chrono::milliseconds kShort{1};
const GpuIndex kGpu0(0);
const GpuIndex kGpu1(1);

class NvmlEventsTest : public ::testing::Test {
 protected:
  void Start(const std::string& gpus, const std::map<std::string, std::string>& env = {},
             const char* library = MIGD_SIM_LIBRARY) {
    library_ = library;
    sim_ = std::make_unique<SimMachine>(gpus, env);
    MIGD_ASSERT_OK_AND_ASSIGN(driver_, NvmlDriver::Open(library));
    MIGD_ASSERT_OK_AND_ASSIGN(watch_, driver_->OpenEventWatch());
  }
  void TearDown() override {
    watch_.reset();
    driver_.reset();
    sim_.reset();
  }
  void Inject(const std::string& specs) {
    ASSERT_EQ(sim_testing::InjectEvents(library_, specs), NVML_SUCCESS) << specs;
  }
  // The next event; nullopt after one short wait without one.
  std::optional<GpuEvent> Next() {
    StatusOr<std::optional<GpuEvent>> e = watch_->Wait(kShort);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : std::nullopt;
  }
  // Every event until a wait times out.
  std::vector<GpuEvent> Drain() {
    std::vector<GpuEvent> out;
    while (std::optional<GpuEvent> e = Next()) out.push_back(*e);
    return out;
  }
  uint64_t Count(const std::string& fn, const std::string& result = "SUCCESS") const {
    return sim_->Count(fn, result);
  }

  const char* library_ = MIGD_SIM_LIBRARY;
  std::unique_ptr<SimMachine> sim_;
  std::unique_ptr<NvmlDriver> driver_;
  std::unique_ptr<GpuEventWatch> watch_;
};

GpuEvent Xid(GpuIndex gpu, uint64_t xid, std::optional<uint32_t> gi = std::nullopt,
             std::optional<uint32_t> ci = std::nullopt) {
  GpuEvent e;
  e.gpu = gpu;
  e.xid = xid;
  if (gi) e.gi = NvmlGiId(*gi);
  if (ci) e.ci = NvmlCiId(*ci);
  return e;
}

GpuEvent Of(GpuIndex gpu, GpuEventKind kind) {
  GpuEvent e;
  e.gpu = gpu;
  e.kind = kind;
  return e;
}

TEST_F(NvmlEventsTest, DeliversAttributedAndUnattributedXids) {
  Start("h100-80gb:2");
  MIGD_ASSERT_OK_AND_ASSIGN(GpuEventKinds got, watch_->Register(kGpu1, GpuEventKinds::All()));
  EXPECT_EQ(got, GpuEventKinds::All());
  Inject("xid=79@1,xid=43@1/3/0,xid=13@1/5,xid=48@0");
  // GPU 0 is not registered: its Xid is not delivered.
  EXPECT_THAT(Drain(), ::testing::ElementsAre(Xid(kGpu1, 79), Xid(kGpu1, 43, 3, 0),
                                              Xid(kGpu1, 13, 5)));
  EXPECT_EQ(DescribeGpuEvent(Xid(kGpu1, 43, 3, 0)), "GPU 1: xid 43 (GI 3, CI 0)");
}

TEST_F(NvmlEventsTest, EveryCreateAndDestroyIsAMigConfigChange) {
  Start("a100-40gb:1");
  ASSERT_THAT(watch_->Register(kGpu0, GpuEventKinds::All()), IsOk());
  MIGD_ASSERT_OK_AND_ASSIGN(GpuInstanceInfo gi, driver_->CreateGi(kGpu0, GiProfileId(0), {0, 8}));
  MIGD_ASSERT_OK_AND_ASSIGN(ComputeInstanceInfo ci, driver_->CreateCi(kGpu0, gi.id));
  ASSERT_THAT(driver_->DestroyCi(kGpu0, gi.id, ci.id), IsOk());
  ASSERT_THAT(driver_->DestroyGi(kGpu0, gi.id), IsOk());
  const GpuEvent change = Of(kGpu0, GpuEventKind::kMigConfigChange);
  EXPECT_THAT(Drain(), ::testing::ElementsAre(change, change, change, change));
}

TEST_F(NvmlEventsTest, EventsBeforeRegistrationAreNotDelivered) {
  Start("a100-40gb:1");
  Inject("xid=79@0");
  ASSERT_THAT(watch_->Register(kGpu0, GpuEventKinds::All()), IsOk());
  EXPECT_THAT(Drain(), ::testing::IsEmpty());
  Inject("xid=31@0");
  EXPECT_THAT(Drain(), ::testing::ElementsAre(Xid(kGpu0, 31)));
}

TEST_F(NvmlEventsTest, TimeoutIsNoEvent) {
  Start("a100-40gb:1");
  ASSERT_THAT(watch_->Register(kGpu0, GpuEventKinds::All()), IsOk());
  StatusOr<std::optional<GpuEvent>> e = watch_->Wait(kShort);
  ASSERT_THAT(e.status(), IsOk());
  EXPECT_FALSE(e->has_value());
  EXPECT_EQ(Count("nvmlEventSetWait_v2", "ERROR_TIMEOUT"), 1u);
}

// nvml.h does not say whether a 0 ms wait returns at once: under the
// simulator's "forever" a 0 would block this test until ctest's timeout.
TEST_F(NvmlEventsTest, NeverWaitsWithZeroMilliseconds) {
  Start("a100-40gb:1", {{"MIGD_SIM_EVENT_WAIT_ZERO", "forever"}});
  ASSERT_THAT(watch_->Register(kGpu0, GpuEventKinds::All()), IsOk());
  for (std::chrono::milliseconds t : {std::chrono::milliseconds(0), std::chrono::milliseconds(-5)}) {
    StatusOr<std::optional<GpuEvent>> e = watch_->Wait(t);
    ASSERT_THAT(e.status(), IsOk());
    EXPECT_FALSE(e->has_value());
  }
  EXPECT_EQ(Count("nvmlEventSetWait_v2", "ERROR_TIMEOUT"), 2u);
}

TEST_F(NvmlEventsTest, UnsupportedTypesAreLeftOutAndReported) {
  Start("a100-40gb:1", {{"MIGD_SIM_UNSUPPORTED_EVENTS", "mig-config"}});
  MIGD_ASSERT_OK_AND_ASSIGN(GpuEventKinds got, watch_->Register(kGpu0, GpuEventKinds::All()));
  EXPECT_EQ(got, (GpuEventKinds{.xid = true, .mig_config_change = false, .gpu_lost = true}));
  EXPECT_EQ(got.ToString(), "xid,gpu-lost");
  // One registration of the supported subset: no NOT_SUPPORTED at all.
  EXPECT_EQ(Count("nvmlDeviceRegisterEvents", "ERROR_NOT_SUPPORTED"), 0u);
  MIGD_ASSERT_OK_AND_ASSIGN(GpuInstanceInfo gi, driver_->CreateGi(kGpu0, GiProfileId(0), {0, 8}));
  (void)gi;
  Inject("xid=79@0");
  EXPECT_THAT(Drain(), ::testing::ElementsAre(Xid(kGpu0, 79)));
}

TEST_F(NvmlEventsTest, AGpuSupportingNoWatchedTypeRegistersNothing) {
  Start("a100-40gb:1", {{"MIGD_SIM_UNSUPPORTED_EVENTS", "xid,mig-config,gpu-unavailable"}});
  MIGD_ASSERT_OK_AND_ASSIGN(GpuEventKinds got,
                            watch_->Register(kGpu0, GpuEventKinds{.xid = true}));
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(got.ToString(), "none");
  EXPECT_EQ(Count("nvmlDeviceRegisterEvents"), 0u);
}

TEST_F(NvmlEventsTest, AnUnexpectedNotSupportedIsRetriedTypeByType) {
  MIGD_RUN_IN_FRESH_PROCESS();  // "@1" counts this process's calls
  Start("a100-40gb:1", {{"MIGD_SIM_FAULTS", "nvmlDeviceRegisterEvents=NOT_SUPPORTED@1"}});
  MIGD_ASSERT_OK_AND_ASSIGN(GpuEventKinds got, watch_->Register(kGpu0, GpuEventKinds::All()));
  EXPECT_EQ(got, GpuEventKinds::All());
  // The set, then one call per type: Xid, MIG config change, GPU unavailable.
  EXPECT_EQ(Count("nvmlDeviceRegisterEvents", "ERROR_NOT_SUPPORTED"), 1u);
  EXPECT_EQ(Count("nvmlDeviceRegisterEvents"), 3u);
  Inject("xid=79@0");
  EXPECT_THAT(Drain(), ::testing::ElementsAre(Xid(kGpu0, 79)));
}

TEST_F(NvmlEventsTest, UnknownFromRegisterRemakesTheSetWithTheOtherGpus) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Start("a100-40gb:2", {{"MIGD_SIM_FAULTS", "nvmlDeviceRegisterEvents=UNKNOWN@2"}});
  ASSERT_THAT(watch_->Register(kGpu0, GpuEventKinds::All()), IsOk());
  EXPECT_THAT(watch_->Register(kGpu1, GpuEventKinds::All()),
              StatusIs(StatusCode::kUnknown, HasSubstr("registering events of GPU 1")));
  // "event set is in undefined state and should be freed" (nvml.h).
  EXPECT_EQ(Count("nvmlEventSetCreate"), 2u);
  EXPECT_EQ(Count("nvmlEventSetFree"), 1u);
  Inject("xid=79@0,xid=31@1");
  EXPECT_THAT(Drain(), ::testing::ElementsAre(Xid(kGpu0, 79)));
  ASSERT_THAT(watch_->Register(kGpu1, GpuEventKinds::All()), IsOk());
  Inject("xid=31@1");
  EXPECT_THAT(Drain(), ::testing::ElementsAre(Xid(kGpu1, 31)));
}

TEST_F(NvmlEventsTest, AWaitErrorLeavesTheWatchUsable) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Start("a100-40gb:1", {{"MIGD_SIM_FAULTS", "nvmlEventSetWait_v2=UNKNOWN@1"}});
  ASSERT_THAT(watch_->Register(kGpu0, GpuEventKinds::All()), IsOk());
  Inject("xid=79@0");
  EXPECT_THAT(watch_->Wait(kShort).status(),
              StatusIs(StatusCode::kUnknown, HasSubstr("waiting for events")));
  EXPECT_THAT(Drain(), ::testing::ElementsAre(Xid(kGpu0, 79)));
}

void ExpectLostGpuReportedOnce(NvmlEventsTest& t, std::vector<GpuEvent> events) {
  (void)t;
  EXPECT_THAT(events, ::testing::ElementsAre(Of(kGpu1, GpuEventKind::kGpuLost), Xid(kGpu0, 31)));
}

// A lost GPU as an nvmlEventTypeGpuUnavailableError event and as
// NVML_ERROR_GPU_IS_LOST from the wait (nvml.h allows both): one kGpuLost,
// then the set goes on without it.
class NvmlEventsLostTest : public NvmlEventsTest,
                           public ::testing::WithParamInterface<const char*> {};

TEST_P(NvmlEventsLostTest, ALostGpuIsReportedOnceAndLeftOut) {
  Start("a100-40gb:2", {{"MIGD_SIM_GPU_LOST", GetParam()}});
  ASSERT_THAT(watch_->Register(kGpu0, GpuEventKinds::All()), IsOk());
  ASSERT_THAT(watch_->Register(kGpu1, GpuEventKinds::All()), IsOk());
  Inject("gpu-lost@1");
  std::vector<GpuEvent> events = Drain();
  Inject("xid=31@0");
  for (const GpuEvent& e : Drain()) events.push_back(e);
  ExpectLostGpuReportedOnce(*this, events);
  EXPECT_THAT(watch_->Register(kGpu1, GpuEventKinds::All()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("GPU_IS_LOST")));
}

INSTANTIATE_TEST_SUITE_P(Reports, NvmlEventsLostTest, ::testing::Values("event", "wait-error"));

TEST_F(NvmlEventsTest, TheR470LibraryReportsALostGpuThroughTheWait) {
  Start("a100-40gb:2", {}, MIGD_SIM_LEGACY_LIBRARY);
  // No nvmlEventTypeGpuUnavailableError in the 11.4 header: gpu_lost is
  // still given, by NVML_ERROR_GPU_IS_LOST.
  MIGD_ASSERT_OK_AND_ASSIGN(GpuEventKinds got, watch_->Register(kGpu0, GpuEventKinds::All()));
  EXPECT_EQ(got, GpuEventKinds::All());
  ASSERT_THAT(watch_->Register(kGpu1, GpuEventKinds::All()), IsOk());
  Inject("gpu-lost@1");
  std::vector<GpuEvent> events = Drain();
  Inject("xid=31@0");
  for (const GpuEvent& e : Drain()) events.push_back(e);
  ExpectLostGpuReportedOnce(*this, events);
  EXPECT_EQ(Count("nvmlEventSetWait_v2", "ERROR_GPU_IS_LOST"), 1u);
}

// Several Xids before one wait: each, or only the last (nvml.h does not
// say). Either way the last one is seen.
class NvmlEventsCoalesceTest : public NvmlEventsTest,
                               public ::testing::WithParamInterface<const char*> {};

TEST_P(NvmlEventsCoalesceTest, TheLastOfSeveralXidsIsSeen) {
  Start("a100-40gb:1", {{"MIGD_SIM_EVENT_COALESCE", GetParam()}});
  ASSERT_THAT(watch_->Register(kGpu0, GpuEventKinds::All()), IsOk());
  Inject("xid=31@0,xid=43@0,xid=79@0");
  std::vector<GpuEvent> events = Drain();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), Xid(kGpu0, 79));
  EXPECT_EQ(events.size(), std::string(GetParam()) == "each" ? 3u : 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, NvmlEventsCoalesceTest, ::testing::Values("each", "last"));

TEST_F(NvmlEventsTest, CloseFreesTheSetOnceAndEndsTheWatch) {
  Start("a100-40gb:1");
  ASSERT_THAT(watch_->Register(kGpu0, GpuEventKinds::All()), IsOk());
  EXPECT_THAT(watch_->Close(), IsOk());
  EXPECT_THAT(watch_->Close(), IsOk());
  EXPECT_EQ(Count("nvmlEventSetFree"), 1u);
  EXPECT_THAT(watch_->Wait(kShort).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("Close() was called")));
  EXPECT_THAT(watch_->Register(kGpu0, GpuEventKinds::All()).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("freed")));
  watch_.reset();
  EXPECT_EQ(Count("nvmlEventSetFree"), 1u);
}

TEST_F(NvmlEventsTest, SessionCloseFreesAWatchStillOpenBeforeShutdown) {
  sim_ = std::make_unique<SimMachine>("a100-40gb:1");
  MIGD_ASSERT_OK_AND_ASSIGN(auto lib, NvmlLibrary::Load(MIGD_SIM_LIBRARY));
  auto session = std::make_shared<NvmlSession>(lib);
  ASSERT_THAT(session->Open(), IsOk());
  NvmlDriver driver(session);
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<GpuEventWatch> watch, driver.OpenEventWatch());
  ASSERT_THAT(watch->Register(kGpu0, GpuEventKinds::All()), IsOk());
  ASSERT_THAT(session->Close(), IsOk());
  // Freed by the close hook: nvmlEventSetFree succeeded, so it ran before
  // nvmlShutdown (after it the library answers UNINITIALIZED).
  EXPECT_EQ(sim_->Count("nvmlEventSetFree", "SUCCESS"), 1u);
  EXPECT_EQ(sim_->Count("nvmlEventSetFree", "ERROR_UNINITIALIZED"), 0u);
  EXPECT_THAT(watch->Wait(kShort).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("session was closed")));
  EXPECT_THAT(watch->Close(), IsOk());
  // A new session does not revive the old set.
  ASSERT_THAT(session->Open(), IsOk());
  EXPECT_THAT(watch->Register(kGpu0, GpuEventKinds::All()).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("freed")));
  watch.reset();
  ASSERT_THAT(session->Close(), IsOk());
  EXPECT_EQ(sim_->Count("nvmlEventSetFree", "SUCCESS"), 1u);
}

TEST_F(NvmlEventsTest, UnknownGpuIsNotFound) {
  Start("a100-40gb:1");
  EXPECT_THAT(watch_->Register(GpuIndex(7), GpuEventKinds::All()).status(),
              StatusIs(StatusCode::kNotFound, HasSubstr("GPU 7")));
}

TEST_F(NvmlEventsTest, ALibraryWithoutTheEventApiIsUnimplemented) {
  sim_ = std::make_unique<SimMachine>("a100-40gb:1");
  MIGD_ASSERT_OK_AND_ASSIGN(
      auto lib, sim_testing::LoadSimWithSymbols(MIGD_SIM_LIBRARY, {"nvmlEventSetWait_v2"}));
  auto session = std::make_shared<NvmlSession>(lib);
  ASSERT_THAT(session->Open(), IsOk());
  NvmlDriver driver(session);
  EXPECT_THAT(driver.OpenEventWatch().status(),
              StatusIs(StatusCode::kUnimplemented, HasSubstr("lacks the event API")));
  ASSERT_THAT(session->Close(), IsOk());
  EXPECT_EQ(sim_->Count("nvmlEventSetCreate", "SUCCESS"), 0u);
}

TEST_F(NvmlEventsTest, OpenNeedsAnOpenSession) {
  sim_ = std::make_unique<SimMachine>("a100-40gb:1");
  MIGD_ASSERT_OK_AND_ASSIGN(auto lib, NvmlLibrary::Load(MIGD_SIM_LIBRARY));
  auto session = std::make_shared<NvmlSession>(lib);
  NvmlDriver driver(session);
  EXPECT_THAT(driver.OpenEventWatch().status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("not open")));
}

}  // namespace
}  // namespace migd::driver
