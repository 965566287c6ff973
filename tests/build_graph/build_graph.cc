#include "tests/build_graph/build_graph.h"

#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>

#include <deque>
#include <filesystem>
#include <set>

namespace migd::build_graph {
namespace {

std::vector<std::string> SplitTabs(std::string_view line) {
  return absl::StrSplit(std::string(line), '\t');
}

std::string Normal(const std::string& path, const std::string& base) {
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::path(base) / p;
  return p.lexically_normal().string();
}

bool IsPath(std::string_view token) {
  return token.find('/') != std::string_view::npos || token.ends_with(".o") ||
         token.ends_with(".a") || token.find(".so") != std::string_view::npos;
}

std::string Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// Why a source file marks its target as test code, or "".
std::string TestFile(const std::string& source) {
  const std::string base = Basename(source);
  const std::string stem = base.substr(0, base.find('.'));
  if (stem.ends_with("_test_util") || stem.ends_with("_testing") || stem.starts_with("fake_")) {
    return "a test helper (" + source + ")";
  }
  if (stem.ends_with("_test")) return "test code (" + source + ")";
  // Only a relative path's directories are the project's own (an absolute
  // one may sit below any directory name).
  if (!source.starts_with("/")) {
    const std::vector<std::string> parts = absl::StrSplit(source, '/');
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      if (parts[i] == "testing") return "a test helper (" + source + ")";
    }
  }
  return "";
}

// The target whose object directory holds `object` (".../CMakeFiles/<t>.dir/..."), or "".
std::string ObjectOwner(const std::string& object) {
  const size_t at = object.find("/CMakeFiles/");
  if (at == std::string::npos) return "";
  const size_t begin = at + 12;
  const size_t end = object.find(".dir/", begin);
  return end == std::string::npos ? "" : object.substr(begin, end - begin);
}

// Ninja's escapes: "$ " (space), "$:" (colon), "$$" (dollar).
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '$' && i + 1 < s.size()) ++i;
    out += s[i];
  }
  return out;
}

// Splits a ninja path list at unescaped spaces.
std::vector<std::string> NinjaPaths(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '$' && i + 1 < s.size()) {
      cur += s[++i];
    } else if (s[i] == ' ') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += s[i];
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// The ninja file as logical lines (continuations "$\n" joined).
std::vector<std::string> LogicalLines(std::string_view ninja) {
  std::vector<std::string> out;
  std::string cur;
  const std::vector<std::string> raw = absl::StrSplit(std::string(ninja), '\n');
  for (std::string_view line : raw) {
    size_t dollars = 0;
    while (dollars < line.size() && line[line.size() - 1 - dollars] == '$') ++dollars;
    if (dollars % 2 == 1) {
      cur += std::string(line.substr(0, line.size() - 1));
      continue;
    }
    out.push_back(cur + std::string(line));
    cur.clear();
  }
  return out;
}

// The position of the first unescaped `c` in `s`, or npos.
size_t FindUnescaped(std::string_view s, char c) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '$') {
      ++i;
    } else if (s[i] == c) {
      return i;
    }
  }
  return std::string_view::npos;
}

void AddTokens(std::string_view value, const std::string& base, LinkLine* line) {
  const std::vector<std::string> tokens =
      absl::StrSplit(std::string(value), ' ', absl::SkipEmpty());
  for (std::string_view token : tokens) {
    if (IsPath(token) && !token.starts_with("-")) {
      line->inputs.push_back(Normal(std::string(token), base));
    } else {
      line->flags.emplace_back(token);
    }
  }
}

}  // namespace

StatusOr<Graph> ParseGraph(std::string_view text) {
  Graph graph;
  int n = 0;
  const std::vector<std::string> lines = absl::StrSplit(std::string(text), '\n', absl::SkipEmpty());
  for (std::string_view line : lines) {
    ++n;
    std::vector<std::string> f = SplitTabs(line);
    const std::string where = "build graph line " + std::to_string(n);
    if (f.size() < 2) return InvalidArgumentError(where + ": expected <kind>\\t<target>...");
    if (f[0] == "target") {
      if (f.size() != 7) return InvalidArgumentError(where + ": a target record has 7 fields");
      Target& t = graph.targets[f[1]];
      t.name = f[1];
      t.type = f[2];
      t.role = f[3];
      t.source_dir = f[4];
      t.binary_dir = f[5];
      t.artifact = f[6] == "-" ? f[6] : Normal(f[6], "/");
      continue;
    }
    std::vector<std::string>* list = nullptr;
    if (f[0] == "links") list = &graph.targets[f[1]].links;
    if (f[0] == "sources") list = &graph.targets[f[1]].sources;
    if (list == nullptr) return InvalidArgumentError(where + ": unknown record " + f[0]);
    for (size_t i = 2; i < f.size(); ++i) {
      if (!f[i].empty()) list->push_back(f[i]);
    }
  }
  for (const auto& [name, t] : graph.targets) {
    if (t.type.empty())
      return InvalidArgumentError("build graph: " + name + " has no target record");
  }
  return graph;
}

std::string ForbiddenTarget(const Target& target, const Rules& rules) {
  if (target.role == "test-helper") return "a test helper (migd_cc_test_library)";
  if (target.role == "test") return "a test (migd_cc_test)";
  if (target.source_dir == rules.sim_dir || target.source_dir.starts_with(rules.sim_dir + "/")) {
    return "the simulator (defined in " + target.source_dir + "/)";
  }
  const std::vector<std::string> dirs = absl::StrSplit(target.source_dir, '/');
  for (const std::string& d : dirs) {
    if (d == "testing") return "a test helper (defined in " + target.source_dir + "/)";
  }
  for (const std::string& source : target.sources) {
    if (std::string why = TestFile(source); !why.empty()) return why;
  }
  return "";
}

std::string ForbiddenItem(std::string_view item) {
  if (item.starts_with("GTest::")) return "gtest/gmock (" + std::string(item) + ")";
  std::string name = Basename(item);
  if (name.starts_with("-l")) name = name.substr(2);
  if (name.starts_with("lib")) name = name.substr(3);
  name = name.substr(0, name.find('.'));
  if (name == "gtest" || name == "gmock" || name == "gtest_main" || name == "gmock_main") {
    return "gtest/gmock (" + std::string(item) + ")";
  }
  return "";
}

std::string Violation::ToString() const { return absl::StrJoin(path, " -> ") + ": " + why; }

std::vector<std::string> Closure(const Graph& graph, const std::string& root) {
  std::vector<std::string> out;
  std::set<std::string> seen = {root};
  std::deque<std::string> queue = {root};
  while (!queue.empty()) {
    const std::string cur = queue.front();
    queue.pop_front();
    out.push_back(cur);
    const auto it = graph.targets.find(cur);
    if (it == graph.targets.end()) continue;
    for (const std::string& item : it->second.links) {
      if (graph.targets.contains(item) && seen.insert(item).second) queue.push_back(item);
    }
  }
  return out;
}

StatusOr<std::vector<Violation>> CheckDeclared(const Graph& graph, const Rules& rules) {
  std::vector<Violation> out;
  for (const std::string& root : rules.roots) {
    if (!graph.targets.contains(root)) return NotFoundError("build graph: no target " + root);
    std::map<std::string, std::string> parent = {{root, ""}};
    auto path_to = [&parent](std::string node) {
      std::vector<std::string> path;
      for (; !node.empty(); node = parent[node]) path.insert(path.begin(), node);
      return path;
    };
    std::deque<std::string> queue = {root};
    std::set<std::string> reported;
    while (!queue.empty()) {
      const std::string cur = queue.front();
      queue.pop_front();
      for (const std::string& item : graph.targets.at(cur).links) {
        const auto it = graph.targets.find(item);
        if (it == graph.targets.end()) {
          const std::string why = ForbiddenItem(item);
          if (!why.empty() && reported.insert(item).second) {
            std::vector<std::string> path = path_to(cur);
            path.push_back(item);
            out.push_back({std::move(path), why});
          }
          continue;
        }
        if (parent.contains(item)) continue;
        parent[item] = cur;
        if (std::string why = ForbiddenTarget(it->second, rules); !why.empty()) {
          out.push_back({path_to(item), why});
        } else {
          queue.push_back(item);
        }
      }
    }
  }
  return out;
}

StatusOr<LinkLine> LinkLineFromNinja(std::string_view ninja, const std::string& build_dir,
                                     const std::string& artifact) {
  const std::vector<std::string> lines = LogicalLines(ninja);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (!l.starts_with("build ")) continue;
    const std::string_view rest = std::string_view(l).substr(6);
    const size_t colon = FindUnescaped(rest, ':');
    if (colon == std::string_view::npos) continue;
    const std::vector<std::string> outputs = NinjaPaths(rest.substr(0, colon));
    if (outputs.empty() || Normal(outputs[0], build_dir) != artifact) continue;
    LinkLine line;
    std::vector<std::string> ins = NinjaPaths(rest.substr(colon + 1));
    // ins[0] is the rule; explicit inputs run up to "|" or "||".
    for (size_t k = 1; k < ins.size() && ins[k] != "|" && ins[k] != "||"; ++k) {
      line.inputs.push_back(Normal(ins[k], build_dir));
    }
    for (size_t j = i + 1; j < lines.size() && lines[j].starts_with("  "); ++j) {
      const std::string_view var = std::string_view(lines[j]).substr(2);
      for (std::string_view key : {"LINK_LIBRARIES = ", "LINK_FLAGS = "}) {
        if (var.starts_with(key)) AddTokens(Unescape(var.substr(key.size())), build_dir, &line);
      }
    }
    return line;
  }
  return NotFoundError("build.ninja has no link step for " + artifact);
}

LinkLine LinkLineFromLinkTxt(std::string_view link_txt, const std::string& binary_dir) {
  std::vector<std::string> tokens =
      absl::StrSplit(std::string(link_txt), absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
  LinkLine line;
  for (size_t i = 1; i < tokens.size(); ++i) {  // tokens[0] is the compiler driver
    if (tokens[i] == "-o") {
      ++i;  // the output
      continue;
    }
    AddTokens(tokens[i], binary_dir, &line);
  }
  return line;
}

std::vector<Violation> CheckLinkLine(const Graph& graph, const Rules& rules,
                                     const std::string& root, const LinkLine& line) {
  std::map<std::string, const Target*> by_artifact;
  for (const auto& [name, t] : graph.targets) by_artifact[t.artifact] = &t;
  std::vector<Violation> out;
  auto forbid = [&](const std::string& item, const std::string& why) {
    out.push_back({{root + " (link line)", item}, why});
  };
  for (const std::string& input : line.inputs) {
    if (input.ends_with(".o")) {
      const std::string owner = ObjectOwner(input);
      const auto it = graph.targets.find(owner);
      if (owner != root && it != graph.targets.end()) {
        if (std::string why = ForbiddenTarget(it->second, rules); !why.empty()) {
          forbid(input, "an object file of " + owner + ", " + why);
        }
      }
      continue;
    }
    if (const auto it = by_artifact.find(input); it != by_artifact.end()) {
      if (std::string why = ForbiddenTarget(*it->second, rules); !why.empty()) {
        forbid(it->second->name, why);
      }
      continue;
    }
    if (std::string why = ForbiddenItem(input); !why.empty()) forbid(input, why);
  }
  for (const std::string& flag : line.flags) {
    if (std::string why = ForbiddenItem(flag); !why.empty()) forbid(flag, why);
  }
  return out;
}

}  // namespace migd::build_graph
