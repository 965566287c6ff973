#include "base/boot_id.h"

#include <cctype>

#include "base/file_util.h"
#include "base/status_macros.h"

namespace migd {

StatusOr<std::string> ReadBootId(std::string_view proc_root) {
  const std::string path = std::string(proc_root) + "/sys/kernel/random/boot_id";
  MIGD_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 4096));
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
