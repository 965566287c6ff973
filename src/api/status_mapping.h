// File: api/status_mapping.h
//
// The one mapping between migd::Status and grpc::Status. migd's StatusCode
// values are grpc::StatusCode values (base/status.h), so the code number is
// kept and the message passes through unchanged in both directions: what the
// engine says is what the operator reads.
//
// Thread-safety: pure functions.
#ifndef MIGD_API_STATUS_MAPPING_H_
#define MIGD_API_STATUS_MAPPING_H_

#include <grpcpp/support/status.h>

#include "base/status.h"

namespace migd::api {

// Server side: the gRPC status returned for `status` (OK stays OK).
grpc::Status ToGrpcStatus(const Status& status);

// Client side: the migd status of a finished call. A code outside the known
// range (a future or foreign server) becomes kUnknown with the number in the
// message.
Status FromGrpcStatus(const grpc::Status& status);

}  // namespace migd::api

#endif  // MIGD_API_STATUS_MAPPING_H_
