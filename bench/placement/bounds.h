// File: bench/placement/bounds.h
//
// Counting bounds, run by the same event loop on
// the same request sequences as the policies:
//   B12 repack oracle: admit iff the Active multiset plus the request fits N
//       GPUs in some legal layouts (free, instant defragmentation);
//   B14 capacity bound: admit iff Σ c ≤ C·N and Σ m ≤ M·N.
// Neither tracks placements, so they have no fragmentation or latency.
//
// Thread-safety: one object per thread.
#ifndef MIGD_BENCH_PLACEMENT_BOUNDS_H_
#define MIGD_BENCH_PLACEMENT_BOUNDS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/placement/sim.h"

namespace migd::bench {

// Whether a multiset of classes fits `gpus` GPUs of `table` in legal layouts.
// Memoised across calls (the memo is dropped when it grows past a limit).
class MultisetPacker {
 public:
  explicit MultisetPacker(const GpuTable& table);
  // counts[p] = instances of class p.
  bool Fits(const std::vector<int>& counts, int gpus);

 private:
  bool FitsKey(uint64_t key, int gpus);
  uint64_t Encode(const std::array<int, kMaxProfiles>& v) const;

  const GpuTable& table_;
  int classes_;
  std::vector<std::array<int, kMaxProfiles>> maximal_;  // maximal per-GPU count vectors
  std::unordered_map<uint64_t, bool> memo_;
};

class CountingBound : public Allocator {
 public:
  enum Kind { kRepack, kCapacity };
  explicit CountingBound(Kind kind) : kind_(kind) {}
  std::string name() const override { return kind_ == kRepack ? "B12" : "B14"; }
  Status Reset(const RunContext& ctx) override;
  Status TryAdmit(const Request& req, double now, bool* admitted) override;
  Status Release(const Request& req, double now) override;
  void SetMeasuring(bool) override {}
  int ActiveCompute() const override { return compute_; }
  int ActiveMemory() const override { return memory_; }

 private:
  Kind kind_;
  const GpuTable* table_ = nullptr;
  int gpus_ = 1;
  std::vector<int> counts_;
  int compute_ = 0, memory_ = 0;
  std::unique_ptr<MultisetPacker> packer_;
  const GpuTable* packer_table_ = nullptr;
};

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_BOUNDS_H_
