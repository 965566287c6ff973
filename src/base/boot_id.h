// File: base/boot_id.h
//
// The kernel's boot id identifies one boot of the machine. MIG configuration
// (GIs, CIs) does not survive a reboot (nvml.md §7.15), so records written in
// another boot describe instances that no longer exist.
#ifndef MIGD_BASE_BOOT_ID_H_
#define MIGD_BASE_BOOT_ID_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace migd {

// Reads <proc_root>/sys/kernel/random/boot_id and returns it without the
// trailing newline. Errors: kNotFound if the file is absent; kDataLoss if its
// content is not a UUID.
StatusOr<std::string> ReadBootId(std::string_view proc_root = "/proc");

}  // namespace migd

#endif  // MIGD_BASE_BOOT_ID_H_
