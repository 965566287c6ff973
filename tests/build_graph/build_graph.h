// File: tests/build_graph/build_graph.h
//
// The check that production code never links the simulator, test helpers or
// gtest/gmock, over the real build graph: the targets CMake declared
// (migd_write_build_graph, cmake/migd_build_graph.cmake) and the link lines
// its generator wrote (build.ninja, or each target's link.txt).
//
// What is forbidden in the closure of a root (migd, migctl):
//   - the simulator: any target defined under Rules::sim_dir (src/sim);
//   - test helpers: targets declared with migd_cc_test_library or
//     migd_cc_test, targets in a testing/ directory, and targets with a file
//     named *_test_util.*, *_testing.* or fake_* (the test-helper
//     convention, README "Layout");
//   - gtest and gmock, as targets (GTest::*) or as libraries on a link line.
//
// Thread-safety: pure functions over values.
#ifndef MIGD_TESTS_BUILD_GRAPH_BUILD_GRAPH_H_
#define MIGD_TESTS_BUILD_GRAPH_BUILD_GRAPH_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace migd::build_graph {

struct Target {
  std::string name;
  std::string type;                  // STATIC_LIBRARY, EXECUTABLE, ...
  std::string role;                  // MIGD_ROLE: library, test-helper, binary, test; "-" if none
  std::string source_dir;            // relative to the project, e.g. "src/daemon"
  std::string binary_dir;            // absolute
  std::string artifact;              // absolute path of the built file; "-" if none
  std::vector<std::string> links;    // direct LINK_LIBRARIES items
  std::vector<std::string> sources;  // as CMake lists them
};

struct Graph {
  std::map<std::string, Target> targets;  // by name
};

// Parses the file migd_write_build_graph writes. kInvalidArgument naming the
// line for a malformed record.
StatusOr<Graph> ParseGraph(std::string_view text);

struct Rules {
  std::vector<std::string> roots = {"migd", "migctl"};
  std::string sim_dir = "src/sim";
};

// Why `target` may not be in a production closure, or "" if it may.
std::string ForbiddenTarget(const Target& target, const Rules& rules);
// Why a link item that is not a target of the graph (a library name or path,
// an imported target, a flag) may not be, or "".
std::string ForbiddenItem(std::string_view item);

struct Violation {
  std::vector<std::string> path;  // root, ..., the offending target or item
  std::string why;
  std::string ToString() const;  // "migd -> migd_daemon -> migd_testing: a test helper (...)"
};

// Every forbidden target or item reachable from the roots through the
// declared direct link dependencies, each with one path that reaches it.
// kNotFound if a root is not in the graph.
StatusOr<std::vector<Violation>> CheckDeclared(const Graph& graph, const Rules& rules);

// The targets reachable from `root` (itself included) through declared links.
std::vector<std::string> Closure(const Graph& graph, const std::string& root);

// A generated link step: its object files and libraries as the linker gets
// them, with relative paths resolved against `base_dir`.
struct LinkLine {
  std::vector<std::string> inputs;  // object files and libraries, absolute where paths
  std::vector<std::string> flags;   // everything else (-l..., -Wl,...)
};
// The link step of the target whose artifact is `artifact` in a build.ninja
// under `build_dir`. kNotFound if there is none.
StatusOr<LinkLine> LinkLineFromNinja(std::string_view ninja, const std::string& build_dir,
                                     const std::string& artifact);
// The link command of a Makefile build's link.txt, run from `binary_dir`.
LinkLine LinkLineFromLinkTxt(std::string_view link_txt, const std::string& binary_dir);

// Every forbidden library, object file or flag on `root`'s link line.
std::vector<Violation> CheckLinkLine(const Graph& graph, const Rules& rules,
                                     const std::string& root, const LinkLine& line);

}  // namespace migd::build_graph

#endif  // MIGD_TESTS_BUILD_GRAPH_BUILD_GRAPH_H_
