// File: bench/latency/repack.h
//
// The repack relaxation of a node that the churn bounds share
// (churn_bound.h, online_bound.h): positions are forgotten, and a multiset of
// instances is allowed iff it fits the node's GPUs in legal layouts
// (bench/placement's MultisetPacker). Fitting is downward closed: a subset of
// a multiset that fits fits too.
//
// Thread-safety: not thread-safe (the packer memoises).
#ifndef MIGD_BENCH_LATENCY_REPACK_H_
#define MIGD_BENCH_LATENCY_REPACK_H_

#include <array>
#include <vector>

#include "bench/placement/bounds.h"
#include "bench/placement/table.h"

namespace migd::bench::latency {

// Instances per profile class of the table.
using ClassCounts = std::array<int, kMaxProfiles>;

class RepackedNode {
 public:
  // REQUIRES: `table` outlives this object; gpus >= 1.
  RepackedNode(const GpuTable& table, int gpus);

  int classes() const { return n_; }
  // Whether `active` + `idle` fit the node.
  bool Fits(const ClassCounts& active, const ClassCounts& idle);
  // Subsets J <= idle (per class) with Fits(active, J), appended to `out`:
  // every maximal one, and possibly some they dominate. None iff `active`
  // alone does not fit.
  void MaximalIdleSubsets(const ClassCounts& active, const ClassCounts& idle,
                          std::vector<ClassCounts>& out);

 private:
  void Dfs(const ClassCounts& active, const ClassCounts& idle, int q, ClassCounts& j,
           std::vector<ClassCounts>& out);

  const int n_;
  const int gpus_;
  MultisetPacker packer_;
  std::vector<int> scratch_;
};

}  // namespace migd::bench::latency

#endif  // MIGD_BENCH_LATENCY_REPACK_H_
