#include "daemon/effective_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "daemon/config_test_util.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::daemon {
namespace {

using ::migd::testing::StatusIs;
using ::testing::ElementsAre;

class EffectiveConfigTest : public ::testing::Test {
 protected:
  // A config file in a private directory (LoadConfigFile's permission rules).
  std::string WriteConfig(const std::string& yaml) {
    const std::string path = dir_.Join("migd.yaml");
    migd::testing::WriteFileOrDie(path, yaml);
    EXPECT_EQ(::chmod(path.c_str(), 0600), 0);
    return path;
  }
  migd::testing::TempDir dir_;
};

TEST_F(EffectiveConfigTest, WithoutAFileTheDefaults) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, ReadEffectiveConfig(Flags{}, Simulation{}));
  EXPECT_EQ(c, Config{});
  EXPECT_EQ(ConfigSource(Flags{}), "command line");
}

TEST_F(EffectiveConfigTest, FlagsWinOverTheFile) {
  Flags flags;
  flags.config_file =
      WriteConfig("stateDir: /srv/a\napi: {socket: /run/a.sock}\nlog: {level: warn}\n");
  flags.socket = "/run/b.sock";
  flags.log_level = "debug";
  flags.metrics_listen = "";
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, ReadEffectiveConfig(flags, Simulation{}));
  EXPECT_EQ(c.state_dir, "/srv/a");
  EXPECT_EQ(c.api.socket, "/run/b.sock");
  EXPECT_EQ(c.log.level, "debug");
  EXPECT_EQ(c.metrics.listen, "");
  EXPECT_EQ(ConfigSource(flags), flags.config_file);
}

TEST_F(EffectiveConfigTest, OverridesAreValidatedNamingWhereTheyCameFrom) {
  Flags flags;
  flags.socket = "relative.sock";
  EXPECT_THAT(ReadEffectiveConfig(flags, Simulation{}),
              StatusIs(StatusCode::kInvalidArgument,
                       "config command line: api.socket: \"relative.sock\" must be an absolute "
                       "path"));
  flags.config_file = WriteConfig("");
  EXPECT_THAT(ReadEffectiveConfig(flags, Simulation{}),
              StatusIs(StatusCode::kInvalidArgument,
                       ::testing::HasSubstr("config " + flags.config_file +
                                            " (with command-line overrides): api.socket:")));
}

TEST_F(EffectiveConfigTest, SimulationMovesOnlyTheRootOnlyDefaults) {
  Simulation sim;
  sim.enabled = true;
  sim.dir = "/tmp/sim";
  sim.proc_root = "/tmp/sim/proc";
  MIGD_ASSERT_OK_AND_ASSIGN(Config moved, ReadEffectiveConfig(Flags{}, sim));
  EXPECT_EQ(moved.state_dir, "/tmp/sim/state");
  EXPECT_EQ(moved.api.socket, "/tmp/sim/api.socket");
  EXPECT_EQ(moved.cdi.spec_dir, "/tmp/sim/cdi");
  EXPECT_EQ(moved.cdi.proc_root, "/tmp/sim/proc");
  Flags flags;
  flags.config_file = WriteConfig("stateDir: /srv/state\n");
  flags.cdi_spec_dir = "/srv/cdi";
  MIGD_ASSERT_OK_AND_ASSIGN(Config kept, ReadEffectiveConfig(flags, sim));
  EXPECT_EQ(kept.state_dir, "/srv/state");
  EXPECT_EQ(kept.cdi.spec_dir, "/srv/cdi");
  EXPECT_EQ(kept.api.socket, "/tmp/sim/api.socket");
}

TEST_F(EffectiveConfigTest, PolicyOfCarriesTheReloadableKeys) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c,
                            testing::Parse("lifecycle: {idleTTL: 10m, maxIdlePerGPU: 2, warmPool: "
                                           "{1g.10gb: 1}}\nmigProfileAllowlist: [1g.10gb]\n"));
  const engine::ManagerPolicy p = PolicyOf(c);
  EXPECT_EQ(p.idle_ttl, std::chrono::minutes(10));
  EXPECT_EQ(p.max_idle_per_gpu, 2u);
  EXPECT_EQ(p.warm_pool.at("1g.10gb"), 1u);
  EXPECT_THAT(p.profile_allowlist, ElementsAre("1g.10gb"));
  EXPECT_FALSE(PolicyOf(Config{}).idle_ttl.has_value());
}

}  // namespace
}  // namespace migd::daemon
