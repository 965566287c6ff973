// End-to-end tests of the real migd binary: simulated GPUs
// (libnvidia-ml-sim.so.1, the production NvmlDriver above it), the real API
// socket called through the generated gRPC stub, real signals. Covers the
// full lifecycle, SIGTERM under load and a restart that loses nothing, bad
// configuration files, a second migd on the same socket or stateDir, a stale
// socket, a missing NVML library, SIGHUP reload, and one NVML session per
// process (the simulator's counters in its state file).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/file_util.h"
#include "base/mutex.h"
#include "migd/v1/migd.grpc.pb.h"
#include "testing/daemon_process.h"
#include "testing/eventually.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

using ::migd::testing::DaemonExit;
using ::migd::testing::DaemonOptions;
using ::migd::testing::DaemonProcess;
using ::migd::testing::Eventually;
using ::migd::testing::TempDir;
using ::migd::testing::WriteFileOrDie;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kRpcDeadline = std::chrono::seconds(30);

class DaemonE2eTest : public ::testing::Test {
 protected:
  std::string Socket() const { return dir_.Join("api.socket"); }
  std::string StateDir() const { return dir_.Join("state"); }
  std::string CdiDir() const { return dir_.Join("cdi"); }
  std::string SimState() const { return dir_.Join("sim/state.json"); }

  // The simulator's knobs: one state file and proc root for every migd this
  // test starts, so that a restart sees the same machine.
  std::map<std::string, std::string> Env() const {
    return migd::testing::SimulatedMachineEnv(dir_.Join("sim"));
  }

  std::vector<std::string> Args(const std::string& gpus = "a100-40gb:2") const {
    return {"--simulate",       gpus,          "--socket",       Socket(),
            "--state-dir",      StateDir(),    "--cdi-spec-dir", CdiDir(),
            "--metrics-listen", "127.0.0.1:0", "--log-level",    "debug"};
  }

  std::unique_ptr<DaemonProcess> Start(std::vector<std::string> args) {
    DaemonOptions o;
    o.args = std::move(args);
    o.env = Env();
    o.socket_path = Socket();
    StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }

  // Runs migd expecting it to fail at startup.
  DaemonExit RunToExit(std::vector<std::string> args) {
    DaemonOptions o;
    o.args = std::move(args);
    o.env = Env();
    StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return {};
    return (*d)->WaitForExit();
  }

  std::unique_ptr<v1::MigManager::Stub> Stub() {
    auto channel = grpc::CreateChannel("unix:" + Socket(), grpc::InsecureChannelCredentials());
    return v1::MigManager::NewStub(channel);
  }

  static void SetDeadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
  }

  grpc::Status Allocate(v1::MigManager::Stub& stub, const std::string& request_id,
                        const std::string& owner, const std::string& profile,
                        v1::AllocateResponse* resp) {
    v1::AllocateRequest req;
    req.set_request_id(request_id);
    req.mutable_owner()->set_opaque_id(owner);
    req.add_instances()->set_profile(profile);
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    grpc::Status s = stub.Allocate(&ctx, req, resp);
    if (s.ok()) ExpectMigIdentities(*resp);
    return s;
  }

  // Every allocated instance has its own MIG UUID, never its GPU's.
  static void ExpectMigIdentities(const v1::AllocateResponse& resp) {
    for (const auto& ai : resp.instances()) {
      EXPECT_THAT(ai.instance().mig_uuid(), ::testing::StartsWith("MIG-"));
      EXPECT_NE(ai.instance().mig_uuid(), ai.instance().gpu_uuid());
    }
  }

  grpc::Status Release(v1::MigManager::Stub& stub, const std::string& request_id) {
    v1::ReleaseRequest req;
    req.set_request_id(request_id);
    v1::ReleaseResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    return stub.Release(&ctx, req, &resp);
  }

  v1::ListResponse List(v1::MigManager::Stub& stub) {
    v1::ListResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    const grpc::Status s = stub.List(&ctx, v1::ListRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  // The simulator's call counter for (function, result) in its state file.
  uint64_t SimCount(const std::string& function, const std::string& result) const {
    StatusOr<std::string> text = ReadFileToString(SimState());
    if (!text.ok()) return 0;
    const nlohmann::json doc = nlohmann::json::parse(*text);
    const nlohmann::json& c = doc["counters"];
    if (!c.contains(function) || !c[function].contains(result)) return 0;
    return c[function][result].get<uint64_t>();
  }

  // Names of the regular files in `dir` ending in ".json".
  static std::set<std::string> JsonFiles(const std::string& dir) {
    std::set<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && name.size() > 5 && name.substr(name.size() - 5) == ".json" &&
          name[0] != '.') {
        out.insert(name);
      }
    }
    return out;
  }

  static std::string CdiFile(const std::string& mig_uuid) {
    return "hami.io-mig_" + mig_uuid + ".json";
  }

  std::string WriteConfig(const std::string& yaml, const std::string& name = "migd.yaml") {
    const std::string path = dir_.Join(name);
    WriteFileOrDie(path, yaml);
    return path;
  }

  TempDir dir_;
};

TEST_F(DaemonE2eTest, FullLifecycleReusesTheSameMigUuidThenReclaims) {
  std::unique_ptr<DaemonProcess> migd = Start(Args());
  ASSERT_NE(migd, nullptr);
  EXPECT_THAT(migd->Stderr(), HasSubstr("migd ready"));
  EXPECT_THAT(migd->Stderr(), HasSubstr("socket=" + Socket()));
  EXPECT_THAT(migd->Stderr(), HasSubstr("gpus=2"));
  auto stub = Stub();

  v1::AllocateResponse first;
  grpc::Status s = Allocate(*stub, "r1", "job-1", "1g.10gb", &first);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(first.instances_size(), 1);
  const v1::Instance& inst = first.instances(0).instance();
  const std::string mig = inst.mig_uuid();
  EXPECT_EQ(first.instances(0).path(), v1::ALLOCATION_PATH_CREATE);
  EXPECT_EQ(inst.state(), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(inst.owner().opaque_id(), "job-1");
  EXPECT_THAT(mig, ::testing::StartsWith("MIG-"));
  // CDI spec published before Allocate returned, and named in the response.
  EXPECT_EQ(JsonFiles(CdiDir()), std::set<std::string>{CdiFile(mig)});
  EXPECT_THAT(first.cdi_devices(), ::testing::ElementsAre("hami.io/mig=" + mig));
  EXPECT_EQ(JsonFiles(StateDir()).size(), 1u);

  s = Release(*stub, "r1");
  ASSERT_TRUE(s.ok()) << s.error_message();
  v1::ListResponse listed = List(*stub);
  ASSERT_EQ(listed.instances_size(), 1);
  EXPECT_EQ(listed.instances(0).state(), v1::INSTANCE_STATE_IDLE);
  // Released, not destroyed: the spec stays for the reuse.
  EXPECT_EQ(JsonFiles(CdiDir()), std::set<std::string>{CdiFile(mig)});

  v1::AllocateResponse second;
  s = Allocate(*stub, "r2", "job-2", "1g.10gb", &second);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(second.instances_size(), 1);
  EXPECT_EQ(second.instances(0).path(), v1::ALLOCATION_PATH_REUSE);
  EXPECT_EQ(second.instances(0).instance().mig_uuid(), mig);
  EXPECT_EQ(second.instances(0).instance().owner().opaque_id(), "job-2");

  // Reclaim never touches Active instances...
  {
    v1::ReclaimRequest req;
    v1::ReclaimResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    ASSERT_TRUE(stub->Reclaim(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.destroyed_size(), 0);
  }
  // ...and destroys Idle ones, with their record and spec.
  ASSERT_TRUE(Release(*stub, "r2").ok());
  {
    v1::ReclaimRequest req;
    v1::ReclaimResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    s = stub->Reclaim(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.destroyed_size(), 1);
    EXPECT_EQ(resp.destroyed(0).mig_uuid(), mig);
  }
  EXPECT_EQ(List(*stub).instances_size(), 0);
  EXPECT_TRUE(JsonFiles(CdiDir()).empty());
  EXPECT_TRUE(JsonFiles(StateDir()).empty());

  const DaemonExit exit = migd->Stop();
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("migd stopped"));
  EXPECT_FALSE(std::filesystem::exists(Socket())) << "the socket is removed at shutdown";
  // One NVML session for the whole process.
  EXPECT_EQ(SimCount("nvmlInit_v2", "SUCCESS"), 1u);
  EXPECT_EQ(SimCount("nvmlShutdown", "SUCCESS"), 1u);
}

// What the clients of SigtermUnderLoadThenRestartLosesNothing were told,
// shared by their threads.
class Ledger {
 public:
  struct Held {
    std::string request_id;
    std::string owner;
    std::string mig_uuid;
  };
  void Allocated(Held held) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    const std::string rid = held.request_id;
    active_[rid] = std::move(held);
  }
  void Released(const std::string& rid) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    active_.erase(rid);
  }
  // A call the client did not see the end of: its outcome is not checked.
  void Uncertain(const std::string& rid) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    active_.erase(rid);
    uncertain_.insert(rid);
  }
  std::map<std::string, Held> active() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return active_;
  }
  bool uncertain(const std::string& rid) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return uncertain_.contains(rid);
  }

 private:
  Mutex mu_;
  std::map<std::string, Held> active_ ABSL_GUARDED_BY(mu_);  // by request id
  std::set<std::string> uncertain_ ABSL_GUARDED_BY(mu_);
};

class DaemonLoadTest : public DaemonE2eTest {
 protected:
  // Allocates and releases until a call fails (migd shutting down); keeps at
  // most two allocations (4 clients x 2 x 4 < 14 free 1g slots), so nothing
  // fails for lack of space.
  void RunClient(int c, Ledger* ledger, std::atomic<int>* completed) {
    auto stub = Stub();
    std::vector<std::string> mine;
    for (int i = 0;; ++i) {
      const std::string rid = "c" + std::to_string(c) + "-" + std::to_string(i);
      const std::string owner = "owner-" + rid;
      v1::AllocateResponse resp;
      if (!Allocate(*stub, rid, owner, i % 3 == 0 ? "2g.10gb" : "1g.10gb", &resp).ok()) {
        ledger->Uncertain(rid);
        return;
      }
      ledger->Allocated({rid, owner, resp.instances(0).instance().mig_uuid()});
      mine.push_back(rid);
      ++*completed;
      if (mine.size() <= 1) continue;
      const std::string old = mine.front();
      if (!Release(*stub, old).ok()) {
        ledger->Uncertain(old);  // released or not: unknown
        return;
      }
      ledger->Released(old);
      mine.erase(mine.begin());
      ++*completed;
    }
  }

  // After the restart: every allocation a client was told about is Active
  // with its MIG UUID and owner, nothing else is, and records and CDI specs
  // match the instances one to one.
  void ExpectNothingLost(Ledger& ledger) {
    auto stub = Stub();
    const v1::ListResponse after = List(*stub);
    std::map<std::string, v1::Instance> by_request;
    for (const v1::Instance& i : after.instances()) {
      EXPECT_NE(i.state(), v1::INSTANCE_STATE_ERROR) << i.mig_uuid();
      if (i.state() == v1::INSTANCE_STATE_ACTIVE) by_request[i.request_id()] = i;
    }
    const std::map<std::string, Ledger::Held> active = ledger.active();
    ASSERT_FALSE(active.empty());
    for (const auto& [rid, held] : active) {
      auto it = by_request.find(rid);
      ASSERT_NE(it, by_request.end()) << "allocation " << rid << " lost in the restart";
      EXPECT_EQ(it->second.mig_uuid(), held.mig_uuid) << rid;
      EXPECT_EQ(it->second.owner().opaque_id(), held.owner) << rid;
    }
    for (const auto& [rid, inst] : by_request) {
      EXPECT_TRUE(active.contains(rid) || ledger.uncertain(rid)) << rid;
    }
    std::set<std::string> want_specs;
    for (const v1::Instance& i : after.instances()) want_specs.insert(CdiFile(i.mig_uuid()));
    EXPECT_EQ(JsonFiles(CdiDir()), want_specs);
    EXPECT_EQ(JsonFiles(StateDir()).size(), static_cast<size_t>(after.instances_size()));
  }
};

TEST_F(DaemonLoadTest, SigtermUnderLoadThenRestartLosesNothing) {
  std::unique_ptr<DaemonProcess> migd = Start(Args());
  ASSERT_NE(migd, nullptr);
  Ledger ledger;
  std::atomic<int> completed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] { RunClient(c, &ledger, &completed); });
  }
  ASSERT_TRUE(Eventually([&] { return completed.load() >= 40; })) << migd->Stderr();
  migd->Signal(SIGTERM);
  const DaemonExit exit = migd->WaitForExit();
  for (std::thread& t : clients) t.join();
  ASSERT_EQ(exit.exit_code, 0) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("shutting down"));

  std::unique_ptr<DaemonProcess> again = Start(Args());
  ASSERT_NE(again, nullptr);
  ExpectNothingLost(ledger);
  const DaemonExit second = again->Stop();
  EXPECT_EQ(second.exit_code, 0) << second.err;
  // One NVML session per process: two processes, two inits, two shutdowns.
  EXPECT_EQ(SimCount("nvmlInit_v2", "SUCCESS"), 2u);
  EXPECT_EQ(SimCount("nvmlShutdown", "SUCCESS"), 2u);
}

TEST_F(DaemonE2eTest, NotifiesSystemdWhenReadyAndWhenStopping) {
  // systemd's side of sd_notify: a datagram socket named by NOTIFY_SOCKET.
  const std::string notify = dir_.Join("notify.sock");
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, notify.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval tv{.tv_sec = 60, .tv_usec = 0};  // bounds the wait; not a timing check
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
  auto receive = [&] {
    char buf[512];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  };

  DaemonOptions o;
  o.args = Args();
  o.env = Env();
  o.env["NOTIFY_SOCKET"] = notify;
  o.socket_path = Socket();
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<DaemonProcess> migd,
                            DaemonProcess::Start(o, dir_.path()));
  EXPECT_THAT(receive(), HasSubstr("READY=1"));
  migd->Signal(SIGTERM);
  EXPECT_THAT(receive(), HasSubstr("STOPPING=1"));
  EXPECT_EQ(migd->WaitForExit().exit_code, 0);
  ::close(fd);
}

TEST_F(DaemonE2eTest, SigintStopsCleanly) {
  std::unique_ptr<DaemonProcess> migd = Start(Args());
  ASSERT_NE(migd, nullptr);
  // Without --config, SIGHUP has nothing to read and changes nothing.
  migd->Signal(SIGHUP);
  ASSERT_TRUE(Eventually([&] {
    return migd->Stderr().find("SIGHUP: no --config file; nothing to reload") != std::string::npos;
  })) << migd->Stderr();
  EXPECT_TRUE(migd->Running());
  migd->Signal(SIGINT);
  const DaemonExit exit = migd->WaitForExit();
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("signal=Interrupt"));
}

struct BadConfigCase {
  const char* name;
  const char* yaml;
  const char* message;
};

class DaemonBadConfigTest : public DaemonE2eTest,
                            public ::testing::WithParamInterface<BadConfigCase> {};

TEST_P(DaemonBadConfigTest, ExitsOneWithTheMessage) {
  const std::string path = WriteConfig(GetParam().yaml);
  std::vector<std::string> args = Args();
  args.push_back("--config");
  args.push_back(path);
  const DaemonExit exit = RunToExit(args);
  EXPECT_EQ(exit.exit_code, 1) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("migd: config " + path + ": " + GetParam().message)) << exit.err;
  EXPECT_THAT(exit.err, Not(HasSubstr("migd ready")));
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, DaemonBadConfigTest,
    ::testing::Values(
        BadConfigCase{"UnknownKey", "api:\n  sokcet: /x\n",
                      "unknown key api.sokcet (did you mean api.socket?)"},
        BadConfigCase{"WrongType", "cdi: {enabled: sometimes}\n",
                      "cdi.enabled: expected true or false, got \"sometimes\""},
        BadConfigCase{"BadDuration", "lifecycle:\n  idleTTL: 5x\n",
                      "lifecycle.idleTTL: \"5x\" is not a duration (use e.g. 30s, 10m, 2h)"},
        BadConfigCase{"BadMode", "api: {socketMode: \"0666\"}\n",
                      "api.socketMode: \"0666\" gives other users"},
        BadConfigCase{"BadListen", "metrics: {listen: \"9400\"}\n",
                      "metrics.listen: \"9400\" has no port"},
        BadConfigCase{"OutOfRange", "lifecycle: {maxIdlePerGPU: 1000}\n",
                      "lifecycle.maxIdlePerGPU: 1000 is out of range (0..64)"},
        BadConfigCase{"DuplicateKey", "log: {level: info}\nlog: {level: debug}\n",
                      "duplicate key log (lines 1 and 2)"},
        BadConfigCase{"SyntaxError", "api: {socket: /x\n",
                      "line 2, column 1: YAML syntax error: end of map flow not found"},
        BadConfigCase{"UnknownProfileName", "migProfileAllowlist: [1g.10g]\n",
                      "migProfileAllowlist[0]: unknown MIG profile \"1g.10g\" (did you mean "
                      "1g.10gb?)"},
        BadConfigCase{"BadPlannerMinArrivals", "planner: {minArrivals: 0}\n",
                      "planner.minArrivals: \"0\" is not a number of requests (use a whole "
                      "number from 1 to 1000000, e.g. 50)"},
        BadConfigCase{"UnknownSocketGroup", "api: {socketGroup: no-such-group-4711}\n",
                      "api.socketGroup: no group named \"no-such-group-4711\" on this host"},
        // Known to the catalogue but not offered by this node's A100-40GB:
        // checked at start against the GPUs (Manager::SetPolicy).
        BadConfigCase{"WarmPoolProfileNotOnThisNode", "lifecycle: {warmPool: {7g.80gb: 1}}\n",
                      "lifecycle.warmPool: profile 7g.80gb is not offered by any MIG GPU of "
                      "this node"}),
    [](const ::testing::TestParamInfo<BadConfigCase>& p) { return p.param.name; });

TEST_F(DaemonE2eTest, BadSimulationSettingsExitOne) {
  std::vector<std::string> args = Args();
  args[1] = "";  // --simulate ""
  DaemonExit exit = RunToExit(args);
  EXPECT_EQ(exit.exit_code, 1) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("migd: --simulate needs a GPU list, e.g. --simulate "
                                  "a100-40gb:2,h100-80gb:1"));

  DaemonOptions o;
  o.args = Args();
  o.env = Env();
  o.env["MIGD_SIM_STATE"] = "relative/state.json";
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<DaemonProcess> migd,
                            DaemonProcess::Start(o, dir_.path()));
  exit = migd->WaitForExit();
  EXPECT_EQ(exit.exit_code, 1) << exit.err;
  EXPECT_THAT(exit.err,
              HasSubstr("migd: MIGD_SIM_STATE must be an absolute path, got relative/state.json"));
}

TEST_F(DaemonE2eTest, BadOverrideFlagIsReportedLikeAConfigMistake) {
  std::vector<std::string> args = Args();
  args[9] = "nowhere";  // --metrics-listen
  const DaemonExit exit = RunToExit(args);
  EXPECT_EQ(exit.exit_code, 1) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("migd: config command line: metrics.listen: \"nowhere\" has "
                                  "no port"));
}

TEST_F(DaemonE2eTest, MissingConfigFileExitsOne) {
  std::vector<std::string> args = Args();
  args.push_back("--config");
  args.push_back(dir_.Join("absent.yaml"));
  const DaemonExit exit = RunToExit(args);
  EXPECT_EQ(exit.exit_code, 1) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("reading config file " + dir_.Join("absent.yaml")));
}

TEST_F(DaemonE2eTest, BadFlagExitsOne) {
  std::vector<std::string> args = Args();
  args.push_back("--no-such-flag");
  const DaemonExit exit = RunToExit(args);
  EXPECT_EQ(exit.exit_code, 1) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("--no-such-flag"));
}

TEST_F(DaemonE2eTest, SecondMigdOnTheSameSocketOrStateDirIsRefused) {
  std::unique_ptr<DaemonProcess> first = Start(Args());
  ASSERT_NE(first, nullptr);

  std::vector<std::string> same_socket = Args();
  same_socket[5] = dir_.Join("state2");  // --state-dir
  DaemonExit exit = RunToExit(same_socket);
  EXPECT_EQ(exit.exit_code, 4) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("another migd is serving on " + Socket()));

  std::vector<std::string> same_state = Args();
  same_state[3] = dir_.Join("api2.socket");  // --socket
  exit = RunToExit(same_state);
  EXPECT_EQ(exit.exit_code, 5) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("another migd is using stateDir " + StateDir()));

  // The first one is unharmed.
  EXPECT_TRUE(first->Running());
  EXPECT_TRUE(migd::testing::SocketAccepts(Socket()));
  auto stub = Stub();
  v1::AllocateResponse resp;
  EXPECT_TRUE(Allocate(*stub, "r1", "job", "1g.10gb", &resp).ok());
  EXPECT_EQ(first->Stop().exit_code, 0);
}

TEST_F(DaemonE2eTest, StaleSocketIsRemoved) {
  // A socket file nobody listens on, as a killed migd leaves behind.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, Socket().c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  ASSERT_TRUE(std::filesystem::exists(Socket()));
  ASSERT_FALSE(migd::testing::SocketAccepts(Socket()));

  std::unique_ptr<DaemonProcess> migd = Start(Args());
  ASSERT_NE(migd, nullptr);
  auto stub = Stub();
  EXPECT_EQ(List(*stub).gpus_size(), 2);
  EXPECT_EQ(migd->Stop().exit_code, 0);
}

TEST_F(DaemonE2eTest, NoNvmlLibraryExitsTwoAndSaysWhatToDo) {
  const std::string missing = dir_.Join("nowhere/libnvidia-ml.so.1");
  const DaemonExit exit =
      RunToExit({"--nvml-library", missing, "--socket", Socket(), "--state-dir", StateDir(),
                 "--cdi-spec-dir", CdiDir(), "--metrics-listen", ""});
  EXPECT_EQ(exit.exit_code, 2) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("migd: NVML unavailable: " + missing + " not found"));
  EXPECT_THAT(exit.err, HasSubstr("install the NVIDIA driver"));
  EXPECT_THAT(exit.err, HasSubstr("--simulate"));
  // Never a silent fallback to the simulator.
  EXPECT_FALSE(std::filesystem::exists(SimState()));
}

TEST_F(DaemonE2eTest, StateDirWritableByOthersIsRefused) {
  std::filesystem::create_directories(StateDir());
  ASSERT_EQ(::chmod(StateDir().c_str(), 0777), 0);
  const DaemonExit exit = RunToExit(Args());
  EXPECT_EQ(exit.exit_code, 5) << exit.err;
  EXPECT_THAT(exit.err,
              HasSubstr("stateDir " + StateDir() + " is writable by group or others (mode 0777)"));
  EXPECT_THAT(exit.err, HasSubstr("chmod 0700"));
}

TEST_F(DaemonE2eTest, MetricsAddressInUseExitsFour) {
  std::unique_ptr<DaemonProcess> first = Start(Args());
  ASSERT_NE(first, nullptr);
  // The port the first migd bound, from its ready line.
  const std::string err = first->Stderr();
  const size_t at = err.find("metrics=127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << err;
  const std::string port = err.substr(at + 18, err.find(' ', at) - at - 18);

  std::vector<std::string> args = Args();
  args[3] = dir_.Join("api2.socket");
  args[5] = dir_.Join("state2");
  args[9] = "127.0.0.1:" + port;
  const DaemonExit exit = RunToExit(args);
  EXPECT_EQ(exit.exit_code, 4) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("cannot serve metrics on 127.0.0.1:" + port));
  EXPECT_EQ(first->Stop().exit_code, 0);
}

TEST_F(DaemonE2eTest, RecordThatDoesNotMatchTheGpuFailsClosedWithExitThree) {
  {
    std::unique_ptr<DaemonProcess> migd = Start(Args());
    ASSERT_NE(migd, nullptr);
    auto stub = Stub();
    v1::AllocateResponse resp;
    ASSERT_TRUE(Allocate(*stub, "r1", "job", "1g.10gb", &resp).ok());
    ASSERT_EQ(migd->Stop().exit_code, 0);
  }
  const std::set<std::string> records = JsonFiles(StateDir());
  ASSERT_EQ(records.size(), 1u);
  const std::string record = StateDir() + "/" + *records.begin();
  nlohmann::json doc = nlohmann::json::parse(ReadFileToString(record).value());
  doc["gpuInstanceID"] = doc["gpuInstanceID"].get<int>() + 1;  // not what the GPU has
  WriteFileOrDie(record, doc.dump(2) + "\n");
  const std::string sim_before = ReadFileToString(SimState()).value();

  const DaemonExit exit = RunToExit(Args());
  EXPECT_EQ(exit.exit_code, 3) << exit.err;
  EXPECT_THAT(exit.err,
              HasSubstr("migd: recovery failed closed (nothing on the GPUs was changed)"));
  // Nothing on the (simulated) GPUs changed: same instances, same serial.
  const nlohmann::json before = nlohmann::json::parse(sim_before);
  const nlohmann::json after = nlohmann::json::parse(ReadFileToString(SimState()).value());
  EXPECT_EQ(before["gpus"], after["gpus"]);
  EXPECT_EQ(before["serial"], after["serial"]);
}

TEST_F(DaemonE2eTest, UnusableCdiSpecDirExitsSix) {
  WriteFileOrDie(dir_.Join("file"), "not a directory\n");
  std::vector<std::string> args = Args();
  args[7] = dir_.Join("file/cdi");  // --cdi-spec-dir
  const DaemonExit exit = RunToExit(args);
  EXPECT_EQ(exit.exit_code, 6) << exit.err;
  EXPECT_THAT(exit.err, HasSubstr("migd: cannot create cdi.specDir " + dir_.Join("file/cdi")));
  EXPECT_EQ(SimCount("nvmlShutdown", "SUCCESS"), 1u) << "NVML is closed on the way out";
}

TEST_F(DaemonE2eTest, SimulateWithoutSimEnvUsesATemporaryMachineAndRemovesIt) {
  // Only --simulate: no MIGD_SIM_* variables, root-only default paths.
  const std::string tmp = dir_.Join("tmp");
  std::filesystem::create_directories(tmp);
  DaemonOptions o;
  o.args = {"--simulate", "a30-24gb:1", "--metrics-listen", ""};
  o.env = Env();
  o.env["MIGD_SIM_STATE"] = "";
  o.env["MIGD_SIM_PROC_ROOT"] = "";
  o.env["TMPDIR"] = tmp;
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<DaemonProcess> migd,
                            DaemonProcess::Start(o, dir_.path()));
  std::string socket;
  ASSERT_TRUE(Eventually([&] {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(tmp, ec)) {
      const std::string candidate = e.path().string() + "/api.socket";
      if (migd->Stderr().find("migd ready") != std::string::npos &&
          migd::testing::SocketAccepts(candidate)) {
        socket = candidate;
        return true;
      }
    }
    return false;
  })) << migd->Stderr();
  EXPECT_THAT(socket, HasSubstr(tmp + "/migd-sim-"));
  EXPECT_THAT(migd->Stderr(), HasSubstr("socket=" + socket));
  const std::string sim_dir = socket.substr(0, socket.rfind('/'));
  EXPECT_TRUE(std::filesystem::exists(sim_dir + "/state.json"));
  EXPECT_TRUE(std::filesystem::is_directory(sim_dir + "/state"));
  EXPECT_TRUE(std::filesystem::is_directory(sim_dir + "/proc"));

  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto stub = v1::MigManager::NewStub(channel);
  v1::AllocateRequest req;
  req.set_request_id("r1");
  req.mutable_owner()->set_opaque_id("job");
  req.add_instances()->set_profile("1g.6gb");
  v1::AllocateResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  const grpc::Status s = stub->Allocate(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectMigIdentities(resp);
  EXPECT_TRUE(std::filesystem::exists(sim_dir + "/cdi/" +
                                      CdiFile(resp.instances(0).instance().mig_uuid())));

  const DaemonExit exit = migd->Stop();
  EXPECT_EQ(exit.exit_code, 0) << exit.err;
  EXPECT_FALSE(std::filesystem::exists(sim_dir)) << "the temporary machine is removed at exit";
}

TEST_F(DaemonE2eTest, SighupAppliesIdleTtlAndReportsStateDirAsNeedingRestart) {
  auto config = [&](const std::string& ttl, const std::string& state_dir) {
    return "stateDir: " + state_dir + "\napi: {socket: " + Socket() +
           "}\ncdi: {specDir: " + CdiDir() +
           "}\nmetrics: {listen: \"\"}\nlifecycle:\n  idleTTL: " + ttl +
           "\n  reconcileInterval: 1s\n";
  };
  const std::string path = WriteConfig(config("0", StateDir()));
  std::unique_ptr<DaemonProcess> migd =
      Start({"--simulate", "a100-40gb:1", "--config", path, "--log-level", "debug"});
  ASSERT_NE(migd, nullptr);
  auto stub = Stub();
  v1::AllocateResponse resp;
  ASSERT_TRUE(Allocate(*stub, "r1", "job", "1g.10gb", &resp).ok());
  ASSERT_TRUE(Release(*stub, "r1").ok());

  // TTL off: the Idle instance stays across reconciler passes.
  auto reconcile_runs = [&] {
    v1::GetStatusResponse st;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    EXPECT_TRUE(stub->GetStatus(&ctx, v1::GetStatusRequest(), &st).ok());
    return st.counters().reconcile_runs();
  };
  const uint64_t runs = reconcile_runs();
  ASSERT_TRUE(Eventually([&] { return reconcile_runs() >= runs + 2; }));
  EXPECT_EQ(List(*stub).instances_size(), 1);

  WriteConfig(config("1s", StateDir()));
  migd->Signal(SIGHUP);
  ASSERT_TRUE(Eventually([&] {
    return migd->Stderr().find("applied=lifecycle.idleTTL needs_restart=-") != std::string::npos;
  })) << migd->Stderr();
  // Applied: the reconciler reclaims the Idle instance once its TTL passed.
  EXPECT_TRUE(Eventually([&] { return List(*stub).instances_size() == 0; })) << migd->Stderr();

  WriteConfig(config("1s", dir_.Join("elsewhere")));
  migd->Signal(SIGHUP);
  ASSERT_TRUE(Eventually([&] {
    return migd->Stderr().find("applied=- needs_restart=stateDir") != std::string::npos;
  })) << migd->Stderr();
  EXPECT_THAT(migd->Stderr(), HasSubstr("restart migd to apply them keys=stateDir"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("elsewhere")));

  // A profile this node does not offer is refused as a whole: nothing applied.
  WriteConfig(config("1s", StateDir()) + "  warmPool: {7g.80gb: 1}\n");
  migd->Signal(SIGHUP);
  ASSERT_TRUE(Eventually([&] {
    return migd->Stderr().find(
               "config reload rejected; keeping the running configuration "
               "error=\"lifecycle.warmPool: profile 7g.80gb is not offered") != std::string::npos;
  })) << migd->Stderr();

  // A broken file changes nothing and the daemon keeps serving.
  WriteConfig("lifecycle: {idleTTL: 5x}\n");
  migd->Signal(SIGHUP);
  ASSERT_TRUE(Eventually([&] {
    return migd->Stderr().find("config reload failed") != std::string::npos;
  })) << migd->Stderr();
  EXPECT_EQ(List(*stub).gpus_size(), 1);
  EXPECT_EQ(migd->Stop().exit_code, 0);
}

}  // namespace
}  // namespace migd
