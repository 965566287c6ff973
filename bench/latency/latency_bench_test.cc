// The latency benchmark's quick sizes, checked by counts (NVML calls, GI/CI
// operations, instances), never by times.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "base/logging.h"
#include "bench/latency/harness.h"
#include "bench/latency/policy.h"
#include "bench/latency/scenarios.h"
#include "planner/planner.h"

namespace migd::bench::latency {
namespace {

// Counts do not depend on fsync; without it the test is CPU-bound.
RigOptions Base() {
  static const bool kQuiet = InitLogging({.level = "warn"}).ok();
  (void)kQuiet;
  RigOptions o;
  o.library = MIGD_SIM_LIBRARY;
  o.base_dir = ::testing::TempDir();
  o.store_sync = false;
  if (std::filesystem::is_directory("/dev/shm")) o.sim_dir = "/dev/shm";
  return o;
}

const OpResult& Find(const std::vector<OpResult>& rows, const std::string& op) {
  for (const auto& r : rows) {
    if (r.op == op) return r;
  }
  ADD_FAILURE() << "no row " << op;
  return rows.front();
}

LatencyModel Model(const std::string& name) {
  auto models = LoadLatencyModels(MIGD_LATENCY_MODELS);
  EXPECT_TRUE(models.ok()) << models.status();
  auto m = FindLatencyModel(models.ok() ? *models : std::vector<LatencyModel>{}, name);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : LatencyModel::Zero();
}

TEST(LatencyModelTest, EnvValueAndProjection) {
  EXPECT_EQ(LatencyModel::Zero().EnvValue(), "");
  const LatencyModel hami = Model("hami-claim");
  EXPECT_NE(hami.EnvValue().find("nvmlGpuInstanceCreateComputeInstance=500"), std::string::npos);
  CallCounts c = {{{"nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS"}, 1},
                  {{"nvmlGpuInstanceCreateComputeInstance", "SUCCESS"}, 1},
                  {{"nvmlDeviceGetUUID", "SUCCESS"}, 3}};
  EXPECT_EQ(hami.ModeledMs(c), 1500.0);
  EXPECT_EQ(hami.CreateMs(), 1500.0);
  EXPECT_EQ(hami.DestroyMs(), 0.0);
  EXPECT_EQ(Total(c), 5u);
  EXPECT_EQ(Calls(c, "nvmlDeviceGetUUID"), 3u);
  const HwOps h = HwOpsOf(c);
  EXPECT_EQ(h.gi_creates, 1u);
  EXPECT_EQ(h.ci_creates, 1u);
  EXPECT_EQ(h.gi_destroys, 0u);
}

TEST(SummarizeTest, NearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  const Summary s = Summarize(v);
  EXPECT_EQ(s.p50, 50);
  EXPECT_EQ(s.p99, 99);
  EXPECT_EQ(s.max, 100);
  EXPECT_EQ(s.mean, 50.5);
  EXPECT_EQ(Summarize({}).n, 0u);
}

TEST(PolicyNameTest, RoundTripAndUnknown) {
  for (Policy p : AllPolicies()) {
    auto q = ParsePolicy(PolicyName(p));
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(*q, p);
  }
  EXPECT_EQ(ParsePolicy("hami").status().code(), StatusCode::kInvalidArgument);
}

TEST(LatencyBenchTest, OpsTakeTheirPathsWithExactNvmlBudgets) {
  auto rows = RunOps(Base(), LatencyModel::Zero(), {20, 5, 5});
  ASSERT_TRUE(rows.ok()) << rows.status();
  const OpResult& reuse = Find(*rows, "reuse");
  EXPECT_EQ(reuse.nvml_calls_max, 0u);  // goal: ≤ 2
  EXPECT_EQ(reuse.hw.gi_creates + reuse.hw.ci_creates, 0u);
  EXPECT_EQ(reuse.fsyncs, 2.0);  // the Active record, written once (asked for; sync off)
  const OpResult& release = Find(*rows, "release");
  EXPECT_EQ(release.nvml_calls_max, 0u);
  const OpResult& create = Find(*rows, "create");
  // GI 2 + CI 5 + the MIG-device walk of an H100 (7 indices, 2 id reads for
  // the one CI): NvmlDriver's budget 7 + M + 2N with M = 7, N = 1.
  EXPECT_EQ(create.nvml_calls, 16.0);
  EXPECT_EQ(create.hw.gi_creates, 5u);
  EXPECT_EQ(create.hw.ci_creates, 5u);
  // The projection adds exactly one GI + one CI create per create.
  EXPECT_GE(create.Modeled(Model("hami-claim")).p50, 1500.0);
  EXPECT_LT(create.Modeled(Model("hami-claim")).p50, 1500.0 + create.wall.max + 1e-9);
  const OpResult& reclaim = Find(*rows, "reclaim+create");
  EXPECT_EQ(reclaim.nvml_calls, 23.0);  // destroy 5 + create 7 + 7 + 2 x 2 CIs
  EXPECT_EQ(reclaim.hw.gi_destroys, 5u);
  EXPECT_EQ(reclaim.hw.ci_destroys, 5u);
}

// The goal is ≥ 10x (90% fewer creates); the measured ratio on this
// workload is about 3x (docs/benchmarks/latency.md says why), so the test
// pins what holds: at least 2x, and reuse serving most allocations.
TEST(LatencyBenchTest, ChurnDestroyOnReleaseCreatesMoreThanTwiceLazy) {
  const Workload w = ChurnWorkload({600, 1, false});
  ASSERT_EQ(w.ops.size(), 1200u);
  std::map<Policy, PolicyResult> r;
  for (Policy p : AllPolicies()) {
    auto res = RunPolicy(Base(), w, p);
    ASSERT_TRUE(res.ok()) << PolicyName(p) << ": " << res.status();
    r[p] = *res;
  }
  const PolicyResult& hami = r[Policy::kDestroyOnRelease];
  const PolicyResult& lazy = r[Policy::kLazy];
  // Every successful destroy-on-release allocation creates its GI.
  EXPECT_EQ(hami.request_ops.gi_creates, hami.allocations);
  EXPECT_EQ(hami.stages.count("reuse"), 0u);
  EXPECT_GT(2 * lazy.stages.at("reuse"), lazy.allocations);
  EXPECT_GE(hami.request_ops.gi_creates, 2 * lazy.request_ops.gi_creates)
      << hami.request_ops.gi_creates << " vs " << lazy.request_ops.gi_creates;
  // The warm pool creates off the request path, never more on it than lazy.
  const PolicyResult& warm = r[Policy::kLazyWarm];
  EXPECT_GT(warm.background_ops.gi_creates, 0u);
  EXPECT_LE(warm.request_ops.gi_creates, lazy.request_ops.gi_creates);
  // whole-gpu re-creates Idle instances it destroyed: more creates than lazy.
  EXPECT_GT(r[Policy::kWholeGpu].request_ops.gi_creates, lazy.request_ops.gi_creates);
  for (const auto& [p, res] : r) {
    EXPECT_EQ(res.allocations + res.failures, 600u) << PolicyName(p);
    EXPECT_EQ(res.wall_ms.size(), res.allocations);
    EXPECT_EQ(res.alloc_calls.size(), res.allocations);
    EXPECT_EQ(res.failed_ids.size(), res.failures);
  }
}

// The policies section runs migd's default planner: the value policy, whose
// solves run between allocations, and planner.reuseMargin 0, which keeps
// Idle instances the cost order would reclaim around (docs/planner.md).
TEST(LatencyBenchTest, LazyRunsTheValuePolicyAndItsReuseMarginCutsCreates) {
  const Workload w = ChurnWorkload({600, 1, false});
  auto lazy = [&](bool values, std::optional<double> margin) {
    RigOptions o = Base();
    o.value_policy = values;
    o.manager.reuse_margin = margin;
    StatusOr<PolicyResult> r = RunPolicy(o, w, Policy::kLazy);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : PolicyResult{};
  };
  const PolicyResult cost = lazy(false, 0.0);
  const PolicyResult off = lazy(true, std::nullopt);
  const PolicyResult zero = lazy(true, 0.0);
  EXPECT_EQ(cost.value_solves, 0u);
  EXPECT_GE(off.value_solves, 1u);
  EXPECT_GE(zero.value_solves, 1u);
  EXPECT_LT(zero.request_ops.gi_creates, off.request_ops.gi_creates);
  EXPECT_LT(zero.stages.at("reclaim"), off.stages.at("reclaim"));
  EXPECT_EQ(zero.allocations + zero.failures, 600u);
}

// planner.reuseMargin "auto" (the default) keeps 0 on one GPU and uses 0.1 on
// several: on churn's two GPUs it creates less than 0 everywhere does.
TEST(LatencyBenchTest, AutoReuseMarginCreatesLessThanZeroOnTwoGpus) {
  const Workload w = ChurnWorkload({600, 1, false});
  auto lazy = [&](const planner::ReuseMargins& m) {
    RigOptions o = Base();
    o.value_policy = true;
    o.manager.reuse_margin = m.one_gpu;
    o.manager.reuse_margin_several_gpus = m.several_gpus;
    StatusOr<PolicyResult> r = RunPolicy(o, w, Policy::kLazy);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : PolicyResult{};
  };
  StatusOr<planner::ReuseMargins> automatic = planner::ParseReuseMargin("auto");
  ASSERT_TRUE(automatic.ok());
  const PolicyResult zero = lazy({0.0, 0.0});
  const PolicyResult by_size = lazy(*automatic);
  EXPECT_LT(by_size.request_ops.gi_creates, zero.request_ops.gi_creates);
  EXPECT_EQ(by_size.allocations + by_size.failures, 600u);
}

TEST(LatencyBenchTest, AlibabaWorkloadFromTheTrace) {
  // The public trace carried in the repository (data/README.md).
  const std::string csv =
      std::string(MIGD_SOURCE_DIR) + "/data/alibaba-gpu-v2023/openb_pod_list_default.csv";
  auto w = AlibabaWorkload({csv, 50, 2, 0.9, 1});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->ops.size(), 100u);
  EXPECT_EQ(w->gpus, "h100-80gb:2");
  EXPECT_EQ(AlibabaWorkload({"/nonexistent.csv", 50, 2, 0.9, 1}).status().code() == StatusCode::kOk,
            false);
}

TEST(LatencyBenchTest, RecoveryOfEightFullGpus) {
  auto r = RunRecovery(Base(), 8, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->instances, 56);
  // Per instance 6 (GpuInstanceGetInfo, GetComputeInstances, ComputeInstance-
  // GetInfo_v2, the walk's GetGpuInstanceId + GetComputeInstanceId, the MIG
  // UUID); per GPU 22 (ListGpus' 6, GetMigMode twice, GetGpuInstances for each
  // of H100's 7 GI profiles, the walk's 7 indices); 1 GetCount. The first
  // recovery of a process also walks the CI profiles of each (GPU, GI
  // profile) once, then cached: 9 indices + the INVALID_ARGUMENT past them.
  EXPECT_EQ(r->nvml_calls, 56u * 6 + 8u * 22 + 1 + 8u * 10);
}

// Runs the footprint section (it restarts the Manager midway; a stale
// reference to the old one crashed here once).
TEST(LatencyBenchTest, FootprintRunsOnEightGpus) {
  auto f = RunFootprint(Base());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_GT(f->rss_kb_idle, 0u);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // ASan and TSan replace malloc, so the heap counter the rig reads stays 0.
  EXPECT_GT(f->heap_rig_bytes, 0u);
#endif
}

TEST(LatencyBenchTest, RigFailsOnAMissingLibrary) {
  RigOptions o = Base();
  o.library = "/nonexistent/libnvidia-ml.so.1";
  EXPECT_FALSE(Rig::Open(o).ok());
}

}  // namespace
}  // namespace migd::bench::latency
