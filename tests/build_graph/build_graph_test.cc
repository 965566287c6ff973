#include "tests/build_graph/build_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "testing/status_matchers.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace migd::build_graph {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

std::vector<std::string> Strings(const std::vector<Violation>& vs) {
  std::vector<std::string> out;
  for (const Violation& v : vs) out.push_back(v.ToString());
  return out;
}

// A small graph: migd -> daemon -> {base, engine}; engine -> base.
constexpr char kGraph[] =
    "target\tmigd\tEXECUTABLE\tbinary\tsrc/daemon\t/b/src/daemon\t/b/bin/migd\n"
    "links\tmigd\tdaemon\n"
    "sources\tmigd\tmain.cc\n"
    "target\tdaemon\tSTATIC_LIBRARY\tlibrary\tsrc/daemon\t/b/src/daemon\t/b/lib/libdaemon.a\n"
    "links\tdaemon\tbase\tengine\tyaml-cpp\n"
    "sources\tdaemon\tdaemon.cc\n"
    "target\tengine\tSTATIC_LIBRARY\tlibrary\tsrc/engine\t/b/src/engine\t/b/lib/libengine.a\n"
    "links\tengine\tbase\n"
    "sources\tengine\tmanager.cc\tmanager.h\n"
    "target\tbase\tSTATIC_LIBRARY\tlibrary\tsrc/base\t/b/src/base\t/b/lib/libbase.a\n"
    "links\tbase\t\n"
    "sources\tbase\tstatus.cc\n"
    "target\thelper\tSTATIC_LIBRARY\ttest-helper\tsrc/testing\t/b/src/testing\t"
    "/b/lib/libhelper.a\n"
    "links\thelper\tbase\tGTest::gmock\n"
    "sources\thelper\ttemp_dir.cc\n"
    "target\tsim\tSTATIC_LIBRARY\tlibrary\tsrc/sim\t/b/src/sim\t/b/lib/libsim.a\n"
    "links\tsim\tbase\n"
    "sources\tsim\tmachine.cc\n";

Graph SmallGraph() {
  StatusOr<Graph> g = ParseGraph(kGraph);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : Graph{};
}

Rules RootsOf(const std::string& root) {
  Rules rules;
  rules.roots = {root};
  return rules;
}

Rules MigdOnly() { return RootsOf("migd"); }

TEST(BuildGraphTest, ParsesTheRecords) {
  const Graph g = SmallGraph();
  ASSERT_THAT(g.targets, SizeIs(6));
  const Target& daemon = g.targets.at("daemon");
  EXPECT_EQ(daemon.type, "STATIC_LIBRARY");
  EXPECT_EQ(daemon.source_dir, "src/daemon");
  EXPECT_EQ(daemon.artifact, "/b/lib/libdaemon.a");
  EXPECT_THAT(daemon.links, ElementsAre("base", "engine", "yaml-cpp"));
  EXPECT_THAT(g.targets.at("base").links, IsEmpty());
  EXPECT_THAT(Closure(g, "migd"), ElementsAre("migd", "daemon", "base", "engine"));
}

TEST(BuildGraphTest, MalformedRecordsAreRefused) {
  EXPECT_THAT(ParseGraph("target\tx\tEXECUTABLE\n"),
              migd::testing::StatusIs(StatusCode::kInvalidArgument, HasSubstr("line 1")));
  EXPECT_THAT(ParseGraph("bogus\tx\n"),
              migd::testing::StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown record")));
  EXPECT_THAT(ParseGraph("links\tx\ty\n"),
              migd::testing::StatusIs(StatusCode::kInvalidArgument, HasSubstr("no target record")));
}

TEST(BuildGraphTest, TheCleanGraphPasses) {
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<Violation> v, CheckDeclared(SmallGraph(), MigdOnly()));
  EXPECT_THAT(v, IsEmpty());
}

TEST(BuildGraphTest, ADeepEdgeToATestHelperIsCaughtWithItsPath) {
  Graph g = SmallGraph();
  g.targets.at("engine").links.push_back("helper");
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<Violation> v, CheckDeclared(g, MigdOnly()));
  EXPECT_THAT(Strings(v), ElementsAre("migd -> daemon -> engine -> helper: a test helper "
                                      "(migd_cc_test_library)"));
}

TEST(BuildGraphTest, TheSimulatorAndGtestAreCaught) {
  Graph g = SmallGraph();
  g.targets.at("daemon").links.push_back("sim");
  g.targets.at("engine").links.push_back("GTest::gtest");
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<Violation> v, CheckDeclared(g, MigdOnly()));
  EXPECT_THAT(Strings(v),
              ElementsAre("migd -> daemon -> sim: the simulator (defined in src/sim/)",
                          "migd -> daemon -> engine -> GTest::gtest: gtest/gmock (GTest::gtest)"));
}

TEST(BuildGraphTest, TestHelpersAreRecognisedByTheirFilesToo) {
  const Rules rules;
  Target t;
  t.name = "x";
  t.role = "library";
  t.source_dir = "src/cdi";
  EXPECT_EQ(ForbiddenTarget(t, rules), "");
  for (const char* file : {"json_schema_test_util.cc", "nvml_sim_testing.h", "fake_host_reader.h",
                           "testing/fake_api_server.cc", "spec_test.cc"}) {
    t.sources = {"spec.cc", file};
    EXPECT_NE(ForbiddenTarget(t, rules), "") << file;
  }
  t.sources = {"/home/testing/migd/src/cdi/spec.cc"};  // a directory outside the project
  EXPECT_EQ(ForbiddenTarget(t, rules), "");
  t.sources = {};
  t.source_dir = "src/k8s/testing";
  EXPECT_THAT(ForbiddenTarget(t, rules), HasSubstr("defined in src/k8s/testing/"));
  t.source_dir = "src/sim/nvml";
  EXPECT_THAT(ForbiddenTarget(t, rules), HasSubstr("the simulator"));
  t.source_dir = "src/simple";
  EXPECT_EQ(ForbiddenTarget(t, rules), "");
}

TEST(BuildGraphTest, GtestIsRecognisedInEverySpelling) {
  for (const char* item : {"GTest::gmock", "gtest", "-lgtest", "-lgmock_main",
                           "/usr/lib/x86_64-linux-gnu/libgtest.a", "lib/libgmock.so.1.12.1"}) {
    EXPECT_NE(ForbiddenItem(item), "") << item;
  }
  for (const char* item :
       {"yaml-cpp", "-ldl", "/usr/lib/libabsl_strings.so", "Threads::Threads", "-Wl,--as-needed"}) {
    EXPECT_EQ(ForbiddenItem(item), "") << item;
  }
}

constexpr char kNinja[] =
    "rule CXX_EXECUTABLE_LINKER__migd_Release\n"
    "  command = $LAUNCHER c++ $FLAGS $in -o $out $LINK_LIBRARIES\n"
    "build bin/migd: CXX_EXECUTABLE_LINKER__migd_Release src/daemon/CMakeFiles/migd.dir/main.cc.o"
    " $\n    src/testing/CMakeFiles/helper.dir/temp$ dir.cc.o | lib/libdaemon.a || lib/libbase.a\n"
    "  LINK_FLAGS = -Wl,--as-needed -lgmock\n"
    "  LINK_LIBRARIES = lib/libdaemon.a  lib/libsim.a  /usr/lib/libgtest.a  -ldl\n"
    "  TARGET_FILE = bin/migd\n"
    "build bin/other: CXX_EXECUTABLE_LINKER__other_Release x.o\n"
    "  LINK_LIBRARIES = lib/libhelper.a\n";

TEST(BuildGraphTest, NinjaLinkLinesAreRead) {
  MIGD_ASSERT_OK_AND_ASSIGN(LinkLine line, LinkLineFromNinja(kNinja, "/b", "/b/bin/migd"));
  EXPECT_THAT(line.inputs,
              ElementsAre("/b/src/daemon/CMakeFiles/migd.dir/main.cc.o",
                          "/b/src/testing/CMakeFiles/helper.dir/temp dir.cc.o",
                          "/b/lib/libdaemon.a", "/b/lib/libsim.a", "/usr/lib/libgtest.a"));
  EXPECT_THAT(line.flags, ElementsAre("-Wl,--as-needed", "-lgmock", "-ldl"));
  EXPECT_THAT(LinkLineFromNinja(kNinja, "/b", "/b/bin/none"),
              migd::testing::StatusIs(StatusCode::kNotFound, HasSubstr("/b/bin/none")));
}

TEST(BuildGraphTest, MakefileLinkLinesAreRead) {
  const LinkLine line = LinkLineFromLinkTxt(
      "/usr/bin/c++ -O2 CMakeFiles/migd.dir/main.cc.o -o ../../bin/migd "
      "../../lib/libdaemon.a -lgtest\n",
      "/b/src/daemon");
  EXPECT_THAT(line.inputs,
              ElementsAre("/b/src/daemon/CMakeFiles/migd.dir/main.cc.o", "/b/lib/libdaemon.a"));
  EXPECT_THAT(line.flags, ElementsAre("-O2", "-lgtest"));
}

TEST(BuildGraphTest, EveryBadItemOnALinkLineIsCaught) {
  MIGD_ASSERT_OK_AND_ASSIGN(LinkLine line, LinkLineFromNinja(kNinja, "/b", "/b/bin/migd"));
  EXPECT_THAT(
      Strings(CheckLinkLine(SmallGraph(), Rules{}, "migd", line)),
      ElementsAre("migd (link line) -> /b/src/testing/CMakeFiles/helper.dir/temp dir.cc.o: an "
                  "object file of helper, a test helper (migd_cc_test_library)",
                  "migd (link line) -> sim: the simulator (defined in src/sim/)",
                  "migd (link line) -> /usr/lib/libgtest.a: gtest/gmock (/usr/lib/libgtest.a)",
                  "migd (link line) -> -lgmock: gtest/gmock (-lgmock)"));
}

// This build tree: migd and migctl, through what CMake declared and what its
// generator wrote. The closure is checked to be real so that the test cannot
// pass on an empty graph.
TEST(BuildGraphTest, ThisBuildTreeIsClean) {
  MIGD_ASSERT_OK_AND_ASSIGN(
      std::string text, ReadFileToString(std::string(MIGD_BINARY_DIR) + "/migd_build_graph.txt"));
  MIGD_ASSERT_OK_AND_ASSIGN(Graph g, ParseGraph(text));
  const std::vector<std::string> closure = Closure(g, "migd");
  for (const char* lib : {"migd_daemon", "migd_engine", "migd_nvml", "migd_base"}) {
    EXPECT_THAT(closure, Contains(lib));
  }
  // The classification sees the real test helpers and simulator.
  EXPECT_NE(ForbiddenTarget(g.targets.at("migd_testing"), Rules{}), "");
  EXPECT_NE(ForbiddenTarget(g.targets.at("migd_sim_driver"), Rules{}), "");
  EXPECT_EQ(ForbiddenTarget(g.targets.at("migd_daemon"), Rules{}), "");
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<Violation> v, CheckDeclared(g, Rules{}));
  EXPECT_THAT(Strings(v), IsEmpty());
}

// The fixture project (testdata/bad_edges), configured by the real CMake with
// migd's helpers. Each executable is one kind of bad edge.
class FixtureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new migd::testing::TempDir;
    const std::string build = dir_->Join("build");
    const migd::testing::CommandResult r = migd::testing::RunCommand(
        {MIGD_CMAKE_COMMAND, "-S",
         std::string(MIGD_SOURCE_DIR) + "/tests/build_graph/testdata/bad_edges", "-B", build, "-G",
         MIGD_CMAKE_GENERATOR, "-DMIGD_SOURCE_DIR=" MIGD_SOURCE_DIR},
        dir_->path());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    StatusOr<std::string> text = ReadFileToString(build + "/migd_build_graph.txt");
    ASSERT_TRUE(text.ok()) << text.status();
    StatusOr<Graph> g = ParseGraph(*text);
    ASSERT_TRUE(g.ok()) << g.status();
    graph_ = new Graph(*g);
    StatusOr<std::string> ninja = ReadFileToString(build + "/build.ninja", size_t{1} << 26);
    ninja_ = new std::string(ninja.ok() ? *ninja : "");
  }
  static void TearDownTestSuite() {
    delete graph_;
    delete ninja_;
    delete dir_;
  }

  // Every violation with `root` as the only root: declared, then link line.
  static std::vector<std::string> Check(const std::string& root) {
    const Rules rules = RootsOf(root);
    std::vector<std::string> out;
    StatusOr<std::vector<Violation>> declared = CheckDeclared(*graph_, rules);
    EXPECT_TRUE(declared.ok()) << declared.status();
    if (declared.ok()) out = Strings(*declared);
    const Target& t = graph_->targets.at(root);
    StatusOr<LinkLine> line =
        ninja_->empty()
            ? StatusOr<LinkLine>(LinkLineFromLinkTxt(
                  ReadFileToString(t.binary_dir + "/CMakeFiles/" + root + ".dir/link.txt")
                      .value_or(""),
                  t.binary_dir))
            : LinkLineFromNinja(*ninja_, dir_->Join("build"), t.artifact);
    EXPECT_TRUE(line.ok()) << line.status();
    if (line.ok()) {
      for (const std::string& s : Strings(CheckLinkLine(*graph_, rules, root, *line))) {
        out.push_back(s);
      }
    }
    return out;
  }

  static migd::testing::TempDir* dir_;
  static Graph* graph_;
  static std::string* ninja_;
};
migd::testing::TempDir* FixtureTest::dir_ = nullptr;
Graph* FixtureTest::graph_ = nullptr;
std::string* FixtureTest::ninja_ = nullptr;

TEST_F(FixtureTest, TheCleanBinaryPasses) { EXPECT_THAT(Check("clean_binary"), IsEmpty()); }

TEST_F(FixtureTest, AHelperTwoLevelsDownIsCaughtInTheGraphAndOnTheLinkLine) {
  EXPECT_THAT(
      Check("via_helper"),
      ElementsAre("via_helper -> upper -> middle -> helper: a test helper "
                  "(migd_cc_test_library)",
                  "via_helper (link line) -> helper: a test helper (migd_cc_test_library)"));
}

TEST_F(FixtureTest, TheSimulatorIsCaught) {
  EXPECT_THAT(Check("via_sim"),
              Contains("via_sim -> sim_model: the simulator (defined in src/sim/)"));
}

TEST_F(FixtureTest, GtestIsCaught) {
  const std::vector<std::string> v = Check("via_gtest");
  EXPECT_THAT(v, Contains("via_gtest -> GTest::gtest: gtest/gmock (GTest::gtest)"));
  EXPECT_THAT(v, Contains(AllOf(HasSubstr("via_gtest (link line) -> "), HasSubstr("libgtest"))));
}

TEST_F(FixtureTest, AFakeDeclaredAsALibraryIsCaughtByItsFileName) {
  EXPECT_THAT(Check("via_fake"), Contains("via_fake -> looks_fine: a test helper (fake_clock.cc)"));
}

TEST_F(FixtureTest, ARawFlagAndForeignObjectsAreCaughtOnTheLinkLine) {
  EXPECT_THAT(Check("via_flag"),
              ElementsAre("via_flag (link line) -> -lgmock: gtest/gmock (-lgmock)"));
  const std::vector<std::string> v = Check("via_objects");
  ASSERT_THAT(v, SizeIs(1));
  EXPECT_THAT(v[0], AllOf(HasSubstr("via_objects (link line) -> "),
                          HasSubstr("an object file of helper_objects, a test helper")));
}

}  // namespace
}  // namespace migd::build_graph
