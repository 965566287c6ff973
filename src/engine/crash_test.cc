// Crash consistency: a child process (this test binary re-executed in
// EngineCrashChild.Run) allocates, releases and reclaims in a loop on
// libnvidia-ml-sim.so and is killed with SIGKILL, at random moments or at
// exact NVML call sites (MIGD_SIM_FAULTS=<fn>=CRASH@N / CRASH_AFTER@N). After
// each kill the parent recovers (one NvmlDriver for the whole test) and
// checks: every live instance is tracked (nothing foreign appears), no intent
// record remains, records equal the live layout, and every allocation the
// child saw succeed and had not started to release is Active with its MIG
// UUID.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/sim_fixture.h"
#include "testing/status_matchers.h"

extern char** environ;

namespace migd::engine {
namespace {

using driver::NvmlDriver;
using driver::sim_testing::SimMachine;
using ::migd::engine::testing::ExpectConsistent;

constexpr char kChildEnv[] = "MIGD_ENGINE_CRASH_CHILD";
constexpr char kStateDirEnv[] = "MIGD_ENGINE_STATE_DIR";
constexpr char kOplogEnv[] = "MIGD_ENGINE_OPLOG";
constexpr char kSeedEnv[] = "MIGD_ENGINE_SEED";
constexpr char kOpsEnv[] = "MIGD_ENGINE_OPS";
constexpr char kReadyEnv[] = "MIGD_ENGINE_READY";

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

void AppendLine(int fd, const std::string& line) {
  const std::string s = line + "\n";
  // One write(2) per line on an O_APPEND fd: a SIGKILL leaves whole lines.
  ssize_t n = ::write(fd, s.data(), s.size());
  (void)n;
}

// The child: recover, then run a random workload until killed or done.
TEST(EngineCrashChild, Run) {
  if (std::string(Env(kChildEnv)) != "1") GTEST_SKIP() << "runs only as a crash-test child";
  FakeClock clock;
  auto driver = NvmlDriver::Open(MIGD_SIM_LIBRARY);
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto store = testing::OpenSimStore(Env(kStateDirEnv), clock, /*sync=*/false);
  ASSERT_TRUE(store.ok()) << store.status();
  RecordsOwnerSource owners;
  ManagerOptions opts;
  opts.boot_id = testing::kSimBoot;
  auto mgr = Manager::Create(opts, **driver, **store, clock, owners);
  ASSERT_TRUE(mgr.ok()) << mgr.status();
  const int fd = ::open(Env(kOplogEnv), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  if (Env(kReadyEnv)[0] != '\0') {  // recovery done: the parent may kill from now on
    const int ready = ::open(Env(kReadyEnv), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (ready >= 0) ::close(ready);
  }
  std::mt19937 rng(static_cast<uint32_t>(std::atoi(Env(kSeedEnv))));
  const int ops = std::atoi(Env(kOpsEnv)) > 0 ? std::atoi(Env(kOpsEnv)) : 1000000;
  std::vector<std::string> held;
  for (const auto& v : (*mgr)->List().instances) {
    if (v.state == InstanceState::kActive) held.push_back(v.request_id);
  }
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  const std::vector<std::string> profiles = {"1g.5gb", "2g.10gb", "3g.20gb", "1g.5gb", "4g.20gb"};
  for (int i = 0; i < ops; ++i) {
    const uint32_t dice = rng() % 10;
    if (dice < 4 && !held.empty()) {
      const size_t pick = rng() % held.size();
      AppendLine(fd, "R " + held[pick]);
      Status s = (*mgr)->Release(held[pick]);
      (void)s;
      held.erase(held.begin() + static_cast<long>(pick));
    } else if (dice == 4) {
      auto r = (*mgr)->Reclaim({});
      (void)r;
    } else {
      const std::string id = "c" + std::string(Env(kSeedEnv)) + "-" + std::to_string(i);
      AllocateRequest req;
      req.request_id = id;
      req.owner = store::Owner::Opaque("job-" + id);
      InstanceSpec spec;
      spec.profile = profiles[rng() % profiles.size()];
      if (rng() % 3 == 0) {
        spec.gpu = GpuIndex(static_cast<uint32_t>(rng() % 2));
        if (spec.profile == "1g.5gb") spec.placement = mig::Placement{static_cast<uint32_t>(rng() % 7), 1};
        if (spec.profile == "3g.20gb") spec.placement = mig::Placement{static_cast<uint32_t>((rng() % 2) * 4), 4};
      }
      req.instances.push_back(spec);
      auto a = (*mgr)->Allocate(req);
      if (a.ok()) {
        AppendLine(fd, "A " + id + " " + a->instances[0].mig_uuid.value());
        held.push_back(id);
      }
    }
  }
  ::close(fd);
}

class EngineCrashTest : public ::testing::Test {
 protected:
  void Init() {
    sim_ = std::make_unique<SimMachine>("a100-40gb:2");
    auto d = NvmlDriver::Open(MIGD_SIM_LIBRARY);
    ASSERT_TRUE(d.ok()) << d.status();
    driver_ = std::move(*d);
    state_dir_ = dir_.Join("state");
    oplog_ = dir_.Join("oplog");
  }
  void TearDown() override {
    driver_.reset();
    sim_.reset();
  }

  // Starts the child with extra environment; returns its pid.
  pid_t Spawn(int seed, int ops, const std::string& faults, const std::string& ready = "") {
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string s(*e);
      if (s.rfind("GTEST_", 0) == 0 || s.rfind("MIGD_SIM_FAULTS=", 0) == 0) continue;
      env.push_back(s);
    }
    env.push_back(std::string(kChildEnv) + "=1");
    env.push_back(std::string(kStateDirEnv) + "=" + state_dir_);
    env.push_back(std::string(kOplogEnv) + "=" + oplog_);
    env.push_back(std::string(kSeedEnv) + "=" + std::to_string(seed));
    env.push_back(std::string(kOpsEnv) + "=" + std::to_string(ops));
    env.push_back("MIGD_SIM_FSYNC=0");
    if (!faults.empty()) env.push_back("MIGD_SIM_FAULTS=" + faults);
    if (!ready.empty()) env.push_back(std::string(kReadyEnv) + "=" + ready);
    std::vector<std::string> args = {"/proc/self/exe", "--gtest_filter=EngineCrashChild.Run"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int devnull = ::open("/dev/null", O_WRONLY);
      if (devnull >= 0) {
        ::dup2(devnull, 1);
        ::dup2(devnull, 2);
      }
      ::execve("/proc/self/exe", argv.data(), envp.data());
      ::_exit(127);
    }
    return pid;
  }

  // Recovers in this process and checks the invariants.
  void RecoverAndCheck(const std::string& what) {
    SCOPED_TRACE(what);
    FakeClock clock;
    auto st = testing::OpenSimStore(state_dir_, clock, /*sync=*/false);
    ASSERT_TRUE(st.ok()) << st.status();
    RecordsOwnerSource owners;
    ManagerOptions opts;
    opts.boot_id = testing::kSimBoot;
    auto mgr = Manager::Create(opts, *driver_, **st, clock, owners);
    ASSERT_TRUE(mgr.ok()) << mgr.status();
    ManagerSnapshot snap = (*mgr)->List();
    EXPECT_TRUE(snap.foreign.empty()) << "nothing but migd creates instances here";
    ExpectConsistent(**mgr, *driver_, **st);
    // Every allocation the child saw succeed and did not start to release.
    std::map<std::string, std::string> alive;
    std::ifstream in(oplog_);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string op, id, uuid;
      ls >> op >> id >> uuid;
      if (op == "A") alive[id] = uuid;
      if (op == "R") alive.erase(id);
    }
    for (const auto& [id, uuid] : alive) {
      bool found = false;
      for (const auto& v : snap.instances) {
        if (v.mig_uuid.value() == uuid) {
          found = true;
          EXPECT_EQ(v.state, InstanceState::kActive) << id << " " << uuid;
          EXPECT_EQ(v.request_id, id);
          EXPECT_EQ(v.owner, store::Owner::Opaque("job-" + id));
        }
      }
      EXPECT_TRUE(found) << "allocation " << id << " lost its instance " << uuid;
    }
    ++recoveries_;
  }

  migd::testing::TempDir dir_;
  std::unique_ptr<SimMachine> sim_;
  std::unique_ptr<NvmlDriver> driver_;
  std::string state_dir_;
  std::string oplog_;
  int recoveries_ = 0;
};

TEST_F(EngineCrashTest, RandomSigkillsRecoverExactly) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Init();
  // 200 in CI; MIGD_ENGINE_CRASH_ITERATIONS overrides (e.g. a soak run).
  const int kIterations = std::atoi(Env("MIGD_ENGINE_CRASH_ITERATIONS")) > 0
                              ? std::atoi(Env("MIGD_ENGINE_CRASH_ITERATIONS"))
                              : 200;
  std::mt19937 rng(20261129);
  int killed = 0;
  for (int it = 0; it < kIterations && !HasFatalFailure(); ++it) {
    const std::string ready = dir_.Join("ready." + std::to_string(it));
    const pid_t pid = Spawn(it, 0, "", ready);
    ASSERT_GT(pid, 0);
    // Wait until the child has recovered (or died), then kill it after a
    // random delay inside its workload. No timing is asserted.
    for (int polls = 0; polls < 20000 && ::access(ready.c_str(), F_OK) != 0; ++polls) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 80000));
    ::kill(pid, SIGKILL);
    int status = 0;
    const pid_t waited = ::waitpid(pid, &status, 0);
    if (waited == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ++killed;
    RecoverAndCheck("iteration " + std::to_string(it));
  }
  EXPECT_EQ(recoveries_, kIterations);
  EXPECT_GT(killed, kIterations / 2);
  // The children did real work between kills.
  std::ifstream in(oplog_);
  int lines = 0;
  for (std::string l; std::getline(in, l);) ++lines;
  EXPECT_GT(lines, kIterations);
}

TEST_F(EngineCrashTest, CrashAtExactNvmlCallSites) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Init();
  const std::vector<std::string> functions = {
      "nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceCreateComputeInstance",
      "nvmlComputeInstanceDestroy", "nvmlGpuInstanceDestroy"};
  int crashed = 0;
  int runs = 0;
  for (const std::string& fn : functions) {
    for (const char* hook : {"CRASH", "CRASH_AFTER"}) {
      for (int n : {1, 2, 5}) {
        const std::string fault = fn + "=" + hook + "@" + std::to_string(n);
        const pid_t pid = Spawn(1000 + runs, 60, fault);
        ASSERT_GT(pid, 0);
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
          ++crashed;
        } else {
          EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << fault;
        }
        RecoverAndCheck(fault);
        ++runs;
      }
    }
  }
  EXPECT_GE(sim_->Count("nvmlDeviceCreateGpuInstanceWithPlacement", "CRASH"), 3u);
  EXPECT_GE(sim_->Count("nvmlGpuInstanceDestroy", "CRASH"), 1u);
  EXPECT_GE(crashed, runs * 3 / 4);
}

}  // namespace
}  // namespace migd::engine
