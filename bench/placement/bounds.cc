#include "bench/placement/bounds.h"

#include <algorithm>

namespace migd::bench {
namespace {
constexpr size_t kMemoLimit = 4'000'000;
constexpr int kBits = 7;  // per class count (≤ 127)
}  // namespace

MultisetPacker::MultisetPacker(const GpuTable& table)
    : table_(table), classes_(table.num_profiles()) {
  std::vector<std::array<int, kMaxProfiles>> all;
  for (const StateInfo& s : table.states()) {
    std::array<int, kMaxProfiles> v{};
    for (int p = 0; p < classes_; ++p) v[p] = s.count[p];
    all.push_back(v);
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  auto dominated = [this](const std::array<int, kMaxProfiles>& a,
                          const std::array<int, kMaxProfiles>& b) {  // a ≤ b, a ≠ b
    bool strict = false;
    for (int p = 0; p < classes_; ++p) {
      if (a[p] > b[p]) return false;
      if (a[p] < b[p]) strict = true;
    }
    return strict;
  };
  for (const auto& a : all) {
    bool is_max = true;
    for (const auto& b : all) {
      if (dominated(a, b)) {
        is_max = false;
        break;
      }
    }
    if (is_max) maximal_.push_back(a);
  }
}

uint64_t MultisetPacker::Encode(const std::array<int, kMaxProfiles>& v) const {
  uint64_t key = 0;
  for (int p = 0; p < classes_; ++p) key = (key << kBits) | static_cast<uint64_t>(v[p]);
  return key;
}

bool MultisetPacker::Fits(const std::vector<int>& counts, int gpus) {
  std::array<int, kMaxProfiles> v{};
  int compute = 0, memory = 0;
  for (int p = 0; p < classes_; ++p) {
    v[p] = counts[p];
    if (v[p] >= (1 << kBits)) return false;
    compute += v[p] * table_.profile(p).compute;
    memory += v[p] * table_.profile(p).memory;
  }
  if (compute > table_.compute_slices() * gpus || memory > table_.memory_slices() * gpus) {
    return false;
  }
  if (memo_.size() > kMemoLimit) memo_.clear();
  return FitsKey(Encode(v), gpus);
}

bool MultisetPacker::FitsKey(uint64_t key, int gpus) {
  if (key == 0) return true;
  if (gpus == 0) return false;
  const uint64_t memo_key = key * 16 + static_cast<uint64_t>(gpus);
  if (auto it = memo_.find(memo_key); it != memo_.end()) return it->second;
  std::array<int, kMaxProfiles> v{};
  int compute = 0, memory = 0;
  uint64_t k = key;
  for (int p = classes_ - 1; p >= 0; --p) {
    v[p] = static_cast<int>(k & ((1u << kBits) - 1));
    k >>= kBits;
    compute += v[p] * table_.profile(p).compute;
    memory += v[p] * table_.profile(p).memory;
  }
  bool ok = false;
  if (compute <= table_.compute_slices() * gpus && memory <= table_.memory_slices() * gpus) {
    // Try each maximal per-GPU layout for one GPU; the rest on gpus - 1.
    // Distinct remainders only.
    std::vector<uint64_t> tried;
    for (const auto& m : maximal_) {
      std::array<int, kMaxProfiles> rest{};
      for (int p = 0; p < classes_; ++p) rest[p] = std::max(0, v[p] - m[p]);
      const uint64_t rk = Encode(rest);
      if (rk == key) continue;
      if (std::find(tried.begin(), tried.end(), rk) != tried.end()) continue;
      tried.push_back(rk);
      if (FitsKey(rk, gpus - 1)) {
        ok = true;
        break;
      }
    }
  }
  memo_[memo_key] = ok;
  return ok;
}

Status CountingBound::Reset(const RunContext& ctx) {
  table_ = ctx.table;
  gpus_ = ctx.gpus;
  counts_.assign(table_->num_profiles(), 0);
  compute_ = memory_ = 0;
  if (kind_ == kRepack && (!packer_ || packer_table_ != table_)) {
    packer_ = std::make_unique<MultisetPacker>(*table_);
    packer_table_ = table_;
  }
  return OkStatus();
}

Status CountingBound::TryAdmit(const Request& req, double /*now*/, bool* admitted) {
  int c = 0, m = 0;
  for (int p : req.profiles) {
    c += table_->profile(p).compute;
    m += table_->profile(p).memory;
  }
  bool ok = false;
  if (kind_ == kCapacity) {
    ok = compute_ + c <= table_->compute_slices() * gpus_ &&
         memory_ + m <= table_->memory_slices() * gpus_;
  } else {
    std::vector<int> next = counts_;
    for (int p : req.profiles) ++next[p];
    ok = packer_->Fits(next, gpus_);
  }
  *admitted = ok;
  if (ok) {
    for (int p : req.profiles) ++counts_[p];
    compute_ += c;
    memory_ += m;
  }
  return OkStatus();
}

Status CountingBound::Release(const Request& req, double /*now*/) {
  for (int p : req.profiles) {
    if (--counts_[p] < 0) return InternalError("bound released more than admitted");
    compute_ -= table_->profile(p).compute;
    memory_ -= table_->profile(p).memory;
  }
  return OkStatus();
}

}  // namespace migd::bench
