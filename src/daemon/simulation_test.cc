#include "daemon/simulation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>

#include "testing/temp_dir.h"

namespace migd::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kVars[] = {"MIGD_SIM_GPUS", "MIGD_SIM_STATE", "MIGD_SIM_PROC_ROOT", "TMPDIR"};

// Saves the simulator's environment variables and restores them.
class SimulationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* value = std::getenv(v)) saved_[v] = value;
      ::unsetenv(v);
    }
    ::setenv("TMPDIR", tmp_.path().c_str(), 1);
  }
  void TearDown() override {
    for (const char* v : kVars) ::unsetenv(v);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }

  static std::string Env(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "";
  }

  migd::testing::TempDir tmp_;
  std::map<std::string, std::string> saved_;
};

TEST_F(SimulationTest, WithoutSimulateNothingChanges) {
  Flags flags;
  Simulation sim;
  EXPECT_EQ(SetUpSimulation(&flags, &sim), std::nullopt);
  EXPECT_FALSE(sim.enabled);
  EXPECT_EQ(Env("MIGD_SIM_GPUS"), "");
  EXPECT_FALSE(flags.nvml_library.has_value());
}

TEST_F(SimulationTest, ATemporaryMachineBesideTheSimulatedLibrary) {
  Flags flags;
  flags.simulate = "a100-40gb:2";
  flags.exe_path = "/opt/migd/bin/migd";
  Simulation sim;
  ASSERT_EQ(SetUpSimulation(&flags, &sim), std::nullopt);
  EXPECT_TRUE(sim.enabled);
  EXPECT_THAT(sim.temp_dir, StartsWith(tmp_.path() + "/migd-sim-"));
  EXPECT_TRUE(std::filesystem::is_directory(sim.temp_dir));
  EXPECT_EQ(sim.dir, sim.temp_dir);
  EXPECT_EQ(Env("MIGD_SIM_GPUS"), "a100-40gb:2");
  EXPECT_EQ(Env("MIGD_SIM_STATE"), sim.temp_dir + "/state.json");
  EXPECT_EQ(Env("MIGD_SIM_PROC_ROOT"), sim.temp_dir + "/proc");
  EXPECT_EQ(flags.nvml_library, "/opt/migd/lib/libnvidia-ml-sim.so.1");
}

TEST_F(SimulationTest, AGivenStateFileAndLibraryAreKept) {
  ::setenv("MIGD_SIM_STATE", "/srv/sim/machine.json", 1);
  ::setenv("MIGD_SIM_PROC_ROOT", "/srv/proc", 1);
  Flags flags;
  flags.simulate = "h100-80gb:1";
  flags.nvml_library = "/x/libnvidia-ml-sim.so.1";
  Simulation sim;
  ASSERT_EQ(SetUpSimulation(&flags, &sim), std::nullopt);
  EXPECT_EQ(sim.dir, "/srv/sim");
  EXPECT_EQ(sim.temp_dir, "");
  EXPECT_EQ(Env("MIGD_SIM_PROC_ROOT"), "/srv/proc");
  EXPECT_EQ(flags.nvml_library, "/x/libnvidia-ml-sim.so.1");
}

TEST_F(SimulationTest, BadInputsAreConfigErrors) {
  Flags flags;
  flags.simulate = "";
  Simulation sim;
  std::optional<Failure> f = SetUpSimulation(&flags, &sim);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->code, kExitConfig);
  EXPECT_THAT(f->message, HasSubstr("--simulate needs a GPU list"));
  flags.simulate = "a100-40gb:1";
  ::setenv("MIGD_SIM_STATE", "relative/state.json", 1);
  f = SetUpSimulation(&flags, &sim);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->code, kExitConfig);
  EXPECT_EQ(f->message, "MIGD_SIM_STATE must be an absolute path, got relative/state.json");
}

TEST_F(SimulationTest, TheProcRootComesFromTheStateFile) {
  const std::string state = tmp_.Join("state.json");
  ::setenv("MIGD_SIM_STATE", state.c_str(), 1);
  Simulation sim;
  migd::testing::WriteFileOrDie(state, R"({"procRoot": "/srv/proc", "gpus": []})");
  ASSERT_EQ(ReadSimProcRoot(&sim), std::nullopt);
  EXPECT_EQ(sim.proc_root, "/srv/proc");
  migd::testing::WriteFileOrDie(state, R"({"gpus": []})");
  ASSERT_EQ(ReadSimProcRoot(&sim), std::nullopt);
  EXPECT_EQ(sim.proc_root, "");
}

TEST_F(SimulationTest, ABadStateFileIsAnNvmlError) {
  const std::string state = tmp_.Join("state.json");
  ::setenv("MIGD_SIM_STATE", state.c_str(), 1);
  Simulation sim;
  std::optional<Failure> f = ReadSimProcRoot(&sim);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->code, kExitNvml);
  EXPECT_THAT(f->message, HasSubstr("cannot read the simulator state " + state));
  migd::testing::WriteFileOrDie(state, "{not json");
  f = ReadSimProcRoot(&sim);
  ASSERT_TRUE(f.has_value());
  EXPECT_THAT(f->message,
              HasSubstr("cannot parse the simulator state: " + state + ": not valid JSON"));
  migd::testing::WriteFileOrDie(state, R"({"procRoot": 7})");
  f = ReadSimProcRoot(&sim);
  ASSERT_TRUE(f.has_value());
  EXPECT_THAT(f->message, HasSubstr(state + ": /procRoot: expected a string, got 7"));
}

TEST(DirNameTest, Forms) {
  EXPECT_EQ(DirName("/a/b/c"), "/a/b");
  EXPECT_EQ(DirName("/a"), "/");
  EXPECT_EQ(DirName("a"), ".");
}

}  // namespace
}  // namespace migd::daemon
