// File: k8s/dra/claim_handler.h
//
// ClaimHandler: what the DRA plugin server (plugin_server.h) asks of the
// code that gives claims their devices (ClaimPreparer, or a test's fake).
//
// Thread-safety: implementations must be thread-safe; the server calls them
// from gRPC handler threads.
#ifndef MIGD_K8S_DRA_CLAIM_HANDLER_H_
#define MIGD_K8S_DRA_CLAIM_HANDLER_H_

#include <string>
#include <vector>

#include "base/status.h"

namespace migd::k8s::dra {

struct ClaimRef {
  std::string ns;
  std::string name;
  std::string uid;
};

struct PreparedDevice {
  std::string request;  // base request name
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_ids;
  friend bool operator==(const PreparedDevice&, const PreparedDevice&) = default;
};

// The plugin server's view of claim preparation (ClaimPreparer, or a test's).
class ClaimHandler {
 public:
  virtual ~ClaimHandler() = default;
  virtual StatusOr<std::vector<PreparedDevice>> Prepare(const ClaimRef& claim) = 0;
  virtual Status Unprepare(const ClaimRef& claim) = 0;
};

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_CLAIM_HANDLER_H_
