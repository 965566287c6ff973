#include "daemon/simulation_paths.h"

#include <gtest/gtest.h>

namespace migd::daemon {
namespace {

TEST(SimulationPathsTest, ExplicitSettingsWinEvenWhenTheyEqualTheDefault) {
  const ExplicitPaths e = ExplicitPathsInConfig(
      "stateDir: /run/migd/state\napi:\n  socket: /run/migd/api.socket\ncdi:\n"
      "  specDir: /var/run/cdi\n");
  EXPECT_TRUE(e.state_dir);
  EXPECT_TRUE(e.socket);
  EXPECT_TRUE(e.spec_dir);
  Config c;  // the defaults: the same three values
  MoveDefaultsForSimulation("/tmp/sim", e, &c);
  EXPECT_EQ(c.state_dir, "/run/migd/state");
  EXPECT_EQ(c.api.socket, "/run/migd/api.socket");
  EXPECT_EQ(c.cdi.spec_dir, "/var/run/cdi");
}

TEST(SimulationPathsTest, UnsetDefaultsMoveBesideTheSimulatorState) {
  const ExplicitPaths e = ExplicitPathsInConfig("cdi:\n  vendor: example.com\napi: {}\n");
  EXPECT_FALSE(e.state_dir);
  EXPECT_FALSE(e.socket);
  EXPECT_FALSE(e.spec_dir);
  Config c;
  MoveDefaultsForSimulation("/tmp/sim", e, &c);
  EXPECT_EQ(c.state_dir, "/tmp/sim/state");
  EXPECT_EQ(c.api.socket, "/tmp/sim/api.socket");
  EXPECT_EQ(c.cdi.spec_dir, "/tmp/sim/cdi");
}

TEST(SimulationPathsTest, OnlyThePresentKeysAreExplicit) {
  const ExplicitPaths e = ExplicitPathsInConfig("cdi:\n  specDir: /var/run/cdi\n");
  Config c;
  MoveDefaultsForSimulation("/tmp/sim", e, &c);
  EXPECT_EQ(c.cdi.spec_dir, "/var/run/cdi");
  EXPECT_EQ(c.state_dir, "/tmp/sim/state");
  EXPECT_EQ(c.api.socket, "/tmp/sim/api.socket");
  // A section without the key, or a missing section, is not explicit.
  const ExplicitPaths partial = ExplicitPathsInConfig("api:\n  socketMode: \"0600\"\n");
  EXPECT_FALSE(partial.socket || partial.state_dir || partial.spec_dir);
  // Not a mapping, or not YAML: nothing explicit (the loader reports it).
  for (const char* text : {"", "- a\n- b\n", "cdi: [unclosed\n", "cdi: 3\n"}) {
    const ExplicitPaths none = ExplicitPathsInConfig(text);
    EXPECT_FALSE(none.state_dir || none.socket || none.spec_dir) << text;
  }
}

}  // namespace
}  // namespace migd::daemon
