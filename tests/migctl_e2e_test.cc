// End-to-end tests of the real `migctl` binary against the simulated NVML
// library: `probe` over every model of the catalogue (read-only, matching the
// catalogue, exactly one nvmlInit_v2/nvmlShutdown per process), its error
// exits, `sim-stats`, and the client subcommands' errors without a migd (the
// client against a real migd: tests/daemon/).
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "mig/catalog.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

using ::migd::testing::CommandResult;
using ::migd::testing::RunCommand;
using ::migd::testing::TempDir;
using ::testing::HasSubstr;

// Every variable the simulator reads, cleared so the parent's environment
// cannot leak into a child.
const char* const kSimVars[] = {"MIGD_SIM_STATE",   "MIGD_SIM_GPUS",      "MIGD_SIM_FAULTS",
                                "MIGD_SIM_LATENCY_MS", "MIGD_SIM_PROC_ROOT", "MIGD_SIM_GI_IDS",
                                "MIGD_SIM_PROFILE_INFO_MAX_VERSION", "MIGD_SIM_NONCE"};

class MigctlTest : public ::testing::Test {
 protected:
  std::map<std::string, std::string> SimEnv(const std::string& gpus) const {
    std::map<std::string, std::string> env;
    for (const char* v : kSimVars) env[v] = "";
    env["MIGD_SIM_STATE"] = state_;
    env["MIGD_SIM_GPUS"] = gpus;
    env["MIGD_SIM_FSYNC"] = "0";
    return env;
  }

  CommandResult Migctl(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env) const {
    std::vector<std::string> argv = {MIGD_MIGCTL};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, dir_.path(), env);
  }

  nlohmann::json Counters() const {
    auto text = ReadFileToString(state_);
    if (!text.ok()) return nlohmann::json::object();
    return nlohmann::json::parse(*text)["counters"];
  }

  static uint64_t Count(const nlohmann::json& counters, const std::string& fn,
                        const std::string& result = "SUCCESS") {
    if (!counters.contains(fn) || !counters[fn].contains(result)) return 0;
    return counters[fn][result].get<uint64_t>();
  }

  TempDir dir_;
  std::string state_ = dir_.Join("sim-state.json");
};

std::string AllModels() {
  std::string spec;
  for (const mig::GpuModel& m : mig::Catalog::Default().models()) {
    if (!spec.empty()) spec += ',';
    spec += m.key + ":1";
  }
  return spec;
}

TEST_F(MigctlTest, ProbeMatchesTheCatalogueForEveryModel) {
  const CommandResult r = Migctl(
      {"probe", "--nvml-library", MIGD_SIM_LIBRARY, "-o", "json", "--compare-catalog"},
      SimEnv(AllModels()));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const auto& models = mig::Catalog::Default().models();
  ASSERT_EQ(doc["gpus"].size(), models.size());
  for (size_t i = 0; i < models.size(); ++i) {
    const nlohmann::json& gpu = doc["gpus"][i];
    EXPECT_EQ(gpu["index"], i);
    EXPECT_EQ(gpu["name"], models[i].names[0]);
    EXPECT_EQ(gpu["mig"]["current"], "enabled") << models[i].key;
    // Every catalogue profile, by id, with its placements.
    std::set<uint32_t> ids;
    for (const auto& p : gpu["profiles"]) ids.insert(p["id"].get<uint32_t>());
    std::set<uint32_t> want;
    for (const mig::GiProfile& p : models[i].gi_profiles) want.insert(p.id.value());
    EXPECT_EQ(ids, want) << models[i].key;
  }
}

TEST_F(MigctlTest, ProbeIsReadOnlyAndInitialisesNvmlExactlyOnce) {
  const auto env = SimEnv("h100-80gb:1,a30-24gb:1");
  ASSERT_EQ(Migctl({"probe", "--nvml-library", MIGD_SIM_LIBRARY}, env).exit_code, 0);
  nlohmann::json c = Counters();
  EXPECT_EQ(Count(c, "nvmlInit_v2"), 1u);
  EXPECT_EQ(Count(c, "nvmlShutdown"), 1u);
  for (const auto& [fn, results] : c.items()) {
    EXPECT_THAT(fn, ::testing::Not(::testing::AnyOf(HasSubstr("Create"), HasSubstr("Destroy"),
                                                    HasSubstr("SetMigMode"))))
        << "probe must not mutate, but called " << fn;
  }
  ASSERT_EQ(Migctl({"probe", "--nvml-library", MIGD_SIM_LIBRARY, "-o", "json"}, env).exit_code,
            0);
  c = Counters();
  EXPECT_EQ(Count(c, "nvmlInit_v2"), 2u);
  EXPECT_EQ(Count(c, "nvmlShutdown"), 2u);
}

TEST_F(MigctlTest, ProbeTableNamesEveryGpuAndProfile) {
  const CommandResult r =
      Migctl({"probe", "--nvml-library", MIGD_SIM_LIBRARY}, SimEnv("rtx-pro-6000-blackwell:1"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NVIDIA RTX PRO 6000 Blackwell Server Edition"));
  EXPECT_THAT(r.out, HasSubstr("1g.24gb+me.all"));
  EXPECT_THAT(r.out, HasSubstr("{0,3,6,9}:3"));
}

TEST_F(MigctlTest, ProbeSaysMigIsOffAndStillSucceeds) {
  const CommandResult r = Migctl({"probe", "--nvml-library", MIGD_SIM_LIBRARY, "-o", "json"},
                                 SimEnv("a100-40gb:1:mig-off"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["gpus"][0]["mig"]["current"], "disabled");
}

TEST_F(MigctlTest, ProbeWithoutALibraryExitsTwoAndSaysWhatToDo) {
  const CommandResult r =
      Migctl({"probe", "--nvml-library", dir_.Join("no/libnvidia-ml.so.1")}, SimEnv("a30-24gb:1"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("no/libnvidia-ml.so.1"));
  EXPECT_THAT(r.err, HasSubstr("--nvml-library"));
}

TEST_F(MigctlTest, ProbeWhenTheDriverIsNotLoadedExitsTwo) {
  auto env = SimEnv("a30-24gb:1");
  env["MIGD_SIM_STATE"] = "";  // the simulated library then acts like a host without a driver
  const CommandResult r = Migctl({"probe", "--nvml-library", MIGD_SIM_LIBRARY}, env);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("NVML_ERROR_DRIVER_NOT_LOADED"));
}

TEST_F(MigctlTest, UnknownFlagIsAUsageError) {
  const CommandResult r = Migctl({"probe", "--no-such-flag"}, SimEnv("a30-24gb:1"));
  EXPECT_EQ(r.exit_code, 1);
}

TEST_F(MigctlTest, SimStatsPrintsTheCountersOfTheStateFile) {
  const auto env = SimEnv("a100-40gb:1");
  ASSERT_EQ(Migctl({"probe", "--nvml-library", MIGD_SIM_LIBRARY}, env).exit_code, 0);
  const CommandResult r = Migctl({"sim-stats", "--state", state_, "-o", "json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["counters"]["nvmlInit_v2"]["SUCCESS"], 1);
  const CommandResult table = Migctl({"sim-stats", "--state", state_}, env);
  EXPECT_THAT(table.out, HasSubstr("nvmlShutdown"));
  EXPECT_EQ(Migctl({"sim-stats", "--state", dir_.Join("missing.json")}, env).exit_code, 2);
}

// The client subcommands of the real binary without a migd: MIGD_SOCKET is
// honoured, --socket overrides it, and the message says what to do.
TEST_F(MigctlTest, ClientCommandsWithoutMigdExitTwoAndSayWhatToDo) {
  auto env = SimEnv("a100-40gb:1");
  const std::string socket = dir_.Join("absent.sock");
  env["MIGD_SOCKET"] = socket;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"status"},
                                             {"list", "-o", "json"},
                                             {"allocate", "--id", "r", "--owner", "o", "1g.5gb"},
                                             {"release", "--id", "r"},
                                             {"plan", "1g.5gb"},
                                             {"reclaim"}}) {
    const CommandResult r = Migctl(args, env);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("migctl " + args[0] + ": cannot reach migd at " + socket +
                                 ": no such socket; is migd running?"));
    EXPECT_THAT(r.err, HasSubstr("MIGD_SOCKET"));
    EXPECT_EQ(r.out, "");
  }
  const std::string other = dir_.Join("other.sock");
  const CommandResult r = Migctl({"list", "--socket", other}, env);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot reach migd at " + other));
}

TEST_F(MigctlTest, ProbeYamlCarriesTheJsonFields) {
  const CommandResult r = Migctl({"probe", "--nvml-library", MIGD_SIM_LIBRARY, "-o", "yaml"},
                                 SimEnv("a30-24gb:1"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("gpus:"));
  EXPECT_THAT(r.out, HasSubstr("\"NVIDIA A30\""));
}

}  // namespace
}  // namespace migd
