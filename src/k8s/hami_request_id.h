// File: k8s/hami_request_id.h
//
// The engine request id of one HAMi container allocation: "hami-<pod uid>-
// <container index>". Shared by the HAMi backend (which allocates under it)
// and the `hami` owner source (which adopts under it at restart, so that a
// kubelet retry is recognised as a replay and a pod's end releases it).
//
// Thread-safety: pure function.
#ifndef MIGD_K8S_HAMI_REQUEST_ID_H_
#define MIGD_K8S_HAMI_REQUEST_ID_H_

#include <string>
#include <string_view>

namespace migd::k8s {

inline std::string HamiRequestId(std::string_view pod_uid, int container_index) {
  return "hami-" + std::string(pod_uid) + "-" + std::to_string(container_index);
}

}  // namespace migd::k8s

#endif  // MIGD_K8S_HAMI_REQUEST_ID_H_
