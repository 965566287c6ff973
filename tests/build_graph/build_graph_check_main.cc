// build_graph_check: fails if migd, migctl or a library they link reaches the
// simulator, a test helper or gtest/gmock (tests/build_graph/build_graph.h).
//
//   build_graph_check --graph <build>/migd_build_graph.txt --build-dir <build>
//                     [--root NAME]... [--sim-dir src/sim]
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "tests/build_graph/build_graph.h"

namespace {

using migd::build_graph::Graph;
using migd::build_graph::LinkLine;
using migd::build_graph::Rules;
using migd::build_graph::Violation;

int Fail(const std::string& what) {
  std::fprintf(stderr, "build_graph_check: %s\n", what.c_str());
  return 2;
}

// The link line CMake's generator wrote for `root`.
migd::StatusOr<LinkLine> ReadLinkLine(const Graph& graph, const std::string& build_dir,
                                      const std::string& root) {
  const migd::build_graph::Target& t = graph.targets.at(root);
  const std::string ninja = build_dir + "/build.ninja";
  if (std::filesystem::exists(ninja)) {
    migd::StatusOr<std::string> text = migd::ReadFileToString(ninja, size_t{1} << 30);
    if (!text.ok()) return text.status();
    return migd::build_graph::LinkLineFromNinja(*text, build_dir, t.artifact);
  }
  migd::StatusOr<std::string> text =
      migd::ReadFileToString(t.binary_dir + "/CMakeFiles/" + root + ".dir/link.txt");
  if (!text.ok()) return text.status();
  return migd::build_graph::LinkLineFromLinkTxt(*text, t.binary_dir);
}

}  // namespace

int main(int argc, char** argv) {
  std::string graph_file, build_dir;
  Rules rules;
  std::vector<std::string> roots;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--graph") {
      graph_file = value;
    } else if (flag == "--build-dir") {
      build_dir = value;
    } else if (flag == "--root") {
      roots.push_back(value);
    } else if (flag == "--sim-dir") {
      rules.sim_dir = value;
    } else {
      return Fail("unknown flag " + flag);
    }
  }
  if (graph_file.empty() || build_dir.empty() || argc % 2 == 0) {
    return Fail("usage: --graph FILE --build-dir DIR [--root NAME]... [--sim-dir DIR]");
  }
  if (!roots.empty()) rules.roots = roots;
  migd::StatusOr<std::string> text = migd::ReadFileToString(graph_file);
  if (!text.ok()) return Fail(text.status().ToString());
  migd::StatusOr<Graph> graph = migd::build_graph::ParseGraph(*text);
  if (!graph.ok()) return Fail(graph.status().ToString());
  migd::StatusOr<std::vector<Violation>> violations =
      migd::build_graph::CheckDeclared(*graph, rules);
  if (!violations.ok()) return Fail(violations.status().ToString());
  for (const std::string& root : rules.roots) {
    migd::StatusOr<LinkLine> line = ReadLinkLine(*graph, build_dir, root);
    if (!line.ok()) return Fail(line.status().ToString());
    for (Violation& v : migd::build_graph::CheckLinkLine(*graph, rules, root, *line)) {
      violations->push_back(std::move(v));
    }
    std::printf("%s: links %zu targets of the project and %zu libraries\n", root.c_str(),
                migd::build_graph::Closure(*graph, root).size() - 1, line->inputs.size());
  }
  for (const Violation& v : *violations) {
    std::printf("FORBIDDEN %s\n", v.ToString().c_str());
  }
  if (!violations->empty()) {
    std::printf(
        "Production code must not link the simulator, test helpers or gtest/gmock "
        "(cmake/migd.cmake); move the dependency to a test target.\n");
    return 1;
  }
  std::printf("ok: no production target links the simulator, a test helper or gtest/gmock\n");
  return 0;
}
