// latency_gbench: Google Benchmark of the engine's allocation paths over
// NvmlDriver and the simulated library at zero added latency.
// Counters: nvml_calls and fsyncs per operation. Percentiles come from
// latency_bench; this binary gives the per-iteration CPU/real time that
// --benchmark_repetitions and the usual Google Benchmark tooling expect.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>

#include "base/logging.h"
#include "bench/latency/harness.h"

namespace migd::bench::latency {
namespace {

std::unique_ptr<Rig> OpenRig() {
  RigOptions o;
  o.library = MIGD_SIM_LIBRARY;
  const char* tmp = std::getenv("TMPDIR");
  o.base_dir = tmp != nullptr ? tmp : "/tmp";
  o.sim_dir = "/dev/shm";  // the simulator's state file on tmpfs (harness.h)
  o.gpus = "h100-80gb:1";
  auto rig = Rig::Open(o);
  if (!rig.ok()) {
    std::cerr << "latency_gbench: " << rig.status() << "\n";
    std::abort();
  }
  return std::move(*rig);
}

void Check(const Status& s) {
  if (!s.ok()) {
    std::cerr << "latency_gbench: " << s << "\n";
    std::abort();
  }
}

void SetCounters(benchmark::State& state, Rig& rig, const CallCounts& before,
                 uint64_t fsyncs_before) {
  state.counters["nvml_calls"] = benchmark::Counter(
      static_cast<double>(Total(Delta(before, rig.Counts()))), benchmark::Counter::kAvgIterations);
  state.counters["fsyncs"] =
      benchmark::Counter(static_cast<double>(rig.DiskCounts().fsyncs - fsyncs_before),
                         benchmark::Counter::kAvgIterations);
}

// (a) Allocate served by an Idle instance (Release untimed).
void BM_AllocateReuse(benchmark::State& state) {
  auto rig = OpenRig();
  Check(rig->mgr().Allocate(OneInstance("seed", "1g.10gb")).status());
  Check(rig->mgr().Release("seed"));
  int64_t i = 0;
  const CallCounts before = rig->Counts();
  const uint64_t fs = rig->DiskCounts().fsyncs;
  for (auto _ : state) {
    const std::string id = "r" + std::to_string(i++);
    Check(rig->mgr().Allocate(OneInstance(id, "1g.10gb")).status());
    state.PauseTiming();
    Check(rig->mgr().Release(id));
    state.ResumeTiming();
  }
  // Release makes 0 NVML calls, so nvml_calls is the Allocate's; fsyncs
  // counts both (the Active and the Idle record writes).
  SetCounters(state, *rig, before, fs);
}
BENCHMARK(BM_AllocateReuse)->Unit(benchmark::kMicrosecond);

// (d) Release of an Active instance (Allocate untimed, a reuse).
void BM_Release(benchmark::State& state) {
  auto rig = OpenRig();
  Check(rig->mgr().Allocate(OneInstance("seed", "1g.10gb")).status());
  Check(rig->mgr().Release("seed"));
  int64_t i = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string id = "r" + std::to_string(i++);
    Check(rig->mgr().Allocate(OneInstance(id, "1g.10gb")).status());
    state.ResumeTiming();
    Check(rig->mgr().Release(id));
  }
}
BENCHMARK(BM_Release)->Unit(benchmark::kMicrosecond);

// (b) Allocate that creates in free space (release + destroy untimed).
void BM_AllocateCreate(benchmark::State& state) {
  auto rig = OpenRig();
  Check(rig->mgr().Allocate(OneInstance("warm", "1g.10gb")).status());
  Check(rig->mgr().Release("warm"));
  Check(rig->mgr().Reclaim({}).status());
  int64_t i = 0;
  for (auto _ : state) {
    const std::string id = "c" + std::to_string(i++);
    Check(rig->mgr().Allocate(OneInstance(id, "1g.10gb")).status());
    state.PauseTiming();
    Check(rig->mgr().Release(id));
    Check(rig->mgr().Reclaim({}).status());
    state.ResumeTiming();
  }
}
BENCHMARK(BM_AllocateCreate)->Unit(benchmark::kMicrosecond);

// (c) Allocate of a 2g.20gb that must destroy an Idle 3g.40gb first.
void BM_AllocateReclaimThenCreate(benchmark::State& state) {
  auto rig = OpenRig();
  Check(rig->mgr().Allocate(OneInstance("hold", "4g.40gb", 0, mig::Placement{0, 4})).status());
  int64_t i = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string idle = "i" + std::to_string(i);
    Check(rig->mgr().Allocate(OneInstance(idle, "3g.40gb", 0, mig::Placement{4, 4})).status());
    Check(rig->mgr().Release(idle));
    const std::string id = "x" + std::to_string(i++);
    state.ResumeTiming();
    Check(rig->mgr().Allocate(OneInstance(id, "2g.20gb")).status());
    state.PauseTiming();
    Check(rig->mgr().Release(id));
    engine::ReclaimFilter f;
    f.profile = "2g.20gb";
    Check(rig->mgr().Reclaim(f).status());
    state.ResumeTiming();
  }
}
BENCHMARK(BM_AllocateReclaimThenCreate)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace migd::bench::latency

// BENCHMARK_MAIN, with migd's logging at warn: the engine logs every
// transition at info, to stdout when nothing configured the logger, which
// would bury the benchmark's table.
int main(int argc, char** argv) {
  if (!migd::InitLogging({.level = "warn"}).ok()) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
