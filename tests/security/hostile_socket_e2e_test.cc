// Hostile input on the API socket, against the real migd on simulated GPUs
//: random bytes, an HTTP/1.1 request, an
// HTTP/2 preface followed by garbage frames, frame headers announcing huge
// lengths, garbage protobuf in well-formed calls, unknown methods, a 10 MiB
// gRPC message (the limit is 64 KiB), 200 half-open
// connections, 1000 connect-and-close cycles. After each: the same migd
// process is still running, a normal gRPC call and migctl work, and at the
// end it stops cleanly on SIGTERM with no crash in its log.
//
// Only the socket path is used, never the server's internals, so the test
// holds for any accept loop behind it. Nothing is timed: where the test
// expects the server to drop a connection it waits for EOF with a generous
// bound (a hang fails, a slow host does not).
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "migd/v1/migd.grpc.pb.h"
#include "testing/daemon_process.h"
#include "testing/eventually.h"
#include "testing/status_matchers.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

using ::migd::testing::DaemonExit;
using ::migd::testing::DaemonOptions;
using ::migd::testing::DaemonProcess;
using ::migd::testing::Eventually;
using ::migd::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kRpcDeadline = std::chrono::seconds(30);
// A bound on waiting for the server to drop a connection: generous, because
// the build hosts are shared; reaching it means the server kept a hostile
// connection open, which is the failure.
constexpr int kCloseWaitMs = 60'000;
constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// An HTTP/2 frame header (RFC 9113 §4.1) followed by `payload`.
std::string Frame(uint32_t length, uint8_t type, uint8_t flags, uint32_t stream,
                  const std::string& payload = "") {
  std::string f;
  f.push_back(static_cast<char>((length >> 16) & 0xff));
  f.push_back(static_cast<char>((length >> 8) & 0xff));
  f.push_back(static_cast<char>(length & 0xff));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  f.push_back(static_cast<char>((stream >> 24) & 0x7f));
  f.push_back(static_cast<char>((stream >> 16) & 0xff));
  f.push_back(static_cast<char>((stream >> 8) & 0xff));
  f.push_back(static_cast<char>(stream & 0xff));
  return f + payload;
}

std::string RandomBytes(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(byte(rng));
  return s;
}

// Open file descriptors of process `pid` (-1 if /proc cannot be read).
int FdCount(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return ec ? -1 : n;
}

class HostileSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonOptions o;
    o.args = {"--simulate",       "a100-40gb:1", "--socket",       Socket(),
              "--state-dir",      dir_.Join("state"), "--cdi-spec-dir", dir_.Join("cdi"),
              "--metrics-listen", "127.0.0.1:0", "--log-level",   "info"};
    o.env = migd::testing::SimulatedMachineEnv(dir_.Join("sim"));
    o.socket_path = Socket();
    MIGD_ASSERT_OK_AND_ASSIGN(daemon_, DaemonProcess::Start(o, dir_.path()));
    pid_ = daemon_->pid();
    stub_ = v1::MigManager::NewStub(
        grpc::CreateChannel("unix:" + Socket(), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (daemon_ == nullptr) return;
    const DaemonExit exit = daemon_->Stop();
    EXPECT_EQ(exit.exit_code, 0) << exit.err;
    ExpectNoCrashIn(exit.err);
  }

  std::string Socket() const { return dir_.Join("api.socket"); }

  static void ExpectNoCrashIn(const std::string& log) {
    for (const char* sign : {"terminate called", "Segmentation fault", "AddressSanitizer",
                             "runtime error:", "Assertion", " critical "}) {
      EXPECT_THAT(log, Not(HasSubstr(sign))) << log;
    }
  }

  // A connected, blocking unix socket; -1 (with a test failure) otherwise.
  int Connect() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      ADD_FAILURE() << "socket: " << std::strerror(errno);
      return -1;
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = Socket();
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    int rc;
    do {
      rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      ADD_FAILURE() << "connect " << path << ": " << std::strerror(errno);
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Writes what the peer accepts; a peer that closes early (EPIPE,
  // ECONNRESET) is fine: refusing is what it should do.
  static void SendAll(int fd, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        EXPECT_TRUE(errno == EPIPE || errno == ECONNRESET) << std::strerror(errno);
        return;
      }
      off += static_cast<size_t>(n);
    }
  }

  // Reads and discards until the server closes the connection (EOF or
  // reset). False if it is still open after kCloseWaitMs.
  static bool ServerCloses(int fd) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kCloseWaitMs);
    char buf[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
      const int r = ::poll(&p, 1, 1000);
      if (r < 0 && errno != EINTR) return false;
      if (r <= 0) continue;
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n < 0 && errno == ECONNRESET) return true;
      if (n < 0 && errno != EINTR && errno != EAGAIN) return false;
    }
    return false;
  }

  // Sends `data` on a fresh connection and expects the server to close it.
  void SendAndExpectClosed(const std::string& what, const std::string& data) {
    SCOPED_TRACE(what);
    const int fd = Connect();
    ASSERT_GE(fd, 0);
    SendAll(fd, data);
    EXPECT_TRUE(ServerCloses(fd)) << what << ": migd kept the connection open";
    ::close(fd);
  }

  // The same migd is running and answers a normal call.
  void ExpectHealthy(const std::string& after) {
    SCOPED_TRACE("after " + after);
    ASSERT_TRUE(daemon_->Running()) << "migd died after " << after << ":\n" << daemon_->Stderr();
    EXPECT_EQ(daemon_->pid(), pid_);
    v1::ListResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
    const grpc::Status s = stub_->List(&ctx, v1::ListRequest(), &resp);
    EXPECT_TRUE(s.ok()) << after << ": List failed: " << s.error_message();
    ExpectNoCrashIn(daemon_->Stderr());
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  pid_t pid_ = -1;
  std::unique_ptr<v1::MigManager::Stub> stub_;
};

TEST_F(HostileSocketTest, RandomBytesAreRefused) {
  ExpectHealthy("start");
  const uint32_t seed = std::random_device()();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (size_t size : {size_t{1}, size_t{24}, size_t{1000}, size_t{65536}, size_t{1} << 20}) {
    SendAndExpectClosed(std::to_string(size) + " random bytes", RandomBytes(rng, size));
    ExpectHealthy(std::to_string(size) + " random bytes");
  }
  // Bytes that start like the preface and then go wrong.
  SendAndExpectClosed("a broken preface", std::string(kPreface, 10) + RandomBytes(rng, 100));
  ExpectHealthy("a broken preface");
}

TEST_F(HostileSocketTest, Http11RequestsAreRefused) {
  SendAndExpectClosed("GET", "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
  ExpectHealthy("an HTTP/1.1 GET");
  SendAndExpectClosed("POST to a gRPC method over HTTP/1.1",
                      std::string("POST /migd.v1.MigManager/List HTTP/1.1\r\nHost: localhost\r\n"
                                  "Content-Type: application/grpc\r\nContent-Length: 5\r\n\r\n") +
                          std::string(5, '\0'));
  ExpectHealthy("an HTTP/1.1 POST");
  SendAndExpectClosed("h2c upgrade",
                      "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                      "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n");
  ExpectHealthy("an h2c upgrade");
}

TEST_F(HostileSocketTest, PrefaceFollowedByGarbageFramesIsRefused) {
  const uint32_t seed = std::random_device()();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> any(0, UINT32_MAX);
  for (int round = 0; round < 20; ++round) {
    std::string data = std::string(kPreface) + Frame(0, 0x4, 0, 0);  // empty SETTINGS
    // Frames of random types, flags and streams with random payloads; then
    // a frame no server may accept (SETTINGS on a stream, RFC 9113 §6.5),
    // so the connection must end even if every random frame was benign.
    for (int i = 0; i < 16; ++i) {
      const uint32_t len = any(rng) % 64;
      data += Frame(len, static_cast<uint8_t>(any(rng)), static_cast<uint8_t>(any(rng)), any(rng),
                    RandomBytes(rng, len));
    }
    data += Frame(0, 0x4, 0, 1);
    SendAndExpectClosed("garbage frames, round " + std::to_string(round), data);
  }
  ExpectHealthy("garbage frames");
}

TEST_F(HostileSocketTest, FrameHeadersAnnouncingHugeLengthsAreRefused) {
  // 2^24-1 is the largest length a frame header can announce; the server's
  // SETTINGS_MAX_FRAME_SIZE is far below it. One of each frame type, with a
  // few bytes of the announced payload, then the sender stalls (it never
  // closes first): the server must end the connection by itself.
  for (uint8_t type = 0; type <= 9; ++type) {
    const uint32_t stream = (type == 0x4 || type == 0x6 || type == 0x7) ? 0 : 1;
    SendAndExpectClosed("huge frame of type " + std::to_string(type),
                        std::string(kPreface) + Frame(0, 0x4, 0, 0) +
                            Frame(0xffffff, type, 0, stream, std::string(100, 'x')));
  }
  ExpectHealthy("huge frame headers");
  // Huge length without the preface.
  SendAndExpectClosed("huge frame without preface", Frame(0xffffff, 0, 0, 1));
  ExpectHealthy("a huge frame without preface");
}

TEST_F(HostileSocketTest, TenMebibyteMessageIsRefusedAsResourceExhausted) {
  v1::AllocateRequest req;
  req.set_request_id(std::string(10 << 20, 'a'));
  req.mutable_owner()->set_opaque_id("hostile");
  req.add_instances()->set_profile("1g.5gb");
  v1::AllocateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
  const grpc::Status s = stub_->Allocate(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  ExpectHealthy("a 10 MiB message");
  // Just over the limit, on the same channel.
  req.set_request_id(std::string((64 << 10) + 1, 'a'));
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
  EXPECT_EQ(stub_->Allocate(&ctx2, req, &resp).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  ExpectHealthy("a 64 KiB + 1 message");
}

// Well-formed gRPC calls whose message bytes are garbage (random bytes,
// truncated varints, a field announcing gigabytes), to every unary method
// and to one that does not exist. Whatever each call answers, migd stays up.
TEST_F(HostileSocketTest, GarbageMessagesInValidCallsAreAnsweredNotFatal) {
  const uint32_t seed = std::random_device()();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  grpc::GenericStub generic(
      grpc::CreateChannel("unix:" + Socket(), grpc::InsecureChannelCredentials()));
  auto call = [&](const std::string& method, const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
    // A mutex and condition variable rather than std::promise: ThreadSanitizer
    // sees their hand-off (pthread), not libstdc++'s futex-based future.
    std::mutex mu;
    std::condition_variable cv;
    std::optional<grpc::Status> result;
    generic.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                      [&](grpc::Status st) {
                        std::lock_guard<std::mutex> lock(mu);
                        result = std::move(st);
                        cv.notify_all();
                      });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return result.has_value(); });
    return *result;
  };
  const std::vector<std::string> messages = {
      RandomBytes(rng, 16), RandomBytes(rng, 4096), std::string("\x0a\xff\xff\xff\xff\x0f", 6),
      std::string("\x0a", 1), std::string("\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80", 11),
      std::string("\x12\xff\xff\xff\xff\x07xyz", 9)};
  // The generic path reaches the service: an empty List request is valid.
  const grpc::Status empty = call("/migd.v1.MigManager/List", "");
  ASSERT_TRUE(empty.ok()) << empty.error_message();
  for (const char* method : {"Allocate", "Release", "List", "Plan", "GetStatus"}) {
    for (size_t i = 0; i < messages.size(); ++i) {
      const grpc::Status st = call(std::string("/migd.v1.MigManager/") + method, messages[i]);
      // From the third on, the bytes cannot be a protobuf message at all
      // (lengths past the end, a truncated field, an 11-byte varint).
      if (i >= 2) {
        EXPECT_FALSE(st.ok()) << method << " accepted message " << i;
      }
    }
    ExpectHealthy(std::string("garbage ") + method + " messages");
  }
  EXPECT_EQ(call("/migd.v1.MigManager/Nope", "").error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(call("/../../etc/passwd", "").error_code(), grpc::StatusCode::UNIMPLEMENTED);
  ExpectHealthy("unknown methods");
}

TEST_F(HostileSocketTest, TwoHundredHalfOpenConnectionsDoNotBlockOthers) {
  ExpectHealthy("start");
  const int baseline = FdCount(pid_);
  ASSERT_GT(baseline, 0);
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    const int fd = Connect();
    ASSERT_GE(fd, 0) << "connection " << i;
    idle.push_back(fd);
  }
  // Connections that send nothing must not stall the accept loop or the
  // server: a normal client (and migctl) still get through meanwhile.
  ExpectHealthy("200 half-open connections (still open)");
  const migd::testing::CommandResult cli =
      migd::testing::RunCommand({MIGD_MIGCTL, "--socket", Socket(), "list"}, dir_.path());
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  // A half-open connection that finally sends garbage is refused as usual.
  SendAll(idle.back(), "garbage after a long silence");
  EXPECT_TRUE(ServerCloses(idle.back()));
  for (int fd : idle) ::close(fd);
  ExpectHealthy("200 half-open connections (closed)");
  // Their descriptors are released: no leak per connection.
  EXPECT_TRUE(Eventually([&] { return FdCount(pid_) <= baseline + 32; }))
      << "migd holds " << FdCount(pid_) << " fds, " << baseline << " before";
}

TEST_F(HostileSocketTest, ThousandConnectAndCloseCyclesLeakNothing) {
  ExpectHealthy("start");
  const int baseline = FdCount(pid_);
  ASSERT_GT(baseline, 0);
  for (int i = 0; i < 1000; ++i) {
    const int fd = Connect();
    ASSERT_GE(fd, 0) << "connection " << i;
    ::close(fd);
  }
  ExpectHealthy("1000 connect-and-close cycles");
  EXPECT_TRUE(Eventually([&] { return FdCount(pid_) <= baseline + 32; }))
      << "migd holds " << FdCount(pid_) << " fds, " << baseline << " before";
  const migd::testing::CommandResult cli =
      migd::testing::RunCommand({MIGD_MIGCTL, "--socket", Socket(), "list"}, dir_.path());
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
}

}  // namespace
}  // namespace migd
