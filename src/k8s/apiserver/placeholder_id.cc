#include "k8s/apiserver/placeholder_id.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>

namespace migd::k8s {

std::string PlaceholderId(std::string_view gpu_uuid, int replica) {
  return absl::StrCat(std::string(gpu_uuid), "-", replica);
}

std::optional<Placeholder> ParsePlaceholderId(std::string_view id) {
  const size_t dash = id.rfind('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == id.size()) return std::nullopt;
  const std::string_view suffix = id.substr(dash + 1);
  if (suffix.find_first_not_of("0123456789") != std::string_view::npos || suffix.size() > 9) {
    return std::nullopt;
  }
  Placeholder p;
  if (!absl::SimpleAtoi(std::string(suffix), &p.replica)) return std::nullopt;
  p.gpu_uuid = std::string(id.substr(0, dash));
  return p;
}

}  // namespace migd::k8s
