// File: cli/app.h
//
// migctl's command line: every subcommand's flags (CLI11), global flags, and
// dispatch to the subcommand implementations (client.h for the ones that talk
// to migd; probe.h, sim_stats.h, plan.h for the local ones). main() only
// gathers the Environment and calls RunMigctl, so flag parsing and exit codes
// are unit-tested without a process.
//
// Global flags (before or after the subcommand):
//   --socket PATH         migd's API socket (default $MIGD_SOCKET, else
//                         /run/migd/api.socket)
//   -o, --output FORMAT   table | json | yaml
//   --timeout DURATION    per-RPC deadline (default 30s)
//   --color WHEN          auto | always | never (status picture)
//   --log-level LEVEL     migctl's own log on stderr (default warn)
//
// Exit codes: cli/exit_codes.h.
//
// Thread-safety: RunMigctl has no shared state besides spdlog's default
// logger (InitLogging), so call it from one thread at a time.
#ifndef MIGD_CLI_APP_H_
#define MIGD_CLI_APP_H_

#include <ostream>
#include <string>
#include <vector>

namespace migd::cli {

// What main() learns from the process environment.
struct Environment {
  std::string migd_socket;    // $MIGD_SOCKET ("" when unset)
  bool stdout_is_tty = false;  // isatty(STDOUT_FILENO)
  bool no_color = false;       // $NO_COLOR set and non-empty
  int columns = 100;           // terminal width (TIOCGWINSZ, else $COLUMNS, else 100)
};

// Parses `args` (without the program name), runs the subcommand and returns
// its exit code. Help goes to `out`, usage errors to `err` (exit 1).
int RunMigctl(const std::vector<std::string>& args, const Environment& env, std::ostream& out,
              std::ostream& err);

}  // namespace migd::cli

#endif  // MIGD_CLI_APP_H_
