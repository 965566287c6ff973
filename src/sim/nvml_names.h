// File: sim/nvml_names.h
//
// Names of NVML return codes and of the NVML functions the simulator exports,
// shared by the state file (counters), the fault-injection knob
// (MIGD_SIM_FAULTS), FakeGpuDriver's error messages and nvmlErrorString.
//
// Thread-safety: pure functions over constant tables.
#ifndef MIGD_SIM_NVML_NAMES_H_
#define MIGD_SIM_NVML_NAMES_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "driver/nvml/nvml_abi.h"

namespace migd::sim {

// The counter key of a result: the enum name without "NVML_", e.g. "SUCCESS",
// "ERROR_IN_USE". Unknown values give "ERROR_<number>".
std::string NvmlResultName(nvmlReturn_t result);

// The text nvmlErrorString returns, e.g. "In use by another client",
// "Insufficient Resources". Unknown values give "Unknown Error". The pointer
// is to a static string.
const char* NvmlErrorText(nvmlReturn_t result);

// Parses an error written as in MIGD_SIM_FAULTS: the name without the
// "NVML_ERROR_" prefix ("IN_USE"), the full name ("NVML_ERROR_IN_USE"), the
// counter name ("ERROR_IN_USE"), or a decimal number ("19"). SUCCESS (0) is
// not an error and yields nullopt, as does any unknown name.
std::optional<nvmlReturn_t> ParseNvmlError(std::string_view text);

// Every NVML symbol the full simulator library exports, in nvml.md §3 order.
// The legacy (R470) variant exports a subset (see IsPostR470Function).
std::span<const std::string_view> SimulatedNvmlFunctions();

// True for symbols newer than NVML 11.4, which libnvidia-ml-sim-legacy.so
// does not export.
bool IsPostR470Function(std::string_view name);

}  // namespace migd::sim

#endif  // MIGD_SIM_NVML_NAMES_H_
