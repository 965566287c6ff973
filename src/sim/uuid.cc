#include "sim/uuid.h"

#include <cstring>

namespace migd::sim {
namespace {

uint32_t Rotl(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

void Sha1Block(const uint8_t* block, uint32_t h[5]) {
  uint32_t w[80];
  for (int i = 0; i < 16; ++i) {
    w[i] = (uint32_t{block[4 * i]} << 24) | (uint32_t{block[4 * i + 1]} << 16) |
           (uint32_t{block[4 * i + 2]} << 8) | uint32_t{block[4 * i + 3]};
  }
  for (int i = 16; i < 80; ++i) w[i] = Rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; ++i) {
    uint32_t f = 0;
    uint32_t k = 0;
    if (i < 20) {
      f = (b & c) | (~b & d);
      k = 0x5A827999;
    } else if (i < 40) {
      f = b ^ c ^ d;
      k = 0x6ED9EBA1;
    } else if (i < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8F1BBCDC;
    } else {
      f = b ^ c ^ d;
      k = 0xCA62C1D6;
    }
    uint32_t t = Rotl(a, 5) + f + e + k + w[i];
    e = d;
    d = c;
    c = Rotl(b, 30);
    b = a;
    a = t;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

std::string FormatUuid(std::string_view prefix, const uint8_t* b) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(prefix);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[b[i] >> 4];
    out += kHex[b[i] & 0xF];
  }
  return out;
}

// A fixed namespace for the simulator's name-based UUIDs (itself a random
// RFC 4122 UUID chosen once).
constexpr uint8_t kMigNamespace[16] = {0x6d, 0x69, 0x67, 0x64, 0x2d, 0x73, 0x69, 0x6d,
                                       0x9a, 0x51, 0x4e, 0x3c, 0x8b, 0x07, 0x2f, 0xd1};

}  // namespace

std::array<uint8_t, 20> Sha1(std::string_view data) {
  uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  const uint64_t bit_len = static_cast<uint64_t>(data.size()) * 8;
  size_t i = 0;
  for (; i + 64 <= data.size(); i += 64) {
    Sha1Block(reinterpret_cast<const uint8_t*>(data.data() + i), h);
  }
  uint8_t tail[128] = {};
  const size_t rest = data.size() - i;
  std::memcpy(tail, data.data() + i, rest);
  tail[rest] = 0x80;
  const size_t tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
  for (int j = 0; j < 8; ++j) {
    tail[tail_len - 1 - j] = static_cast<uint8_t>(bit_len >> (8 * j));
  }
  Sha1Block(tail, h);
  if (tail_len == 128) Sha1Block(tail + 64, h);
  std::array<uint8_t, 20> out{};
  for (int j = 0; j < 5; ++j) {
    out[4 * j] = static_cast<uint8_t>(h[j] >> 24);
    out[4 * j + 1] = static_cast<uint8_t>(h[j] >> 16);
    out[4 * j + 2] = static_cast<uint8_t>(h[j] >> 8);
    out[4 * j + 3] = static_cast<uint8_t>(h[j]);
  }
  return out;
}

uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string MakeGpuUuid(std::string_view model_key, uint32_t index, uint64_t nonce) {
  std::string name = "migd-sim-gpu/";
  name += model_key;
  name += "/" + std::to_string(index) + "/" + std::to_string(nonce);
  std::array<uint8_t, 20> d = Sha1(name);
  return FormatUuid("GPU-", d.data());
}

std::string MakeMigUuid(std::string_view gpu_uuid, uint32_t gi_id, uint32_t ci_id,
                        uint64_t serial) {
  // RFC 4122 §4.3: SHA-1 over namespace || name, then set version and variant.
  std::string data(reinterpret_cast<const char*>(kMigNamespace), sizeof(kMigNamespace));
  data += gpu_uuid;
  data += "/" + std::to_string(gi_id) + "/" + std::to_string(ci_id) + "/" + std::to_string(serial);
  std::array<uint8_t, 20> d = Sha1(data);
  d[6] = static_cast<uint8_t>((d[6] & 0x0F) | 0x50);
  d[8] = static_cast<uint8_t>((d[8] & 0x3F) | 0x80);
  return FormatUuid("MIG-", d.data());
}

}  // namespace migd::sim
