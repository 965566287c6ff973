#include "driver/nvml/nvml_sim_testing.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "sim/config.h"

extern char** environ;

namespace migd::driver::sim_testing {
namespace {

constexpr std::string_view kSimEnvPrefix = "MIGD_SIM_";
// Set in the environment of a process started by RerunInFreshProcess to the
// full name of the test it runs.
constexpr const char* kFreshProcessEnv = "MIGD_TEST_FRESH_PROCESS";

// The state file as JSON; null (and a test failure) if it cannot be read.
nlohmann::json ReadState(const std::string& path) {
  StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    ADD_FAILURE() << "cannot read the simulator state " << path << ": " << text.status();
    return nullptr;
  }
  return nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
}

const nlohmann::json* FindGpu(const nlohmann::json& state, unsigned int gpu) {
  if (!state.is_object() || !state.contains("gpus") || gpu >= state["gpus"].size()) {
    ADD_FAILURE() << "the simulator state has no GPU " << gpu;
    return nullptr;
  }
  return &state["gpus"][gpu];
}

struct Symbols {
  void* handle = nullptr;
  const std::set<std::string>* hidden = nullptr;
  const std::map<std::string, void*>* hooks = nullptr;
};

void* ResolveSymbol(const char* name, void* ctx) {
  const auto* s = static_cast<const Symbols*>(ctx);
  if (s->hidden->contains(name)) return nullptr;
  if (auto it = s->hooks->find(name); it != s->hooks->end()) return it->second;
  return dlsym(s->handle, name);
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

CallCounts ToCallCounts(const std::vector<NvmlCallCount>& rows) {
  CallCounts c;
  for (const NvmlCallCount& r : rows) c[{r.function, r.result}] += r.count;
  return c;
}

CallCounts Delta(const CallCounts& before, const CallCounts& after) {
  CallCounts d;
  for (const auto& [key, n] : after) {
    auto it = before.find(key);
    const uint64_t prev = it == before.end() ? 0 : it->second;
    if (n != prev) d[key] = n - prev;
  }
  return d;
}

uint64_t Get(const CallCounts& counts, const std::string& function, const std::string& result) {
  auto it = counts.find({function, result});
  return it == counts.end() ? 0 : it->second;
}

namespace {

// The header-open knobs as the process found them before any test changed
// its environment (a suite run under one simulator variant).
const std::map<std::string, std::string>& VariantKnobs() {
  static const auto* const kKnobs = [] {
    auto* knobs = new std::map<std::string, std::string>;
    for (const char* name : sim::kHeaderOpenKnobs) {
      if (const char* v = std::getenv(name)) (*knobs)[name] = v;
    }
    return knobs;
  }();
  return *kKnobs;
}
// Captured before main(), so before any test touches the environment.
[[maybe_unused]] const bool kVariantKnobsCaptured = !VariantKnobs().empty();

}  // namespace

void ClearSimEnv() {
  VariantKnobs();
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (StartsWith(entry, kSimEnvPrefix)) names.emplace_back(entry.substr(0, entry.find('=')));
  }
  for (const std::string& name : names) unsetenv(name.c_str());
  for (const auto& [name, value] : VariantKnobs()) setenv(name.c_str(), value.c_str(), 1);
}

SimMachine::SimMachine(const std::string& gpus,
                       const std::map<std::string, std::string>& extra_env)
    : state_path_(dir_.Join("state.json")) {
  ClearSimEnv();
  setenv("MIGD_SIM_STATE", state_path_.c_str(), 1);
  setenv("MIGD_SIM_GPUS", gpus.c_str(), 1);
  setenv("MIGD_SIM_FSYNC", "0", 1);
  for (const auto& [name, value] : extra_env) setenv(name.c_str(), value.c_str(), 1);
}

SimMachine::~SimMachine() { ClearSimEnv(); }

bool SimMachine::exists() const { return access(state_path_.c_str(), F_OK) == 0; }

CallCounts SimMachine::Counts() const {
  CallCounts c;
  if (!exists()) return c;
  const nlohmann::json state = ReadState(state_path_);
  if (!state.is_object() || !state.contains("counters")) {
    ADD_FAILURE() << "the simulator state " << state_path_ << " has no counters";
    return c;
  }
  for (const auto& [fn, results] : state["counters"].items()) {
    for (const auto& [result, n] : results.items()) c[{fn, result}] = n.get<uint64_t>();
  }
  return c;
}

uint64_t SimMachine::Count(const std::string& function, const std::string& result) const {
  return Get(Counts(), function, result);
}

int SimMachine::GiCount(unsigned int gpu) const {
  const nlohmann::json state = ReadState(state_path_);
  const nlohmann::json* g = FindGpu(state, gpu);
  return g == nullptr ? -1 : static_cast<int>((*g)["gpuInstances"].size());
}

int SimMachine::CiCount(unsigned int gpu) const {
  const nlohmann::json state = ReadState(state_path_);
  const nlohmann::json* g = FindGpu(state, gpu);
  if (g == nullptr) return -1;
  int n = 0;
  for (const nlohmann::json& gi : (*g)["gpuInstances"]) {
    n += static_cast<int>(gi["computeInstances"].size());
  }
  return n;
}

std::string SimMachine::GpuUuid(unsigned int gpu) const {
  const nlohmann::json state = ReadState(state_path_);
  const nlohmann::json* g = FindGpu(state, gpu);
  return g == nullptr ? "" : (*g)["uuid"].get<std::string>();
}

void* LoadedSymbol(const std::string& path, const char* name) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) return nullptr;
  void* sym = dlsym(h, name);
  dlclose(h);  // the library stays loaded: this was not the first reference
  return sym;
}

nvmlReturn_t AttachProcess(const std::string& path, const std::string& mig_uuid, unsigned int pid,
                           unsigned long long used_bytes) {
  using Fn = nvmlReturn_t (*)(const char*, unsigned int, unsigned long long);
  if (LoadedSymbol(path, "nvmlInit_v2") == nullptr) return NVML_ERROR_LIBRARY_NOT_FOUND;
  auto fn = reinterpret_cast<Fn>(LoadedSymbol(path, "migdSimAttachProcess"));
  return fn == nullptr ? NVML_ERROR_FUNCTION_NOT_FOUND : fn(mig_uuid.c_str(), pid, used_bytes);
}

nvmlReturn_t DetachProcess(const std::string& path, const std::string& mig_uuid,
                           unsigned int pid) {
  using Fn = nvmlReturn_t (*)(const char*, unsigned int);
  if (LoadedSymbol(path, "nvmlInit_v2") == nullptr) return NVML_ERROR_LIBRARY_NOT_FOUND;
  auto fn = reinterpret_cast<Fn>(LoadedSymbol(path, "migdSimDetachProcess"));
  return fn == nullptr ? NVML_ERROR_FUNCTION_NOT_FOUND : fn(mig_uuid.c_str(), pid);
}

nvmlReturn_t InjectEvents(const std::string& path, const std::string& specs) {
  using Fn = nvmlReturn_t (*)(const char*);
  if (LoadedSymbol(path, "nvmlInit_v2") == nullptr) return NVML_ERROR_LIBRARY_NOT_FOUND;
  auto fn = reinterpret_cast<Fn>(LoadedSymbol(path, "migdSimInjectEvents"));
  return fn == nullptr ? NVML_ERROR_FUNCTION_NOT_FOUND : fn(specs.c_str());
}

StatusOr<std::shared_ptr<NvmlLibrary>> LoadSimWithSymbols(
    const std::string& path, const std::set<std::string>& hidden,
    const std::map<std::string, void*>& hooks) {
  // The flags of NvmlLibrary::Load: the library stays mapped for good.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* err = dlerror();
    return UnavailableError(path + " not found: " + (err != nullptr ? err : "dlopen failed"));
  }
  Symbols symbols{handle, &hidden, &hooks};
  StatusOr<std::shared_ptr<NvmlLibrary>> lib =
      NvmlLibrary::FromResolver(&ResolveSymbol, &symbols, path);
  dlclose(handle);  // RTLD_NODELETE: the symbols stay valid
  return lib;
}

bool RerunInFreshProcess() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) {
    ADD_FAILURE() << "RerunInFreshProcess() called outside a test";
    return true;
  }
  const std::string name = std::string(info->test_suite_name()) + "." + info->name();
  if (const char* running = std::getenv(kFreshProcessEnv);
      running != nullptr && name == running) {
    return false;  // this is the fresh process: run the body
  }

  migd::testing::TempDir dir;
  const std::string out_path = dir.Join("output");
  // Everything the child needs is built before fork(): only async-signal-safe
  // calls happen between fork and exec.
  const std::vector<std::string> args = {"/proc/self/exe", "--gtest_filter=" + name,
                                         "--gtest_repeat=1", "--gtest_color=no"};
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    // The child runs exactly one test and writes no report of its own.
    if (StartsWith(entry, "GTEST_SHARD_INDEX=") || StartsWith(entry, "GTEST_TOTAL_SHARDS=") ||
        StartsWith(entry, "GTEST_SHARD_STATUS_FILE=") || StartsWith(entry, "GTEST_OUTPUT=") ||
        StartsWith(entry, "GTEST_FILTER=") || StartsWith(entry, kFreshProcessEnv)) {
      continue;
    }
    env.emplace_back(entry);
  }
  env.push_back(std::string(kFreshProcessEnv) + "=" + name);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(out, STDERR_FILENO) < 0) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return true;
  }
  int status = 0;
  pid_t waited;
  do {
    waited = waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  const std::string output = ReadFileToString(out_path).value_or("");
  std::string how;
  if (waited != pid) {
    how = std::string("waitpid: ") + std::strerror(errno);
  } else if (WIFSIGNALED(status)) {
    how = "killed by signal " + std::to_string(WTERMSIG(status));
  } else if (WEXITSTATUS(status) != 0) {
    how = "exit code " + std::to_string(WEXITSTATUS(status));
  } else if (output.find("[  PASSED  ] 1 test.") == std::string::npos) {
    how = "it did not pass exactly one test";
  }
  if (!how.empty()) {
    ADD_FAILURE() << name << " failed in its own process (" << how << "); its output:\n"
                  << output;
  }
  return true;
}

}  // namespace migd::driver::sim_testing
