// File: cli/reply_tables.h
//
// The human (`-o table`) form of each migd.v1 reply migctl prints: column
// tables of instances (cli/output.h FormatTable) and one line per fact a
// container runtime needs (CDI names, environment, device nodes). The JSON
// and YAML forms are the replies themselves (client.h).
//
// Thread-safety: pure functions.
#ifndef MIGD_CLI_REPLY_TABLES_H_
#define MIGD_CLI_REPLY_TABLES_H_

#include <string>

#include "migd/v1/migd.pb.h"

namespace migd::cli {

std::string ListTable(const migd::v1::ListResponse& response);
std::string AllocateTable(const migd::v1::AllocateResponse& response);
std::string ReleaseTable(const migd::v1::ReleaseResponse& response);
std::string PlanTable(const migd::v1::PlanResponse& response);
std::string ReclaimTable(const migd::v1::ReclaimResponse& response);
// "GPU 1: cleared the GPU's health mark and 2 instance mark(s); it takes new
// allocations again" or "GPU 1: nothing to clear (no health marks)".
std::string HealthClearTable(uint32_t gpu, const migd::v1::ClearHealthResponse& response);

}  // namespace migd::cli

#endif  // MIGD_CLI_REPLY_TABLES_H_
