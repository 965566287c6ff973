// File: api/peer.h
//
// Who is calling: the kernel's credentials of the process at the other end
// of an API connection (SO_PEERCRED), kept per connection so that each RPC
// can log them (docs/security.md, "Audit").
//
// ApiServer accepts connections itself (gRPC 1.51 reports a unix peer only
// as "unix:"), reads SO_PEERCRED, records the credentials under the
// connection's fd and hands the fd to gRPC, which then names the call's peer
// "fd:N" (ServerContext::peer()). PeerDirectory maps that string back.
//
// Staleness: gRPC closes a connection's fd only when its transport is
// destroyed, after every call on it has finished, so a number seen inside a
// handler cannot have been reused; the accept loop overwrites a closed
// connection's entry before handing the new one to gRPC. Entries are never
// erased (one per fd number, bounded by the descriptor limit).
//
// Credentials are those of the process that connected (at connect time; a
// connection passed to another process keeps them). pid may be 0 when the
// peer is in another PID namespace that the kernel cannot map.
//
// Thread-safety: PeerDirectory is safe for concurrent use.
#ifndef MIGD_API_PEER_H_
#define MIGD_API_PEER_H_

#include <absl/base/thread_annotations.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/logging.h"
#include "base/mutex.h"
#include "base/status.h"

namespace migd::api {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  // /proc/<pid>/comm at accept time, best effort ("" if unreadable); the
  // process may have exited or changed its name since. For reading logs,
  // never for decisions.
  std::string command;
};

// SO_PEERCRED of a connected unix socket, plus the command name.
// kFailedPrecondition (errno text) if the socket has no peer credentials.
StatusOr<PeerCredentials> ReadPeerCredentials(int fd);

// Appends peer_pid, peer_uid, peer_gid, peer_comm to `f`.
void AddPeerFields(const PeerCredentials& peer, Fields& f);

class PeerDirectory {
 public:
  // Records the credentials of the connection on `fd` (replacing any entry
  // of a closed connection that had the same number).
  void Set(int fd, PeerCredentials peer);
  // The credentials for a gRPC peer string "fd:N"; nullopt for other forms
  // (in-process channels, TCP) and unknown numbers.
  std::optional<PeerCredentials> Lookup(std::string_view grpc_peer) const;
  size_t size() const;

 private:
  mutable Mutex mu_;
  std::unordered_map<int, PeerCredentials> by_fd_ ABSL_GUARDED_BY(mu_);
};

}  // namespace migd::api

#endif  // MIGD_API_PEER_H_
