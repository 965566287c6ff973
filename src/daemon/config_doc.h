// File: daemon/config_doc.h
//
// docs/config.md's key table, rendered from the schema (config_schema.h).
// The table sits between kKeyTableBegin and kKeyTableEnd; everything else in
// the document is prose written by hand. The `config_doc_table` test fails
// when the document's table is not the rendered one; `make config-doc`
// (build/bin/migd_config_doc --write docs/config.md) rewrites it.
//
// Thread-safety: pure functions.
#ifndef MIGD_DAEMON_CONFIG_DOC_H_
#define MIGD_DAEMON_CONFIG_DOC_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace migd::daemon {

inline constexpr std::string_view kKeyTableBegin =
    "<!-- BEGIN KEY TABLE: generated from src/daemon/config_schema.cc by `make config-doc`; do "
    "not edit -->";
inline constexpr std::string_view kKeyTableEnd = "<!-- END KEY TABLE -->";

// The markdown table: one row per key that holds a value (sections have no
// row), in schema order: Key | Type | Default | Reload | Meaning.
std::string RenderKeyTable();

// `doc` with the text between the markers replaced by RenderKeyTable().
// kInvalidArgument if the markers are missing or out of order.
StatusOr<std::string> WithRenderedKeyTable(std::string_view doc);

// OK if `doc`'s table is RenderKeyTable(); else kFailedPrecondition naming
// the first line that differs and the command that fixes it.
Status CheckKeyTable(std::string_view doc, std::string_view doc_name);

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_CONFIG_DOC_H_
