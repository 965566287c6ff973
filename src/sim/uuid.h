// File: sim/uuid.h
//
// Identifiers of simulated hardware, all derived deterministically from the
// state file's content so that a state file reproduces the same machine:
//   * GPU UUIDs "GPU-8-4-4-4-12" from (model key, index, creation nonce);
//   * MIG UUIDs "MIG-8-4-4-4-12" in RFC 4122 version-5 form (SHA-1 name-based,
//     version nibble 5, variant bits 10xx), from (GPU UUID, GI id, CI id,
//     creation serial). The serial makes a re-created instance get a new UUID
//     (nvml.md §7.7: code must not assume stability);
//   * a 64-bit mixer for the seeded shuffle of GI ids and MIG device indices.
//
// Thread-safety: pure functions.
#ifndef MIGD_SIM_UUID_H_
#define MIGD_SIM_UUID_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace migd::sim {

// SHA-1 digest of `data` (FIPS 180-4).
std::array<uint8_t, 20> Sha1(std::string_view data);

// splitmix64 finaliser: a bijective, well-mixed function of `x`.
uint64_t Mix64(uint64_t x);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lower-case hex).
std::string MakeGpuUuid(std::string_view model_key, uint32_t index, uint64_t nonce);

// "MIG-xxxxxxxx-xxxx-5xxx-yxxx-xxxxxxxxxxxx" with y in {8,9,a,b}.
std::string MakeMigUuid(std::string_view gpu_uuid, uint32_t gi_id, uint32_t ci_id, uint64_t serial);

}  // namespace migd::sim

#endif  // MIGD_SIM_UUID_H_
