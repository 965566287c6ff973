// End-to-end tests of the health monitor in the real migd binary over
// libnvidia-ml-sim.so.1: it frees its event set inside migd's one NVML
// session (the simulator counts a call after the final nvmlShutdown as
// ERROR_UNINITIALIZED), a driver without an event set is one warning, and
// health.enabled: false creates no event set, and MIGD_SIM_EVENTS injects
// events into a running daemon.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "driver/nvml/nvml_library.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "testing/daemon_process.h"
#include "testing/eventually.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

using ::migd::testing::DaemonExit;
using ::migd::testing::DaemonOptions;
using ::migd::testing::DaemonProcess;
using ::migd::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

class DaemonHealthE2eTest : public ::testing::Test {
 protected:
  // Runs migd on two simulated A100s until it is ready, then SIGTERM.
  DaemonExit RunAndStop(const std::vector<std::string>& extra,
                        const std::map<std::string, std::string>& env = {}) {
    DaemonOptions o;
    o.args = {"--simulate",  "a100-40gb:2",        "--socket",       dir_.Join("api.socket"),
              "--state-dir", dir_.Join("state"),   "--cdi-spec-dir", dir_.Join("cdi"),
              "--metrics-listen", "127.0.0.1:0"};
    o.args.insert(o.args.end(), extra.begin(), extra.end());
    o.env = migd::testing::SimulatedMachineEnv(dir_.Join("sim"));
    for (const auto& [k, v] : env) o.env[k] = v;
    o.socket_path = dir_.Join("api.socket");
    StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return {};
    (*d)->Signal(SIGTERM);
    return (*d)->WaitForExit();
  }

  // The simulator's call counter for (function, result) in its state file.
  uint64_t SimCount(const std::string& function, const std::string& result) const {
    StatusOr<std::string> text = ReadFileToString(dir_.Join("sim/state.json"));
    if (!text.ok()) return 0;
    const nlohmann::json doc = nlohmann::json::parse(*text);
    const nlohmann::json& c = doc["counters"];
    if (!c.contains(function) || !c[function].contains(result)) return 0;
    return c[function][result].get<uint64_t>();
  }

  TempDir dir_;
};

TEST_F(DaemonHealthE2eTest, TheMonitorFreesItsEventSetInsideTheNvmlSession) {
  const DaemonExit exit = RunAndStop({});
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  EXPECT_THAT(exit.err, Not(HasSubstr("no GPU event monitoring"))) << exit.err;
  EXPECT_EQ(SimCount("nvmlEventSetCreate", "SUCCESS"), 1u);
  EXPECT_EQ(SimCount("nvmlDeviceRegisterEvents", "SUCCESS"), 2u);  // each managed GPU
  EXPECT_EQ(SimCount("nvmlEventSetFree", "SUCCESS"), 1u);
  EXPECT_EQ(SimCount("nvmlEventSetFree", "ERROR_UNINITIALIZED"), 0u);
  EXPECT_EQ(SimCount("nvmlEventSetWait_v2", "ERROR_UNINITIALIZED"), 0u);
  EXPECT_EQ(SimCount("nvmlShutdown", "SUCCESS"), 1u);
}

// A driver that cannot give an event set: one warning, migd serves anyway.
TEST_F(DaemonHealthE2eTest, NoEventApiIsOneWarningAndMigdStillRuns) {
  const DaemonExit exit =
      RunAndStop({}, {{"MIGD_SIM_FAULTS", "nvmlEventSetCreate=NOT_SUPPORTED@1+"}});
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  const std::string warning = "no GPU event monitoring";
  const size_t first = exit.err.find(warning);
  ASSERT_NE(first, std::string::npos) << exit.err;
  EXPECT_EQ(exit.err.find(warning, first + 1), std::string::npos) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("migd ready"));
  EXPECT_EQ(SimCount("nvmlEventSetFree", "SUCCESS"), 0u);
}

TEST_F(DaemonHealthE2eTest, HealthDisabledCreatesNoEventSet) {
  const std::string config = dir_.Join("migd.yaml");
  migd::testing::WriteFileOrDie(config, "health:\n  enabled: false\n");
  const DaemonExit exit = RunAndStop({"--config", config});
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("health.enabled: false"));
  EXPECT_EQ(SimCount("nvmlEventSetCreate", "SUCCESS"), 0u);
  EXPECT_EQ(SimCount("nvmlShutdown", "SUCCESS"), 1u);
}

// MIGD_SIM_EVENTS (docs/simulator.md §11) reaches a daemon that never calls
// the injection API: the simulator's own thread records the events after
// migd's nvmlInit. Events recorded before migd registers are not delivered
// ("All events that occurred before this call are not recorded", nvml.h), so
// each Xid is injected at several delays; one delivery of each suffices.
TEST_F(DaemonHealthE2eTest, MigdSimEventsAtStartReachTheMonitorAndTheGpuIsMarked) {
  DaemonOptions o;
  o.args = {"--simulate",  "a100-40gb:2",      "--socket",       dir_.Join("api.socket"),
            "--state-dir", dir_.Join("state"), "--cdi-spec-dir", dir_.Join("cdi"),
            "--metrics-listen", "127.0.0.1:0"};
  o.env = migd::testing::SimulatedMachineEnv(dir_.Join("sim"));
  std::string specs;
  for (const char* ms : {"500", "2000", "8000", "30000"}) {
    if (!specs.empty()) specs += ",";
    specs += std::string("xid=43@0+") + ms + ",xid=79@1+" + ms;
  }
  o.env["MIGD_SIM_EVENTS"] = specs;
  o.socket_path = dir_.Join("api.socket");
  StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string ignored = "health: GPU 0: xid 43: action ignored";
  const std::string marked = "health: GPU 1: xid 79: action gpu-unhealthy";
  EXPECT_TRUE(migd::testing::Eventually([&] {
    const std::string err = (*d)->Stderr();
    return err.find(ignored) != std::string::npos && err.find(marked) != std::string::npos;
  })) << (*d)->Stderr();
  const DaemonExit exit = (*d)->Stop();
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  EXPECT_THAT(exit.err, Not(HasSubstr("MIGD_SIM_EVENTS:"))) << exit.err;  // no bad spec
  EXPECT_THAT(exit.err, Not(HasSubstr("health: GPU 0: xid 43: action gpu-unhealthy")));
  EXPECT_GE(SimCount("nvmlEventSetWait_v2", "SUCCESS"), 2u);
  EXPECT_EQ(SimCount("nvmlEventSetFree", "SUCCESS"), 1u);
}

// A malformed MIGD_SIM_EVENTS is reported by the simulator and injects
// nothing; migd starts and stops as usual.
TEST_F(DaemonHealthE2eTest, MalformedMigdSimEventsIsReportedAndInjectsNothing) {
  const DaemonExit exit = RunAndStop({}, {{"MIGD_SIM_EVENTS", "xid=79@zero"}});
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("MIGD_SIM_EVENTS:"));
  EXPECT_THAT(exit.err, HasSubstr("no event injected"));
  EXPECT_EQ(SimCount("nvmlEventSetWait_v2", "SUCCESS"), 0u);
}

// health.clearRecoveredGpus in the real binary: a GPU lost while migd runs
// is marked; once it answers again (the simulator's gpu-back, injected from
// this process into the daemon's state file) the recovery probe clears it.
TEST_F(DaemonHealthE2eTest, ALostGpuThatAnswersAgainIsClearedByPolicy) {
  const std::string config = dir_.Join("migd.yaml");
  migd::testing::WriteFileOrDie(
      config, "health:\n  clearRecoveredGpus: true\n  recoveryProbeInterval: 1s\n");
  DaemonOptions o;
  o.args = {"--simulate",  "a100-40gb:2",      "--socket",       dir_.Join("api.socket"),
            "--state-dir", dir_.Join("state"), "--cdi-spec-dir", dir_.Join("cdi"),
            "--metrics-listen", "127.0.0.1:0", "--config", config};
  o.env = migd::testing::SimulatedMachineEnv(dir_.Join("sim"));
  o.socket_path = dir_.Join("api.socket");
  StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
  ASSERT_TRUE(d.ok()) << d.status();
  // This process reaches the same simulated machine through its state file.
  for (const auto& [k, v] : o.env) {
    if (v.empty()) {
      ::unsetenv(k.c_str());
    } else {
      ::setenv(k.c_str(), v.c_str(), 1);
    }
  }
  StatusOr<std::shared_ptr<driver::NvmlLibrary>> lib = driver::NvmlLibrary::Load(MIGD_SIM_LIBRARY);
  ASSERT_TRUE(lib.ok()) << lib.status();
  ASSERT_EQ(driver::sim_testing::InjectEvents(MIGD_SIM_LIBRARY, "gpu-lost@1"), NVML_SUCCESS);
  EXPECT_TRUE(migd::testing::Eventually([&] {
    return (*d)->Stderr().find("health: GPU 1: gpu-lost: action gpu-unhealthy") != std::string::npos;
  })) << (*d)->Stderr();
  ASSERT_EQ(driver::sim_testing::InjectEvents(MIGD_SIM_LIBRARY, "gpu-back@1"), NVML_SUCCESS);
  EXPECT_TRUE(migd::testing::Eventually([&] {
    return (*d)->Stderr().find("health: GPU 1 answers again") != std::string::npos;
  })) << (*d)->Stderr();
  const DaemonExit exit = (*d)->Stop();
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("cleared by policy (health.clearRecoveredGpus)"));
  // Every set (the watch may re-make its set around a lost GPU) is freed
  // inside the session.
  EXPECT_GE(SimCount("nvmlEventSetFree", "SUCCESS"), 1u);
  EXPECT_EQ(SimCount("nvmlEventSetFree", "ERROR_UNINITIALIZED"), 0u);
  EXPECT_EQ(SimCount("nvmlEventSetCreate", "SUCCESS"), SimCount("nvmlEventSetFree", "SUCCESS"))
      << exit.err;
  // The mark file is gone: a restart finds the GPU healthy.
  StatusOr<std::vector<std::string>> marks = ListDirectory(dir_.Join("state/gpu-health"));
  ASSERT_TRUE(marks.ok()) << marks.status();
  EXPECT_TRUE(marks->empty());
}

}  // namespace
}  // namespace migd
