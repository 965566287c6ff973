// File: cli/client_options.h
//
// ClientOptions: how migctl reaches migd and prints its answers (the global
// flags, cli/app.h), shared by the client subcommands (client.h) and the
// connection helpers (connection.h).
//
// Thread-safety: a value type.
#ifndef MIGD_CLI_CLIENT_OPTIONS_H_
#define MIGD_CLI_CLIENT_OPTIONS_H_

#include <chrono>
#include <string>
#include <string_view>

#include "cli/output.h"

namespace migd::cli {

inline constexpr std::string_view kDefaultSocket = "/run/migd/api.socket";

enum class ColorMode { kAuto, kAlways, kNever };

struct ClientOptions {
  std::string socket = std::string(kDefaultSocket);
  OutputFormat output = OutputFormat::kTable;
  std::chrono::milliseconds timeout{30000};
  ColorMode color = ColorMode::kAuto;
  // Facts about the terminal, filled by main() (tests set them directly).
  bool stdout_is_tty = false;
  bool no_color_env = false;  // $NO_COLOR set and non-empty
  int width = 100;            // terminal columns
};

// True when `status` should be coloured: kAlways; or kAuto on a TTY without
// NO_COLOR.
bool UseColor(const ClientOptions& options);

}  // namespace migd::cli

#endif  // MIGD_CLI_CLIENT_OPTIONS_H_
