// The online churn bound (online_bound.h): a one-slot node against Erlang's
// formula, a small node against an exhaustive search over every stationary
// policy written independently here (states and options listed by hand from
// the H100's placement rules, each policy's long-run cost from the empty node
// by powers of its transition matrix), the duality properties, and every
// error path.
#include "bench/latency/online_bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "bench/latency/bound_test_util.h"
#include "bench/latency/policy.h"

namespace migd::bench::latency {
namespace {

std::vector<double> Load(std::initializer_list<std::pair<const char*, double>> by_key) {
  std::vector<double> load(static_cast<size_t>(H100().num_profiles()), 0.0);
  for (const auto& [key, v] : by_key) {
    const int p = H100().FindProfile(key);
    EXPECT_GE(p, 0) << key;
    load[static_cast<size_t>(p)] = v;
  }
  return load;
}

TEST(OnlineBoundTest, OneSevenGSlotRefusesAsErlangBAndNeverRecreates) {
  const double rho = 0.8;
  auto m = OnlineModel::Build(H100(), 1, Load({{"7g", rho}}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_states(), 3u);  // empty, one Active, one Idle
  OnlineSolveOptions o;
  o.refusal_price = 2.0;
  o.tolerance = 1e-10;
  auto sol = m->Solve(o);
  ASSERT_TRUE(sol.ok()) << sol.status();
  ASSERT_TRUE(sol->converged);
  const double blocked = rho / (1 + rho);  // Erlang B, one server
  EXPECT_NEAR(sol->refusals, blocked, 1e-9);
  EXPECT_NEAR(sol->creates, 0.0, 1e-9);  // created once, then Idle or Active for ever
  EXPECT_LE(sol->cost_lower, 2.0 * blocked + 1e-9);
  EXPECT_GE(sol->cost_upper, 2.0 * blocked - 1e-9);
}

// One H100, classes 7g and 3g. Legal layouts: one 7g, or up to two 3g (at 0
// and 4); never both. A state is (Active 7g, Idle 7g, Active 3g, Idle 3g).
struct Tiny {
  static constexpr int kStates = 8;
  static constexpr std::array<std::array<int, 4>, kStates> kState = {{
      {0, 0, 0, 0},
      {1, 0, 0, 0},
      {0, 1, 0, 0},
      {0, 0, 1, 0},
      {0, 0, 0, 1},
      {0, 0, 2, 0},
      {0, 0, 1, 1},
      {0, 0, 0, 2},
  }};
  struct Opt {
    int next;
    bool create;
  };
  // Options per (state, class 0 = 7g / 1 = 3g), refusal aside.
  static std::vector<Opt> Options(int s, int c) {
    switch (s * 2 + c) {
      case 0:
        return {{1, true}};  // empty, 7g
      case 1:
        return {{3, true}};  // empty, 3g
      case 4:
        return {{1, false}, {1, true}};  // Idle 7g: reuse or re-create
      case 5:
        return {{3, true}};  // Idle 7g, 3g: destroy it, create
      case 7:
        return {{5, true}};  // one Active 3g, 3g
      case 8:
        return {{1, true}};  // Idle 3g, 7g: destroy it
      case 9:
        return {{3, false}, {6, true}};  // Idle 3g, 3g: reuse or create beside
      case 13:
        return {{5, false}, {5, true}};  // Active + Idle 3g, 3g
      case 14:
        return {{1, true}};  // two Idle 3g, 7g: destroy both
      case 15:
        return {{6, false}, {6, true}};  // two Idle 3g, 3g
      default:
        return {};  // full: refuse only
    }
  }
  static int Departure(int s, int c) {  // -1: nothing of that class Active
    const int a = kState[s][c == 0 ? 0 : 2];
    if (a == 0) return -1;
    std::array<int, 4> t = kState[s];
    --t[c == 0 ? 0 : 2];
    ++t[c == 0 ? 1 : 3];
    for (int k = 0; k < kStates; ++k) {
      if (kState[k] == t) return k;
    }
    return -2;
  }
};

using Matrix = std::array<std::array<double, Tiny::kStates>, Tiny::kStates>;

Matrix Multiply(const Matrix& a, const Matrix& b) {
  Matrix c{};
  for (int i = 0; i < Tiny::kStates; ++i)
    for (int k = 0; k < Tiny::kStates; ++k)
      for (int j = 0; j < Tiny::kStates; ++j) c[i][j] += a[i][k] * b[k][j];
  return c;
}

// The least long-run cost per request from the empty node over every
// stationary deterministic policy.
double ExhaustiveBest(double load7, double load3, double price) {
  const double lambda[2] = {load7, load3};
  const double total = load7 + load3;
  const double nu = total + 3;  // at most two Active instances
  std::vector<int> sizes;       // choices per (state, class), index state * 2 + class
  for (int s = 0; s < Tiny::kStates; ++s)
    for (int c = 0; c < 2; ++c) {
      sizes.push_back(static_cast<int>(Tiny::Options(s, c).size()) + 1);  // + refuse
    }
  std::vector<int> pick(sizes.size(), 0);
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    Matrix p{};
    std::array<double, Tiny::kStates> cost{};  // per step
    for (int s = 0; s < Tiny::kStates; ++s) {
      double out = 0;
      for (int c = 0; c < 2; ++c) {
        const int d = Tiny::Departure(s, c);
        if (d >= 0) {
          const double r = Tiny::kState[s][c == 0 ? 0 : 2];
          p[s][d] += r / nu;
          out += r;
        }
        const int k = pick[static_cast<size_t>(s * 2 + c)];
        const auto opts = Tiny::Options(s, c);
        if (k == static_cast<int>(opts.size())) {
          cost[s] += lambda[c] / nu * price;  // refuse: stays
        } else {
          p[s][opts[k].next] += lambda[c] / nu;
          out += lambda[c];
          if (opts[k].create) cost[s] += lambda[c] / nu;
        }
      }
      p[s][s] += 1 - out / nu;
    }
    // P^(2^24), rows renormalised after each squaring (rounding would
    // otherwise drain or inflate them): the limit from the empty node, as
    // the chain mixes within a few hundred steps.
    for (int i = 0; i < 24; ++i) {
      p = Multiply(p, p);
      for (auto& row : p) {
        double sum = 0;
        for (double v : row) sum += v;
        for (double& v : row) v /= sum;
      }
    }
    double g = 0;
    for (int s = 0; s < Tiny::kStates; ++s) g += p[0][s] * cost[s];
    best = std::min(best, g * nu / total);
    size_t i = 0;
    while (i < pick.size() && ++pick[i] == sizes[i]) pick[i++] = 0;
    if (i == pick.size()) break;
  }
  return best;
}

TEST(OnlineBoundTest, MatchesAnExhaustiveSearchOverEveryPolicyOnASmallNode) {
  for (double load7 : {0.3, 1.0}) {
    for (double load3 : {0.5, 2.0}) {
      auto m = OnlineModel::Build(H100(), 1, Load({{"7g", load7}, {"3g", load3}}));
      ASSERT_TRUE(m.ok()) << m.status();
      ASSERT_EQ(m->num_states(), static_cast<size_t>(Tiny::kStates));
      for (double price : {0.0, 0.5, 2.0, 50.0}) {
        OnlineSolveOptions o;
        o.refusal_price = price;
        o.tolerance = 1e-10;
        auto sol = m->Solve(o);
        ASSERT_TRUE(sol.ok()) << sol.status();
        ASSERT_TRUE(sol->converged);
        const double best = ExhaustiveBest(load7, load3, price);
        SCOPED_TRACE(testing::Message() << load7 << " " << load3 << " price " << price);
        EXPECT_LE(sol->cost_lower, best + 1e-8);
        EXPECT_GE(sol->cost_upper, best - 1e-8);
        // The greedy policy's own creates and refusals cost the optimum.
        EXPECT_NEAR(sol->creates + price * sol->refusals, best, 1e-7);
      }
    }
  }
}

TEST(OnlineBoundTest, CostRisesWithThePriceAndTheBoundFallsWithTheRefusalsAllowed) {
  auto m = OnlineModel::Build(H100(), 1, Load({{"1g", 2.0}, {"2g", 1.0}, {"3g", 0.4}}));
  ASSERT_TRUE(m.ok()) << m.status();
  OnlineSolveOptions o;
  o.tolerance = 1e-9;
  double last = -1;
  for (double price : {0.0, 0.5, 1.0, 3.0, 10.0}) {
    o.refusal_price = price;
    auto sol = m->Solve(o);
    ASSERT_TRUE(sol.ok()) << sol.status();
    EXPECT_GE(sol->cost_lower, last - 1e-9) << price;
    last = sol->cost_upper;
    // Weak duality: the policy found at this price refuses sol->refusals and
    // creates sol->creates; no bound for that refusal fraction exceeds it.
    auto b = m->CreatesLowerBound(sol->refusals, {0.0, 0.5, 1.0, 3.0, 10.0}, o);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_LE(b->creates, sol->creates + 1e-6) << price;
  }
  const std::vector<double> prices = {0.0, 1.0, 3.0, 10.0};
  double prev = std::numeric_limits<double>::infinity();
  for (double r : {0.0, 0.01, 0.05, 0.2}) {
    auto b = m->CreatesLowerBound(r, prices, o);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_LE(b->creates, prev + 1e-12) << r;
    EXPECT_GE(b->creates, 0.0);
    prev = b->creates;
  }
  auto none = m->CreatesLowerBound(1.0, prices, o);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->creates, 0.0);  // refusing everything creates nothing
}

TEST(OnlineBoundTest, AnUnconvergedSolveStillBracketsTheOptimum) {
  auto m = OnlineModel::Build(H100(), 1, Load({{"7g", 1.0}, {"3g", 2.0}}));
  ASSERT_TRUE(m.ok());
  OnlineSolveOptions few;
  few.refusal_price = 2.0;
  few.max_sweeps = 3;
  auto rough = m->Solve(few);
  ASSERT_TRUE(rough.ok());
  EXPECT_FALSE(rough->converged);
  EXPECT_EQ(rough->sweeps, 3);
  const double best = ExhaustiveBest(1.0, 2.0, 2.0);
  EXPECT_LE(rough->cost_lower, best + 1e-12);
  EXPECT_GE(rough->cost_upper, best - 1e-12);
  EXPECT_LT(rough->cost_lower, rough->cost_upper);
}

// The loads churn-steady declares are the ones its generator draws from:
// arrivals per profile over the run's length, times the mean lifetime seen.
TEST(OnlineBoundTest, ChurnSteadyDeclaresTheLoadItsGeneratorDraws) {
  const Workload steady = ChurnWorkload({20000, 1, false});
  ASSERT_EQ(steady.markov_load.size(), 3u);
  std::map<std::string, double> arrivals;
  std::map<int64_t, double> born;
  double life_sum = 0;
  int lives = 0;
  for (const Op& op : steady.ops) {
    if (op.kind == Op::Kind::kAllocate) {
      arrivals[op.profiles.at(0)] += 1;
      born[op.id] = op.time;
    } else {
      life_sum += op.time - born.at(op.id);
      ++lives;
    }
  }
  const double mean_life = life_sum / lives;
  double last_arrival = 0;
  for (const Op& op : steady.ops) {
    if (op.kind == Op::Kind::kAllocate) last_arrival = std::max(last_arrival, op.time);
  }
  for (const auto& [name, load] : steady.markov_load) {
    const double seen = arrivals[name] / last_arrival * mean_life;
    EXPECT_NEAR(seen / load, 1.0, 0.05) << name;
  }
  EXPECT_TRUE(ChurnWorkload({200, 1, true}).markov_load.empty());  // bursts: not Markovian
}

TEST(OnlineBoundTest, RefusesBadInput) {
  const std::vector<double> ok = Load({{"1g", 1.0}});
  EXPECT_EQ(OnlineModel::Build(H100(), 0, ok).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OnlineModel::Build(H100(), 9, ok).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OnlineModel::Build(H100(), 1, {1.0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OnlineModel::Build(H100(), 1, Load({{"1g", -1.0}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OnlineModel::Build(H100(), 1, Load({{"1g", std::nan("")}})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OnlineModel::Build(H100(), 1, Load({})).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OnlineModel::Build(H100(), 2, ok, 10).status().code(), StatusCode::kResourceExhausted);
  auto m = OnlineModel::Build(H100(), 1, ok);
  ASSERT_TRUE(m.ok());
  OnlineSolveOptions o;
  o.refusal_price = -1;
  EXPECT_EQ(m->Solve(o).status().code(), StatusCode::kInvalidArgument);
  o.refusal_price = 1;
  o.tolerance = 0;
  EXPECT_EQ(m->Solve(o).status().code(), StatusCode::kInvalidArgument);
  o.tolerance = 1e-6;
  EXPECT_EQ(m->CreatesLowerBound(0.1, {}, o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m->CreatesLowerBound(-0.1, {1.0}, o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m->CreatesLowerBound(1.5, {1.0}, o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace migd::bench::latency
