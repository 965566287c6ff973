// File: api/service.h
//
// MigManagerService: the migd.v1.MigManager gRPC service (synchronous API)
// over an engine::Manager. Each RPC validates its request (api/convert.h),
// checks what the engine cannot say well (a request pinned to a GPU whose MIG
// mode is disabled), calls the Manager and converts the result. Errors keep
// the engine's code and message (api/status_mapping.h), so the planner's
// RESOURCE_EXHAUSTED text and NVML error names reach the operator verbatim;
// the planner's "request[i]" field prefix is renamed to the API's
// "instances[i]". Every failed RPC logs one line, and so does every successful
// Allocate, Release and Reclaim (the audit trail), naming the caller
// (api/peer.h):
//   rpc failed rpc=Allocate code=RESOURCE_EXHAUSTED request=r1 peer_pid=4242
//       peer_uid=0 peer_gid=0 peer_comm=migctl message="..."
//   rpc rpc=Release code=OK request=r1 peer_pid=4242 peer_uid=0 ...
//
// ClearHealth: the operator's clear of a GPU's health marks (docs/health.md).
//
// Watch: optional snapshot (one synthetic event per tracked instance, reason
// "snapshot", sequence 0, from UNSPECIFIED), then live events from the
// EventHub until the client cancels, the hub drops the stream (RESOURCE_
// EXHAUSTED) or the hub is closed (UNAVAILABLE, shutdown). The subscription
// is taken before the snapshot, so no change is missed; a change racing
// with the snapshot may be shown by both (events carry the state after the
// change, so applying them in order converges).
//
// Thread-safety: all RPC handlers may run concurrently (gRPC's sync server
// thread pool); the only mutable state of its own is the PeerDirectory,
// which is thread-safe.
#ifndef MIGD_API_SERVICE_H_
#define MIGD_API_SERVICE_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "api/event_hub.h"
#include "api/peer.h"
#include "base/clock.h"
#include "base/status.h"
#include "engine/cdi_observer.h"
#include "engine/manager.h"
#include "migd/v1/migd.grpc.pb.h"

namespace migd::api {

// What GetStatus reports about the daemon itself.
struct ServerInfo {
  std::string version;
  std::string driver_version;
  std::string nvml_library;
  bool simulated = false;
  Clock::TimePoint started{};
  std::string boot_id;
  // Where the CDI specs' driver edits come from (cdi::CommonEdits::summary).
  std::string cdi_common_edits;
  // Startup warnings an operator must act on (e.g. no driver libraries in
  // the CDI specs), each naming the fix; shown by `migctl status`.
  std::vector<std::string> warnings;
};

struct ServiceOptions {
  // CDI observer of the Manager, for CDI names and the legacy device form.
  // Not owned; may be null (then AllocateResponse only carries
  // NVIDIA_VISIBLE_DEVICES and Instance.cdi_device stays empty).
  engine::CdiObserver* cdi = nullptr;
  // cdi.enabled: false → no CDI names (legacy form only).
  bool cdi_enabled = true;
  // How often an idle Watch handler checks for client cancellation.
  std::chrono::milliseconds watch_poll{100};
  // Test hook: called by a Watch handler before it writes each live event
  // (not snapshot events). Lets a test stall one stream deterministically.
  std::function<void(const v1::InstanceEvent&)> before_watch_write;
};

class MigManagerService final : public v1::MigManager::Service {
 public:
  // `manager` and `hub` (which must be the Manager's listener, or fed by
  // it) are not owned and must outlive the service.
  MigManagerService(engine::Manager& manager, EventHub& hub, ServerInfo info,
                    ServiceOptions options = {});

  EventHub& hub() { return hub_; }
  // Credentials of the connections ApiServer accepted (filled by it; read
  // by the handlers to name the caller in logs).
  PeerDirectory& peers() { return peers_; }

  grpc::Status Allocate(grpc::ServerContext* ctx, const v1::AllocateRequest* req,
                        v1::AllocateResponse* resp) override;
  grpc::Status Release(grpc::ServerContext* ctx, const v1::ReleaseRequest* req,
                       v1::ReleaseResponse* resp) override;
  grpc::Status List(grpc::ServerContext* ctx, const v1::ListRequest* req,
                    v1::ListResponse* resp) override;
  grpc::Status Plan(grpc::ServerContext* ctx, const v1::PlanRequest* req,
                    v1::PlanResponse* resp) override;
  grpc::Status Reclaim(grpc::ServerContext* ctx, const v1::ReclaimRequest* req,
                       v1::ReclaimResponse* resp) override;
  grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::GetStatusRequest* req,
                         v1::GetStatusResponse* resp) override;
  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                     grpc::ServerWriter<v1::InstanceEvent>* writer) override;
  // Manager::ClearGpuHealth; audited like Allocate, Release and Reclaim.
  // NOT_FOUND "GPU 7 is not on this node (GPUs: 0, 1; migctl status lists
  // the GPUs)" for an index this node does not have.
  grpc::Status ClearHealth(grpc::ServerContext* ctx, const v1::ClearHealthRequest* req,
                           v1::ClearHealthResponse* resp) override;

  // The checks Allocate and Plan run on pinned GPUs before the engine sees
  // the request: an unknown GPU index → kInvalidArgument
  // "instances[i].gpu: unknown GPU N (GPUs: 0, 1)"; a GPU with MIG disabled →
  // kFailedPrecondition "gpuN: MIG mode is disabled; enable it with
  // nvidia-smi -i N -mig 1 (a GPU reset may be needed); migd takes it over
  // at its next reconcile pass"; no MIG-enabled GPU at all →
  // kFailedPrecondition naming the GPUs and the fix; a profile that no
  // eligible GPU has → kInvalidArgument "instances[i].profile: unknown profile
  // \"9g.1gb\"; known on gpu0, gpu1: 1g.5gb, ..." (one list per model).
  Status CheckGpus(const std::vector<engine::InstanceSpec>& specs) const;

 private:
  Status DoAllocate(const v1::AllocateRequest& req, v1::AllocateResponse* resp);
  Status DoRelease(const v1::ReleaseRequest& req, v1::ReleaseResponse* resp);
  Status DoList(const v1::ListRequest& req, v1::ListResponse* resp);
  Status DoPlan(const v1::PlanRequest& req, v1::PlanResponse* resp);
  Status DoReclaim(const v1::ReclaimRequest& req, v1::ReclaimResponse* resp);
  Status DoGetStatus(v1::GetStatusResponse* resp);
  Status DoClearHealth(const v1::ClearHealthRequest& req, v1::ClearHealthResponse* resp);
  Status DoWatch(grpc::ServerContext* ctx, const v1::WatchRequest& req,
                 grpc::ServerWriter<v1::InstanceEvent>* writer);

  // Logs the call and converts the status: a failed RPC at warn (error for
  // INTERNAL/DATA_LOSS, debug for CANCELLED), a successful `audit` RPC (one
  // that changes state) at info, others at debug; each line names the
  // caller's credentials.
  grpc::Status Finish(const char* rpc, const grpc::ServerContext* ctx,
                      const std::string& request_id, const Status& status,
                      const std::string& mig_uuid = "", bool audit = false) const;
  // peer_pid/peer_uid/peer_gid/peer_comm of the caller, or peer=<gRPC's
  // peer string> when the connection did not come through ApiServer.
  void AddPeer(const grpc::ServerContext* ctx, Fields& f) const;
  // The qualified CDI name of a published instance ("" if none / disabled);
  // the second form for a spec already looked up.
  std::string CdiName(const MigUuid& mig_uuid) const;
  std::string CdiName(const std::optional<cdi::BuiltSpec>& spec) const;

  engine::Manager& manager_;
  EventHub& hub_;
  const ServerInfo info_;
  const ServiceOptions options_;
  PeerDirectory peers_;
};

}  // namespace migd::api

#endif  // MIGD_API_SERVICE_H_
