#include "engine/health_monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "driver/gpu_driver_wrapper.h"
#include "sim/fake_gpu_driver.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::driver::GpuEvent;
using ::migd::driver::GpuEventKind;
using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records what the monitor decided, one line per call.
class RecordingSink : public HealthSink {
 public:
  void MarkInstanceUnhealthy(GpuIndex gpu, NvmlGiId gi, std::optional<NvmlCiId> ci,
                             uint64_t xid) override {
    Add("instance " + std::to_string(gpu.value()) + "/" + std::to_string(gi.value()) + "/" +
        (ci ? std::to_string(ci->value()) : "-") + " xid " + std::to_string(xid));
  }
  void MarkGpuUnhealthy(GpuIndex gpu, const std::string& reason) override {
    Add("gpu " + std::to_string(gpu.value()) + ": " + reason);
  }
  void OnMigConfigChange(GpuIndex gpu) override { Add("drift " + std::to_string(gpu.value())); }

  std::vector<std::string> calls() const {
    MutexLock lock(&mu_);
    return calls_;
  }

 private:
  void Add(std::string s) {
    MutexLock lock(&mu_);
    calls_.push_back(std::move(s));
  }
  mutable Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

GpuEvent Xid(uint64_t xid, std::optional<uint32_t> gi = std::nullopt) {
  GpuEvent e;
  e.gpu = GpuIndex(0);
  e.xid = xid;
  if (gi) e.gi = NvmlGiId(*gi);
  return e;
}

TEST(ClassifyGpuEventTest, EveryRowOfThePolicyTable) {
  const HealthOptions o;
  EXPECT_EQ(ClassifyGpuEvent(Xid(79), o), HealthAction::kGpuUnhealthy);
  EXPECT_EQ(ClassifyGpuEvent(Xid(79, 2), o), HealthAction::kInstanceUnhealthy);
  for (uint64_t app : {13, 31, 43, 45, 68, 109}) {
    EXPECT_EQ(ClassifyGpuEvent(Xid(app), o), HealthAction::kIgnore) << app;
    EXPECT_EQ(ClassifyGpuEvent(Xid(app, 1), o), HealthAction::kIgnore) << app;
  }
  EXPECT_EQ(ClassifyGpuEvent(Xid(driver::kUnknownXid), o), HealthAction::kGpuUnhealthy);
  GpuEvent lost;
  lost.kind = GpuEventKind::kGpuLost;
  EXPECT_EQ(ClassifyGpuEvent(lost, o), HealthAction::kGpuUnhealthy);
  GpuEvent change;
  change.kind = GpuEventKind::kMigConfigChange;
  EXPECT_EQ(ClassifyGpuEvent(change, o), HealthAction::kDriftCheck);
  HealthOptions none;
  none.ignored_xids.clear();
  EXPECT_EQ(ClassifyGpuEvent(Xid(13), none), HealthAction::kGpuUnhealthy);
}

struct Harness {
  std::unique_ptr<sim::FakeGpuDriver> driver;
  RecordingSink sink;
  std::unique_ptr<HealthMonitor> monitor;
};

void StartOn(Harness& h, std::string_view gpus, HealthOptions options = {}) {
  MIGD_ASSERT_OK_AND_ASSIGN(h.driver, sim::FakeGpuDriver::Create(gpus));
  std::vector<GpuIndex> indices;
  for (const sim::SimGpu& g : h.driver->Snapshot().gpus) indices.push_back(g.index);
  options.wait = std::chrono::milliseconds(5000);  // events, not timeouts, wake it
  MIGD_ASSERT_OK_AND_ASSIGN(h.monitor,
                            HealthMonitor::Start(*h.driver, indices, options, h.sink));
}

TEST(HealthMonitorTest, AnAttributedXidMarksTheInstance) {
  Harness h;
  StartOn(h, "h100-80gb:1");
  ASSERT_THAT(h.driver->InjectEvents("xid=48@0/3/0"), IsOk());
  h.monitor->WaitForEvents(1);
  EXPECT_THAT(h.sink.calls(), ElementsAre("instance 0/3/0 xid 48"));
}

TEST(HealthMonitorTest, AnUnattributedXidOrALostGpuMarksTheGpu) {
  Harness h;
  StartOn(h, "a100-40gb:2");
  ASSERT_THAT(h.driver->InjectEvents("xid=79@0,gpu-lost@1"), IsOk());
  h.monitor->WaitForEvents(2);
  EXPECT_THAT(h.sink.calls(), ElementsAre("gpu 0: GPU 0: xid 79", "gpu 1: GPU 1: gpu-lost"));
}

TEST(HealthMonitorTest, ApplicationXidsAreIgnored) {
  Harness h;
  StartOn(h, "a100-40gb:1");
  ASSERT_THAT(h.driver->InjectEvents("xid=13@0/1/0,xid=43@0,xid=79@0"), IsOk());
  h.monitor->WaitForEvents(3);
  EXPECT_THAT(h.sink.calls(), ElementsAre("gpu 0: GPU 0: xid 79"));
  EXPECT_EQ(h.monitor->counters().ignored, 2u);
}

TEST(HealthMonitorTest, AMigConfigChangeTriggersTheDriftCheck) {
  Harness h;
  StartOn(h, "a100-40gb:1");
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, h.driver->CreateGi(GpuIndex(0), GiProfileId(0), {0, 8}));
  (void)gi;
  h.monitor->WaitForEvents(1);
  EXPECT_THAT(h.sink.calls(), ElementsAre("drift 0"));
}

TEST(HealthMonitorTest, AGpuLostBeforeStartIsMarkedAtRegistration) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto driver, sim::FakeGpuDriver::Create("a100-40gb:2"));
  ASSERT_THAT(driver->InjectEvents("gpu-lost@1"), IsOk());
  RecordingSink sink;
  MIGD_ASSERT_OK_AND_ASSIGN(auto monitor,
                            HealthMonitor::Start(*driver, {GpuIndex(0), GpuIndex(1)}, {}, sink));
  EXPECT_THAT(sink.calls(), ElementsAre(HasSubstr("gpu 1: lost at registration")));
  monitor->Stop();
  monitor->Stop();  // idempotent
}

TEST(HealthMonitorTest, UnsupportedKindsAreRegisteredAsFarAsPossible) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto driver, sim::FakeGpuDriver::Create("a100-40gb:1"));
  driver->SetSupportedEventKinds(driver::GpuEventKinds{.xid = true});
  RecordingSink sink;
  MIGD_ASSERT_OK_AND_ASSIGN(auto monitor, HealthMonitor::Start(*driver, {GpuIndex(0)}, {}, sink));
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver->CreateGi(GpuIndex(0), GiProfileId(0), {0, 8}));
  (void)gi;
  ASSERT_THAT(driver->InjectEvents("xid=79@0"), IsOk());
  monitor->WaitForEvents(1);  // the Xid; the MIG change was not registered
  EXPECT_THAT(sink.calls(), ElementsAre("gpu 0: GPU 0: xid 79"));
}

TEST(HealthMonitorTest, DisabledOpensNoWatch) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto driver, sim::FakeGpuDriver::Create("a100-40gb:1"));
  RecordingSink sink;
  HealthOptions off;
  off.enabled = false;
  MIGD_ASSERT_OK_AND_ASSIGN(auto monitor, HealthMonitor::Start(*driver, {GpuIndex(0)}, off, sink));
  EXPECT_EQ(driver->Snapshot().counters["OpenEventWatch"]["SUCCESS"], 0u);
}

// A sink that keeps loss marks as EngineHealth does: LostGpus lists them,
// ClearRecoveredGpu removes one.
class LossSink : public RecordingSink {
 public:
  explicit LossSink(std::map<uint32_t, GpuUuid> uuids) : uuids_(std::move(uuids)) {}
  void MarkGpuLost(GpuIndex gpu, const std::string& reason) override {
    MarkGpuUnhealthy(gpu, "lost: " + reason);
    MutexLock lock(&lost_mu_);
    lost_.insert(gpu.value());
  }
  std::vector<LostGpu> LostGpus() override {
    MutexLock lock(&lost_mu_);
    std::vector<LostGpu> out;
    for (uint32_t g : lost_) out.push_back(LostGpu{GpuIndex(g), uuids_[g]});
    return out;
  }
  void ClearRecoveredGpu(GpuIndex gpu) override {
    {
      MutexLock lock(&lost_mu_);
      lost_.erase(gpu.value());
    }
    MarkGpuUnhealthy(gpu, "recovered");  // recorded as a call line
  }

 private:
  Mutex lost_mu_;
  std::set<uint32_t> lost_ ABSL_GUARDED_BY(lost_mu_);
  std::map<uint32_t, GpuUuid> uuids_;
};

struct RecoveryHarness {
  std::unique_ptr<sim::FakeGpuDriver> driver;
  std::unique_ptr<LossSink> sink;
  std::unique_ptr<HealthMonitor> monitor;
};

void StartRecovery(RecoveryHarness& h, bool clear_recovered) {
  MIGD_ASSERT_OK_AND_ASSIGN(h.driver, sim::FakeGpuDriver::Create("a100-40gb:2"));
  std::map<uint32_t, GpuUuid> uuids;
  for (const sim::SimGpu& g : h.driver->Snapshot().gpus) uuids[g.index.value()] = g.uuid;
  h.sink = std::make_unique<LossSink>(uuids);
  HealthOptions options;
  options.wait = std::chrono::milliseconds(5000);
  options.clear_recovered_gpus = clear_recovered;
  options.recovery_probe = std::chrono::milliseconds(10);
  MIGD_ASSERT_OK_AND_ASSIGN(
      h.monitor, HealthMonitor::Start(*h.driver, {GpuIndex(0), GpuIndex(1)}, options, *h.sink));
}

TEST(HealthRecoveryTest, ALostGpuThatAnswersAgainIsClearedAndRegisteredAgain) {
  RecoveryHarness h;
  StartRecovery(h, /*clear_recovered=*/true);
  ASSERT_THAT(h.driver->InjectEvents("gpu-lost@1"), IsOk());
  h.monitor->WaitForEvents(1);
  // Still lost: probes list the GPUs, GPU 1 is not among them, nothing cleared.
  const uint64_t probes = h.monitor->counters().recovery_probes;
  h.monitor->WaitForRecoveryProbes(probes + 2);
  EXPECT_EQ(h.monitor->counters().recovered, 0u);
  EXPECT_THAT(h.sink->calls(), ElementsAre("gpu 1: lost: GPU 1: gpu-lost"));

  ASSERT_THAT(h.driver->InjectEvents("gpu-back@1"), IsOk());
  h.monitor->WaitForRecoveryProbes(h.monitor->counters().recovery_probes + 2);
  EXPECT_EQ(h.monitor->counters().recovered, 1u);
  EXPECT_THAT(h.sink->calls(), ElementsAre("gpu 1: lost: GPU 1: gpu-lost", "gpu 1: recovered"));
  EXPECT_TRUE(h.sink->LostGpus().empty());
  // Registered again: its next Xid reaches the sink.
  ASSERT_THAT(h.driver->InjectEvents("xid=79@1"), IsOk());
  h.monitor->WaitForEvents(2);
  EXPECT_EQ(h.sink->calls().back(), "gpu 1: GPU 1: xid 79");
}

TEST(HealthRecoveryTest, WithoutThePolicyALostGpuIsNeverProbed) {
  RecoveryHarness h;
  StartRecovery(h, /*clear_recovered=*/false);
  ASSERT_THAT(h.driver->InjectEvents("gpu-lost@1"), IsOk());
  h.monitor->WaitForEvents(1);
  ASSERT_THAT(h.driver->InjectEvents("gpu-back@1,xid=79@0"), IsOk());
  h.monitor->WaitForEvents(2);  // the monitor ran past the GPU's return
  EXPECT_EQ(h.monitor->counters().recovery_probes, 0u);
  EXPECT_EQ(h.sink->LostGpus().size(), 1u);
  EXPECT_THAT(h.sink->calls(),
              ElementsAre("gpu 1: lost: GPU 1: gpu-lost", "gpu 0: GPU 0: xid 79"));
}

TEST(HealthRecoveryTest, AGpuThatAnswersUnderAnotherUuidKeepsItsMark) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto driver, sim::FakeGpuDriver::Create("a100-40gb:2"));
  LossSink sink({{1u, GpuUuid("GPU-00000000-0000-0000-0000-00000000dead")}});
  HealthOptions options;
  options.clear_recovered_gpus = true;
  options.recovery_probe = std::chrono::milliseconds(10);
  MIGD_ASSERT_OK_AND_ASSIGN(auto monitor,
                            HealthMonitor::Start(*driver, {GpuIndex(0), GpuIndex(1)}, options, sink));
  sink.MarkGpuLost(GpuIndex(1), "restored");  // as a restored mark of another GPU's UUID
  monitor->WaitForRecoveryProbes(2);
  EXPECT_EQ(monitor->counters().recovered, 0u);
  EXPECT_EQ(sink.LostGpus().size(), 1u);
}

// A driver without the event API: Start says so, with the driver's words.
class NoEventsDriver : public driver::GpuDriverWrapper {
 public:
  using GpuDriverWrapper::GpuDriverWrapper;
  StatusOr<std::unique_ptr<driver::GpuEventWatch>> OpenEventWatch() override {
    return UnimplementedError("no event API here");
  }
};

TEST(HealthMonitorTest, ADriverWithoutEventsIsAnError) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto fake, sim::FakeGpuDriver::Create("a100-40gb:1"));
  NoEventsDriver driver(fake.get());
  RecordingSink sink;
  EXPECT_THAT(HealthMonitor::Start(driver, {GpuIndex(0)}, {}, sink).status(),
              StatusIs(StatusCode::kUnimplemented, HasSubstr("no event API")));
}

}  // namespace
}  // namespace migd::engine
