// HealthMonitor over the production NvmlDriver and libnvidia-ml-sim.so
// (loaded by path): events injected into the simulated library reach the
// sink, and the monitor frees its event set inside the NVML session.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "engine/health_monitor.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::testing::ElementsAre;

class CountingSink : public HealthSink {
 public:
  void MarkInstanceUnhealthy(GpuIndex gpu, NvmlGiId gi, std::optional<NvmlCiId>,
                             uint64_t xid) override {
    Add("instance " + std::to_string(gpu.value()) + "/" + std::to_string(gi.value()) + " xid " +
        std::to_string(xid));
  }
  void MarkGpuUnhealthy(GpuIndex gpu, const std::string&) override {
    Add("gpu " + std::to_string(gpu.value()));
  }
  void OnMigConfigChange(GpuIndex gpu) override { Add("drift " + std::to_string(gpu.value())); }
  std::vector<std::string> calls() const {
    MutexLock lock(&mu_);
    return calls_;
  }
  // Blocks until a call equal to `call` was made.
  void WaitFor(const std::string& call) const {
    MutexLock lock(&mu_);
    cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::find(calls_.begin(), calls_.end(), call) != calls_.end();
    });
  }

 private:
  void Add(std::string s) {
    MutexLock lock(&mu_);
    calls_.push_back(std::move(s));
    cv_.SignalAll();
  }
  mutable Mutex mu_;
  mutable CondVar cv_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

TEST(HealthMonitorSimTest, InjectedEventsReachTheSinkAndTheSetIsFreedInsideTheSession) {
  driver::sim_testing::SimMachine sim("a100-40gb:2");
  MIGD_ASSERT_OK_AND_ASSIGN(auto driver, driver::NvmlDriver::Open(MIGD_SIM_LIBRARY));
  CountingSink sink;
  HealthOptions options;
  options.wait = std::chrono::milliseconds(20);
  MIGD_ASSERT_OK_AND_ASSIGN(
      auto monitor, HealthMonitor::Start(*driver, {GpuIndex(0), GpuIndex(1)}, options, sink));
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver->CreateGi(GpuIndex(1), GiProfileId(0), {0, 8}));
  (void)gi;
  ASSERT_EQ(driver::sim_testing::InjectEvents(MIGD_SIM_LIBRARY, "xid=94@0/2/0,xid=43@0,gpu-lost@1"),
            NVML_SUCCESS);
  monitor->WaitForEvents(4);
  EXPECT_THAT(sink.calls(), ElementsAre("drift 1", "instance 0/2 xid 94", "gpu 1"));
  EXPECT_EQ(monitor->counters().ignored, 1u);
  monitor->Stop();
  EXPECT_EQ(sim.Count("nvmlEventSetFree", "SUCCESS"), 2u);  // the set re-made after GPU 1 was lost
  driver.reset();  // nvmlShutdown
  EXPECT_EQ(sim.Count("nvmlEventSetFree", "ERROR_UNINITIALIZED"), 0u);
  EXPECT_EQ(sim.Count("nvmlShutdown", "SUCCESS"), 1u);
}

}  // namespace
}  // namespace migd::engine
