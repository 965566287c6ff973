// Fuzz target: gRPC request messages (proto/migd/v1/migd.proto) as they reach
// the service, and their validation (api/convert.h).
//
// Input: first byte selects the message type, the rest is its wire encoding
// (what any local client may send). Properties: parsing and validation never
// crash; an AllocateRequest that validates respects the documented limits.
#include <cstddef>
#include <cstdint>

#include "api/convert.h"
#include "fuzz/fuzz_check.h"
#include "google/protobuf/stubs/logging.h"
#include "migd/v1/migd.pb.h"

namespace {

namespace v1 = migd::v1;

template <typename Message>
bool Parse(const uint8_t* data, size_t size, Message* msg) {
  return msg->ParseFromArray(data, static_cast<int>(size));
}

}  // namespace

// Protobuf logs every invalid-UTF-8 string field it refuses; at thousands of
// inputs a second that drowns libFuzzer's own output.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0] % 5;
  ++data;
  --size;
  switch (selector) {
    case 0: {
      v1::AllocateRequest req;
      if (!Parse(data, size, &req)) return 0;
      migd::StatusOr<migd::engine::AllocateRequest> got = migd::api::FromProto(req);
      if (got.ok()) {
        FUZZ_CHECK(req.instances_size() >= 1 &&
                       static_cast<size_t>(req.instances_size()) <= migd::api::kMaxInstances,
                   "an AllocateRequest outside 1..kMaxInstances validated");
        FUZZ_CHECK(req.request_id().size() <= migd::api::kMaxIdBytes,
                   "an over-long request_id validated");
      }
      break;
    }
    case 1: {
      v1::PlanRequest req;
      if (!Parse(data, size, &req)) return 0;
      (void)migd::api::SpecsFromProto(req.instances(), "instances");
      break;
    }
    case 2: {
      v1::ReleaseRequest req;
      if (!Parse(data, size, &req)) return 0;
      (void)migd::api::ValidateRelease(req);
      break;
    }
    case 3: {
      v1::ReclaimRequest req;
      if (!Parse(data, size, &req)) return 0;
      (void)migd::api::FromProto(req);
      break;
    }
    default: {
      v1::ListRequest req;
      if (!Parse(data, size, &req)) return 0;
      (void)migd::api::StatesFromProto(req);
      break;
    }
  }
  return 0;
}
