#include "k8s/allocation_backend.h"

#include <algorithm>

namespace migd::k8s {

StatusOr<std::vector<std::string>> AllocationBackend::PreferredAllocation(
    const std::vector<std::string>& available, const std::vector<std::string>& must_include,
    int size) {
  if (size < 0) return InvalidArgumentError("allocation_size: negative");
  if (static_cast<size_t>(size) < must_include.size()) {
    return InvalidArgumentError("allocation_size " + std::to_string(size) + " is smaller than " +
                                std::to_string(must_include.size()) + " must-include devices");
  }
  std::vector<std::string> out = must_include;
  for (const std::string& id : available) {
    if (out.size() >= static_cast<size_t>(size)) break;
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  if (out.size() < static_cast<size_t>(size)) {
    return ResourceExhaustedError("only " + std::to_string(out.size()) + " of " +
                                  std::to_string(size) + " devices available");
  }
  return out;
}

}  // namespace migd::k8s
