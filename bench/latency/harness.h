// File: bench/latency/harness.h
//
// The rig of the latency benchmark: engine::Manager over the
// production driver::NvmlDriver loaded against the simulator's
// libnvidia-ml-sim.so, with a record store on disk, exactly as migd runs it
// minus the gRPC server and the CDI observer. Everything a benchmark mode
// needs to measure one operation: NVML calls (NvmlDriver::CallCounts, the
// loader's own per-function counters), record-store writes and fsyncs
// (CountingFileOps) and a latency model for the simulated library.
//
// Latency model (latency_model.h). MIGD_SIM_LATENCY_MS makes the simulator
// sleep in each named NVML function (docs/simulator.md §2). Because the rig
// runs one operation at a time, the wall time of an operation under a model
// is its zero-latency wall time plus the model's cost over the NVML calls it
// made (ModeledMs); the ops mode checks that identity against real sleeps.
//
// Benchmark only (bench/ is not linked into migd).
//
// Thread-safety: SimEnv changes the process environment; create it from the
// main thread with no NVML session open. A Rig is used by one thread.
#ifndef MIGD_BENCH_LATENCY_HARNESS_H_
#define MIGD_BENCH_LATENCY_HARNESS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "bench/latency/latency_model.h"
#include "driver/nvml/nvml_driver.h"
#include "engine/manager.h"
#include "engine/owner_source.h"
#include "store/file_ops.h"
#include "store/record_store.h"

namespace migd::bench::latency {

CallCounts ToCounts(const std::vector<driver::NvmlCallCount>& rows);
// after − before, per key (keys whose count did not change are dropped).
CallCounts Delta(const CallCounts& before, const CallCounts& after);
uint64_t Total(const CallCounts& c);
// Calls of `function` (any result) in `c`.
uint64_t Calls(const CallCounts& c, const std::string& function);
// GI/CI creates and destroys (successful) in `c`.
struct HwOps {
  uint64_t gi_creates = 0, ci_creates = 0, gi_destroys = 0, ci_destroys = 0;
};
HwOps HwOpsOf(const CallCounts& c);

// Record-store FileOps that counts what the store does to the disk, and can
// turn fsync off (to measure what the fsyncs cost).
class CountingFileOps final : public store::FileOps {
 public:
  explicit CountingFileOps(bool sync) : sync_(sync) {}
  Status WriteFileAtomically(const std::string& path, std::string_view data,
                             const AtomicWriteOptions& options) override;
  Status RemoveFile(const std::string& path) override;
  Status SyncDirectory(const std::string& dir) override;

  struct Counts {
    uint64_t writes = 0;  // atomic record writes
    uint64_t fsyncs = 0;  // file fsyncs + directory fsyncs actually done or asked for
    uint64_t removes = 0;
  };
  Counts counts() const;

 private:
  const bool sync_;
  std::atomic<uint64_t> writes_{0}, fsyncs_{0}, removes_{0};
};

// The simulated machine: a fresh directory (under `base_dir`, removed by the
// destructor) with the simulator's state file, MIGD_SIM_* set for it:
// MIGD_SIM_GPUS = `gpus`, MIGD_SIM_FSYNC = 0 (the simulator's own state file
// is an artefact of simulation, not a cost real NVML has), MIGD_SIM_NONCE = 1,
// MIGD_SIM_LATENCY_MS from `model`. Every other MIGD_SIM_* is unset.
class SimEnv {
 public:
  SimEnv(const std::string& base_dir, const std::string& gpus, const LatencyModel& model);
  ~SimEnv();
  SimEnv(const SimEnv&) = delete;
  SimEnv& operator=(const SimEnv&) = delete;
  const std::string& dir() const { return dir_; }
  // Changes MIGD_SIM_LATENCY_MS; applies at the next nvmlInit_v2 from zero
  // (a new NvmlDriver once the old one is gone).
  void SetLatency(const LatencyModel& model);

 private:
  std::string dir_;
};

struct RigOptions {
  std::string library;            // path of libnvidia-ml-sim.so.1
  std::string base_dir = "/tmp";  // where the record store's directory is made
  // Where the simulator's state file lives (empty: base_dir). The simulator
  // rewrites it (write + rename) at every mutating NVML call, which a real
  // driver does not do; on ext4 each rename-over forces a data writeback
  // (auto_da_alloc), so keep it on tmpfs (/dev/shm) to measure migd, not the
  // simulator.
  std::string sim_dir;
  std::string gpus = "h100-80gb:1";
  LatencyModel latency = LatencyModel::Zero();
  bool store_sync = true;  // production: fsync every record write
  // The engine's clock stands still (a FakeClock) instead of the real one:
  // timestamps (created_at, last_used_at) then tie the same way on any
  // machine speed, so policy comparisons are deterministic (used by
  // RunPolicy; no policy there uses an idle TTL).
  bool frozen_clock = false;
  engine::ManagerOptions manager;  // boot_id filled in by the rig
  // RunPolicy: the planner policy migd runs with. true: `planner.policy:
  // value` with its defaults (the daemon's default), solves run on a
  // ManualExecutor drained after every allocation (a solve of milliseconds
  // lands before the next request, deterministically); false: the cost order.
  bool value_policy = true;
};

// One simulated machine, one NVML session, one record store, one Manager.
class Rig {
 public:
  static StatusOr<std::unique_ptr<Rig>> Open(RigOptions options);
  ~Rig();

  engine::Manager& mgr() { return *mgr_; }
  driver::NvmlDriver& driver() { return *driver_; }
  CallCounts Counts() const { return ToCounts(driver_->CallCounts()); }
  CountingFileOps::Counts DiskCounts() const { return file_ops_->counts(); }
  SimEnv& env() { return *env_; }

  // Drops the Manager and the store (the NVML session stays open), reopens
  // the store and times Manager::Create. Returns its wall time.
  StatusOr<std::chrono::nanoseconds> RestartManager();
  // Drops Manager, store and NVML session, sets the latency model, reopens
  // all three (Manager::Create recovers the state).
  Status Reopen(const LatencyModel& model);

 private:
  Rig() = default;
  Status OpenAll();
  Clock& EngineClock() { return options_.frozen_clock ? fake_clock_ : Clock::Real(); }

  RigOptions options_;
  FakeClock fake_clock_;
  std::unique_ptr<SimEnv> env_;
  std::string records_root_;  // mkdtemp under base_dir; removed by the destructor
  std::unique_ptr<CountingFileOps> file_ops_;
  std::unique_ptr<driver::NvmlDriver> driver_;
  std::unique_ptr<store::RecordStore> store_;
  engine::RecordsOwnerSource owners_;
  std::unique_ptr<engine::Manager> mgr_;
};

// One allocation request of one instance.
engine::AllocateRequest OneInstance(const std::string& id, const std::string& profile,
                                    std::optional<uint32_t> gpu = std::nullopt,
                                    std::optional<mig::Placement> placement = std::nullopt);

// Wall-clock stopwatch (steady clock).
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  std::chrono::nanoseconds Elapsed() const { return std::chrono::steady_clock::now() - start_; }
  double Ms() const { return std::chrono::duration<double, std::milli>(Elapsed()).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Summary of a sample of durations (milliseconds).
struct Summary {
  size_t n = 0;
  double mean = 0, p50 = 0, p99 = 0, max = 0;
};
Summary Summarize(std::vector<double> ms);

// Resident set size and CPU time of this process (from /proc/self).
struct ProcUsage {
  uint64_t rss_kb = 0;
  double cpu_s = 0;  // user + system
};
ProcUsage SelfUsage();
// Bytes currently allocated from the heap (mallinfo2().uordblks).
uint64_t HeapInUse();

}  // namespace migd::bench::latency

#endif  // MIGD_BENCH_LATENCY_HARNESS_H_
