// MigdMetrics: listener calls, scrape-time collection over a real Manager on
// the in-process simulator (FakeGpuDriver), injected NVML counters, the
// CDI operation counts (SpecWriter::OperationCounts, added for metrics), and
// the planner's value service (a real one, solves run by the test).
#include "metrics/migd_collector.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <tuple>

#include "base/clock.h"
#include "cdi/host_reader.h"
#include "cdi/publisher.h"
#include "cdi/spec_writer.h"
#include "engine/capacity.h"
#include "engine/health_monitor.h"
#include "engine/manager.h"
#include "engine/manager_testing.h"
#include "engine/owner_source.h"
#include "planner/solve_executor.h"
#include "planner/value_service.h"
#include "sim/fake_gpu_driver.h"
#include "store/record_store.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::metrics {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

engine::AllocateRequest Req(const std::string& id, const std::string& profile, bool pod) {
  engine::AllocateRequest r;
  r.request_id = id;
  r.owner = pod ? store::Owner::Pod("team-a", "pod-" + id, PodUid("uid-" + id), "main")
                : store::Owner::Opaque("owner-" + id);
  engine::InstanceSpec s;
  s.profile = profile;
  r.instances.push_back(s);
  return r;
}

// The value of the sample line `series` ("name{labels}") in `text`; -1 if
// absent.
double Sample(const std::string& text, const std::string& series) {
  const std::string needle = "\n" + series + " ";
  const size_t at = text.find(needle);
  if (at == std::string::npos) return -1;
  const size_t start = at + needle.size();
  return std::stod(text.substr(start, text.find('\n', start) - start));
}

TEST(AllocationBucketsTest, CoverTenMicrosecondsToSixtySeconds) {
  const std::vector<double> b = AllocationDurationBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 1e-5);
  EXPECT_DOUBLE_EQ(b.back(), 60);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
}

TEST(WithDefaultsTest, NodeNameFromEnvironmentThenHostName) {
  MigdMetricsOptions given;
  given.node_name = "explicit";
  EXPECT_EQ(WithDefaults(given).node_name, "explicit");
  ASSERT_EQ(::setenv("NODE_NAME", "node-from-env", 1), 0);
  EXPECT_EQ(WithDefaults({}).node_name, "node-from-env");
  ASSERT_EQ(::unsetenv("NODE_NAME"), 0);
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);
  EXPECT_EQ(WithDefaults({}).node_name, host);
}

class MigdMetricsTest : public engine::testing::FakeHardwareTest {
 protected:
  void SetUp() override {
    MigdMetricsOptions o;
    o.version = "1.2.3";
    o.revision = "abc";
    o.driver = "simulated";
    o.node_name = "node-1";
    o.nvml_call_counts = [this] { return nvml_counts_; };
    o.nvml_sessions_opened = [] { return uint64_t{1}; };
    auto m = MigdMetrics::Create(&registry_, o);
    ASSERT_TRUE(m.ok()) << m.status();
    metrics_ = std::move(*m);
  }

  // A Manager (the shared engine harness) over the in-process simulator.
  void StartManager(const std::string& gpus, engine::EngineListener* listener = nullptr) {
    Machine(gpus);
    opts_.listener = listener;
    observer_ = nullptr;
    Start();
  }

  void TearDown() override {
    metrics_->AttachManager(nullptr);
    mgr_.reset();
  }

  Registry registry_;
  std::vector<driver::NvmlCallCount> nvml_counts_;
  std::unique_ptr<MigdMetrics> metrics_;
};

TEST_F(MigdMetricsTest, RegistersOnceOnly) {
  EXPECT_THAT(MigdMetrics::Create(&registry_, {}).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("migd_allocations_total")));
  EXPECT_THAT(MigdMetrics::Create(nullptr, {}).status(),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

TEST_F(MigdMetricsTest, WithoutManagerOnlyProcessFamiliesHaveSamples) {
  nvml_counts_ = {{"nvmlInit_v2", "SUCCESS", 1},
                  {"nvmlDeviceGetCount_v2", "SUCCESS", 4},
                  {"nvmlDeviceCreateGpuInstanceWithPlacement", "ERROR_INSUFFICIENT_RESOURCES", 2}};
  const std::string text = registry_.Expose();
  EXPECT_EQ(
      Sample(text, "migd_build_info{version=\"1.2.3\",revision=\"abc\",driver=\"simulated\"}"), 1);
  EXPECT_EQ(Sample(text,
                   "migd_nvml_calls_total{function=\"nvmlDeviceGetCount_v2\",result="
                   "\"SUCCESS\"}"),
            4);
  EXPECT_EQ(Sample(text,
                   "migd_nvml_calls_total{function=\"nvmlDeviceCreateGpuInstanceWith"
                   "Placement\",result=\"ERROR_INSUFFICIENT_RESOURCES\"}"),
            2);
  EXPECT_EQ(Sample(text, "migd_nvml_sessions_opened_total"), 1);
  // Series that exist before the first event.
  EXPECT_EQ(Sample(text, "migd_allocations_total{result=\"ok\",path=\"create\"}"), 0);
  EXPECT_EQ(Sample(text, "migd_reclaims_total{reason=\"ttl\"}"), 0);
  // No Manager: no engine samples, but the families are declared.
  EXPECT_THAT(text, HasSubstr("# TYPE migd_instances gauge\n"));
  EXPECT_THAT(text, Not(HasSubstr("migd_instances{")));
  EXPECT_EQ(Sample(text, "migd_reconcile_runs_total"), -1);
  // No publisher: no CDI samples.
  EXPECT_EQ(Sample(text, "migd_cdi_pending_removals"), -1);
}

TEST_F(MigdMetricsTest, EmptyCallbacksMeanNoSamples) {
  Registry r;
  MIGD_ASSERT_OK_AND_ASSIGN(auto m, MigdMetrics::Create(&r, {}));
  const std::string text = r.Expose();
  EXPECT_THAT(text, Not(HasSubstr("migd_nvml_calls_total{")));
  EXPECT_EQ(Sample(text, "migd_nvml_sessions_opened_total"), -1);
  EXPECT_EQ(
      Sample(text, "migd_build_info{version=\"unknown\",revision=\"unknown\",driver=\"nvml\"}"), 1);
}

TEST_F(MigdMetricsTest, ListenerCallsCountAllocationsReclaimsTransitions) {
  engine::AllocationOutcome ok;
  ok.code = StatusCode::kOk;
  ok.path = engine::AllocationPath::kReuse;
  ok.duration = std::chrono::microseconds(30);
  metrics_->OnAllocation(ok);
  ok.path = engine::AllocationPath::kReclaimCreate;
  ok.duration = std::chrono::milliseconds(700);
  metrics_->OnAllocation(ok);
  ok.replayed = true;
  ok.path = engine::AllocationPath::kNone;
  ok.duration = std::chrono::microseconds(5);
  metrics_->OnAllocation(ok);
  engine::AllocationOutcome fail;
  fail.code = StatusCode::kResourceExhausted;
  fail.path = engine::AllocationPath::kNone;
  metrics_->OnAllocation(fail);

  engine::InstanceView v;
  metrics_->OnReclaim(engine::EventReason::kReclaimPressure, v);
  metrics_->OnReclaim(engine::EventReason::kReclaimPressure, v);
  metrics_->OnReclaim(engine::EventReason::kReclaimOperator, v);
  metrics_->OnReclaim(engine::EventReason::kRelease, v);  // not a reclaim: ignored

  engine::InstanceEvent e;
  e.from = engine::InstanceState::kActive;
  e.to = engine::InstanceState::kIdle;
  e.reason = engine::EventReason::kRelease;
  metrics_->OnInstanceEvent(e);

  const std::string text = registry_.Expose();
  EXPECT_EQ(Sample(text, "migd_allocations_total{result=\"ok\",path=\"reuse\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_allocations_total{result=\"ok\",path=\"reclaim_create\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_allocations_total{result=\"ok\",path=\"replay\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_allocations_total{result=\"resource_exhausted\",path=\"none\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_allocation_duration_seconds_bucket{path=\"reuse\",le=\"2.5e-05\"}"),
            0);
  EXPECT_EQ(Sample(text, "migd_allocation_duration_seconds_bucket{path=\"reuse\",le=\"5e-05\"}"),
            1);
  EXPECT_EQ(Sample(text,
                   "migd_allocation_duration_seconds_bucket{path=\"reclaim_create\","
                   "le=\"0.5\"}"),
            0);
  EXPECT_EQ(Sample(text,
                   "migd_allocation_duration_seconds_bucket{path=\"reclaim_create\","
                   "le=\"1\"}"),
            1);
  EXPECT_DOUBLE_EQ(Sample(text, "migd_allocation_duration_seconds_sum{path=\"reclaim_create\"}"),
                   0.7);
  EXPECT_EQ(Sample(text, "migd_allocation_duration_seconds_count{path=\"none\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_reclaims_total{reason=\"pressure\"}"), 2);
  EXPECT_EQ(Sample(text, "migd_reclaims_total{reason=\"operator\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_reclaims_total{reason=\"cap\"}"), 0);
  EXPECT_THAT(text, Not(HasSubstr("migd_reclaims_total{reason=\"release\"}")));
  EXPECT_EQ(Sample(text,
                   "migd_instance_transitions_total{from=\"active\",to=\"idle\","
                   "reason=\"release\"}"),
            1);
}

TEST_F(MigdMetricsTest, ScrapeReadsManagerState) {
  StartManager("a100-40gb:1,a100-40gb:1:mig-off");
  metrics_->AttachManager(mgr_.get());
  MIGD_ASSERT_OK_AND_ASSIGN(engine::Allocation a, mgr_->Allocate(Req("p1", "3g.20gb", true)));
  MIGD_ASSERT_OK_AND_ASSIGN(engine::Allocation b, mgr_->Allocate(Req("o1", "1g.5gb", false)));
  ASSERT_THAT(mgr_->Release("o1"), IsOk());
  MIGD_ASSERT_OK_AND_ASSIGN(engine::ReconcileReport rep, mgr_->ReconcileOnce());
  (void)rep;

  const std::string text = registry_.Expose();
  EXPECT_EQ(Sample(text, "migd_instances{gpu=\"0\",profile=\"3g.20gb\",state=\"active\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_instances{gpu=\"0\",profile=\"3g.20gb\",state=\"idle\"}"), 0);
  EXPECT_EQ(Sample(text, "migd_instances{gpu=\"0\",profile=\"1g.5gb\",state=\"idle\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_instances{gpu=\"0\",profile=\"1g.5gb\",state=\"active\"}"), 0);
  EXPECT_THAT(text, Not(HasSubstr("migd_instances{gpu=\"1\"")));

  // Capacity figures are engine::ComputeCapacity's.
  const engine::ManagerSnapshot snap = mgr_->List();
  const std::vector<engine::GpuView> gpus = mgr_->Gpus();
  ASSERT_EQ(gpus.size(), 2u);
  const engine::GpuCapacity cap = engine::ComputeCapacity(gpus[0], snap);
  EXPECT_EQ(Sample(text, "migd_gpu_free_slices{gpu=\"0\"}"), cap.free_slices);
  EXPECT_EQ(cap.free_slices, 8u - 4u - 1u);  // A100-40GB: 8 memory slices
  EXPECT_DOUBLE_EQ(Sample(text, "migd_gpu_fragmentation{gpu=\"0\"}"), cap.fragmentation);
  EXPECT_EQ(Sample(text, "migd_gpu_memory_slices{gpu=\"0\"}"), 8);
  EXPECT_EQ(Sample(text, "migd_gpu_memory_slices{gpu=\"1\"}"), 0);  // MIG off
  EXPECT_EQ(Sample(text, "migd_gpu_free_slices{gpu=\"1\"}"), -1);
  EXPECT_EQ(Sample(text, "migd_foreign_instances{gpu=\"0\"}"), 0);
  EXPECT_EQ(Sample(text, "migd_foreign_instances{gpu=\"1\"}"), -1);

  EXPECT_EQ(Sample(text, "migd_reconcile_runs_total"), 1);
  EXPECT_EQ(Sample(text, "migd_reconcile_errors_total"), 0);
  EXPECT_EQ(Sample(text, "migd_drift_events_total{kind=\"instance_vanished\"}"), 0);
  EXPECT_EQ(Sample(text, "migd_engine_operations_total{operation=\"create\"}"), 2);
  EXPECT_EQ(Sample(text, "migd_engine_operations_total{operation=\"release\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_planner_margin_reuses_total"), 0);  // no value policy here

  // HAMi series: only the Active instance; the pod-owned one also per device.
  const engine::InstanceView& p = a.instances[0];
  const std::string gi = std::to_string(p.gi_id.value());
  const std::string ci = std::to_string(p.ci_id.value());
  EXPECT_EQ(Sample(text, "hami_node_gpu_mig_instance_info{node=\"node-1\",device_uuid=\"" +
                             p.gpu_uuid.value() + "\",device_index=\"0\",mig_uuid=\"" +
                             p.mig_uuid.value() + "\",profile=\"3g.20gb\",gpu_instance_id=\"" + gi +
                             "\",compute_instance_id=\"" + ci + "\",placement_start=\"" +
                             std::to_string(p.placement.start) + "\",placement_size=\"" +
                             std::to_string(p.placement.size) + "\"}"),
            1);
  EXPECT_EQ(Sample(text,
                   "hami_mig_device_info{namespace=\"team-a\",pod=\"pod-p1\",container="
                   "\"main\",vdevice_index=\"0\",device_uuid=\"" +
                       p.gpu_uuid.value() + "\",mig_uuid=\"" + p.mig_uuid.value() +
                       "\",profile=\"3g.20gb\",gpu_instance_id=\"" + gi +
                       "\",compute_instance_id=\"" + ci + "\"}"),
            1);
  EXPECT_THAT(text, Not(HasSubstr(b.instances[0].mig_uuid.value())));  // Idle: no info series

  // Detached: engine families empty again.
  metrics_->AttachManager(nullptr);
  EXPECT_THAT(registry_.Expose(), Not(HasSubstr("migd_instances{")));
}

TEST_F(MigdMetricsTest, ManagerReportsThroughListener) {
  StartManager("a100-40gb:1", metrics_.get());
  metrics_->AttachManager(mgr_.get());
  MIGD_ASSERT_OK_AND_ASSIGN(engine::Allocation a, mgr_->Allocate(Req("r1", "2g.10gb", false)));
  ASSERT_THAT(mgr_->Release("r1"), IsOk());
  MIGD_ASSERT_OK_AND_ASSIGN(engine::Allocation b, mgr_->Allocate(Req("r2", "2g.10gb", false)));
  EXPECT_THAT(mgr_->Allocate(Req("r2", "2g.10gb", false)).status(), IsOk());  // replay
  EXPECT_FALSE(mgr_->Allocate(Req("big", "7g.40gb", false)).ok());
  MIGD_ASSERT_OK_AND_ASSIGN(engine::Allocation c, mgr_->Allocate(Req("r3", "1g.5gb", false)));
  ASSERT_THAT(mgr_->Release("r3"), IsOk());
  MIGD_ASSERT_OK_AND_ASSIGN(engine::ReclaimResult rr, mgr_->Reclaim({}));
  ASSERT_EQ(rr.destroyed.size(), 1u);

  const std::string text = registry_.Expose();
  EXPECT_EQ(Sample(text, "migd_allocations_total{result=\"ok\",path=\"create\"}"), 2);
  EXPECT_EQ(Sample(text, "migd_allocations_total{result=\"ok\",path=\"reuse\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_allocations_total{result=\"ok\",path=\"replay\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_allocations_total{result=\"resource_exhausted\",path=\"none\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_allocation_duration_seconds_count{path=\"create\"}"), 2);
  EXPECT_EQ(Sample(text, "migd_reclaims_total{reason=\"operator\"}"), 1);
  EXPECT_EQ(Sample(text,
                   "migd_instance_transitions_total{from=\"active\",to=\"idle\","
                   "reason=\"release\"}"),
            2);
}

// Xid events (ignored ones too) are counted by GPU and Xid; unhealthy GPUs
// and instances are gauges read at scrape time, zeros included.
TEST_F(MigdMetricsTest, XidEventsAndHealthGauges) {
  StartManager("a100-40gb:2", metrics_.get());
  metrics_->AttachManager(mgr_.get());
  MIGD_ASSERT_OK_AND_ASSIGN(engine::Allocation a, mgr_->Allocate(Req("r1", "2g.10gb", false)));
  const engine::InstanceView& v = a.instances[0];
  engine::HealthOptions options;
  options.wait = std::chrono::milliseconds(20);
  const uint32_t other = v.gpu.value() == 0 ? 1 : 0;
  MIGD_ASSERT_OK_AND_ASSIGN(
      auto monitor, engine::HealthMonitor::Start(*fake_, {GpuIndex(0), GpuIndex(1)}, options,
                                                 mgr_->health_sink()));
  const std::string g = std::to_string(v.gpu.value());
  ASSERT_THAT(fake_->InjectEvents("xid=43@" + g + ",xid=43@" + g + ",xid=94@" + g + "/" +
                                  std::to_string(v.gi_id.value()) + ",xid=79@" +
                                  std::to_string(other)),
              IsOk());
  monitor->WaitForEvents(4);
  monitor->Stop();
  const std::string text = registry_.Expose();
  EXPECT_EQ(Sample(text, "migd_xid_events_total{gpu=\"" + g + "\",xid=\"43\"}"), 2);
  EXPECT_EQ(Sample(text, "migd_xid_events_total{gpu=\"" + g + "\",xid=\"94\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_xid_events_total{gpu=\"" + std::to_string(other) +
                             "\",xid=\"79\"}"),
            1);
  EXPECT_EQ(Sample(text, "migd_gpu_unhealthy{gpu=\"" + g + "\"}"), 0);
  EXPECT_EQ(Sample(text, "migd_gpu_unhealthy{gpu=\"" + std::to_string(other) + "\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_unhealthy_instances{gpu=\"" + g + "\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_unhealthy_instances{gpu=\"" + std::to_string(other) + "\"}"), 0);
}

// An instance created behind migd's back: drift counted, shown as foreign.
TEST_F(MigdMetricsTest, ForeignInstanceAndDrift) {
  StartManager("a100-40gb:1");
  metrics_->AttachManager(mgr_.get());
  MIGD_ASSERT_OK_AND_ASSIGN(auto gis, fake_->ListGpuInstances(GpuIndex(0)));
  ASSERT_TRUE(gis.empty());
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(9), {4, 4}));
  (void)gi;
  (void)mgr_->ReconcileOnce();
  const std::string text = registry_.Expose();
  EXPECT_EQ(Sample(text, "migd_drift_events_total{kind=\"foreign_appeared\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_foreign_instances{gpu=\"0\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_gpu_free_slices{gpu=\"0\"}"), 4);
}

// Scrapes concurrent with allocations (listener calls under the Manager's
// registry lock) and with AttachManager: no deadlock, nothing lost.
TEST_F(MigdMetricsTest, ScrapesDuringAllocationsAndAttach) {
  StartManager("a100-40gb:1", metrics_.get());
  metrics_->AttachManager(mgr_.get());
  constexpr int kRounds = 40;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    int n = 0;
    while (!done.load()) {
      const std::string text = registry_.Expose();
      EXPECT_THAT(text, HasSubstr("migd_build_info{"));
      if (++n % 5 == 0) metrics_->AttachManager(mgr_.get());  // re-attach while others scrape
    }
  });
  std::thread scraper2([&] {
    while (!done.load()) (void)registry_.Expose();
  });
  for (int i = 0; i < kRounds; ++i) {
    const std::string id = "r" + std::to_string(i);
    ASSERT_THAT(mgr_->Allocate(Req(id, i % 2 ? "1g.5gb" : "2g.10gb", i % 3 == 0)).status(), IsOk());
    ASSERT_THAT(mgr_->Release(id), IsOk());
  }
  done = true;
  scraper.join();
  scraper2.join();
  const std::string text = registry_.Expose();
  double total = 0;
  for (const char* path : {"create", "reuse", "reclaim_create"}) {
    const double v =
        Sample(text, std::string("migd_allocations_total{result=\"ok\",path=\"") + path + "\"}");
    ASSERT_GE(v, 0) << path;
    total += v;
  }
  EXPECT_EQ(total, kRounds);
  EXPECT_EQ(Sample(text,
                   "migd_instance_transitions_total{from=\"active\",to=\"idle\","
                   "reason=\"release\"}"),
            kRounds);
}

TEST(CdiOperationCountsTest, WriterCountsEveryOperationByResult) {
  migd::testing::TempDir dir;
  cdi::WriterOptions wo;
  wo.spec_dir = dir.path();
  wo.sync = false;
  bool fail_unlink = false;
  wo.unlink = [&](const std::string& path) {
    if (fail_unlink) {
      errno = EIO;
      return -1;
    }
    return ::unlink(path.c_str());
  };
  cdi::SpecWriter writer(wo);
  const std::string dev = "MIG-11111111-2222-3333-4444-555555555555";
  EXPECT_THAT(writer.Verify(dev, "x").status(), IsOk());  // missing: ok
  EXPECT_THAT(writer.Remove(dev), IsOk());                // absent: ok
  EXPECT_THAT(writer.Remove("bad name!"), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  cdi::BuiltSpec wrong;
  wrong.device_name = dev;
  wrong.spec.kind = "other.io/thing";
  EXPECT_THAT(writer.Write(wrong), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  // A file whose removal fails: queued, counted as a failed remove, then
  // retried successfully.
  const std::string path = writer.PathFor(dev);
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  fail_unlink = true;
  const Status failed = writer.Remove(dev);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(writer.PendingRemovals().size(), 1u);
  fail_unlink = false;
  EXPECT_THAT(writer.RetryPendingRemovals(), IsOk());

  const std::string failed_result = [&] {
    std::string s(StatusCodeName(failed.code()));
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }();
  std::vector<cdi::OperationCount> want = {{"remove", "invalid_argument", 1},
                                           {"remove", "ok", 2},
                                           {"verify", "ok", 1},
                                           {"write", "invalid_argument", 1}};
  want.push_back({"remove", failed_result, 1});
  std::sort(want.begin(), want.end(), [](const auto& x, const auto& y) {
    return std::tie(x.kind, x.result) < std::tie(y.kind, y.result);
  });
  EXPECT_EQ(writer.OperationCounts(), want);
}

TEST(CdiOperationCountsTest, PublisherCountsReachMetrics) {
  migd::testing::TempDir dir;
  cdi::Options co;
  co.spec_dir = dir.path();
  co.sync = false;
  cdi::OsHostReader reader;
  cdi::Publisher publisher(co, &reader);
  Registry registry;
  MigdMetricsOptions mo;
  mo.publisher = &publisher;
  MIGD_ASSERT_OK_AND_ASSIGN(auto m, MigdMetrics::Create(&registry, mo));
  const std::string dev = "MIG-11111111-2222-3333-4444-555555555555";
  ASSERT_THAT(publisher.writer().Remove(dev), IsOk());
  ASSERT_THAT(publisher.writer().Verify(dev, "x").status(), IsOk());
  const std::string text = registry.Expose();
  EXPECT_EQ(Sample(text, "migd_cdi_operations_total{kind=\"remove\",result=\"ok\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_cdi_operations_total{kind=\"verify\",result=\"ok\"}"), 1);
  EXPECT_EQ(Sample(text, "migd_cdi_pending_removals"), 0);
}

// The migd_planner_value_* families, in the order of CollectedFamilies.
constexpr const char* kValueFamilies[] = {
    "migd_planner_value_solves_total",        "migd_planner_value_solve_failures_total",
    "migd_planner_value_drift_solves_total",  "migd_planner_value_table_version",
    "migd_planner_value_last_solve_seconds",  "migd_planner_value_max_solve_seconds",
    "migd_planner_value_solve_seconds_total", "migd_planner_value_max_table_bytes",
    "migd_planner_value_max_table_states",    "migd_planner_value_arrivals_total",
    "migd_planner_value_offered_load",
};

// planner.policy: cost (no service): the families are declared, no samples.
TEST_F(MigdMetricsTest, WithoutValueServiceThePlannerFamiliesHaveNoSamples) {
  const std::string text = registry_.Expose();
  for (const char* family : kValueFamilies) {
    EXPECT_THAT(text, HasSubstr(std::string("# TYPE ") + family + " ")) << family;
    EXPECT_EQ(Sample(text, family), -1) << family;
  }
}

// A value service behind the Manager, its solves run by the test: every
// family reads 0 before the first arrival, then the exact counts of what
// the Manager's Allocate calls made the service do.
class ValueServiceMetricsTest : public engine::testing::FakeHardwareTest {
 protected:
  void StartWith(planner::ValueOptions o) {
    auto e = std::make_unique<planner::ManualExecutor>();
    executor_ = e.get();
    values_ = std::make_shared<planner::ValueService>(o, std::move(e));
    MigdMetricsOptions mo;
    mo.values = values_;
    auto m = MigdMetrics::Create(&registry_, mo);
    ASSERT_TRUE(m.ok()) << m.status();
    metrics_ = std::move(*m);
    opts_.values = values_;
    Machine("h100-80gb:1");
    observer_ = nullptr;
    Start();
  }
  void TearDown() override { mgr_.reset(); }
  void Allocate(const std::string& id, const std::string& profile) {
    ASSERT_THAT(mgr_->Allocate(Req(id, profile, false)).status(), IsOk());
  }

  Registry registry_;
  planner::ManualExecutor* executor_ = nullptr;
  std::shared_ptr<planner::ValueService> values_;
  std::unique_ptr<MigdMetrics> metrics_;
};

TEST_F(ValueServiceMetricsTest, ASolveShowsUpInTheScrapeWithExactCounts) {
  planner::ValueOptions o;
  o.min_arrivals = 3;
  StartWith(o);
  std::string text = registry_.Expose();
  for (const char* family : kValueFamilies) EXPECT_EQ(Sample(text, family), 0) << family;

  for (int i = 0; i < 3; ++i) Allocate("r" + std::to_string(i), "1g.10gb");
  ASSERT_EQ(executor_->pending(), 1u) << "the third arrival starts the first solve";
  text = registry_.Expose();
  EXPECT_EQ(Sample(text, "migd_planner_value_arrivals_total"), 3);
  EXPECT_EQ(Sample(text, "migd_planner_value_solves_total"), 0) << "queued, not yet run";
  EXPECT_EQ(Sample(text, "migd_planner_value_table_version"), 0);
  // The arrivals found 0, 1 and 2 of the 7 compute slices Active, all placed
  // (the half-life of 2000 arrivals weighs them a little differently).
  EXPECT_NEAR(Sample(text, "migd_planner_value_offered_load"), 1.0 / 7, 1e-3);
  EXPECT_EQ(Sample(text, "migd_planner_value_offered_load"), values_->estimate().load);

  ASSERT_EQ(executor_->RunPending(), 1u);
  const planner::ValueServiceCounters c = values_->counters();
  ASSERT_EQ(c.solves, 1u);
  ASSERT_GT(c.last_solve_ns, 0);
  text = registry_.Expose();
  EXPECT_EQ(Sample(text, "migd_planner_value_solves_total"), 1);
  EXPECT_EQ(Sample(text, "migd_planner_value_solve_failures_total"), 0);
  EXPECT_EQ(Sample(text, "migd_planner_value_drift_solves_total"), 0);
  EXPECT_EQ(Sample(text, "migd_planner_value_table_version"), 1);
  EXPECT_EQ(Sample(text, "migd_planner_value_last_solve_seconds"), c.last_solve_ns * 1e-9);
  EXPECT_EQ(Sample(text, "migd_planner_value_max_solve_seconds"), c.last_solve_ns * 1e-9);
  EXPECT_EQ(Sample(text, "migd_planner_value_solve_seconds_total"), c.last_solve_ns * 1e-9);
  // Only 1g.10gb has demand: its 7 one-slice placements on an H100-80GB,
  // any subset of them, 2^7 layouts.
  EXPECT_EQ(Sample(text, "migd_planner_value_max_table_states"), 128);
  EXPECT_EQ(Sample(text, "migd_planner_value_max_table_bytes"), static_cast<double>(c.max_bytes));
  EXPECT_GT(c.max_bytes, 0u);

  // The fourth arrival finds 3 of 7 slices Active: the load estimate moves
  // from 1/7 to 6/28 (decay aside), a drift of (6/28 - 1/7) / (4/7) = 1/8 >
  // planner.driftThreshold 0.05, so it starts a drift solve.
  Allocate("r3", "1g.10gb");
  ASSERT_EQ(executor_->RunPending(), 1u);
  const planner::ValueServiceCounters d = values_->counters();
  text = registry_.Expose();
  EXPECT_EQ(Sample(text, "migd_planner_value_arrivals_total"), 4);
  EXPECT_EQ(Sample(text, "migd_planner_value_drift_solves_total"), 1);
  EXPECT_EQ(Sample(text, "migd_planner_value_solves_total"), 2);
  EXPECT_EQ(Sample(text, "migd_planner_value_table_version"), 2);
  EXPECT_EQ(Sample(text, "migd_planner_value_last_solve_seconds"), d.last_solve_ns * 1e-9);
  EXPECT_EQ(Sample(text, "migd_planner_value_max_solve_seconds"),
            std::max(c.last_solve_ns, d.last_solve_ns) * 1e-9);
  EXPECT_EQ(Sample(text, "migd_planner_value_solve_seconds_total"),
            (c.last_solve_ns + d.last_solve_ns) * 1e-9);
  EXPECT_EQ(Sample(text, "migd_planner_value_offered_load"), values_->estimate().load);
}

// migd_planner_margin_reuses_total reads ManagerCounters::margin_reuses: 0,
// then 1 once an Idle 1g at 6:1, which the values alone would pass over
// for a create at 0:1, is handed out under planner.reuseMargin.
TEST_F(ValueServiceMetricsTest, AReuseTheMarginKeptIsCounted) {
  opts_.reuse_margin = 1000;
  StartWith({});
  metrics_->AttachManager(mgr_.get());
  ASSERT_THAT(mgr_->Allocate(engine::testing::OpaqueReq(
                                 "r1", {engine::testing::Spec("1g.10gb", 0, mig::Placement{6, 1})}))
                  .status(),
              IsOk());
  ASSERT_THAT(mgr_->Release("r1"), IsOk());
  values_->Prime({{"1g.10gb", 4}, {"2g.20gb", 2}, {"3g.40gb", 1}}, 0.9,
                 {mgr_->ModelOf(GpuIndex(0))});
  ASSERT_EQ(executor_->RunPending(), 1u);
  EXPECT_EQ(Sample(registry_.Expose(), "migd_planner_margin_reuses_total"), 0);
  Allocate("r2", "1g.10gb");
  EXPECT_EQ(mgr_->counters().margin_reuses, 1u);
  EXPECT_EQ(Sample(registry_.Expose(), "migd_planner_margin_reuses_total"), 1);
  metrics_->AttachManager(nullptr);
}

// A solve the table refuses (more states than SolveOptions::max_states) is
// a failure: no table, version 0, the cost order decides.
TEST_F(ValueServiceMetricsTest, ARefusedSolveIsCountedAsAFailure) {
  planner::ValueOptions o;
  o.min_arrivals = 1;
  o.solve.max_states = 2;
  StartWith(o);
  Allocate("r0", "1g.10gb");
  ASSERT_EQ(executor_->RunPending(), 1u);
  const std::string text = registry_.Expose();
  EXPECT_EQ(Sample(text, "migd_planner_value_solve_failures_total"), 1);
  EXPECT_EQ(Sample(text, "migd_planner_value_solves_total"), 0);
  EXPECT_EQ(Sample(text, "migd_planner_value_table_version"), 0);
  EXPECT_EQ(Sample(text, "migd_planner_value_max_table_states"), 0);
  EXPECT_EQ(Sample(text, "migd_planner_value_arrivals_total"), 1);
}

}  // namespace
}  // namespace migd::metrics
