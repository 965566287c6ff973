// MetricsHttpServer over loopback with a real HTTP client (cpp-httplib).
#include "metrics/http_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testing/status_matchers.h"

namespace migd::metrics {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ParseListenAddressTest, Accepts) {
  MIGD_ASSERT_OK_AND_ASSIGN(ListenAddress a, ParseListenAddress("127.0.0.1:9400"));
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 9400);
  MIGD_ASSERT_OK_AND_ASSIGN(a, ParseListenAddress("[::1]:0"));
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 0);
  MIGD_ASSERT_OK_AND_ASSIGN(a, ParseListenAddress("localhost:65535"));
  EXPECT_EQ(a.host, "localhost");
  EXPECT_EQ(a.port, 65535);
  MIGD_ASSERT_OK_AND_ASSIGN(a, ParseListenAddress("0.0.0.0:80"));
  EXPECT_EQ(a.host, "0.0.0.0");
}

TEST(ParseListenAddressTest, Rejects) {
  for (const char* bad :
       {"", "9400", ":9400", "host:", "host:x", "host:65536", "host:123456", "host:-1", "::1:9400",
        "[::1]9400", "[::1", "[]:9400", "[127.0.0.1]:9400", "a b:1", "host:+1"}) {
    EXPECT_THAT(ParseListenAddress(bad).status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(bad)))
        << bad;
  }
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = registry_.AddCounter("test_requests_total", "Requests.", {"code"});
    ASSERT_TRUE(f.ok()) << f.status();
    (*f)->WithLabels({"200"}).Inc(3);
  }
  Registry registry_;
};

TEST_F(HttpServerTest, ServesMetricsAnd404) {
  MetricsHttpServer server(&registry_);
  MIGD_ASSERT_OK_AND_ASSIGN(int port, server.Start("127.0.0.1:0"));
  ASSERT_GT(port, 0);
  EXPECT_EQ(server.port(), port);

  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(res->body, registry_.Expose());
  EXPECT_THAT(res->body, HasSubstr("test_requests_total{code=\"200\"} 3\n"));

  auto missing = client.Get("/");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto other = client.Get("/metricsx");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);

  server.Stop();
  EXPECT_EQ(server.port(), 0);
  server.Stop();  // idempotent
  httplib::Client after("127.0.0.1", port);
  after.set_connection_timeout(5);
  EXPECT_FALSE(after.Get("/metrics"));  // nothing listens any more
}

TEST_F(HttpServerTest, StopBeforeStartAndRestart) {
  MetricsHttpServer server(&registry_);
  server.Stop();  // no-op
  MIGD_ASSERT_OK_AND_ASSIGN(int port, server.Start("127.0.0.1:0"));
  EXPECT_THAT(server.Start("127.0.0.1:0").status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr(std::to_string(port))));
  server.Stop();
  MIGD_ASSERT_OK_AND_ASSIGN(int port2, server.Start("127.0.0.1:0"));
  httplib::Client client("127.0.0.1", port2);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(HttpServerTest, StopRightAfterStartReturns) {
  // Stop() must not be lost when the listen loop has not started yet.
  for (int i = 0; i < 20; ++i) {
    MetricsHttpServer server(&registry_);
    ASSERT_THAT(server.Start("127.0.0.1:0").status(), IsOk());
    server.Stop();
  }
}

TEST_F(HttpServerTest, MalformedAddress) {
  MetricsHttpServer server(&registry_);
  EXPECT_THAT(server.Start("localhost").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("localhost")));
  EXPECT_EQ(server.port(), 0);
}

TEST_F(HttpServerTest, BindFailureNamesAddress) {
  MetricsHttpServer first(&registry_);
  MIGD_ASSERT_OK_AND_ASSIGN(int port, first.Start("127.0.0.1:0"));
  MetricsHttpServer second(&registry_);
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  EXPECT_THAT(second.Start(addr).status(), StatusIs(StatusCode::kUnavailable, HasSubstr(addr)));
  // An address of no local interface (TEST-NET-1, RFC 5737).
  EXPECT_THAT(second.Start("192.0.2.1:0").status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("192.0.2.1:0")));
  // The failed starts left `second` startable.
  EXPECT_THAT(second.Start("127.0.0.1:0").status(), IsOk());
}

// Whether this host can bind the IPv6 loopback (a container may have no
// IPv6): asked of the kernel directly, not of the server under test.
bool KernelBindsIpv6Loopback() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// Where the kernel has IPv6 loopback, /metrics is served on it; where it has
// not, Start fails naming the address (never a silent skip).
TEST_F(HttpServerTest, Ipv6Loopback) {
  MetricsHttpServer server(&registry_);
  StatusOr<int> port = server.Start("[::1]:0");
  if (!KernelBindsIpv6Loopback()) {
    EXPECT_THAT(port.status(), StatusIs(StatusCode::kUnavailable, HasSubstr("[::1]:0")));
    EXPECT_EQ(server.port(), 0);
    return;
  }
  ASSERT_TRUE(port.ok()) << port.status();
  httplib::Client client("::1", *port);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
}

}  // namespace
}  // namespace migd::metrics
