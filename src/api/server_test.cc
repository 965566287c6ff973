// api/server: the unix socket's life (mode, group, stale and live sockets,
// non-socket files), the request size limit and Shutdown's drain.
#include "api/server.h"

#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "api/api_test_util.h"
#include "testing/status_matchers.h"

namespace migd::api {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

class ServerTest : public testing::ApiTest {
 protected:
  StatusOr<std::unique_ptr<ApiServer>> StartAnother(ApiServerOptions o = {}) {
    if (o.socket_path.empty()) o.socket_path = socket_path();
    return ApiServer::Start(o, service_.get());
  }
  bool Exists(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0;
  }
  grpc::Status Ping() {
    v1::GetStatusResponse r;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return NewStub()->GetStatus(&ctx, v1::GetStatusRequest(), &r);
  }
};

TEST_F(ServerTest, SocketIsMode0600InA0755DirectoryItCreated) {
  Boot();
  struct stat st {};
  ASSERT_EQ(::lstat(socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(dir_->Join("run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  EXPECT_TRUE(Ping().ok());
  EXPECT_EQ(server_->socket_path(), socket_path());
  EXPECT_NE(server_->grpc_server(), nullptr);
}

TEST_F(ServerTest, ModeAndGroupApplied) {
  Boot();
  server_->Shutdown(std::chrono::milliseconds(0));
  struct group* g = ::getgrgid(::getgid());
  ASSERT_NE(g, nullptr);
  ApiServerOptions o;
  o.mode = 0660;
  o.group = std::string(g->gr_name);
  MIGD_ASSERT_OK_AND_ASSIGN(auto s, StartAnother(o));
  struct stat st {};
  ASSERT_EQ(::lstat(socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, ::getgid());
  EXPECT_TRUE(Ping().ok());
}

TEST_F(ServerTest, NumericGidApplied) {
  Boot();
  server_->Shutdown(std::chrono::milliseconds(0));
  ApiServerOptions o;
  o.mode = 0660;
  o.group = "4242";  // need not have a name on this host
  MIGD_ASSERT_OK_AND_ASSIGN(auto s, StartAnother(o));
  struct stat st {};
  ASSERT_EQ(::lstat(socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 4242u);
  s->Shutdown(std::chrono::milliseconds(0));
  o.group = "99999999999";
  EXPECT_THAT(StartAnother(o), StatusIs(StatusCode::kInvalidArgument,
                                        "api.socketGroup: gid 99999999999 is out of range"));
  o.group = "";
  EXPECT_THAT(StartAnother(o),
              StatusIs(StatusCode::kInvalidArgument, "api.socketGroup: empty group name"));
}

TEST_F(ServerTest, StartRestoresTheUmask) {
  Boot();
  server_->Shutdown(std::chrono::milliseconds(0));
  const mode_t before = ::umask(0022);
  MIGD_ASSERT_OK_AND_ASSIGN(auto s, StartAnother());
  EXPECT_EQ(::umask(before), 0022u);
}

TEST_F(ServerTest, UnknownGroupRefusedBeforeBinding) {
  Boot();
  server_->Shutdown(std::chrono::milliseconds(0));
  ApiServerOptions o;
  o.group = "migd-no-such-group-xyz";
  EXPECT_THAT(StartAnother(o),
              StatusIs(StatusCode::kFailedPrecondition,
                       "api.socketGroup: group 'migd-no-such-group-xyz' does not exist; create it "
                       "(groupadd migd-no-such-group-xyz) or unset api.socketGroup"));
  EXPECT_FALSE(Exists(socket_path()));
}

TEST_F(ServerTest, LiveSocketRefused) {
  Boot();
  EXPECT_THAT(StartAnother(),
              StatusIs(StatusCode::kFailedPrecondition,
                       "another migd is serving on " + socket_path() + "; stop it first"));
  EXPECT_TRUE(Ping().ok());  // the first server is untouched
}

TEST_F(ServerTest, StaleSocketRemoved) {
  Boot();
  server_->Shutdown(std::chrono::milliseconds(0));
  ASSERT_FALSE(Exists(socket_path()));
  // A socket file nobody listens on: what a killed migd leaves behind.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path().c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  ASSERT_TRUE(Exists(socket_path()));
  EXPECT_THAT(ProbeUnixSocket(socket_path()),
              StatusIs(StatusCode::kUnavailable, HasSubstr("refused")));
  MIGD_ASSERT_OK_AND_ASSIGN(auto s, StartAnother());
  EXPECT_TRUE(Ping().ok());
  s->Shutdown(std::chrono::milliseconds(0));
}

TEST_F(ServerTest, NonSocketFileRefusedAndKept) {
  Boot();
  server_->Shutdown(std::chrono::milliseconds(0));
  migd::testing::WriteFileOrDie(socket_path(), "not a socket");
  EXPECT_THAT(
      StartAnother(),
      StatusIs(StatusCode::kFailedPrecondition,
               socket_path() +
                   " exists and is not a socket; remove it or set api.socket to another path"));
  struct stat st {};
  ASSERT_EQ(::lstat(socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST_F(ServerTest, BadPathsRefused) {
  Boot();
  server_->Shutdown(std::chrono::milliseconds(0));
  ApiServerOptions o;
  o.socket_path = "relative/api.socket";
  EXPECT_THAT(StartAnother(o),
              StatusIs(StatusCode::kInvalidArgument,
                       "api.socket: 'relative/api.socket' is not an absolute path"));
  o.socket_path = "/" + std::string(120, 'x');
  EXPECT_THAT(StartAnother(o), StatusIs(StatusCode::kInvalidArgument,
                                        HasSubstr("bytes, at most 107 (unix socket limit)")));
  migd::testing::WriteFileOrDie(dir_->Join("file"), "x");
  o.socket_path = dir_->Join("file/api.socket");
  EXPECT_THAT(StartAnother(o), StatusIs(StatusCode::kFailedPrecondition,
                                        HasSubstr("is not a directory; fix api.socket")));
  o.socket_path = dir_->Join("file/sub/api.socket");
  EXPECT_THAT(StartAnother(o),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("cannot create the socket directory " + dir_->Join("file/sub"))));
  // A directory where nothing can be bound (procfs refuses socket files).
  o.socket_path = "/proc/migd-api-test.socket";
  EXPECT_THAT(StartAnother(o),
              StatusIs(StatusCode::kUnavailable,
                       HasSubstr("cannot listen on unix:/proc/migd-api-test.socket")));
  o.socket_path = "";
  EXPECT_THAT(ApiServer::Start(o, service_.get()),
              StatusIs(StatusCode::kInvalidArgument, "api.socket: required"));
  o.socket_path = socket_path();
  o.max_receive_bytes = 0;
  EXPECT_THAT(StartAnother(o),
              StatusIs(StatusCode::kInvalidArgument, "max_receive_bytes must be positive"));
  o.max_receive_bytes = 64 * 1024;
  o.mode = 01777;
  EXPECT_THAT(StartAnother(o),
              StatusIs(StatusCode::kInvalidArgument, "api.socketMode: 1777 has bits outside 0777"));
}

TEST_F(ServerTest, ShutdownRemovesSocketAndIsIdempotent) {
  Boot();
  server_->Shutdown(std::chrono::milliseconds(1000));
  EXPECT_FALSE(Exists(socket_path()));
  server_->Shutdown(std::chrono::milliseconds(1000));
  grpc::Status s = Ping();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(ServerTest, ShutdownKeepsASuccessorsSocket) {
  Boot();
  // Another process replaced the file (e.g. an operator removed ours and a
  // new migd bound the path): ours must not delete it.
  ASSERT_EQ(::unlink(socket_path().c_str()), 0);
  migd::testing::WriteFileOrDie(socket_path(), "successor");
  server_->Shutdown(std::chrono::milliseconds(0));
  EXPECT_TRUE(Exists(socket_path()));
}

TEST_F(ServerTest, RequestOver64KiBRejected) {
  Boot();
  v1::AllocateRequest req = AllocReq("big", "1g.5gb");
  req.mutable_owner()->set_opaque_id(std::string(70 * 1024, 'x'));
  v1::AllocateResponse resp;
  grpc::Status s = Allocate(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("65536"));
  EXPECT_TRUE(mgr_->List().instances.empty());
  // Just under the limit passes the transport and fails validation.
  req.mutable_owner()->set_opaque_id(std::string(60 * 1024, 'x'));
  s = Allocate(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "owner.opaque_id: 61440 bytes, at most 253");
}

TEST_F(ServerTest, InFlightCallCompletesDuringShutdown) {
  Boot();
  gated_->Close();
  grpc::Status alloc_status;
  v1::AllocateResponse alloc;
  std::thread caller([&] { alloc_status = Allocate(AllocReq("slow", "1g.5gb"), &alloc); });
  ASSERT_TRUE(gated_->WaitHeld());
  std::thread stopper([&] { server_->Shutdown(std::chrono::seconds(60)); });
  // Wait until the server stopped accepting: new connections are refused.
  bool refused = false;
  for (int i = 0; i < 3000 && !refused; ++i) {
    refused = !ProbeUnixSocket(socket_path()).ok();
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(refused) << "the server kept accepting connections during Shutdown";
  gated_->Open();
  caller.join();
  stopper.join();
  ASSERT_TRUE(alloc_status.ok()) << alloc_status.error_message();
  ASSERT_EQ(alloc.instances_size(), 1);
  EXPECT_EQ(alloc.instances(0).instance().state(), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_FALSE(Exists(socket_path()));
}

}  // namespace
}  // namespace migd::api
