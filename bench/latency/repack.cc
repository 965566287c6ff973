#include "bench/latency/repack.h"

namespace migd::bench::latency {

RepackedNode::RepackedNode(const GpuTable& table, int gpus)
    : n_(table.num_profiles()), gpus_(gpus), packer_(table), scratch_(static_cast<size_t>(n_)) {}

bool RepackedNode::Fits(const ClassCounts& active, const ClassCounts& idle) {
  for (int p = 0; p < n_; ++p) scratch_[p] = active[p] + idle[p];
  return packer_.Fits(scratch_, gpus_);
}

void RepackedNode::MaximalIdleSubsets(const ClassCounts& active, const ClassCounts& idle,
                                      std::vector<ClassCounts>& out) {
  ClassCounts j{};
  if (!Fits(active, j)) return;
  Dfs(active, idle, 0, j, out);
}

// Class by class, the largest count first. Fits is downward closed, so a
// prefix that does not fit with zeros after it has no fitting completion,
// and at the last class only the largest count that fits is maximal.
void RepackedNode::Dfs(const ClassCounts& active, const ClassCounts& idle, int q, ClassCounts& j,
                       std::vector<ClassCounts>& out) {
  if (q == n_) {
    out.push_back(j);
    return;
  }
  for (int v = idle[q]; v >= 0; --v) {
    j[q] = v;
    if (!Fits(active, j)) continue;
    Dfs(active, idle, q + 1, j, out);
    if (q == n_ - 1) break;
  }
  j[q] = 0;
}

}  // namespace migd::bench::latency
