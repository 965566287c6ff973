// File: k8s/dra/claim_preparer.h
//
// ClaimPreparer: what NodePrepareResources / NodeUnprepareResources mean for
// migd. The DRA plugin server (plugin_server.h) owns the kubelet protocol;
// this class owns the meaning of a claim.
//
// Prepare(claim):
//   1. GET the ResourceClaim; its metadata.uid must be the one kubelet sent
//      (else it was deleted and recreated: kFailedPrecondition) and it must
//      be allocated (status.allocation);
//   2. the results of our driver (status.allocation.devices.results[] with
//      driver == ours; others belong to other drivers); none is
//      kFailedPrecondition. Each must name our pool (a device of another
//      pool is kInvalidArgument: it is not on this node) and a device of the
//      node's device table (device_table.h; unknown: kNotFound). adminAccess
//      results are refused (kUnimplemented): a MIG instance is never shared;
//   3. engine::Manager::Allocate with request id "dra-<uid>" and the claim
//      as owner (claim_ids.h), one instance per result pinned to exactly
//      the allocated GPU, profile and placement: an Idle instance there is
//      reused, else the instance is created, reclaiming only the Idle
//      instances that overlap it. A placement blocked by anything else
//      (Active, Error, foreign) fails with the engine's kResourceExhausted
//      and nothing is changed. All results or none;
//   4. per result, in result order: the base request name ("gpu" for
//      "gpu/small": kubelet matches containers' claim requests by base
//      name, k8s.io/dynamic-resource-allocation kubeletplugin
//      stripSubrequestNames), the pool, the device and the CDI device id of
//      the instance's spec (cdi::Publisher: "<vendor>/<class>=<MIG UUID>").
//   Idempotent: a second Prepare of the same claim is the engine's replay
//   (same instances, no NVML call), also after a migd restart (the records
//   carry request id and owner).
// Unprepare(claim): engine::Manager::Release("dra-<uid>"): the instance
//   becomes Idle, its GI/CI and CDI spec stay for reuse. An unknown claim
//   (never prepared here, or already unprepared) is success.
//
// Errors name the claim, the device and the fix; they go back to kubelet as
// the claim's error string (kubelet retries the pod).
//
// Thread-safety: thread-safe (Manager, CdiObserver and ResourceApi are).
#ifndef MIGD_K8S_DRA_CLAIM_PREPARER_H_
#define MIGD_K8S_DRA_CLAIM_PREPARER_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/cdi_observer.h"
#include "engine/manager.h"
#include "k8s/dra/claim_handler.h"
#include "k8s/dra/resource_api.h"

namespace migd::k8s::dra {

struct ClaimPreparerOptions {
  std::string driver;  // required
  std::string pool;    // required (the node name by default)
};

class ClaimPreparer final : public ClaimHandler {
 public:
  // None is owned; all must outlive the preparer.
  ClaimPreparer(ResourceApi* api, engine::Manager* manager, engine::CdiObserver* cdi,
                ClaimPreparerOptions options);

  StatusOr<std::vector<PreparedDevice>> Prepare(const ClaimRef& claim) override;
  Status Unprepare(const ClaimRef& claim) override;

 private:
  struct Result;
  StatusOr<std::vector<PreparedDevice>> PrepareImpl(const ClaimRef& claim);
  StatusOr<std::vector<Result>> ReadResults(const ClaimRef& claim);

  ResourceApi* const api_;
  engine::Manager* const manager_;
  engine::CdiObserver* const cdi_;
  const ClaimPreparerOptions options_;
};

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_CLAIM_PREPARER_H_
