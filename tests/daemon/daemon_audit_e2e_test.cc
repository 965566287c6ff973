// End to end: migd names the caller of every state-changing RPC in its log
// (SO_PEERCRED, api/peer.h), and its accept loop survives running out of file
// descriptors. The real migd binary on simulated GPUs.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "migd/v1/migd.grpc.pb.h"
#include "testing/daemon_process.h"
#include "testing/eventually.h"
#include "testing/status_matchers.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

using ::migd::testing::DaemonOptions;
using ::migd::testing::DaemonProcess;
using ::migd::testing::Eventually;
using ::migd::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kRpcDeadline = std::chrono::seconds(30);

// Our own command name as the kernel reports it (what migd logs as peer_comm).
std::string SelfComm() {
  std::ifstream in("/proc/self/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}

// A unix-socket connection that never speaks (a client that holds a
// descriptor of migd's).
int ConnectRaw(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

class DaemonAuditE2eTest : public ::testing::Test {
 protected:
  std::string Socket() const { return dir_.Join("run/api.socket"); }

  std::vector<std::string> Args() const {
    return {"--simulate",       "a100-40gb:1",  "--socket",       Socket(),
            "--state-dir",      dir_.Join("state"), "--cdi-spec-dir", dir_.Join("cdi"),
            "--metrics-listen", "127.0.0.1:0",  "--log-level",    "info"};
  }

  std::unique_ptr<DaemonProcess> Start(std::vector<std::string> args, std::string binary = "") {
    DaemonOptions o;
    o.binary = std::move(binary);
    o.args = std::move(args);
    o.env = migd::testing::SimulatedMachineEnv(dir_.Join("sim"));
    o.socket_path = Socket();
    StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }

  std::unique_ptr<v1::MigManager::Stub> Stub() {
    return v1::MigManager::NewStub(
        grpc::CreateChannel("unix:" + Socket(), grpc::InsecureChannelCredentials()));
  }

  static void SetDeadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
  }

  TempDir dir_;
};

TEST_F(DaemonAuditE2eTest, EachStateChangingRpcNamesItsCaller) {
  auto daemon = Start(Args());
  ASSERT_NE(daemon, nullptr);
  auto stub = Stub();
  {
    v1::AllocateRequest req;
    req.set_request_id("audit-1");
    req.mutable_owner()->set_opaque_id("pod-a");
    req.add_instances()->set_profile("1g.5gb");
    v1::AllocateResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    ASSERT_TRUE(stub->Allocate(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.instances_size(), 1);
    EXPECT_THAT(resp.instances(0).instance().mig_uuid(), ::testing::StartsWith("MIG-"));
    EXPECT_NE(resp.instances(0).instance().mig_uuid(), resp.instances(0).instance().gpu_uuid());
  }
  {
    v1::ListResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    ASSERT_TRUE(stub->List(&ctx, v1::ListRequest(), &resp).ok());
  }
  {
    v1::ReleaseRequest req;
    req.set_request_id("no-such-request");
    v1::ReleaseResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    ASSERT_EQ(stub->Release(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  const std::string who = " peer_pid=" + std::to_string(::getpid()) +
                          " peer_uid=" + std::to_string(::getuid()) +
                          " peer_gid=" + std::to_string(::getgid()) + " peer_comm=" + SelfComm();
  ASSERT_TRUE(Eventually([&] {
    return daemon->Stderr().find("rpc failed rpc=Release code=NOT_FOUND") != std::string::npos;
  })) << daemon->Stderr();
  const std::string log = daemon->Stderr();
  EXPECT_THAT(log, HasSubstr("rpc rpc=Allocate code=OK request=audit-1" + who)) << log;
  EXPECT_THAT(log, HasSubstr("rpc failed rpc=Release code=NOT_FOUND request=no-such-request" +
                             who + " message="))
      << log;
  // Reads are not audited at info.
  EXPECT_THAT(log, Not(HasSubstr("rpc=List"))) << log;
  stub.reset();  // an idle C++ channel slows gRPC's graceful shutdown
  EXPECT_EQ(daemon->Stop().exit_code, 0);
}

// Another user, allowed in through api.socketGroup, is named by its own uid
// and gid; a user outside the group is refused by the kernel.
TEST_F(DaemonAuditE2eTest, CallerOfAnotherUserIsNamedByItsUid) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run migctl as another user";
  // The socket's directories must be traversable by the other user.
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  std::vector<std::string> args = Args();
  const std::string config = dir_.Join("migd.yaml");
  {
    std::ofstream out(config);
    out << "api: {socketMode: \"0660\", socketGroup: \"65534\"}\n";
  }
  ASSERT_EQ(::chmod(config.c_str(), 0644), 0);
  args.insert(args.end(), {"--config", config});
  auto daemon = Start(args);
  ASSERT_NE(daemon, nullptr);

  const migd::testing::CommandResult member = migd::testing::RunCommand(
      {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", MIGD_MIGCTL,
       "--socket", Socket(), "reclaim"},
      dir_.path());
  EXPECT_EQ(member.exit_code, 0) << member.out << member.err;
  ASSERT_TRUE(Eventually([&] {
    return daemon->Stderr().find("rpc rpc=Reclaim code=OK") != std::string::npos;
  })) << daemon->Stderr();
  EXPECT_THAT(daemon->Stderr(),
              ::testing::ContainsRegex("rpc rpc=Reclaim code=OK peer_pid=[1-9][0-9]* "
                                       "peer_uid=65534 peer_gid=65534 peer_comm=migctl"))
      << daemon->Stderr();

  const migd::testing::CommandResult outsider = migd::testing::RunCommand(
      {"/usr/bin/setpriv", "--reuid=65533", "--regid=65533", "--clear-groups", "--", MIGD_MIGCTL,
       "--socket", Socket(), "reclaim"},
      dir_.path());
  EXPECT_EQ(outsider.exit_code, 2) << outsider.out << outsider.err;
  EXPECT_THAT(outsider.err, HasSubstr("ermission denied")) << outsider.err;
  EXPECT_THAT(daemon->Stderr(), Not(HasSubstr("peer_uid=65533")));
  EXPECT_EQ(daemon->Stop().exit_code, 0);
}

// Out of descriptors, the accept loop says so once, keeps migd alive, and
// serves again as soon as clients let go of their connections.
TEST_F(DaemonAuditE2eTest, AcceptLoopSurvivesRunningOutOfDescriptors) {
  std::vector<std::string> args = {"--nofile=64:64", "--", migd::testing::MigdBinaryPath()};
  for (const std::string& a : Args()) args.push_back(a);
  auto daemon = Start(args, "/usr/bin/prlimit");
  ASSERT_NE(daemon, nullptr);
  constexpr char kWarning[] = "API cannot accept connections: out of file descriptors";
  std::vector<int> held;
  // Each connection costs migd one descriptor; 64 cannot all be held.
  for (int i = 0; i < 80; ++i) {
    const int fd = ConnectRaw(Socket());
    if (fd >= 0) held.push_back(fd);
  }
  ASSERT_TRUE(Eventually([&] { return daemon->Stderr().find(kWarning) != std::string::npos; }))
      << daemon->Stderr();
  EXPECT_TRUE(daemon->Running());
  for (int fd : held) ::close(fd);
  auto stub = Stub();
  EXPECT_TRUE(Eventually([&] {
    v1::GetStatusResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return stub->GetStatus(&ctx, v1::GetStatusRequest(), &resp).ok();
  })) << daemon->Stderr();
  stub.reset();
  const std::string log = daemon->Stderr();
  // Said once per shortage, not once per retry.
  size_t count = 0;
  for (size_t pos = log.find(kWarning); pos != std::string::npos; pos = log.find(kWarning, pos + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << log;
  EXPECT_EQ(daemon->Stop().exit_code, 0) << daemon->Stderr();
}

}  // namespace
}  // namespace migd
