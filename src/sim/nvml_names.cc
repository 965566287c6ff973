#include "sim/nvml_names.h"

#include <array>
#include <charconv>

#include "driver/nvml/nvml_functions.h"

namespace migd::sim {
namespace {

struct ResultEntry {
  nvmlReturn_t code;
  const char* name;  // without "NVML_"
  const char* text;  // nvmlErrorString
};

// Texts: nvidia-smi prints IN_USE and INSUFFICIENT_RESOURCES as shown
// (nvml.md §3.1); the others follow NVML's wording as far as it is known.
constexpr ResultEntry kResults[] = {
    {NVML_SUCCESS, "SUCCESS", "Success"},
    {NVML_ERROR_UNINITIALIZED, "ERROR_UNINITIALIZED", "Uninitialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "ERROR_INVALID_ARGUMENT", "Invalid Argument"},
    {NVML_ERROR_NOT_SUPPORTED, "ERROR_NOT_SUPPORTED", "Not Supported"},
    {NVML_ERROR_NO_PERMISSION, "ERROR_NO_PERMISSION", "Insufficient Permissions"},
    {NVML_ERROR_ALREADY_INITIALIZED, "ERROR_ALREADY_INITIALIZED", "Already Initialized"},
    {NVML_ERROR_NOT_FOUND, "ERROR_NOT_FOUND", "Not Found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "ERROR_INSUFFICIENT_SIZE", "Insufficient Size"},
    {NVML_ERROR_INSUFFICIENT_POWER, "ERROR_INSUFFICIENT_POWER", "Insufficient External Power"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "ERROR_DRIVER_NOT_LOADED", "Driver Not Loaded"},
    {NVML_ERROR_TIMEOUT, "ERROR_TIMEOUT", "Timeout"},
    {NVML_ERROR_IRQ_ISSUE, "ERROR_IRQ_ISSUE", "Interrupt Request Issue"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "ERROR_LIBRARY_NOT_FOUND", "NVML Shared Library Not Found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "ERROR_FUNCTION_NOT_FOUND", "Function Not Found"},
    {NVML_ERROR_CORRUPTED_INFOROM, "ERROR_CORRUPTED_INFOROM", "Corrupted infoROM"},
    {NVML_ERROR_GPU_IS_LOST, "ERROR_GPU_IS_LOST", "GPU is lost"},
    {NVML_ERROR_RESET_REQUIRED, "ERROR_RESET_REQUIRED", "GPU requires restart"},
    {NVML_ERROR_OPERATING_SYSTEM, "ERROR_OPERATING_SYSTEM",
     "The operating system has blocked the request."},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "ERROR_LIB_RM_VERSION_MISMATCH",
     "RM has detected an NVML/RM version mismatch."},
    {NVML_ERROR_IN_USE, "ERROR_IN_USE", "In use by another client"},
    {NVML_ERROR_MEMORY, "ERROR_MEMORY", "Insufficient Memory"},
    {NVML_ERROR_NO_DATA, "ERROR_NO_DATA", "No data"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "ERROR_VGPU_ECC_NOT_SUPPORTED",
     "The requested vgpu operation is not available on target device, because ECC is enabled"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "ERROR_INSUFFICIENT_RESOURCES", "Insufficient Resources"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "ERROR_FREQ_NOT_SUPPORTED",
     "Setting frequency is not supported"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "ERROR_ARGUMENT_VERSION_MISMATCH",
     "Version mismatch between argument and API"},
    {NVML_ERROR_DEPRECATED, "ERROR_DEPRECATED", "Deprecated"},
    {NVML_ERROR_NOT_READY, "ERROR_NOT_READY", "Not Ready"},
    {NVML_ERROR_GPU_NOT_FOUND, "ERROR_GPU_NOT_FOUND", "GPU not found"},
    {NVML_ERROR_INVALID_STATE, "ERROR_INVALID_STATE", "Invalid state"},
    {NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, "ERROR_RESET_TYPE_NOT_SUPPORTED",
     "Reset type not supported"},
    {NVML_ERROR_UNKNOWN, "ERROR_UNKNOWN", "Unknown Error"},
};

const ResultEntry* FindResult(nvmlReturn_t code) {
  for (const ResultEntry& e : kResults) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

// Every function of driver/nvml/nvml_functions.h, in its order.
constexpr std::string_view kFunctions[] = {
#define MIGD_SIM_NAME(id, name, type, since, header, use, head, effect) #name,
    MIGD_NVML_FUNCTIONS(MIGD_SIM_NAME)
#undef MIGD_SIM_NAME
};

// Those the NVML 11.4 header (R470) does not declare.
constexpr std::string_view kPostR470[] = {
#define MIGD_SIM_NEWER(id, name, type, since, header, use, head, effect) \
  MIGD_NVML_IF_NEWER_##header(#name, )
    MIGD_NVML_FUNCTIONS(MIGD_SIM_NEWER)
#undef MIGD_SIM_NEWER
};

}  // namespace

std::string NvmlResultName(nvmlReturn_t result) {
  if (const ResultEntry* e = FindResult(result)) return e->name;
  return "ERROR_" + std::to_string(static_cast<int>(result));
}

const char* NvmlErrorText(nvmlReturn_t result) {
  if (const ResultEntry* e = FindResult(result)) return e->text;
  return "Unknown Error";
}

std::optional<nvmlReturn_t> ParseNvmlError(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text.front() >= '0' && text.front() <= '9') {
    int value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || value <= 0) return std::nullopt;
    return static_cast<nvmlReturn_t>(value);
  }
  if (text.starts_with("NVML_")) text.remove_prefix(5);
  for (const ResultEntry& e : kResults) {
    if (e.code == NVML_SUCCESS) continue;
    std::string_view name = e.name;
    if (text == name) return e.code;
    if (name.starts_with("ERROR_") && text == name.substr(6)) return e.code;
  }
  return std::nullopt;
}

std::span<const std::string_view> SimulatedNvmlFunctions() { return kFunctions; }

bool IsPostR470Function(std::string_view name) {
  for (std::string_view n : kPostR470) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace migd::sim
