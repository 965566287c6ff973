// Crash consistency: a child process (engine_crash_child, crash_child.cc)
// allocates, releases and reclaims in a loop on libnvidia-ml-sim.so and is
// killed with SIGKILL, at random moments or at
// exact NVML call sites (MIGD_SIM_FAULTS=<fn>=CRASH@N / CRASH_AFTER@N). After
// each kill the parent recovers (one NvmlDriver for the whole test) and
// checks: every live instance is tracked (nothing foreign appears), no intent
// record remains, records equal the live layout, and every allocation the
// child saw succeed and had not started to release is Active with its MIG
// UUID.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "engine/manager_testing.h"
#include "testing/status_matchers.h"

extern char** environ;

namespace migd::engine {
namespace {

constexpr char kStateDirEnv[] = "MIGD_ENGINE_STATE_DIR";
constexpr char kOplogEnv[] = "MIGD_ENGINE_OPLOG";
constexpr char kSeedEnv[] = "MIGD_ENGINE_SEED";
constexpr char kOpsEnv[] = "MIGD_ENGINE_OPS";
constexpr char kReadyEnv[] = "MIGD_ENGINE_READY_FD";

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// One NVML session for the whole test; the children share the simulated
// machine and the state dir; records are written without fsync (kill -9,
// not power loss, is what this exercises).
class EngineCrashTest : public testing::SimHardwareTest {
 protected:
  void Init() {
    sync_records_ = false;
    SimHardwareTest::Init(MIGD_SIM_LIBRARY, "a100-40gb:2");
    store_.reset();  // the children own the state dir while they run
    state_dir_ = StateDir();
    oplog_ = dir_->Join("oplog");
  }

  int OplogLines() const;
  void WaitForOplogToGrow(pid_t pid) const;

  // Starts the child; returns its pid. With `ready`, *ready receives the read
  // end of a pipe whose write end the child gets (MIGD_ENGINE_READY_FD): one
  // byte arrives once the child has recovered, EOF if it died first.
  pid_t Spawn(int seed, int ops, const std::string& faults, int* ready = nullptr) {
    int fds[2] = {-1, -1};
    if (ready != nullptr && ::pipe2(fds, O_CLOEXEC) != 0) return -1;
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string s(*e);
      if (s.rfind("GTEST_", 0) == 0 || s.rfind("MIGD_SIM_FAULTS=", 0) == 0) continue;
      env.push_back(s);
    }
    env.push_back(std::string(kStateDirEnv) + "=" + state_dir_);
    env.push_back(std::string(kOplogEnv) + "=" + oplog_);
    env.push_back(std::string(kSeedEnv) + "=" + std::to_string(seed));
    env.push_back(std::string(kOpsEnv) + "=" + std::to_string(ops));
    env.push_back("MIGD_SIM_FSYNC=0");
    if (!faults.empty()) env.push_back("MIGD_SIM_FAULTS=" + faults);
    if (ready != nullptr) env.push_back(std::string(kReadyEnv) + "=" + std::to_string(fds[1]));
    std::vector<std::string> args = {MIGD_ENGINE_CRASH_CHILD};
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
      if (fds[1] >= 0) ::fcntl(fds[1], F_SETFD, 0);  // the child keeps its end
      ::execve(MIGD_ENGINE_CRASH_CHILD, argv.data(), envp.data());
      ::_exit(127);
    }
    if (ready != nullptr) {
      ::close(fds[1]);
      *ready = fds[0];
    }
    return pid;
  }

  // Recovers in this process and checks the invariants.
  void RecoverAndCheck(const std::string& what) {
    SCOPED_TRACE(what);
    Restart();
    if (mgr_ == nullptr) return;
    ManagerSnapshot snap = mgr_->List();
    EXPECT_TRUE(snap.foreign.empty()) << "nothing but migd creates instances here";
    Consistent();
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
    // The next child owns the state dir.
    mgr_.reset();
    store_.reset();
    ++recoveries_;
  }

  std::string state_dir_;
  std::string oplog_;
  int recoveries_ = 0;
};

// The oplog's line count now.
int EngineCrashTest::OplogLines() const {
  std::ifstream in(oplog_);
  int lines = 0;
  for (std::string l; std::getline(in, l);) ++lines;
  return lines;
}

// Waits until the oplog holds a line more than it did, or the child `pid`
// exited. A hang guard of 5 minutes, not a timing: a stuck child fails the
// line count below.
void EngineCrashTest::WaitForOplogToGrow(pid_t pid) const {
  const int before = OplogLines();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (OplogLines() <= before && std::chrono::steady_clock::now() < give_up) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;  // exited (reaped below: ECHILD)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

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
    int ready = -1;
    const pid_t pid = Spawn(it, 0, "", &ready);
    ASSERT_GT(pid, 0);
    // Wait until the child has recovered (a byte) or died (EOF), then kill it
    // after a random delay inside its workload: the delay picks the moment,
    // nothing is timed or asserted about it.
    char byte = 0;
    ssize_t got = 0;
    do {
      got = ::read(ready, &byte, 1);
    } while (got < 0 && errno == EINTR);
    ::close(ready);
    // Every other child first gets to log an operation, however slow the
    // machine (ASan, load), so the kills below land in real work.
    if (it % 2 == 0 && got == 1) WaitForOplogToGrow(pid);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 80000));
    ::kill(pid, SIGKILL);
    int status = 0;
    const pid_t waited = ::waitpid(pid, &status, 0);
    if (waited == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ++killed;
    RecoverAndCheck("iteration " + std::to_string(it));
  }
  EXPECT_EQ(recoveries_, kIterations);
  EXPECT_GT(killed, kIterations / 2);
  // The children did real work between kills: at least the line each
  // even-numbered child was let write.
  EXPECT_GE(OplogLines(), kIterations / 2);
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
