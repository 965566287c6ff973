// Deterministic invariants of the placement benchmark's simulator: tables,
// common random numbers, bounds, the MDP solver against brute force,
// legality of every baseline's layouts (the trace replay: trace_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/placement/baselines.h"
#include "bench/placement/bounds.h"
#include "bench/placement/mdp.h"
#include "bench/placement/runner.h"
#include "bench/placement/sim.h"
#include "bench/placement/table.h"
#include "bench/placement/workload.h"
#include "mig/catalog.h"
#include "planner/value_table.h"

namespace migd::bench {
namespace {

const mig::GpuModel& Model(const char* key) {
  const mig::GpuModel* m = mig::Catalog::Default().FindModel(key);
  EXPECT_NE(m, nullptr) << key;
  return *m;
}

GpuTable Table(const char* key, bool dm) {
  StatusOr<GpuTable> t = GpuTable::Build(Model(key), dm);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

std::vector<Request> Synthetic(const GpuTable& t, const char* mix, double load, int gpus,
                               int events, uint64_t seed) {
  StatusOr<Mix> m = ParseMix(mix);
  EXPECT_TRUE(m.ok());
  SyntheticSpec spec{*m, load, gpus, events, seed, LifetimeDist::kExponential};
  StatusOr<std::vector<Request>> r = GenerateSynthetic(t, spec);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

RunContext Context(const GpuTable& t, const char* mix, int gpus) {
  RunContext ctx;
  ctx.table = &t;
  ctx.gpus = gpus;
  ctx.class_weights = MixClassWeights(t, *ParseMix(mix));
  return ctx;
}

RunResult Simulate(Allocator& a, const RunContext& ctx, const std::vector<Request>& reqs) {
  SimOptions o;
  o.warmup_fraction = 0;
  StatusOr<RunResult> r = RunSimulation(a, ctx, reqs, o);
  EXPECT_TRUE(r.ok()) << a.name() << ": " << r.status().ToString();
  return r.ok() ? *r : RunResult{};
}

// ---- tables ----

TEST(GpuTableTest, StandardTableHas298StatesAnd19MaximalLayouts) {
  for (const char* key : {"a100-40gb", "h100-80gb", "h200-141gb"}) {
    GpuTable t = Table(key, false);
    EXPECT_EQ(t.num_states(), 298) << key;
    EXPECT_EQ(t.maximal_states().size(), 19u) << key;
    EXPECT_EQ(t.state(t.empty_state()).instances, 0);
    EXPECT_EQ(t.num_profiles(), 5);
  }
}

TEST(GpuTableTest, DoubleMemoryTableHas723StatesAnd78MaximalLayouts) {
  for (const char* key : {"h100-80gb", "h200-141gb"}) {
    GpuTable t = Table(key, true);
    EXPECT_EQ(t.num_states(), 723) << key;
    EXPECT_EQ(t.maximal_states().size(), 78u) << key;
    EXPECT_GE(t.FindProfile("1g.dm"), 0);
  }
}

TEST(GpuTableTest, TransitionsFollowAlignment) {
  GpuTable t = Table("h100-80gb", false);
  const int one = t.FindProfile("1g"), two = t.FindProfile("2g"), three = t.FindProfile("3g");
  // A 1g at 6 blocks 3g@4 (3g@4 spans units 4-7); 2g@4 as well.
  const int s = t.Add(t.empty_state(), t.PairOf(one, 6));
  ASSERT_GE(s, 0);
  EXPECT_LT(t.Add(s, t.PairOf(three, 4)), 0);
  EXPECT_GE(t.Add(s, t.PairOf(three, 0)), 0);
  const int s2 = t.Add(t.empty_state(), t.PairOf(two, 4));
  EXPECT_LT(t.Add(s2, t.PairOf(three, 4)), 0);
  EXPECT_EQ(t.Remove(s, t.PairOf(one, 6)), t.empty_state());
  EXPECT_EQ(t.StateString(s), "1g@6");
}

// ---- common random numbers ----

TEST(WorkloadTest, SameSeedGivesIdenticalSequences) {
  GpuTable t = Table("h100-80gb", false);
  for (const char* mix : {"uniform", "multi"}) {
    const std::vector<Request> a = Synthetic(t, mix, 0.9, 4, 2000, 7);
    const std::vector<Request> b = Synthetic(t, mix, 0.9, 4, 2000, 7);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].arrival, b[i].arrival);
      EXPECT_EQ(a[i].lifetime, b[i].lifetime);
      EXPECT_EQ(a[i].profiles, b[i].profiles);
      EXPECT_EQ(a[i].same_gpu, b[i].same_gpu);
    }
    const std::vector<Request> c = Synthetic(t, mix, 0.9, 4, 2000, 8);
    EXPECT_NE(a[5].arrival, c[5].arrival);
  }
}

TEST(WorkloadTest, LoadChangesOnlyArrivalTimes) {
  GpuTable t = Table("h100-80gb", false);
  const std::vector<Request> a = Synthetic(t, "uniform", 0.7, 8, 1000, 3);
  const std::vector<Request> b = Synthetic(t, "uniform", 1.1, 8, 1000, 3);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].profiles, b[i].profiles);
    EXPECT_EQ(a[i].lifetime, b[i].lifetime);
  }
  EXPECT_GT(a.back().arrival, b.back().arrival);
}

TEST(WorkloadTest, OfferedLoadMatchesRho) {
  GpuTable t = Table("h100-80gb", false);
  const std::vector<Request> r = Synthetic(t, "small-heavy", 0.9, 4, 200000, 11);
  double work = 0;
  for (const Request& q : r) work += RequestCompute(t, q) * q.lifetime;
  EXPECT_NEAR(work / (r.back().arrival * 7 * 4), 0.9, 0.02);
}

TEST(WorkloadTest, EveryPolicySeesTheSameSequence) {
  // The runner generates one sequence per (cell, seed) and runs all policies
  // on it; a run must not modify the sequence.
  GpuTable t = Table("h100-80gb", false);
  const std::vector<Request> reqs = Synthetic(t, "uniform", 1.0, 2, 500, 5);
  const std::vector<Request> copy = reqs;
  RunContext ctx = Context(t, "uniform", 2);
  for (const char* p : {"B1", "B2"}) {
    std::unique_ptr<Allocator> a = MakeAllocator(p, {}, false);
    Simulate(*a, ctx, reqs);
  }
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(reqs[i].arrival, copy[i].arrival);
}

// ---- bounds ----

TEST(BoundsTest, CapacityAtLeastRepackAtLeastAnyPolicyOnFixedSequence) {
  GpuTable t = Table("h100-80gb", false);
  const std::vector<Request> reqs = Synthetic(t, "uniform", 1.2, 2, 400, 21);
  RunContext ctx = Context(t, "uniform", 2);
  CountingBound b14(CountingBound::kCapacity), b12(CountingBound::kRepack);
  const int64_t cap = Simulate(b14, ctx, reqs).accepted;
  const int64_t repack = Simulate(b12, ctx, reqs).accepted;
  EXPECT_GE(cap, repack);
  std::vector<std::string> names = {"migd", "B1", "B2", "B3", "B4a", "B4b",
                                    "B5",   "B6", "B8", "B9", "B10"};
  for (const std::string& n : names) {
    std::unique_ptr<Allocator> a = MakeAllocator(n, {}, true);
    EXPECT_GE(repack, Simulate(*a, ctx, reqs).accepted) << n;
  }
}

TEST(BoundsTest, RepackPackerKnowsGeometry) {
  GpuTable t = Table("h100-80gb", false);
  MultisetPacker packer(t);
  // 1g 2g 3g 4g 7g
  EXPECT_TRUE(packer.Fits({0, 0, 1, 1, 0}, 1));   // 4g + 3g
  EXPECT_TRUE(packer.Fits({4, 0, 1, 0, 0}, 1));   // 4×1g + 3g
  EXPECT_FALSE(packer.Fits({0, 0, 0, 2, 0}, 1));  // 2×4g
  EXPECT_FALSE(packer.Fits({0, 3, 1, 0, 0}, 1));  // 3×2g + 3g: 3g@4 needs 4-7
  EXPECT_TRUE(packer.Fits({0, 2, 1, 0, 0}, 1));   // 2g@0 2g@2 3g@4
  EXPECT_TRUE(packer.Fits({0, 0, 2, 2, 0}, 2));
  EXPECT_FALSE(packer.Fits({0, 0, 0, 0, 3}, 2));
  EXPECT_TRUE(packer.Fits({3, 3, 2, 1, 1}, 4));
  EXPECT_FALSE(packer.Fits({7, 3, 2, 1, 1}, 4));  // 30 compute slices > 28
}

// ---- B11 ----

// A 3-unit toy table: 1g at 0, 1, 2 and a 2g at 0 (slices 0-1): placing the
// first 1g at 2 keeps the 2g possible.
struct ToyModel {
  mig::GpuModel model;
  ToyModel() {
    model.key = "toy";
    model.compute_slices = 3;
    model.memory_slices = 3;
    mig::GiProfile one;
    one.name = "1g.toy";
    one.id = GiProfileId(1);
    one.slice_count = 1;
    one.instance_count = 3;
    one.placements = {{0, 1}, {1, 1}, {2, 1}};
    mig::GiProfile two;
    two.name = "2g.toy";
    two.id = GiProfileId(2);
    two.slice_count = 2;
    two.instance_count = 1;
    two.placements = {{0, 2}};
    model.gi_profiles = {one, two};
  }
};

// The best average reward over every deterministic stationary policy of
// `t` (a placement for each (state, class) where one is legal), by exact
// policy evaluation; *policies counts them.
double BruteForceBestGain(const GpuTable& t, const std::vector<double>& rates, bool slice,
                          int* policies) {
  const int S = t.num_states(), P = t.num_profiles();
  std::vector<std::vector<int>> options(static_cast<size_t>(S) * P);
  for (int s = 0; s < S; ++s) {
    for (int p = 0; p < P; ++p) {
      for (int pair : t.profile(p).pairs) {
        if (t.Add(s, pair) >= 0) options[static_cast<size_t>(s) * P + p].push_back(pair);
      }
    }
  }
  std::vector<int> choice(options.size(), -1);
  double best = -1;
  *policies = 0;
  std::function<void(size_t)> enumerate = [&](size_t i) {
    if (i == options.size()) {
      ++*policies;
      best = std::max(best, EvaluateStationaryPolicy(t, rates, slice, choice));
      return;
    }
    if (options[i].empty()) {
      choice[i] = -1;
      enumerate(i + 1);
      return;
    }
    for (int pair : options[i]) {
      choice[i] = pair;
      enumerate(i + 1);
    }
  };
  enumerate(0);
  return best;
}

TEST(MdpTest, ValueIterationConvergesAndMatchesBruteForce) {
  ToyModel toy;
  StatusOr<GpuTable> t = GpuTable::BuildFrom(
      toy.model, {{"1g", &toy.model.gi_profiles[0]}, {"2g", &toy.model.gi_profiles[1]}});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->num_states(), 10);
  for (const std::vector<double>& rates :
       {std::vector<double>{1.5, 0.8}, std::vector<double>{3.0, 0.3}}) {
    for (bool slice : {false, true}) {
      const MdpResult r = SolveSingleGpuMdp(*t, rates, slice);
      EXPECT_TRUE(r.converged);
      int policies = 0;
      const double best = BruteForceBestGain(*t, rates, slice, &policies);
      EXPECT_EQ(policies, 24);
      EXPECT_NEAR(r.gain, best, 1e-7) << "slice=" << slice;
    }
  }
}

// The planner's own rule against the exhaustive search: on the toy GPU,
// "place where h of the next state is largest", with h from the planner's
// value table (src/planner/value_table.h), evaluated exactly, earns the best
// average reward of all 24 stationary policies, under both objectives; the
// table's gain is that optimum.
TEST(MdpTest, PlannerValueChoiceIsOptimalByExhaustiveSearch) {
  ToyModel toy;
  StatusOr<GpuTable> t = GpuTable::BuildFrom(
      toy.model, {{"1g", &toy.model.gi_profiles[0]}, {"2g", &toy.model.gi_profiles[1]}});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const int S = t->num_states(), P = t->num_profiles();
  auto gi_index = [&](int p) {
    return static_cast<size_t>(t->profile(p).gi - toy.model.gi_profiles.data());
  };
  for (const std::vector<double>& rates :
       {std::vector<double>{1.5, 0.8}, std::vector<double>{3.0, 0.3},
        std::vector<double>{0.4, 2.0}}) {
    for (bool slice : {false, true}) {
      planner::ValueSpec spec;
      spec.objective = slice ? planner::Objective::kSliceWeighted : planner::Objective::kCount;
      spec.rates.assign(toy.model.gi_profiles.size(), 0.0);
      for (int p = 0; p < P; ++p) spec.rates[gi_index(p)] = rates[static_cast<size_t>(p)];
      StatusOr<std::shared_ptr<const planner::ValueTable>> vt =
          planner::ValueTable::Solve(toy.model, spec);
      ASSERT_TRUE(vt.ok()) << vt.status().ToString();
      std::vector<int> choice(static_cast<size_t>(S) * P, -1);
      for (int s = 0; s < S; ++s) {
        uint64_t set = 0;
        for (int i = 0; i < t->num_pairs(); ++i) {
          if ((t->state(s).pair_set >> i & 1u) == 0) continue;
          set |= uint64_t{1} << (*vt)->SlotOf(gi_index(t->pair(i).profile), t->pair(i).start);
        }
        const int vs = (*vt)->StateOf(set);
        ASSERT_GE(vs, 0) << t->StateString(s);
        for (int p = 0; p < P; ++p) {
          double best_h = -1e300;
          for (int pair : t->profile(p).pairs) {
            if (t->Add(s, pair) < 0) continue;
            const int next = (*vt)->Add(vs, (*vt)->SlotOf(gi_index(p), t->pair(pair).start));
            ASSERT_GE(next, 0);
            if ((*vt)->Value(next) > best_h) {
              best_h = (*vt)->Value(next);
              choice[static_cast<size_t>(s) * P + p] = pair;
            }
          }
        }
      }
      int policies = 0;
      const double best = BruteForceBestGain(*t, rates, slice, &policies);
      EXPECT_EQ(policies, 24);
      EXPECT_NEAR(EvaluateStationaryPolicy(*t, rates, slice, choice), best, 1e-7)
          << "slice=" << slice;
      EXPECT_NEAR((*vt)->stats().gain, best, 1e-6) << "slice=" << slice;
    }
  }
}

// The planner's value tables (src/planner/value_table.h) and the benchmark's
// MDP solver are separate implementations of the same single-GPU MDP: equal
// optimal gains, and the planner's choice (argmax h of the next state) is
// optimal for the benchmark's values in every state and class.
TEST(MdpTest, PlannerValueTablesAgreeWithTheBenchmarksSolver) {
  GpuTable t = Table("h100-80gb", false);
  const mig::GpuModel& m = Model("h100-80gb");
  for (const char* mix : {"uniform", "no-7g", "small-heavy"}) {
    const std::vector<double> w = MixClassWeights(t, *ParseMix(mix));
    double mean_c = 0;
    for (int p = 0; p < t.num_profiles(); ++p) mean_c += w[p] * t.profile(p).compute;
    std::vector<double> rates(t.num_profiles());
    planner::ValueSpec spec;
    spec.rates.assign(m.gi_profiles.size(), 0.0);
    for (int p = 0; p < t.num_profiles(); ++p) {
      rates[p] = 1.1 * 7 / mean_c * w[p];
      spec.rates[static_cast<size_t>(t.profile(p).gi - m.gi_profiles.data())] = rates[p];
    }
    for (bool slice : {false, true}) {
      spec.objective = slice ? planner::Objective::kSliceWeighted : planner::Objective::kCount;
      const MdpResult bench = SolveSingleGpuMdp(t, rates, slice);
      StatusOr<std::shared_ptr<const planner::ValueTable>> vt = planner::ValueTable::Solve(m, spec);
      ASSERT_TRUE(vt.ok()) << vt.status().ToString();
      EXPECT_NEAR((*vt)->stats().gain, bench.gain, 1e-6 * bench.gain) << mix << " " << slice;
      int checked = 0;
      int demanded_states = 0;
      for (int s = 0; s < t.num_states(); ++s) {
        // States holding a profile without demand are unreachable; the
        // planner's table leaves them out.
        bool demanded = true;
        for (int i = 0; i < t.num_pairs(); ++i) {
          if ((t.state(s).pair_set >> i & 1u) != 0 && rates[t.pair(i).profile] == 0) {
            demanded = false;
          }
        }
        if (!demanded) continue;
        ++demanded_states;
        uint64_t set = 0;
        for (int i = 0; i < t.num_pairs(); ++i) {
          if ((t.state(s).pair_set >> i & 1u) == 0) continue;
          const PairInfo& pi = t.pair(i);
          set |=
              uint64_t{1} << (*vt)->SlotOf(
                  static_cast<size_t>(t.profile(pi.profile).gi - m.gi_profiles.data()), pi.start);
        }
        const int vs = (*vt)->StateOf(set);
        ASSERT_GE(vs, 0);
        for (int p = 0; p < t.num_profiles(); ++p) {
          if (rates[p] == 0) continue;
          double best = -1e300, planner_pick = -1e300, planner_h = -1e300;
          for (int pair : t.profile(p).pairs) {
            const int n = t.Add(s, pair);
            if (n < 0) continue;
            best = std::max(best, bench.h[n]);
            const int vn = (*vt)->Add(
                vs, (*vt)->SlotOf(static_cast<size_t>(t.profile(p).gi - m.gi_profiles.data()),
                                  t.pair(pair).start));
            if ((*vt)->Value(vn) > planner_h) {
              planner_h = (*vt)->Value(vn);
              planner_pick = bench.h[n];
            }
          }
          if (best < -1e299) continue;
          EXPECT_NEAR(planner_pick, best, 1e-6) << mix << " state " << t.StateString(s);
          ++checked;
        }
      }
      // The same legal layouts, and a choice checked in every (state, class)
      // where one is legal.
      EXPECT_EQ(static_cast<size_t>(demanded_states), (*vt)->num_states()) << mix;
      EXPECT_GT(checked, 100) << mix;
    }
  }
}

TEST(MdpTest, StandardTableConvergesAndBoundsTheSimulation) {
  GpuTable t = Table("h100-80gb", false);
  // Uniform mix at rho = 0.9: λ = 0.9·7/3.4 split evenly.
  const double rate = 0.9 * 7 / 3.4;
  const std::vector<double> rates(5, rate / 5);
  const MdpResult r = SolveSingleGpuMdp(t, rates, false);
  EXPECT_TRUE(r.converged);
  EXPECT_GT(r.acceptance, 0.5);
  EXPECT_LT(r.acceptance, 0.8);
}

// ---- legality of every policy ----

TEST(PolicyTest, EveryPolicyProducesOnlyLegalLayouts) {
  struct Case {
    const char* model;
    bool dm;
    const char* mix;
    int gpus;
  };
  for (const Case& c :
       {Case{"h100-80gb", false, "multi", 3}, Case{"h200-141gb", true, "uniform-dm", 2},
        Case{"a100-40gb", false, "small-heavy", 1}}) {
    GpuTable t = Table(c.model, c.dm);
    const std::vector<Request> reqs = Synthetic(t, c.mix, 1.1, c.gpus, 600, 13);
    RunContext ctx = Context(t, c.mix, c.gpus);
    for (const std::string& n : KnownPolicies()) {
      if (n == "B11" || n == "B11s" || n == "B12" || n == "B14") continue;
      std::unique_ptr<Allocator> a = MakeAllocator(n, {}, /*validate=*/true);
      const RunResult r = Simulate(*a, ctx, reqs);
      EXPECT_GT(r.accepted, 0) << n << " " << c.mix;
      EXPECT_EQ(r.policy_errors, 0) << n;
    }
  }
}

TEST(PolicyTest, B11PolicyIsLegalOnOneGpu) {
  GpuTable t = Table("h100-80gb", false);
  const std::vector<Request> reqs = Synthetic(t, "uniform", 0.9, 1, 500, 2);
  RunContext ctx = Context(t, "uniform", 1);
  ctx.class_rates.assign(5, 0.9 * 7 / 3.4 / 5);
  for (const char* n : {"B11", "B11s"}) {
    std::unique_ptr<Allocator> a = MakeAllocator(n, {}, true);
    EXPECT_GT(Simulate(*a, ctx, reqs).accepted, 0) << n;
  }
}

TEST(PolicyTest, HamiRulesPlaceAsDocumented) {
  GpuTable t = Table("a100-40gb", false);
  RunContext ctx = Context(t, "uniform", 1);
  auto place = [&](const char* policy, std::vector<const char*> profiles) {
    std::unique_ptr<Policy> p = MakeBaseline(policy);
    EXPECT_TRUE(p->Reset(ctx).ok());
    ClusterState cs = EmptyCluster(t, 1);
    std::vector<std::string> out;
    int64_t id = 0;
    for (const char* key : profiles) {
      Request r;
      r.id = id++;
      r.profiles = {t.FindProfile(key)};
      std::optional<Decision> d = p->Decide(cs, r);
      if (!d) {
        out.push_back("-");
        continue;
      }
      OpCounters c;
      EXPECT_TRUE(ApplyDecision(cs, r, *d, &c).ok());
      out.push_back(std::string(key) + "@" + std::to_string(t.pair(d->ops[0].pair).start));
    }
    return out;
  };
  // HAMi v2.10 (TestSelectMigPlacementUsesBalancedPacking): 3g -> 4, 2g -> 0, 1g -> 3 then 2.
  EXPECT_THAT(place("B3", {"3g", "2g", "1g", "1g"}),
              ::testing::ElementsAre("3g@4", "2g@0", "1g@3", "1g@2"));
  // Merged PR #2855: region-sized 3g in the reserved (upper) region, 1g packed
  // to the outer edge of the lower region.
  EXPECT_THAT(place("B4b", {"3g", "1g"}), ::testing::ElementsAre("3g@4", "1g@0"));
  EXPECT_THAT(place("B1", {"1g", "1g"}), ::testing::ElementsAre("1g@0", "1g@1"));
  EXPECT_THAT(place("B2", {"1g", "1g"}), ::testing::ElementsAre("1g@6", "1g@5"));
}

TEST(PolicyTest, Dra933PatternBlocksFirstFit) {
  GpuTable t = Table("h100-80gb", false);
  int gpus = 0;
  StatusOr<std::vector<Request>> reqs = AdversarialScript(t, "dra933", &gpus);
  ASSERT_TRUE(reqs.ok());
  RunContext ctx = Context(t, "uniform", gpus);
  std::unique_ptr<Allocator> b1 = MakeAllocator("B1", {}, true);
  const RunResult r = Simulate(*b1, ctx, *reqs);
  EXPECT_EQ(r.class_accepted[t.FindProfile("3g")], 0);  // 1g left at 0, 1, 5
  EXPECT_EQ(r.class_accepted[t.FindProfile("1g")], 7);
}

TEST(PolicyTest, SameRunTwiceGivesIdenticalDecisions) {
  GpuTable t = Table("h100-80gb", false);
  const std::vector<Request> reqs = Synthetic(t, "multi", 1.0, 4, 800, 17);
  RunContext ctx = Context(t, "multi", 4);
  for (const char* n : {"migd", "B4b", "B6", "B10"}) {
    std::unique_ptr<Allocator> a = MakeAllocator(n, {}, false);
    std::unique_ptr<Allocator> b = MakeAllocator(n, {}, false);
    EXPECT_EQ(Simulate(*a, ctx, reqs).decision_hash, Simulate(*b, ctx, reqs).decision_hash) << n;
  }
}

TEST(PolicyTest, IdleInstancesAreReusedAndReclaimedWithoutEvictions) {
  GpuTable t = Table("h100-80gb", false);
  const std::vector<Request> reqs = Synthetic(t, "uniform", 1.0, 2, 2000, 4);
  RunContext ctx = Context(t, "uniform", 2);
  std::unique_ptr<Allocator> a = MakeAllocator("migd", {}, true);
  const RunResult r = Simulate(*a, ctx, reqs);
  EXPECT_GT(r.ops.reuses, 0);
  EXPECT_GT(r.ops.reclaims, 0);
  // Every accepted instance is a create or a reuse.
  int64_t instances = 0;
  for (int64_t x : r.class_accepted) instances += x;
  EXPECT_EQ(r.ops.creates + r.ops.reuses, instances);
}

TEST(StatsTest, PairedConfidenceInterval) {
  const MeanCi m = Summarise({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(m.mean, 2.5);
  // sd = 1.290994, t(3) = 3.182, n = 4.
  EXPECT_NEAR(m.half_width, 3.182 * 1.2909944 / 2, 1e-6);
  EXPECT_EQ(Summarise({5}).half_width, 0);
  EXPECT_NEAR(TQuantile975(9), 2.262, 1e-9);
}

}  // namespace
}  // namespace migd::bench
