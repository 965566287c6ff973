// File: cli/exit_codes.h
//
// migctl's exit codes, one table for every subcommand (docs/migctl.md):
//   0 ok
//   1 usage: bad flags, files or request text; or migd answered
//     INVALID_ARGUMENT / OUT_OF_RANGE
//   2 unreachable: migd's socket cannot be reached, migd answered UNAVAILABLE
//     or not within --timeout; for probe and sim-stats: NVML (or the
//     simulator state) is unavailable
//   3 catalogue mismatch (probe --compare-catalog)
//   4 no placement: RESOURCE_EXHAUSTED (or nothing fits in an offline plan)
//   5 not found: NOT_FOUND (unknown request id or MIG UUID)
//   6 any other server error, and reclaim when some destroys failed
#ifndef MIGD_CLI_EXIT_CODES_H_
#define MIGD_CLI_EXIT_CODES_H_

namespace migd::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;
inline constexpr int kExitUnreachable = 2;
inline constexpr int kExitNvmlUnavailable = 2;
inline constexpr int kExitCatalogMismatch = 3;
inline constexpr int kExitNoPlacement = 4;
inline constexpr int kExitNoPlan = 4;
inline constexpr int kExitNotFound = 5;
inline constexpr int kExitServerError = 6;

}  // namespace migd::cli

#endif  // MIGD_CLI_EXIT_CODES_H_
