// Fuzz target: HAMi pod annotations (k8s/apiserver/hami_codec.h), written by
// the HAMi scheduler and by anyone who may edit a pod.
//
// Input: one annotation value, decoded both as the MIG allocation JSON array
// and as the vgpu-devices-to-allocate device list. Properties: neither
// decoder crashes or throws; whatever decodes re-encodes to text that
// decodes to the same value (migd writes these annotations back).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "k8s/apiserver/hami_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace hami = migd::k8s::hami;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  migd::StatusOr<std::vector<hami::MigAllocation>> allocs = hami::DecodeMigAllocations(text);
  if (allocs.ok()) {
    const std::string encoded = hami::EncodeMigAllocations(*allocs);
    migd::StatusOr<std::vector<hami::MigAllocation>> again = hami::DecodeMigAllocations(encoded);
    FUZZ_CHECK(again.ok(), "encoded MIG allocations do not decode");
    FUZZ_CHECK(*again == *allocs, "MIG allocations changed across encode/decode");
  }

  migd::StatusOr<hami::PodDevices> devices = hami::DecodePodDevices(text);
  if (devices.ok()) {
    const std::string encoded = hami::EncodePodDevices(*devices);
    migd::StatusOr<hami::PodDevices> again = hami::DecodePodDevices(encoded);
    FUZZ_CHECK(again.ok(), "encoded pod devices do not decode");
    FUZZ_CHECK(*again == *devices, "pod devices changed across encode/decode");
  }
  return 0;
}
