// File: cli/sim_stats.h
//
// `migctl sim-stats`: prints the per-function NVML call counters that the
// simulator (libnvidia-ml-sim.so) keeps in its state file. The file is JSON
// with a top-level "counters" object:
//   { "counters": { "<nvml function>": { "<RESULT>": <count>, ... }, ... }, ... }
// where RESULT is the NVML return name without "NVML_", e.g. "SUCCESS" or
// "ERROR_IN_USE". The file is read directly with nlohmann-json; this code
// does not depend on src/sim/.
//
// Exit codes of RunSimStats: 0 ok; 1 usage (no --state and no
// $MIGD_SIM_STATE); 2 the state file is unreadable or not of that shape.
//
// Thread-safety: functions without shared state.
#ifndef MIGD_CLI_SIM_STATS_H_
#define MIGD_CLI_SIM_STATS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace migd::cli {

struct SimCounter {
  std::string function;
  std::string result;
  uint64_t count = 0;
  friend bool operator==(const SimCounter&, const SimCounter&) = default;
};

// Parses the "counters" object of a state file, sorted by (function, result).
// A document without "counters" has none (empty vector). kDataLoss when the
// text is not JSON, or "counters" is not an object of objects of
// non-negative integers; the message names the offending key.
StatusOr<std::vector<SimCounter>> ParseSimCounters(std::string_view json_text);

struct SimStatsOptions {
  std::string state_file;  // empty: $MIGD_SIM_STATE
  std::string output = "table";  // "table" or "json"
};

int RunSimStats(const SimStatsOptions& options, std::ostream& out, std::ostream& err);

}  // namespace migd::cli

#endif  // MIGD_CLI_SIM_STATS_H_
