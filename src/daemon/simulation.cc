#include "daemon/simulation.h"

#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/file_util.h"
#include "base/json_reader.h"
#include "base/logging.h"

namespace migd::daemon {
namespace {

// MIGD_SIM_STATE, or a new temporary directory holding it.
MaybeFailure ChooseStateFile(Simulation* sim) {
  const char* state = std::getenv("MIGD_SIM_STATE");
  if (state != nullptr && *state != '\0') {
    if (state[0] != '/') {
      return Failure{kExitConfig,
                     std::string("MIGD_SIM_STATE must be an absolute path, got ") + state};
    }
    sim->dir = DirName(state);
    return std::nullopt;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/migd-sim-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return Failure{kExitStartup, "cannot create a temporary simulation directory " + pattern +
                                     ": " + std::strerror(errno)};
  }
  sim->temp_dir = pattern;
  sim->dir = pattern;
  ::setenv("MIGD_SIM_STATE", (pattern + "/state.json").c_str(), 1);
  return std::nullopt;
}

}  // namespace

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

MaybeFailure SetUpSimulation(Flags* flags, Simulation* sim) {
  if (!flags->simulate) return std::nullopt;
  if (flags->simulate->empty()) {
    return Failure{kExitConfig,
                   "--simulate needs a GPU list, e.g. --simulate a100-40gb:2,h100-80gb:1"};
  }
  sim->enabled = true;
  ::setenv("MIGD_SIM_GPUS", flags->simulate->c_str(), 1);
  if (MaybeFailure f = ChooseStateFile(sim)) return f;
  const char* proc = std::getenv("MIGD_SIM_PROC_ROOT");
  if (proc == nullptr || *proc == '\0') {
    // Only used when the state file is created now (a creation knob).
    ::setenv("MIGD_SIM_PROC_ROOT", (sim->dir + "/proc").c_str(), 1);
  }
  if (!flags->nvml_library) {
    const std::string exe_dir = DirName(flags->exe_path);
    std::error_code ec;
    const std::filesystem::path lib = std::filesystem::weakly_canonical(
        std::filesystem::path(exe_dir) / ".." / "lib" / "libnvidia-ml-sim.so.1", ec);
    flags->nvml_library = ec ? exe_dir + "/../lib/libnvidia-ml-sim.so.1" : lib.string();
  }
  return std::nullopt;
}

MaybeFailure ReadSimProcRoot(Simulation* sim) {
  const char* env = std::getenv("MIGD_SIM_STATE");
  const std::string state = env != nullptr ? env : "";
  StatusOr<std::string> text = ReadFileToString(state);
  if (!text.ok()) {
    return Failure{kExitNvml,
                   "cannot read the simulator state " + state + ": " + text.status().ToString()};
  }
  StatusOr<nlohmann::json> doc = ParseJson(*text, state, StatusCode::kDataLoss);
  StatusOr<std::string> proc_root = doc.status();
  if (doc.ok()) {
    const JsonReader r(*doc, state, StatusCode::kDataLoss);
    proc_root = r.OptionalString("procRoot");
  }
  if (!proc_root.ok()) {
    return Failure{kExitNvml, "cannot parse the simulator state: " +
                                  std::string(proc_root.status().message())};
  }
  sim->proc_root = *proc_root;
  if (sim->proc_root.empty()) {
    spdlog::warn("simulated machine has no fake /proc tree; CDI specs cannot be built{}",
                 Fields().Add("state", state));
  }
  return std::nullopt;
}

}  // namespace migd::daemon
