// migd: the MIG node agent. main() parses the command line and hands over to
// RunDaemon (daemon/daemon.h), which documents startup, signals and the exit
// codes: 0 ok, 1 usage or configuration, 2 NVML unavailable, 3 recovery
// failed closed, 4 API socket or metrics address in use, 5 stateDir unusable
// or locked, 6 other startup failure.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <iostream>
#include <string>

#include "daemon/daemon.h"

namespace {

std::string SelfExe(const char* argv0) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return argv0;
  buf[n] = '\0';
  return buf;
}

// Binds an optional string flag: the Flags field is set only when given.
void AddOptional(CLI::App& app, const std::string& name, std::optional<std::string>* out,
                 const std::string& help) {
  app.add_option_function<std::string>(
      name, [out](const std::string& v) { *out = v; }, help);
}

}  // namespace

int main(int argc, char** argv) {
  migd::daemon::Flags flags;
  flags.exe_path = SelfExe(argv[0]);
  CLI::App app{
      "migd: manages NVIDIA MIG instances on this node and serves the migd.v1 API on a unix "
      "socket (docs/config.md)"};
  app.footer(
      "Signals: SIGTERM/SIGINT stop cleanly (exit 0); SIGHUP reloads the reloadable keys.\n"
      "Exit codes: 0 ok, 1 usage or configuration, 2 NVML unavailable, 3 recovery failed closed,\n"
      "4 API socket or metrics address in use, 5 stateDir unusable or locked, 6 other startup "
      "failure.");
  app.set_version_flag("--version", std::string("migd ") + migd::daemon::Version());
  app.add_option("-c,--config", flags.config_file,
                 "YAML configuration file (default: built-in defaults; docs/config.md)");
  AddOptional(app, "--simulate", &flags.simulate,
              "Run on simulated GPUs, e.g. a100-40gb:2,h100-80gb:1 (loads "
              "libnvidia-ml-sim.so.1 from <exe dir>/../lib unless --nvml-library is given)");
  AddOptional(app, "--socket", &flags.socket, "API socket path (api.socket)");
  AddOptional(app, "--state-dir", &flags.state_dir, "State directory (stateDir)");
  AddOptional(app, "--metrics-listen", &flags.metrics_listen,
              "Metrics address host:port, \"\" disables (metrics.listen)");
  AddOptional(app, "--cdi-spec-dir", &flags.cdi_spec_dir, "CDI spec directory (cdi.specDir)");
  AddOptional(app, "--nvml-library", &flags.nvml_library, "NVML library path (nvml.library)");
  AddOptional(app, "--log-level", &flags.log_level,
              "trace, debug, info, warn, error, critical or off (log.level)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "migd: %s (see migd --help)\n", e.what());
    return migd::daemon::kExitConfig;
  }
  return migd::daemon::RunDaemon(flags);
}
