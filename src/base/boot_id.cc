#include "base/boot_id.h"

#include <cctype>
#include <utility>

#include "base/file_util.h"
#include "base/status_macros.h"

namespace migd {

StatusOr<std::string> ReadBootId(std::string_view proc_root) {
  const std::string path = std::string(proc_root) + "/sys/kernel/random/boot_id";
  StatusOr<std::string> read = ReadFileToString(path, 4096);
  // A boot_id file too large to be a UUID is corrupt content, not a read error.
  if (read.status().code() == StatusCode::kOutOfRange) {
    return DataLossError(path +
                         " does not hold a boot UUID: " + std::string(read.status().message()));
  }
  MIGD_ASSIGN_OR_RETURN(std::string text, std::move(read));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  // 8-4-4-4-12 hex digits.
  bool ok = text.size() == 36;
  for (size_t i = 0; ok && i < text.size(); ++i) {
    const bool dash = (i == 8 || i == 13 || i == 18 || i == 23);
    ok = dash ? text[i] == '-' : std::isxdigit(static_cast<unsigned char>(text[i])) != 0;
  }
  if (!ok) return DataLossError(path + " does not hold a boot UUID: '" + text + "'");
  return text;
}

}  // namespace migd
