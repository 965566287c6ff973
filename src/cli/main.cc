// migctl: the command-line tool of migd. Flags and dispatch live in migd_cli
// (app.h); main() only reads the process environment and the terminal.
//
// Exit codes: cli/exit_codes.h (0 ok, 1 usage, 2 migd unreachable or NVML
// unavailable, 3 catalogue mismatch, 4 no placement, 5 not found, 6 other
// server error).
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/app.h"

namespace {

int TerminalColumns() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr) {
    const int n = std::atoi(columns);
    if (n >= 20 && n <= 1000) return n;
  }
  return 100;
}

}  // namespace

int main(int argc, char** argv) {
  migd::cli::Environment env;
  if (const char* socket = std::getenv("MIGD_SOCKET"); socket != nullptr) env.migd_socket = socket;
  const char* no_color = std::getenv("NO_COLOR");
  env.no_color = no_color != nullptr && no_color[0] != '\0';
  env.stdout_is_tty = ::isatty(STDOUT_FILENO) == 1;
  env.columns = TerminalColumns();
  const std::vector<std::string> args(argv + 1, argv + argc);
  return migd::cli::RunMigctl(args, env, std::cout, std::cerr);
}
