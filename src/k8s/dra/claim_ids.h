// File: k8s/dra/claim_ids.h
//
// How a prepared ResourceClaim is recorded by the engine, so that migd's
// existing ownership records carry the DRA state and no second checkpoint
// file is needed:
//   request id  "dra-<claim UID>"   (engine::AllocateRequest.request_id:
//               Allocate is idempotent by it, Release undoes it, and
//               recovery rebuilds it from the records after a restart);
//   owner       Opaque("resourceclaim:<namespace>/<name>"), or
//               Opaque("resourceclaim:<UID>") when that would exceed the
//               record's 256-byte field limit.
// The pool builder uses the prefix to tell instances the scheduler allocated
// (their counters are accounted for by the claim) from every other one.
//
// Thread-safety: pure functions.
#ifndef MIGD_K8S_DRA_CLAIM_IDS_H_
#define MIGD_K8S_DRA_CLAIM_IDS_H_

#include <string>
#include <string_view>

#include "store/record.h"

namespace migd::k8s::dra {

inline constexpr std::string_view kClaimRequestPrefix = "dra-";

inline std::string ClaimRequestId(std::string_view claim_uid) {
  return std::string(kClaimRequestPrefix) + std::string(claim_uid);
}

inline bool IsClaimRequestId(std::string_view request_id) {
  return request_id.size() > kClaimRequestPrefix.size() &&
         request_id.substr(0, kClaimRequestPrefix.size()) == kClaimRequestPrefix;
}

inline store::Owner ClaimOwner(std::string_view ns, std::string_view name, std::string_view uid) {
  std::string id = "resourceclaim:" + std::string(ns) + "/" + std::string(name);
  if (id.size() > store::kMaxFieldBytes) id = "resourceclaim:" + std::string(uid);
  return store::Owner::Opaque(std::move(id));
}

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_CLAIM_IDS_H_
