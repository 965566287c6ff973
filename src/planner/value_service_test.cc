#include "planner/value_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "planner/planner.h"
#include "planner/planner_test_util.h"
#include "planner/solve_executor.h"
#include "testing/status_matchers.h"

namespace migd::planner {
namespace {

using namespace ::migd::planner::test;  // NOLINT(google-build-using-namespace): test builders

// A service on a ManualExecutor: solves run only when the test says so.
struct Service {
  explicit Service(ValueOptions o = {}) {
    auto e = std::make_unique<ManualExecutor>();
    executor = e.get();
    service = std::make_shared<ValueService>(o, std::move(e));
  }
  ManualExecutor* executor;
  std::shared_ptr<ValueService> service;
};

size_t Index(const char* name) {
  const mig::GpuModel& m = Model("h100-80gb");
  return static_cast<size_t>(m.FindProfileByName(name) - m.gi_profiles.data());
}

uint32_t Bit(const char* name) { return 1u << Index(name); }

// One GPU with `active` Active 1g instances at starts 0.. and a request.
PlanInput Arrival(const char* profile, int active = 0) {
  GpuLayout g = Gpu(0, "h100-80gb");
  for (int i = 0; i < active; ++i) {
    g.occupants.push_back(Active("1g.10gb", std::to_string(i) + ":1", "a" + std::to_string(i)));
  }
  return Input({g}, {Any(profile)});
}

// A service (min_arrivals 2) after two 1g arrivals on an idle GPU and the
// one solve they started.
Service SolvedAfterTwoIdleArrivals() {
  ValueOptions o;
  o.min_arrivals = 2;
  Service s(o);
  s.service->ObserveArrival(Arrival("1g.10gb"), true);
  s.service->ObserveArrival(Arrival("1g.10gb"), true);
  EXPECT_EQ(s.executor->RunPending(), 1u);
  EXPECT_EQ(s.service->counters().solves, 1u);
  return s;
}

TEST(ValueServiceTest, NoValuesBeforeEnoughArrivalsThenOneSolve) {
  ValueOptions o;
  o.min_arrivals = 10;
  Service s(o);
  const mig::GpuModel& m = Model("h100-80gb");
  for (int i = 0; i < 9; ++i)
    s.service->ObserveArrival(Arrival(i % 3 ? "1g.10gb" : "3g.40gb"), true);
  EXPECT_EQ(s.executor->pending(), 0u);
  EXPECT_EQ(s.service->Values(m, Bit("1g.10gb")), nullptr);
  s.service->ObserveArrival(Arrival("1g.10gb"), true);
  EXPECT_EQ(s.executor->pending(), 1u);
  // Decisions do not wait: no values until the solve has run.
  EXPECT_EQ(s.service->Values(m, Bit("1g.10gb")), nullptr);
  s.service->ObserveArrival(Arrival("1g.10gb"), true);
  EXPECT_EQ(s.executor->pending(), 1u);  // one solve in flight per model
  EXPECT_EQ(s.executor->RunPending(), 1u);
  std::shared_ptr<const ValueTable> t = s.service->Values(m, Bit("1g.10gb") | Bit("3g.40gb"));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->profiles(), Bit("1g.10gb") | Bit("3g.40gb"));
  // The mix learned when the solve started: seven 1g, three 3g.
  EXPECT_NEAR(t->spec().rates[Index("1g.10gb")] / t->spec().rates[Index("3g.40gb")], 7.0 / 3.0,
              0.01);
  EXPECT_EQ(s.service->counters().solves, 1u);
  EXPECT_EQ(s.service->counters().version, 1u);
}

TEST(ValueServiceTest, EstimatesTheOfferedLoadFromActiveComputeAndAcceptance) {
  ValueOptions o;
  o.min_arrivals = 1000;  // no solves here
  Service s(o);
  // Every arrival sees 3 of 7 compute slices Active and is placed: ρ = 3/7.
  for (int i = 0; i < 200; ++i) s.service->ObserveArrival(Arrival("1g.10gb", 3), true);
  EXPECT_NEAR(s.service->estimate().load, 3.0 / 7.0, 1e-9);
  // Half of the offered compute rejected from now on: carried / acceptance.
  Service h(o);
  for (int i = 0; i < 200; ++i) h.service->ObserveArrival(Arrival("1g.10gb", 3), i % 2 == 0);
  EXPECT_NEAR(h.service->estimate().load, 6.0 / 7.0, 0.02);
  EXPECT_EQ(h.service->estimate().arrivals, 200);
}

TEST(ValueServiceTest, DriftBeyondTheThresholdResolvesInTheBackground) {
  ValueOptions o;
  o.min_arrivals = 1;
  o.half_life_arrivals = 20;
  o.drift_threshold = 0.5;
  Service s(o);
  const mig::GpuModel& m = Model("h100-80gb");
  s.service->Prime({{"1g.10gb", 1}}, 0.9, {&m});
  s.executor->RunPending();
  std::shared_ptr<const ValueTable> first = s.service->Values(m, Bit("1g.10gb"));
  ASSERT_NE(first, nullptr);
  // The same mix: no drift, no solve.
  s.service->ObserveArrival(Arrival("1g.10gb", 6), true);
  EXPECT_EQ(s.executor->pending(), 0u);
  // 3g requests shift the mix: a solve starts; the old table serves meanwhile.
  int arrivals = 0;
  while (s.executor->pending() == 0 && arrivals < 100) {
    s.service->ObserveArrival(Arrival("3g.40gb", 6), true);
    ++arrivals;
  }
  EXPECT_EQ(s.executor->pending(), 1u);
  EXPECT_GT(arrivals, 1);  // not on the first 3g (a third of the mix): the threshold holds
  EXPECT_LT(arrivals, 5);
  EXPECT_EQ(s.service->Values(m, Bit("1g.10gb")), first);
  s.executor->RunPending();
  std::shared_ptr<const ValueTable> second = s.service->Values(m, Bit("3g.40gb"));
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second, first);
  EXPECT_GT(second->stats().serial, first->stats().serial);
  EXPECT_EQ(s.service->counters().drift_solves, 1u);
}

// The first solve a model's arrivals start is not counted as a drift solve
// (there was no table to drift from); a later one that drift starts is.
TEST(ValueServiceTest, TheFirstSolveIsNotADriftSolve) {
  Service s = SolvedAfterTwoIdleArrivals();
  EXPECT_EQ(s.service->counters().solves, 1u);
  EXPECT_EQ(s.service->counters().drift_solves, 0u);
  s.service->ObserveArrival(Arrival("3g.40gb"), true);  // a third of the mix: drift 1/3
  ASSERT_EQ(s.executor->RunPending(), 1u);
  EXPECT_EQ(s.service->counters().solves, 2u);
  EXPECT_EQ(s.service->counters().drift_solves, 1u);
}

// A node with nothing Active estimates ρ = 0, below the floor a table is
// solved for (kMinSolveLoad). The drift is measured against the same floor,
// so such a node solves once, not again on every arrival: before, the drift
// read |0 − 0.05| / 0.2 = 0.25 forever and the solver never stopped (68% of
// migd's CPU in a reuse loop, docs/benchmarks/latency.md).
TEST(ValueServiceTest, ALoadBelowTheSolveFloorSolvesOnceNotOnEveryArrival) {
  Service s = SolvedAfterTwoIdleArrivals();
  EXPECT_EQ(s.service->estimate().load, 0.0);
  for (int i = 0; i < 100; ++i) {
    s.service->ObserveArrival(Arrival("1g.10gb"), true);
    EXPECT_EQ(s.executor->RunPending(), 0u) << "arrival " << i;
  }
  EXPECT_EQ(s.service->counters().solves, 1u);
  EXPECT_EQ(s.service->counters().drift_solves, 0u);
  // A real load still drifts from the floor: Active work re-solves.
  for (int i = 0; i < 100 && s.executor->pending() == 0; ++i) {
    s.service->ObserveArrival(Arrival("1g.10gb", 6), true);
  }
  EXPECT_EQ(s.executor->RunPending(), 1u);
  EXPECT_EQ(s.service->counters().drift_solves, 1u);
}

TEST(ValueServiceTest, AProfilePresentButNotInTheTableIsAddedByASolve) {
  Service s;
  const mig::GpuModel& m = Model("h100-80gb");
  s.service->Prime({{"1g.10gb", 1}}, 0.9, {&m});
  s.executor->RunPending();
  const uint32_t needed = Bit("1g.10gb") | Bit("2g.20gb");
  EXPECT_EQ(s.service->Values(m, needed), nullptr);
  EXPECT_EQ(s.executor->pending(), 1u);
  s.executor->RunPending();
  std::shared_ptr<const ValueTable> t = s.service->Values(m, needed);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->spec().rates[Index("2g.20gb")], 0.0);  // kept without demand
  EXPECT_GE(t->SlotOf(Index("2g.20gb"), 0), 0);
}

TEST(ValueServiceTest, ARefusedSolveIsNotRetriedWithoutDrift) {
  ValueOptions o;
  o.min_arrivals = 1;
  o.solve.max_states = 10;  // every table is too big
  Service s(o);
  const mig::GpuModel& m = Model("h100-80gb");
  // Counts as if 2,000 requests had been seen: four more move the mix little.
  s.service->Prime({{"1g.10gb", 1000}, {"3g.40gb", 1000}}, 0.9, {&m});
  s.executor->RunPending();
  EXPECT_EQ(s.service->counters().solve_failures, 1u);
  // The same mix and load as primed: no drift, so no retry.
  for (int i = 0; i < 4; ++i) {
    s.service->ObserveArrival(Arrival(i % 2 ? "1g.10gb" : "3g.40gb", 6), true);
  }
  EXPECT_EQ(s.executor->pending(), 0u);
  EXPECT_EQ(s.service->Values(m, Bit("1g.10gb")), nullptr);
}

TEST(ValueServiceTest, ADifferentTableUnderTheSameKeyStartsAfresh) {
  Service s;
  const mig::GpuModel& m = Model("h100-80gb");
  s.service->Prime({{"1g.10gb", 1}}, 0.9, {&m});
  s.executor->RunPending();
  ASSERT_NE(s.service->Values(m, Bit("1g.10gb")), nullptr);
  mig::GpuModel changed = m;
  changed.gi_profiles[Index("1g.10gb")].instance_count = 3;
  EXPECT_EQ(s.service->Values(changed, Bit("1g.10gb")), nullptr);
}

TEST(SolveExecutorTest, BackgroundRunsTasksInOrderOnItsThread) {
  Mutex mu;
  CondVar cv;
  std::vector<int> ran;  // guarded by mu
  {
    BackgroundExecutor e;
    for (int i = 0; i < 5; ++i) {
      e.Submit([&, i] {
        MutexLock l(&mu);
        ran.push_back(i);
        cv.SignalAll();
      });
    }
    MutexLock l(&mu);
    cv.Wait(&mu, [&] { return ran.size() == 5; });
  }
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4}));
}

// Not started: tasks wait (no thread exists); Start runs them; after Stop
// every task is dropped.
TEST(SolveExecutorTest, BackgroundStartsWhenToldAndDropsTasksAfterStop) {
  Mutex mu;
  CondVar cv;
  int ran = 0;  // guarded by mu
  auto task = [&] {
    MutexLock l(&mu);
    ++ran;
    cv.SignalAll();
  };
  BackgroundExecutor e(/*start=*/false);
  e.Submit(task);
  e.Submit(task);
  EXPECT_FALSE(e.running());
  {
    MutexLock l(&mu);
    EXPECT_EQ(ran, 0);
  }
  e.Start();
  e.Start();  // idempotent
  EXPECT_TRUE(e.running());
  {
    MutexLock l(&mu);
    cv.Wait(&mu, [&] { return ran == 2; });
  }
  e.Stop();
  EXPECT_FALSE(e.running());
  e.Submit(task);
  e.Start();  // no restart after Stop
  e.Stop();
  MutexLock l(&mu);
  EXPECT_EQ(ran, 2);
}

TEST(SolveExecutorTest, ManualDropsTasksAfterStop) {
  ManualExecutor e;
  int n = 0;
  e.Submit([&] { ++n; });
  e.Stop();
  e.Submit([&] { ++n; });
  EXPECT_EQ(e.pending(), 0u);
  EXPECT_EQ(e.RunPending(), 0u);
  EXPECT_EQ(n, 0);
}

TEST(SolveExecutorTest, ManualRunsWhatTasksSubmitToo) {
  ManualExecutor e;
  int n = 0;
  e.Submit([&] {
    ++n;
    e.Submit([&] { ++n; });
  });
  EXPECT_EQ(e.pending(), 1u);
  EXPECT_EQ(e.RunPending(), 2u);
  EXPECT_EQ(n, 2);
}

// With a real background thread: decisions use the cost order until the
// solve publishes, then the values; MakePlan never blocks on the solve.
TEST(ValueServiceTest, BackgroundSolvePublishesForLaterDecisions) {
  Mutex mu;
  CondVar cv;
  bool published = false;
  struct Signalling : SolveExecutor {
    BackgroundExecutor inner;
    Mutex* mu;
    CondVar* cv;
    bool* done;
    void Submit(std::function<void()> task) override {
      inner.Submit([this, task] {
        task();
        MutexLock l(mu);
        *done = true;
        cv->SignalAll();
      });
    }
  };
  auto exec = std::make_unique<Signalling>();
  exec->mu = &mu;
  exec->cv = &cv;
  exec->done = &published;
  auto service = std::make_shared<ValueService>(ValueOptions{}, std::move(exec));
  Planner planner(PlannerOptions{service, std::nullopt, std::nullopt});
  const PlanInput in = Input({Gpu(0, "h100-80gb")}, {Any("1g.10gb")});
  service->Prime({{"1g.10gb", 1}, {"3g.40gb", 1}}, 0.9, {&Model("h100-80gb")});
  {
    MutexLock l(&mu);
    cv.Wait(&mu, [&] { return published; });
  }
  MIGD_ASSERT_OK_AND_ASSIGN(Plan plan, planner.MakePlan(in));
  EXPECT_TRUE(plan.stats.value_policy);
}

}  // namespace
}  // namespace migd::planner
