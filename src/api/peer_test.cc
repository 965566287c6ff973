#include "api/peer.h"

#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace migd::api {
namespace {


TEST(PeerCredentialsTest, SocketPairNamesThisProcess) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  StatusOr<PeerCredentials> peer = ReadPeerCredentials(sv[0]);
  ::close(sv[0]);
  ::close(sv[1]);
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->pid, ::getpid());
  EXPECT_EQ(peer->uid, ::getuid());
  EXPECT_EQ(peer->gid, ::getgid());
  std::ifstream in("/proc/self/comm");
  std::string comm;
  std::getline(in, comm);
  EXPECT_EQ(peer->command, comm);
}

TEST(PeerCredentialsTest, NotASocketIsAnError) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  StatusOr<PeerCredentials> peer = ReadPeerCredentials(p[0]);
  ::close(p[0]);
  ::close(p[1]);
  EXPECT_EQ(peer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(peer.status().message()), ::testing::HasSubstr("SO_PEERCRED"));
}

TEST(PeerCredentialsTest, FieldsAreKeyValuePairs) {
  PeerCredentials peer{.pid = 42, .uid = 1000, .gid = 100, .command = "kubelet"};
  Fields f;
  AddPeerFields(peer, f);
  EXPECT_EQ(f.str(), " peer_pid=42 peer_uid=1000 peer_gid=100 peer_comm=kubelet");
  // A process names itself: a name with spaces is quoted, not split.
  peer.command = "evil code=OK";
  Fields g;
  AddPeerFields(peer, g);
  EXPECT_EQ(g.str(), " peer_pid=42 peer_uid=1000 peer_gid=100 peer_comm=\"evil code=OK\"");
  // No command: the field is left out.
  peer.command.clear();
  Fields h;
  AddPeerFields(peer, h);
  EXPECT_EQ(h.str(), " peer_pid=42 peer_uid=1000 peer_gid=100");
}

TEST(PeerDirectoryTest, LooksUpGrpcFdPeers) {
  PeerDirectory dir;
  dir.Set(12, {.pid = 1, .uid = 2, .gid = 3, .command = "a"});
  std::optional<PeerCredentials> p = dir.Lookup("fd:12");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->pid, 1);
  EXPECT_EQ(p->command, "a");
  // A later connection with the same number replaces the closed one's entry.
  dir.Set(12, {.pid = 9, .uid = 2, .gid = 3, .command = "b"});
  EXPECT_EQ(dir.Lookup("fd:12")->pid, 9);
  EXPECT_EQ(dir.size(), 1u);
}

TEST(PeerDirectoryTest, OtherPeerFormsAreUnknown) {
  PeerDirectory dir;
  dir.Set(7, {.pid = 1, .uid = 0, .gid = 0, .command = ""});
  for (const char* peer : {"", "unix:", "unix:/run/migd.sock", "ipv4:127.0.0.1:80", "fd:", "fd:-7",
                           "fd:7x", "fd: 7", "fd:99999999999999999999", "fd:8", "FD:7"}) {
    EXPECT_FALSE(dir.Lookup(peer).has_value()) << peer;
  }
  EXPECT_TRUE(dir.Lookup("fd:7").has_value());
}

}  // namespace
}  // namespace migd::api
