#include "api/status_mapping.h"

#include <string>

namespace migd::api {

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(status.code())),
                      std::string(status.message()));
}

Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return OkStatus();
  const int code = static_cast<int>(status.error_code());
  if (code <= 0 || code > static_cast<int>(StatusCode::kUnauthenticated)) {
    return UnknownError("gRPC status " + std::to_string(code) + ": " + status.error_message());
  }
  return Status(static_cast<StatusCode>(code), status.error_message());
}

}  // namespace migd::api
