#include "bench/placement/template_fill.h"

#include <optional>

namespace migd::bench {
namespace {

// "name" if `line` is exactly "{{<c>name}}" (c = '#' or '/').
std::optional<std::string> Marker(std::string_view line, char c) {
  if (line.size() < 5 || line.substr(0, 3) != std::string{'{', '{', c} ||
      line.substr(line.size() - 2) != "}}") {
    return std::nullopt;
  }
  return std::string(line.substr(3, line.size() - 5));
}

// Replaces every {{name}} of one kept line.
Status FillLine(std::string_view line, size_t lineno,
                const std::map<std::string, std::string>& values, std::string& out) {
  size_t pos = 0;
  while (true) {
    const size_t open = line.find("{{", pos);
    if (open == std::string_view::npos) {
      out.append(line.substr(pos));
      return OkStatus();
    }
    const size_t close = line.find("}}", open + 2);
    const std::string where = "template line " + std::to_string(lineno);
    if (close == std::string_view::npos) return InvalidArgumentError(where + ": unclosed {{");
    const std::string name(line.substr(open + 2, close - open - 2));
    auto it = values.find(name);
    if (it == values.end()) return InvalidArgumentError(where + ": no value for {{" + name + "}}");
    out.append(line.substr(pos, open - pos));
    out.append(it->second);
    pos = close + 2;
  }
}

}  // namespace

StatusOr<std::string> FillTemplate(std::string_view text,
                                   const std::map<std::string, std::string>& values,
                                   const std::set<std::string>& sections) {
  std::string out;
  std::optional<std::string> block;  // the open block
  bool keep = true;
  size_t lineno = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    ++lineno;
    const size_t nl = text.find('\n', pos);
    const std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    const std::string where = "template line " + std::to_string(lineno);
    if (std::optional<std::string> name = Marker(line, '#')) {
      if (block.has_value()) return InvalidArgumentError(where + ": blocks do not nest");
      block = *name;
      keep = sections.count(*name) > 0;
      continue;
    }
    if (std::optional<std::string> name = Marker(line, '/')) {
      if (block != name) return InvalidArgumentError(where + ": {{/" + *name + "}} not open");
      block.reset();
      keep = true;
      continue;
    }
    if (!keep) continue;
    Status s = FillLine(line, lineno, values, out);
    if (!s.ok()) return s;
    if (nl != std::string_view::npos) out += '\n';
  }
  if (block.has_value())
    return InvalidArgumentError("template: block {{#" + *block + "}} not closed");
  return out;
}

}  // namespace migd::bench
