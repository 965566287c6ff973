// File: bench/placement/template_fill.h
//
// A minimal markdown template filler for the benchmark report: `{{name}}`
// is replaced by a value; a block between the lines `{{#name}}` and
// `{{/name}}` is kept (without the marker lines) iff `name` is an enabled
// section. Blocks do not nest. Anything else is copied verbatim.
//
// Example:
//   FillTemplate("# {{title}}\n{{#extra}}\nmore\n{{/extra}}\n", {{"title", "T"}}, {})
//   // == "# T\n"
//
// Thread-safety: a pure function.
#ifndef MIGD_BENCH_PLACEMENT_TEMPLATE_FILL_H_
#define MIGD_BENCH_PLACEMENT_TEMPLATE_FILL_H_

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "base/status.h"

namespace migd::bench {

// kInvalidArgument naming the line: a placeholder without a value (in kept
// text), an unclosed `{{`, a block opened twice or closed without opening,
// or a block left open at the end.
StatusOr<std::string> FillTemplate(std::string_view text,
                                   const std::map<std::string, std::string>& values,
                                   const std::set<std::string>& sections);

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_TEMPLATE_FILL_H_
