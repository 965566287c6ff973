// The DRA benchmark's policies: NVIDIA's names and order reproduce the
// first-fit fragmentation of its issue #933; migd's order with Idle reuse
// admits the same script and reuses instead of creating; validated runs.
#include "bench/placement/dra_bench.h"

#include <gtest/gtest.h>

#include "bench/placement/dra_policy.h"
#include "bench/placement/sim.h"
#include "bench/placement/table.h"
#include "mig/catalog.h"

namespace migd::bench {
namespace {

const GpuTable& A100() {
  static const GpuTable* t = [] {
    StatusOr<GpuTable> b = GpuTable::Build(*mig::Catalog::Default().FindModel("a100-40gb"), false);
    EXPECT_TRUE(b.ok()) << b.status();
    return new GpuTable(std::move(*b));
  }();
  return *t;
}

RunResult RunDra(DraOrder order, const std::vector<Request>& reqs, int gpus,
                 double* ttr_total_ms = nullptr) {
  RunContext ctx;
  ctx.table = &A100();
  ctx.gpus = gpus;
  ctx.class_weights = EmpiricalClassWeights(A100(), reqs);
  SimOptions so;
  so.warmup_fraction = 0;
  DraPolicyOptions po;
  po.order = order;
  PlacementAllocator alloc(std::make_unique<DraPolicy>(po), /*validate=*/true);
  StatusOr<RunResult> r = RunSimulation(alloc, ctx, reqs, so);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(alloc.policy().Errors(), 0);
  if (ttr_total_ms != nullptr) {
    *ttr_total_ms = 0;
    for (const auto& [id, ms] : static_cast<const DraPolicy&>(alloc.policy()).ready_ms()) {
      *ttr_total_ms += ms;
    }
  }
  return r.ok() ? *r : RunResult{};
}

TEST(DraBenchTest, NvidiaDeviceNamesSortAsItsDriverDoes) {
  EXPECT_EQ(NvidiaDeviceName(0, "1g.5gb", 19, 0), "gpu-0-mig-1g5gb-19-0");
  EXPECT_EQ(NvidiaDeviceName(3, "3g.40gb", 9, 4), "gpu-3-mig-3g40gb-9-4");
  EXPECT_EQ(NvidiaDeviceName(0, "1g.10gb+me", 20, 6), "gpu-0-mig-1g10gb-me-20-6");
  // Lexicographic: the double-memory 1g (1g10gb) sorts before 1g5gb.
  EXPECT_LT(NvidiaDeviceName(0, "1g.10gb", 15, 0), NvidiaDeviceName(0, "1g.5gb", 19, 0));
}

std::vector<Request> Sequence(const std::vector<const char*>& classes, double lifetime) {
  std::vector<Request> reqs;
  for (size_t i = 0; i < classes.size(); ++i) {
    Request r;
    r.id = static_cast<int64_t>(i);
    r.arrival = static_cast<double>(i);
    r.lifetime = lifetime;
    r.profiles = {A100().FindProfile(classes[i])};
    reqs.push_back(r);
  }
  return reqs;
}

// Three 1g, then a 4g, on one GPU: NVIDIA's name order puts 1g at 0, 1, 2,
// which blocks the only 4g placement (0:4), the fragmentation its users
// report; migd's order end-packs the 1g and admits the 4g.
TEST(DraBenchTest, FirstFitOverNvidiaOrderBlocksTheLargeProfile) {
  const std::vector<Request> reqs = Sequence({"1g", "1g", "1g", "4g"}, 100);
  const RunResult nv = RunDra(DraOrder::kNvidia, reqs, 1);
  const RunResult migd = RunDra(DraOrder::kMigd, reqs, 1);
  EXPECT_EQ(nv.accepted, 3);
  EXPECT_EQ(migd.accepted, 4);
}

// The placement benchmark's DRA #933 script: seven 1g fill the GPU under
// either order, four depart, and the 3g finds no free 0:4 or 4:4 under
// NVIDIA's first fit (1g left at 0, 1, 5).
TEST(DraBenchTest, Dra933ScriptUnderNvidiaOrder) {
  int gpus = 1;
  StatusOr<std::vector<Request>> reqs = AdversarialScript(A100(), "dra933", &gpus);
  ASSERT_TRUE(reqs.ok()) << reqs.status();
  const RunResult nv = RunDra(DraOrder::kNvidia, *reqs, gpus);
  EXPECT_EQ(nv.accepted, 7);
  EXPECT_EQ(nv.class_accepted[A100().FindProfile("3g")], 0);
}

TEST(DraBenchTest, IdleReuseReplacesCreatesAndShortensTimeToReady) {
  std::vector<Request> reqs;
  const int p = A100().FindProfile("3g");
  for (int i = 0; i < 20; ++i) {
    Request r;
    r.id = i;
    r.arrival = 2.0 * i;
    r.lifetime = 1;
    r.profiles = {p};
    reqs.push_back(r);
  }
  double nv_ms = 0, migd_ms = 0;
  const RunResult nv = RunDra(DraOrder::kNvidia, reqs, 2, &nv_ms);
  const RunResult migd = RunDra(DraOrder::kMigd, reqs, 2, &migd_ms);
  // The default latency model: create 100 ms, reuse 1 ms.
  EXPECT_DOUBLE_EQ(nv_ms, 20 * 100.0);
  EXPECT_DOUBLE_EQ(migd_ms, 100.0 + 19 * 1.0);
  EXPECT_EQ(nv.accepted, 20);
  EXPECT_EQ(migd.accepted, 20);
  EXPECT_EQ(nv.ops.creates, 20);
  EXPECT_EQ(nv.ops.destroys, 19);  // the last claim still runs when the run ends
  EXPECT_EQ(migd.ops.creates, 1);
  EXPECT_EQ(migd.ops.reuses, 19);
  EXPECT_EQ(migd.ops.destroys, 0);
}

TEST(DraBenchTest, MatrixRunsValidatedAndReportsBothDrivers) {
  DraBenchSpec spec;
  spec.mixes = {"uniform"};
  spec.loads = {0.9};
  spec.gpus = {2};
  spec.seeds = 2;
  spec.events = 150;
  spec.validate = true;
  StatusOr<nlohmann::json> doc = RunDraBench(spec);
  ASSERT_TRUE(doc.ok()) << doc.status();
  ASSERT_EQ((*doc)["cells"].size(), 1u);
  const nlohmann::json& cell = (*doc)["cells"][0];
  for (const char* name : {"dra-nvidia", "dra-migd"}) {
    const double acc = cell["policies"][name]["acc"]["mean"];
    EXPECT_GT(acc, 0.0) << name;
    EXPECT_LE(acc, 1.0) << name;
  }
  EXPECT_GE(cell["policies"]["dra-nvidia"]["creates_per_1000"]["mean"].get<double>(), 999.0);
  EXPECT_NE(DraBenchMarkdown(*doc).find("migd − NVIDIA"), std::string::npos);
}

TEST(DraBenchTest, LatencyModelParses) {
  StatusOr<DraLatency> l = ParseDraLatency("create=51.8,destroy=140");
  ASSERT_TRUE(l.ok());
  EXPECT_DOUBLE_EQ(l->create_ms, 51.8);
  EXPECT_DOUBLE_EQ(l->destroy_ms, 140);
  EXPECT_DOUBLE_EQ(l->reuse_ms, 1);
  EXPECT_FALSE(ParseDraLatency("create").ok());
  EXPECT_FALSE(ParseDraLatency("boot=3").ok());
  EXPECT_FALSE(ParseDraLatency("create=-1").ok());
}

}  // namespace
}  // namespace migd::bench
